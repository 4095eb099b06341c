// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One classifier truth: the probes' classify (bpf/sock_classify.h, compiled here as it is
 * in bpf/sock.bpf.c) and userspace's (stream/conn.c, through a connection) on one table of
 * first bytes. What userspace reads, the probes must capture; what the probes ignore,
 * userspace must not read; a status line the probes capture, userspace waits on (a request
 * may follow); TLS records go to the TLS probes and userspace reads none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <linux/types.h>

#include "sock_classify.h"
#include "stream/conn.h"

#define V(...) ((const uint8_t[]){ __VA_ARGS__ })
#define S(s) ((const uint8_t *)(s)), (sizeof(s) - 1)

struct vector {
	const char *name;
	const uint8_t *bytes;
	size_t len;
	bool is_unix;
	int bpf;		/* enum sock_proto */
	enum conn_kind user;	/* what userspace makes of the bytes */
};

static const struct vector vectors[] = {
	{ "GET", S("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "POST", S("POST /v1/chat/completions HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "PUT", S("PUT /x HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "DELETE", S("DELETE /x HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "PATCH", S("PATCH /x HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "HEAD", S("HEAD /x HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "OPTIONS", S("OPTIONS * HTTP/1.1\r\n\r\n"), false, PROTO_HTTP, CONN_HTTP1 },
	{ "POST on a Unix socket", S("POST /v1/completions HTTP/1.1\r\n\r\n"), true, PROTO_HTTP,
	  CONN_HTTP1 },
	/* a connection joined mid-way at a response: captured, read once a request comes */
	{ "status line", S("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false, PROTO_HTTP,
	  CONN_UNKNOWN },
	{ "h2 preface", S("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"),
	  false, PROTO_HTTP, CONN_HTTP2 },
	/* HTTP/2 joined after its preface: the frames a joined connection's first call carries */
	{ "h2 SETTINGS", V(0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100), 15, false, PROTO_HTTP,
	  CONN_HTTP2 },
	{ "h2 SETTINGS ack", V(0, 0, 0, 4, 1, 0, 0, 0, 0), 9, false, PROTO_HTTP, CONN_HTTP2 },
	{ "h2 WINDOW_UPDATE", V(0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0x10, 0), 13, false, PROTO_HTTP,
	  CONN_HTTP2 },
	{ "h2 HEADERS", V(0, 0, 3, 1, 4, 0, 0, 0, 1, 0x82, 0x86, 0x84), 12, false, PROTO_HTTP,
	  CONN_HTTP2 },
	/* ZeroMQ's greeting: signature, version 3.1, NULL mechanism */
	{ "zmtp greeting",
	  V(0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1, 'N', 'U', 'L', 'L', 0, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	  64, false, PROTO_HTTP, CONN_ZMTP },
	{ "zmtp greeting, Unix",
	  V(0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1, 'N', 'U', 'L', 'L', 0, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	  64, true, PROTO_HTTP, CONN_ZMTP },
	/* vLLM's engine wire joined on its Unix socket: an ADD (type frame, then a body array),
	 * outputs in a short frame and in a long one */
	{ "vllm ADD", V(1, 1, 0, 0, 8, 0x95, 0xa3, 'r', 'e', 'q', 0xc0, 0xc0, 0xc0), 13, true,
	  PROTO_HTTP, CONN_ZMTP },
	{ "vllm outputs", V(0, 8, 0x95, 0, 0x91, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0), 10, true, PROTO_HTTP,
	  CONN_ZMTP },
	{ "vllm outputs, long frame", V(2, 0, 0, 0, 0, 0, 0, 0, 5, 0x95, 0, 0xc0, 0xc0, 0xc0), 14,
	  true, PROTO_HTTP, CONN_ZMTP },
	/* TLS: the TLS probes read its plaintext */
	{ "TLS ClientHello", V(0x16, 3, 1, 0, 0x20, 1, 0, 0, 0x1c, 3, 3), 11, false, PROTO_TLS,
	  CONN_UNKNOWN },
	/* what is neither */
	{ "ssh", S("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"), false, PROTO_IGNORED, CONN_UNKNOWN },
	{ "redis", S("*1\r\n$4\r\nPING\r\n"), false, PROTO_IGNORED, CONN_UNKNOWN },
	{ "h2 DATA, flags not its own", V(0, 0, 2, 0, 0x24, 0, 0, 0, 1, 'h', 'i'), 11, false,
	  PROTO_IGNORED, CONN_UNKNOWN },
	{ "postgres startup", V(0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f), 8, false, PROTO_IGNORED,
	  CONN_UNKNOWN },
	{ "lower-case get", S("get / HTTP/1.1\r\n\r\n"), false, PROTO_IGNORED, CONN_UNKNOWN },
	{ "h2 DATA first", V(0, 0, 2, 0, 0, 0, 0, 0, 1, 'h', 'i'), 11, false, PROTO_HTTP,
	  CONN_HTTP2 },
	{ "text on a Unix socket", S("hello there, journald\n"), true, PROTO_IGNORED, CONN_UNKNOWN },
};

/* The probes' verdict: the first bytes (at most 8, little-endian in one word), as
 * bpf/sock.bpf.c hands them over. */
static int probes(const struct vector *v)
{
	__u64 head = 0;
	__u32 n = v->len < 8 ? (__u32)v->len : 8;

	memcpy(&head, v->bytes, n);
	return classify(head, n, v->is_unix);
}

static void drop(void *ctx, struct request *r)
{
	(void)ctx;
	request__free(r);
}

/* Userspace's: a connection of the vector's transport, the bytes written by its client. */
static enum conn_kind userspace(const struct vector *v)
{
	uint64_t next_id = 0;
	struct conn_counts counts = { 0 };
	struct h2_counts h2 = { 0 };
	struct jdoc json = { 0 };
	struct conn_sink sink = { .on_request = drop, .next_id = &next_id, .counts = &counts,
				  .json = &json, .h2 = &h2 };
	struct stream_key key = { .pid = 1, .transport = v->is_unix ? TRANSPORT_UNIX
								     : TRANSPORT_TCP, .id = 7 };
	struct conn *c = conn__new(&key, "client", &sink);
	uint8_t copy[128];
	enum conn_kind kind;

	assert_non_null(c);
	assert_true(v->len <= sizeof(copy));
	memcpy(copy, v->bytes, v->len); /* the reader may mask bytes in place */
	conn__data(c, true, copy, v->len, 1000);
	kind = conn__kind(c);
	conn__close(c, 2000, "test");
	conn__free(c);
	jdoc__free(&json);
	return kind;
}

static bool reads(enum conn_kind k)
{
	return k == CONN_HTTP1 || k == CONN_HTTP2 || k == CONN_ZMTP;
}

static void test_classifiers_agree(void **state)
{
	bool failed = false;

	(void)state;
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		const struct vector *v = &vectors[i];
		int bpf = probes(v);
		enum conn_kind user = userspace(v);

		if (bpf != v->bpf || user != v->user) {
			print_error("%s: the probes say %d (want %d), userspace %d (want %d)\n",
				    v->name, bpf, v->bpf, user, v->user);
			failed = true;
		}
		/* the rule every row keeps: what userspace reads, the probes capture */
		if (reads(user) && bpf != PROTO_HTTP) {
			print_error("%s: userspace reads what the probes do not capture\n", v->name);
			failed = true;
		}
	}
	assert_false(failed);
}

/* The method list both sides read: each start's first four bytes are its word. */
static void test_method_words(void **state)
{
	size_t n = 0;

	(void)state;
#define CHECK(start, a, b, c, d)                                                                  \
	do {                                                                                      \
		const uint8_t w[4] = { a, b, c, d };                                              \
		assert_true(strlen(start) >= 4 && !memcmp(start, w, 4));                          \
		assert_int_equal(start[strlen(start) - 1], ' ');                                  \
		n++;                                                                              \
	} while (0);
	TS_HTTP_METHODS(CHECK)
#undef CHECK
	assert_int_equal(n, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classifiers_agree),
		cmocka_unit_test(test_method_words),
	};

	return cmocka_run_group_tests_name("classify", tests, NULL, NULL);
}
