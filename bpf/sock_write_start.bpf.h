/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A write's start (bpf/sock.bpf.c includes this, after its scratch and sock_fd.bpf.h): the
 * only program at a call's entry on the plaintext path, sock_write_enter, stamps when a
 * write-family call began, which its exit (sock_exit_any) gives the call's records. A read
 * is stamped at its return; a write at its entry, because its return can come after what it
 * caused on another CPU (docs/performance.md, History). The thread remembers the files its
 * writes found not captured, and a write to one of those reads no clock (docs/performance.md,
 * "Where the time goes").
 */
#ifndef TS_SOCK_WRITE_START_BPF_H
#define TS_SOCK_WRITE_START_BPF_H

#ifdef TS_TASK_RDONLY
/* How many of a thread's files its write entries remember as not captured */
#define UNCAPTURED_SLOTS 16
#endif

/* When the thread's latest write-family call began (sock_write_enter); 0: not stamped. */
struct write_start {
	__u64 ns;
#ifdef TS_TASK_RDONLY
	/* Files this thread's writes found not captured (a pipe, a file, a datagram, ignored or
	 * TLS socket), by inode number, in slot fd % UNCAPTURED_SLOTS: a write to one of those
	 * is not stamped at its entry (the clock read is most of what an entry costs). By inode
	 * number, not fd: a closed fd's number given to a socket that is captured names
	 * another inode, so its first write is stamped. */
	__u64 uncaptured[UNCAPTURED_SLOTS];
#endif
};

/* deleted at the thread's exit in the legacy build (sock_process_exit) */
TS_THREAD_STATE(write_starts, struct write_start, write_start)

/* A write-family call begins: its time, for its records (sock_exit_any). The only work an
 * entry does, and only for writes. */
SEC("tracepoint/syscalls/sys_enter_write,sys_enter_writev,sys_enter_sendto,sys_enter_sendmsg,"
    "sys_enter_pwritev,sys_enter_pwritev2,sys_enter_sendmmsg")
int sock_write_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *t = ts_current_task();
	struct write_start *w;

	if (!ts_traced_task(t, TS_TGID(t)))
		return 0;
	w = write_start_of(t, true);
	if (!w)
		return 0;
#ifdef TS_TASK_RDONLY
	{
		/* A file this thread's writes found not captured: no clock. The walk to its inode
		 * touches what the call itself is about to (the fd table, the file), where the
		 * clock's reads are this program's own; it is taken only where the fd's slot
		 * holds a file (a captured socket's usually does not). */
		__u64 fd = ctx->args[0];
		__u64 known = w->uncaptured[fd & (UNCAPTURED_SLOTS - 1)];
		struct file *file = known ? fd_file(t, fd) : NULL;
		struct inode *inode = file ? file->f_inode : NULL;

		if (inode && inode->i_ino == known) {
			__u32 zero = 0;
			struct sock_buf *d = bpf_map_lookup_elem(&sock_scratch, &zero);

			w->ns = 0;
			if (d)
				d->write_unstamped = t->pid;
			return 0;
		}
	}
#endif
	w->ns = bpf_ktime_get_ns();
	return 0;
}

/* A write on fd was found not captured (d->call.sock: its file's inode number, whatever the
 * file): its next writes are not stamped (sock_write_enter), which this one's entry may
 * already have known (d->write_unstamped: then the thread's state is not looked up again). */
static __always_inline void note_uncaptured_write(struct task_struct *t, struct sock_buf *d,
						  __u64 fd)
{
#ifdef TS_TASK_RDONLY
	struct write_start *w;

	if (d->write_unstamped == t->pid) {
		d->write_unstamped = 0;
		return;
	}
	w = write_start_of(t, false);
	if (w && d->call.sock)
		w->uncaptured[fd & (UNCAPTURED_SLOTS - 1)] = d->call.sock;
#endif
}

#endif
