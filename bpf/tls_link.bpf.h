/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the TLS probes (tls.bpf.c) and the socket probes (sock.bpf.c) share, so that a TLS
 * stream learns the TCP socket under it: both objects define these maps and userspace loads
 * the second with the first one's (any map whose name the first family also has is shared).
 * BPF side only: include after common.bpf.h.
 */
#ifndef TS_TLS_LINK_BPF_H
#define TS_TLS_LINK_BPF_H

/* An SSL call in progress: arguments saved at entry, keyed by thread id, consumed at return.
 * A socket syscall made while it is here is that SSL*'s (OpenSSL's socket BIO). */
struct ssl_call {
	__u64 ssl;
	__u64 buf;
	__u64 out_len; /* size_t * for the _ex variants, 0 otherwise */
	__u64 entry_ns;
	__u32 dir;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* threads killed inside a call must not fill it */
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ssl_call);
} tls_calls SEC(".maps");

/* The SSL* whose SSL_write last returned on this thread, until the thread's next write on a
 * TLS socket: with a memory BIO (node) that write sends what SSL_write encrypted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} tls_last_write SEC(".maps");

#endif /* TS_TLS_LINK_BPF_H */
