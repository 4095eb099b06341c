/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a socket carries, from its first bytes: HTTP/1.1, HTTP/2 (its preface, or the frames
 * of a connection joined mid-way) and ZeroMQ (vLLM's engine wire) are captured; TLS is left to
 * the TLS probes; anything else is ignored. Userspace checks what follows (proto/,
 * stream/conn.c). Pure: bpf/sock.bpf.c includes it, and tests/unit/test_classify.c compiles
 * it in userspace and runs it beside userspace's classifier on the same bytes.
 */
#ifndef TS_SOCK_CLASSIFY_H
#define TS_SOCK_CLASSIFY_H

#include "http_methods.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif

/* PROTO_HTTP: captured (HTTP, or ZeroMQ: userspace tells them apart) */
enum sock_proto { PROTO_UNKNOWN = 0, PROTO_HTTP, PROTO_TLS, PROTO_IGNORED };

#define WORD(a, b, c, d) ((__u32)(a) | (__u32)(b) << 8 | (__u32)(c) << 16 | (__u32)(d) << 24)

/* An HTTP/2 connection that began before capture: its first bytes are a frame header (the
 * first 8 of its 9). Only the frames a joined connection's first call carries, strictly: a
 * SETTINGS frame on stream 0, a WINDOW_UPDATE, a whole HEADERS block (END_HEADERS) on a
 * client stream, or a DATA frame of a reply streaming when capture began (on a stream below
 * 65536, as a connection's streams are); userspace checks the frames that follow
 * (proto/h2.c). A connection ignored here is ignored for its life: a long-lived gRPC channel
 * first seen mid-reply would lose every later request. */
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
	case 0: /* DATA: END_STREAM and PADDED its only flags */
		return !(b[4] & ~0x09) && len > 0 && !b[5] && !b[6];
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
#define METHOD_CASE(start, a, b, c, d) case WORD(a, b, c, d):
		TS_HTTP_METHODS(METHOD_CASE)
#undef METHOD_CASE
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

#endif
