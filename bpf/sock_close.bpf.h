/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The end of a captured socket (bpf/sock.bpf.c includes this, after its state map and
 * sock_fd.bpf.h): its close call, unless the socket stays open through another reference
 * (sock_held_elsewhere); for TCP, the local close where no close call of its own ends it
 * (another thread's last reference, a dying process). The end is said to userspace
 * (TS_EV_SOCK_CLOSE) and the socket's state forgotten.
 */
#ifndef TS_SOCK_CLOSE_BPF_H
#define TS_SOCK_CLOSE_BPF_H

/* The end of socket ino: forgotten, and said (but not of a socket ignored from the start).
 * A TLS socket's end is said too: it ends the TLS streams of processes that exited. */
static __always_inline void end_socket(__u64 ino, __u32 flags)
{
	struct sock_state *st = bpf_map_lookup_elem(&sock_states, &ino);
	struct ts_sock_close *e;
	__u32 owner;
	__u8 proto, early;

	if (!st) {
		bpf_map_delete_elem(&sock_skipped, &ino);
		return;
	}
	owner = st->owner;
	proto = st->proto;
	early = st->early;
	if (st->is_unix)
		flags |= TS_CLOSE_UNIX;
	if (!bpf_map_delete_elem(&sock_states, &ino))
		ts_count(TS_CNT_SOCK_STATES_REMOVED, 1);
	if (proto == PROTO_IGNORED && !early)
		return;
	e = ts_reserve(TS_EV_SOCK_CLOSE, sizeof(*e), TS_CNT_OTHER_DROPS);
	if (!e)
		return;
	e->sock = ino;
	e->owner = owner;
	e->flags = flags;
	bpf_ringbuf_submit(e, ts_submit_flags());
}

/* int close(int fd): the end of a stream, unless its socket stays open through another fd
 * (dup, fork: a child that closes what it inherited ends nothing of its parent's). */
SEC("tracepoint/syscalls/sys_enter_close")
int sock_enter_close(struct trace_event_raw_sys_enter *ctx)
{
	struct task_struct *t = ts_current_task();
	struct sock *sk;
	__u64 ino = 0;

	sk = stream_sock_of(t, ctx->args[0], &ino);
	if (sk && !sock_held_elsewhere(t, sk))
		end_socket(ino, 0);
	return 0;
}

#ifndef TS_LEGACY
/* Where an exiting process's fd walk stands (forget_unix_slot). */
struct exit_walk {
	struct file **fds;
	__u32 tgid;
};

/* Slots of an fd table walked at a process's exit, at most */
#define EXIT_WALK_MAX 65536

/* One fd slot of an exiting process: a Unix socket of its own that no other process holds is
 * forgotten. The kernel closes it with no call and no tracepoint of its own, and userspace
 * ends its stream with the process (streams__exit); left here, such sockets of processes
 * that come and go would push live captured sockets out of the table. */
static long forget_unix_slot(__u32 i, void *ctx)
{
	struct exit_walk *w = ctx;
	struct sock_state *st;
	struct socket *sock;
	struct inode *inode;
	struct file *f = NULL;
	struct sock *sk;
	__u64 ino;

	if (bpf_probe_read_kernel(&f, sizeof(f), &w->fds[i]) || !f)
		return 0;
	inode = BPF_CORE_READ(f, f_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFSOCK)
		return 0;
	sock = BPF_CORE_READ(f, private_data);
	sk = sock ? BPF_CORE_READ(sock, sk) : NULL;
	if (!sk || BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX)
		return 0;
	ino = BPF_CORE_READ(inode, i_ino);
	st = bpf_map_lookup_elem(&sock_states, &ino);
	if (st && st->owner == w->tgid && sock_file_refs(sk) <= 1 &&
	    !bpf_map_delete_elem(&sock_states, &ino))
		ts_count(TS_CNT_SOCK_STATES_REMOVED, 1);
	return 0;
}
#endif

/* A process that owned captured sockets is gone: it is reported. Its sockets are not ended
 * here: one it shared (fork) lives on in another process; the kernel's close of the others,
 * below, ends them (a TCP socket), or userspace ends their streams with the process and its
 * Unix sockets' states go here (fd table still held: exit_files comes after this
 * tracepoint; no thread left that shares it; not in the legacy build, which has no
 * bpf_loop). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sock_process_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

#ifdef TS_LEGACY
	bpf_map_delete_elem(&write_starts, &(__u32){ (__u32)id }); /* the thread's write */
#endif
	if (tgid != (__u32)id || !bpf_map_lookup_elem(&sock_pids, &tgid))
		return 0;
	bpf_map_delete_elem(&sock_pids, &tgid);
#ifndef TS_LEGACY
	if (BPF_CORE_READ(p, files, count.counter) == 1) {
		struct fdtable *fdt = BPF_CORE_READ(p, files, fdt);
		struct exit_walk w = { .fds = BPF_CORE_READ(fdt, fd), .tgid = tgid };
		__u32 n = BPF_CORE_READ(fdt, max_fds);

		bpf_loop(n < EXIT_WALK_MAX ? n : EXIT_WALK_MAX, forget_unix_slot, &w, 0);
	}
#endif
	ts_send_proc(TS_EV_EXIT);
	return 0;
}

#define PF_EXITING 0x00000004

#define SHUTDOWN_MASK 3 /* RCV_SHUTDOWN | SEND_SHUTDOWN: tcp_close sets both */

/*
 * A captured TCP socket closed where no close call of its own ended it: its last reference
 * went in another thread's call (sock_held_elsewhere), or the kernel closed it for a dying
 * process (the last one holding it exited, SIGKILL included). Its local close moves it out
 * of ESTABLISHED or CLOSE_WAIT (to FIN_WAIT1, LAST_ACK, or CLOSE when unread data makes it
 * a reset): tcp_close has shut both directions first (a shutdown(SHUT_WR) that leaves the
 * reply to be read has not), or the task is exiting. A reset that arrives from the peer
 * while an exiting task happens to be current would read the same; it is as rare as it
 * sounds.
 */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(sock_state_change, const struct sock *sk, const int oldstate, const int newstate)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	bool exiting;
	__u64 ino;

	if ((oldstate != TCP_ESTABLISHED && oldstate != TCP_CLOSE_WAIT) ||
	    (newstate != TCP_FIN_WAIT1 && newstate != TCP_LAST_ACK && newstate != TCP_CLOSE))
		return 0;
	exiting = BPF_CORE_READ(t, flags) & PF_EXITING;
	if (!exiting && BPF_CORE_READ_BITFIELD_PROBED(sk, sk_shutdown) != SHUTDOWN_MASK)
		return 0;
	ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
	if (ino)
		end_socket(ino, exiting ? TS_CLOSE_BY_EXIT : 0);
	return 0;
}

#endif
