/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The plaintext family's first step on every call (bpf/sock.bpf.c includes this, after its
 * constants): the stream socket behind an fd, TCP or Unix, in the build for this kernel
 * (bpf_rdonly_cast's direct loads; CO-RE reads before 6.2; the legacy task walk before
 * 5.17), and the socket's addresses; for a captured Unix socket, the record that says its
 * path and peer (send_unix_sock); the call's user registers (sock_task_regs). Every call of a
 * traced process pays the walk, so it is kept short.
 */
#ifndef TS_SOCK_FD_BPF_H
#define TS_SOCK_FD_BPF_H

#if !defined(TS_SOCK_CORE_READS) && !defined(TS_LEGACY)
/* bpf_rdonly_cast (common.bpf.h, TS_TASK_RDONLY): a pointer read as a number made walkable
 * again, read-only: its loads cannot fault. */

/* The file behind fd in task's process (task: the current one), NULL for none: direct loads
 * (BTF pointers), no helper call. */
static __always_inline struct file *fd_file(struct task_struct *task, __u64 fd)
{
	/* walked read-only: a pointer loaded from the trusted task would cost the verifier its
	 * linear type-name searches (common.bpf.h, ts_process_comm_of) at every path here */
	struct task_struct *walk = bpf_rdonly_cast(task, bpf_core_type_id_kernel(struct task_struct));
	struct fdtable *fdt = walk->files->fdt;
	struct kiocb *slot;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	/* The fd table's slot, a struct file *, loaded as the first member of a struct that
	 * begins with one (kiocb's ki_filp, in every kernel): the verifier has no type for a
	 * slot of an array of pointers, and a direct load costs less than bpf_probe_read_kernel
	 * (a helper call, 30-50 ns here). */
	slot = bpf_rdonly_cast((void *)((__u64)fdt->fd + fd * sizeof(struct file *)),
			       bpf_core_type_id_kernel(struct kiocb));
	return slot->ki_filp;
}

/* The stream socket behind fd, TCP or Unix, with its inode number; NULL for anything else
 * (pipes, files, UDP and datagram sockets), whose inode number (0: no file) is in *ino all
 * the same. Every call of a traced process pays this walk, so it is kept short. */
static __always_inline struct sock *stream_sock_of(struct task_struct *task, __u64 fd, __u64 *ino)
{
	struct file *file = fd_file(task, fd);
	struct inode *inode;
	struct socket *sock;
	struct sock *sk;

	*ino = 0;
	if (!file)
		return NULL;
	inode = file->f_inode;
	if (!inode)
		return NULL;
	*ino = inode->i_ino;
	if ((inode->i_mode & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = bpf_rdonly_cast(file->private_data, bpf_core_type_id_kernel(struct socket));
	if (sock->type != SOCK_STREAM)
		return NULL;
	sk = sock->sk;
	if (!sk || (sk->sk_protocol != IPPROTO_TCP && sk->__sk_common.skc_family != AF_UNIX))
		return NULL;
	return sk;
}
#else
/* The same walk for kernels without bpf_rdonly_cast (before 6.2: Debian 12's 6.1, Amazon
 * Linux 2023, COS): each field past the fd table slot with a CO-RE read, a helper call each
 * (user/capture/live.c loads this build, sock_core, there; docs/kernels.md). The legacy build
 * (before 5.17) reads the fd table so too: its task is no BTF pointer. */
static __always_inline struct sock *stream_sock_of(struct task_struct *task, __u64 fd, __u64 *ino)
{
	struct file *slot = NULL;
	struct inode *inode;
	struct socket *sock;
	struct sock *sk;
#ifdef TS_LEGACY
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&slot, sizeof(slot), &fds[fd]) || !slot)
		return NULL;
#else
	struct fdtable *fdt = task->files->fdt;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	if (bpf_probe_read_kernel(&slot, sizeof(slot), &fdt->fd[fd]) || !slot)
		return NULL;
#endif
	inode = BPF_CORE_READ(slot, f_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = BPF_CORE_READ(slot, private_data);
	if (!sock || BPF_CORE_READ(sock, type) != SOCK_STREAM)
		return NULL;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP &&
		    BPF_CORE_READ(sk, __sk_common.skc_family) != AF_UNIX))
		return NULL;
	*ino = BPF_CORE_READ(inode, i_ino);
	return sk;
}
#endif

/* struct file before Linux 6.13, whose count was an atomic_long_t (f_ref since) */
struct file___f_count {
	atomic_long_t f_count;
} __attribute__((preserve_access_index));

/* How many references a socket's file has (each fd that holds it, in any process, and
 * each call under way on it in a process of several threads). */
static __always_inline long sock_file_refs(struct sock *sk)
{
	struct file *f = BPF_CORE_READ(sk, sk_socket, file);
	long c;

	if (!f)
		return 0;
	if (bpf_core_field_exists(struct file, f_ref)) {
		/* file_ref_t: one reference reads 0; past LONG_MAX (negative) it is released */
		c = BPF_CORE_READ(f, f_ref.refcnt.counter);
		return c < 0 ? 0 : c + 1;
	}
	return BPF_CORE_READ((struct file___f_count *)f, f_count.counter);
}

/*
 * Does a close of this socket's fd leave it held elsewhere, so that it is not its end? A
 * forked child that closes what it inherited leaves its parent's socket open. Another
 * reference may also be a call under way in another thread of the closing process (its fd
 * table shared): for TCP the real close is seen where it happens (sock_state_change); a
 * Unix socket closed by a process of several threads ends at the close, as it always did.
 */
static __always_inline bool sock_held_elsewhere(struct task_struct *t, struct sock *sk)
{
	if (sock_file_refs(sk) <= 1)
		return false;
	return BPF_CORE_READ(sk, sk_protocol) == IPPROTO_TCP ||
	       BPF_CORE_READ(t, files, count.counter) == 1;
}

/* A socket's inode number, from its struct sock (0: none, as for a peer already gone). */
static __always_inline __u64 sock_ino(struct sock *sk)
{
	return sk ? BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino) : 0;
}

/* The inode number of the socket's network namespace (net:[N]). */
static __always_inline __u32 sock_netns(struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

#if !defined(TS_SOCK_CORE_READS) && !defined(TS_LEGACY)
/* A socket's addresses (sk: a struct sock *, as a number or not): every captured call's exit
 * says them, so they are direct loads, as in stream_sock_of; five helper calls each were a
 * fifth of the captured path's cost (docs/decisions/performance-log.md). */
static __always_inline void sock_addr(const void *sk_any, struct ts_sock_addr *a)
{
	struct sock *sk = bpf_rdonly_cast(sk_any, bpf_core_type_id_kernel(struct sock));
	__u16 family = sk->__sk_common.skc_family;

	a->family = family;
	a->_pad = 0;
	__builtin_memset(a->laddr, 0, sizeof(a->laddr));
	__builtin_memset(a->raddr, 0, sizeof(a->raddr));
	if (family == AF_UNIX) {
		struct unix_sock *u =
			bpf_rdonly_cast(sk_any, bpf_core_type_id_kernel(struct unix_sock));
		struct sock *peer = u->peer;
		__u64 own = sk->sk_socket->file->f_inode->i_ino;
		__u64 peer_ino = peer ? peer->sk_socket->file->f_inode->i_ino : 0;

		a->lport = a->rport = 0;
		__builtin_memcpy(a->laddr, &own, sizeof(own));
		__builtin_memcpy(a->raddr, &peer_ino, sizeof(peer_ino));
		return;
	}
	a->lport = sk->__sk_common.skc_num;
	a->rport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (family == AF_INET6) {
		__u32 *l = (__u32 *)a->laddr, *r = (__u32 *)a->raddr;

		for (int i = 0; i < 4; i++) {
			l[i] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[i];
			r[i] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[i];
		}
	} else {
		*(__u32 *)a->laddr = sk->__sk_common.skc_rcv_saddr;
		*(__u32 *)a->raddr = sk->__sk_common.skc_daddr;
	}
}
#else
/* The same with a CO-RE read per field. */
static __always_inline void sock_addr(const void *sk_any, struct ts_sock_addr *a)
{
	struct sock *sk = (struct sock *)sk_any;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	a->family = family;
	if (family == AF_UNIX) {
		__u64 own = sock_ino(sk), peer = sock_ino(BPF_CORE_READ((struct unix_sock *)sk, peer));

		a->lport = a->rport = a->_pad = 0;
		__builtin_memset(a->laddr, 0, sizeof(a->laddr));
		__builtin_memset(a->raddr, 0, sizeof(a->raddr));
		__builtin_memcpy(a->laddr, &own, sizeof(own));
		__builtin_memcpy(a->raddr, &peer, sizeof(peer));
		return;
	}
	a->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	a->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	a->_pad = 0;
	__builtin_memset(a->laddr, 0, sizeof(a->laddr));
	__builtin_memset(a->raddr, 0, sizeof(a->raddr));
	if (family == AF_INET6) {
		BPF_CORE_READ_INTO(&a->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&a->raddr, sk, __sk_common.skc_v6_daddr);
	} else {
		BPF_CORE_READ_INTO((__u32 *)a->laddr, sk, __sk_common.skc_rcv_saddr);
		BPF_CORE_READ_INTO((__u32 *)a->raddr, sk, __sk_common.skc_daddr);
	}
}
#endif

/* A captured Unix socket says its path and its peer, once (and again once its peer is known). */

/*
 * A function of its own, not inlined (but not global: sk may be a pointer the verifier knows,
 * which a global function's arguments may not be): sk is the socket's struct sock, ino its inode
 * number, owner its stream's process. A client may write before its server has accepted the
 * connection, and the server's socket has no inode until then: the record is sent again, once,
 * at a later call that finds the peer's inode (only_if_peer), so that both ends' records name
 * each other. Returns 1 when the peer's inode was said.
 */
static __noinline int send_unix_sock(const void *sk, __u64 ino, __u32 owner, __u32 only_if_peer)
{
	struct unix_sock *u = (struct unix_sock *)sk;
	struct sock *peer = BPF_CORE_READ(u, peer);
	__u64 peer_ino = sock_ino(peer);
	struct unix_address *addr;
	struct ts_unix_sock *e;
	__s32 len;

	if (only_if_peer && !peer_ino)
		return 0;
	e = ts_reserve(TS_EV_UNIX_SOCK, sizeof(*e), TS_CNT_OTHER_DROPS);
	if (!e)
		return 0;
	e->sock = ino;
	e->peer_sock = peer_ino;
	e->owner = owner;
	e->peer_pid = BPF_CORE_READ(u, sk.sk_peer_pid, numbers[0].nr);
	/* a server's accepted socket carries its listener's path; a client's is unbound, and
	 * the path is its peer's */
	addr = BPF_CORE_READ(u, addr);
	if (!addr && peer)
		addr = BPF_CORE_READ((struct unix_sock *)peer, addr);
	len = addr ? BPF_CORE_READ(addr, len) - (__s32)sizeof(__u16) : 0;
	e->path_len = len > 0 ? (len < TS_UNIX_PATH_MAX ? len : TS_UNIX_PATH_MAX) : 0;
	__builtin_memset(e->path, 0, sizeof(e->path));
	if (e->path_len &&
	    bpf_probe_read_kernel(e->path, sizeof(e->path),
				  (char *)addr + bpf_core_field_offset(struct unix_address, name) +
					  sizeof(__u16)))
		e->path_len = 0;
	bpf_ringbuf_submit(e, ts_submit_flags());
	return peer_ino != 0;
}

/* phase: the call's arguments, the user registers its entry saved */
#ifdef TS_TASK_RDONLY
/* How far a task's user registers lie from its stack page (task_pt_regs: THREAD_SIZE less the
 * registers and a padding, which depend on the kernel's build), learnt from bpf_task_pt_regs
 * at the first call; 0 until then. */
__u64 regs_from_stack;

/* The learning's two addresses, per CPU (one program runs at a time on a CPU): stored as
 * pointers, read back as numbers, whose difference the verifier lets be taken. */
struct regs_learn {
	__u64 regs, stack;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct regs_learn);
} sock_regs_learn SEC(".maps");

/* The current task's user registers: its stack page plus that distance, a load and an add,
 * where bpf_task_pt_regs is a helper call (30-50 ns here) on every call of a traced process. */
static __always_inline struct pt_regs *sock_task_regs(struct task_struct *t)
{
	struct task_struct *walk = bpf_rdonly_cast(t, bpf_core_type_id_kernel(struct task_struct));
	void *stack = walk->stack;
	__u64 off = regs_from_stack;

	if (!off) {
		__u32 zero = 0;
		struct regs_learn *l = bpf_map_lookup_elem(&sock_regs_learn, &zero);

		if (!l)
			return (struct pt_regs *)bpf_task_pt_regs(t);
		*(volatile __u64 *)&l->regs = (__u64)bpf_task_pt_regs(t);
		*(volatile __u64 *)&l->stack = (__u64)stack;
		off = *(volatile __u64 *)&l->regs - *(volatile __u64 *)&l->stack;
		if (!l->stack || off == 0 || off > (1 << 16)) /* not where it can be: the helper */
			return (struct pt_regs *)bpf_task_pt_regs(t);
		regs_from_stack = off;
	}
	if (!stack)
		return NULL;
	return bpf_rdonly_cast(stack + off, bpf_core_type_id_kernel(struct pt_regs));
}
#else
#define sock_task_regs(t) ts_task_pt_regs(t)
#endif

#endif
