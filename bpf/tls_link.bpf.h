/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the TLS probes (tls.bpf.c) and the socket probes (sock.bpf.c) share, so that a TLS
 * stream learns the TCP socket under it: both objects define these maps and userspace loads
 * the second with the first one's (any map whose name the first family also has is shared).
 * BPF side only: include after common.bpf.h.
 */
#ifndef TS_TLS_LINK_BPF_H
#define TS_TLS_LINK_BPF_H

/* A thread's SSL state, in task storage (freed with the thread; reached without a hash):
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

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ssl_call);
} tls_calls SEC(".maps");

static __always_inline struct ssl_call *tls_thread(bool create)
{
	return bpf_task_storage_get(&tls_calls, bpf_get_current_task_btf(), NULL,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

#endif /* TS_TLS_LINK_BPF_H */
