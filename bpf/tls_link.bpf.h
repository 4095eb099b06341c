/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the TLS probes (tls.bpf.c) and the socket probes (sock.bpf.c) share, so that a TLS
 * stream learns the TCP socket under it: both objects define these maps and userspace loads
 * the second with the first one's (any map whose name the first family also has is shared).
 * BPF side only: include after common.bpf.h.
 */
#ifndef TS_TLS_LINK_BPF_H
#define TS_TLS_LINK_BPF_H

/* A thread's SSL state (TS_THREAD_STATE: task storage, or a map by thread id):
 * - call: an SSL call in progress, arguments saved at entry, consumed at return (active). A
 *   socket syscall made meanwhile is that SSL*'s (OpenSSL's socket BIO).
 * - last_write: the SSL* whose SSL_write last returned on this thread, until the thread's
 *   next write on a TLS socket: with a memory BIO (node) that write sends what SSL_write
 *   encrypted. */
struct ssl_call {
	__u64 ssl;
	__u64 buf;
	__u64 out_len; /* size_t * for the _ex variants, 0 otherwise */
	__u64 entry_ns; /* writes only: a write's bytes are stamped at its entry */
	__u32 dir;
	__u32 active;
	__u64 last_write;
	__u32 noted_pid; /* the process is in tls_pids (tls.bpf.c): its exit is reported */
	__u32 _pad;
};

/* deleted at the thread's exit in the legacy build (tls.bpf.c, handle_exit) */
TS_THREAD_STATE(tls_calls, struct ssl_call, tls_thread)

/*
 * Go's crypto/tls calls in progress (tls.bpf.c, go_tls_*), by goroutine: (process, g) ->
 * the *tls.Conn (a Read's entry also keeps its buffer). A syscall on a TLS socket made by a
 * goroutine inside one is that Conn's: g is R14 of the user registers the syscall saved.
 * LRU: a goroutine that died inside a call (its return never seen) cannot fill it.
 */
struct go_call_key {
	__u32 pid;
	__u32 _pad;
	__u64 g;
};

struct go_call {
	__u64 conn;
	__u64 buf; /* a Read's */
	__u32 dir; /* enum ts_dir: in Read or in Write */
	__u32 _pad;
};

/* One map for both calls (a goroutine is in one at a time): each LRU entry is made when the
 * map is, and 65 536 of them cost about 8 ms of the start here (bpf_lru_populate). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct go_call_key);
	__type(value, struct go_call);
} go_tls_calls SEC(".maps");

/* Processes that made a Go TLS call: only their TLS sockets look for one. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} go_pids SEC(".maps");

#ifdef TS_LEGACY
/* The user registers a task's syscall saved, where task_pt_regs finds them on x86-64: at the
 * top of its kernel stack (THREAD_SIZE, 16 KiB without KASAN, which distribution kernels do
 * not build with; no padding above them before FRED, 6.9). bpf_task_pt_regs is 5.15. */
#define TS_THREAD_SIZE (4096 << 2)

static __always_inline struct pt_regs *ts_task_pt_regs(struct task_struct *t)
{
	void *stack = BPF_CORE_READ(t, stack);

	return stack ? (struct pt_regs *)(stack + TS_THREAD_SIZE) - 1 : NULL;
}
#else
#define ts_task_pt_regs(t) ((struct pt_regs *)bpf_task_pt_regs(t))
#endif

/* The *tls.Conn whose Read or Write the current goroutine is in (0: none). */
static __always_inline __u64 go_conn_in_call(struct task_struct *t)
{
	struct go_call_key k = { .pid = TS_TGID(t) };
	struct pt_regs *regs;
	struct go_call *c;

	if (!bpf_map_lookup_elem(&go_pids, &k.pid))
		return 0;
	regs = ts_task_pt_regs(t);
	if (!regs)
		return 0;
	k.g = BPF_CORE_READ(regs, r14);
	c = bpf_map_lookup_elem(&go_tls_calls, &k);
	return c ? c->conn : 0;
}

#endif /* TS_TLS_LINK_BPF_H */
