/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a socket carries, from its first bytes (bpf/sock.bpf.c includes this, after its
 * PROTO_ constants): HTTP/1.1, HTTP/2 (its preface, or the frames of a connection joined
 * mid-way), ZeroMQ (vLLM's engine wire) are captured; TLS is left to the TLS probes; anything
 * else is ignored, for the socket's life, which a per-CPU table remembers (known_ignored).
 * Userspace checks what follows (proto/).
 */
#ifndef TS_SOCK_CLASSIFY_BPF_H
#define TS_SOCK_CLASSIFY_BPF_H

#define WORD(a, b, c, d) ((__u32)(a) | (__u32)(b) << 8 | (__u32)(c) << 16 | (__u32)(d) << 24)

/* An HTTP/2 connection that began before capture: its first bytes are a frame header (the
 * first 8 of its 9). Only the frames a joined connection's first call carries, strictly: a
 * SETTINGS frame on stream 0, a WINDOW_UPDATE, or a whole HEADERS block (END_HEADERS) on a
 * client stream; userspace checks the frames that follow (proto/h2.c). */
static __always_inline bool h2_frame_start(__u64 head)
{
	__u8 b[8];
	__u32 len;

	__builtin_memcpy(b, &head, sizeof(b));
	len = (__u32)b[0] << 16 | (__u32)b[1] << 8 | b[2];
	if (len > 16384 || (b[5] & 0x80))
		return false;
	switch (b[3]) {
	case 4: /* SETTINGS */
		return !(b[4] & ~1) && len % 6 == 0 && !b[5] && !b[6] && !b[7];
	case 8: /* WINDOW_UPDATE */
		return !b[4] && len == 4;
	case 1: /* HEADERS */
		return (b[4] & 0x04) && !(b[4] & ~0x2d) && len > 0;
	}
	return false;
}

/* ZeroMQ (ZMTP 3), whose messages userspace reads (vLLM's engine wire): the greeting's
 * signature, 0xFF and eight bytes of padding whose first seven libzmq leaves zero; or, on a
 * Unix socket opened before capture, the first frames of a vLLM engine message (the checks
 * of vllm_wire__looks_like_frames that eight bytes allow). */
static __always_inline bool zmtp_start(__u64 head, __u32 is_unix)
{
	__u8 b[8];

	__builtin_memcpy(b, &head, sizeof(b));
	if (b[0] == 0xff && !(head >> 8))
		return true;
	if (!is_unix)
		return false;
	/* a request: its type frame (MORE, size 1, ADD..UTILITY), then its body's flags */
	if (b[0] == 0x01 && b[1] == 0x01 && b[2] <= 3 && b[3] <= 3)
		return true;
	/* outputs: a short frame whose body is an array of at least 4, a small engine index,
	 * and an array or nil; or a long frame (its size's high half zero) */
	if (b[0] <= 1 && (b[2] & 0xf0) == 0x90 && b[2] >= 0x94 && b[3] < 0x80 &&
	    ((b[4] & 0xf0) == 0x90 || b[4] == 0xdc || b[4] == 0xc0))
		return true;
	return (b[0] == 2 || b[0] == 3) && !b[1] && !b[2] && !b[3] && !b[4];
}

/* What the first bytes of a socket (n of them, in head, little-endian) say it carries;
 * PROTO_UNKNOWN while too few to tell. A global function: verified once, on its own. */
__noinline int classify(__u64 head, __u32 n, __u32 is_unix)
{
	__u32 w = (__u32)head;

	if (n >= 2 && (w & 0xffff) == 0x0316)
		return PROTO_TLS;
	if (n < 4)
		return PROTO_UNKNOWN;
	/* request methods, a status line (joined mid-connection), the HTTP/2 preface */
	switch (w) {
	case WORD('G', 'E', 'T', ' '):
	case WORD('P', 'O', 'S', 'T'):
	case WORD('P', 'U', 'T', ' '):
	case WORD('H', 'E', 'A', 'D'):
	case WORD('D', 'E', 'L', 'E'):
	case WORD('P', 'A', 'T', 'C'):
	case WORD('O', 'P', 'T', 'I'):
	case WORD('H', 'T', 'T', 'P'):
	case WORD('P', 'R', 'I', ' '):
		return PROTO_HTTP;
	}
	if (n >= 8 && h2_frame_start(head))
		return PROTO_HTTP;
	if (n >= 8 && zmtp_start(head, is_unix))
		return PROTO_HTTP;
	return PROTO_IGNORED;
}

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
