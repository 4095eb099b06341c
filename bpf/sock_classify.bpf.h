/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The sockets found ignored (bpf/sock.bpf.c includes this): what a socket carries is decided
 * from its first bytes by classify (sock_classify.h); anything it ignores is ignored for the
 * socket's life, which a per-CPU table remembers (known_ignored).
 */
#ifndef TS_SOCK_CLASSIFY_BPF_H
#define TS_SOCK_CLASSIFY_BPF_H

/* Sockets found ignored lately on this CPU, by inode number (a slot each, by its low bits),
 * with their struct sock as a second key: a traced process's database or cache connection
 * is read and written many times, and each call then costs this look (an inlined per-CPU
 * lookup) instead of the state map's hash lookup. Ignored is for the socket's life, and an
 * inode number comes back only after 2^32 others, with the same struct sock besides: a slot
 * is never wrong, only overwritten. */
#define IGNORED_SLOTS 16

struct ignored_cache {
	__u64 ino[IGNORED_SLOTS];
	__u64 sk[IGNORED_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ignored_cache);
} sock_ignored SEC(".maps");

static __always_inline bool known_ignored(__u64 ino, const struct sock *sk)
{
	__u32 zero = 0, i = ino & (IGNORED_SLOTS - 1);
	struct ignored_cache *c = bpf_map_lookup_elem(&sock_ignored, &zero);

	return c && c->ino[i] == ino && c->sk[i] == (__u64)sk;
}

static __always_inline void note_ignored(__u64 ino, __u64 sk)
{
	__u32 zero = 0, i = ino & (IGNORED_SLOTS - 1);
	struct ignored_cache *c = bpf_map_lookup_elem(&sock_ignored, &zero);

	if (c) {
		c->ino[i] = ino;
		c->sk[i] = sk;
	}
}

#endif
