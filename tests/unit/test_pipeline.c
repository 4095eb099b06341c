// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
/*
 * The pipeline around the parsers: connections, roles, keep-alive, lost and truncated data,
 * dying processes, unsupported streams, recordings and their replay.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "base/outfile.h"
#include "stream/conn.h"
#include "stream/recording.h"
#include "sinks/jsonl.h"
#include "sinks/line.h"
#include "sinks/sink.h"
#include "sinks/summary.h"
#include "helpers.h"
#include "llm/group.h"

#define T0 (1000 * MS)

static const char *req_chat =
	"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer sk-SECRET\r\n"
	"Content-Length: 27\r\n\r\n{\"model\":\"m\",\"stream\":true}";
static const char *resp_head =
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

static void chunk(struct run *r, uint64_t ts, const char *payload)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%zx\r\n%s\r\n", strlen(payload), payload);

	run__data(r, false, ts, buf, (size_t)n);
}

static void token(struct run *r, uint64_t ts)
{
	chunk(r, ts, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
}

static void exchange(struct run *r, uint64_t t, int ntok)
{
	run__data(r, true, t, req_chat, strlen(req_chat));
	run__data(r, false, t + 2 * MS, resp_head, strlen(resp_head));
	for (int i = 0; i < ntok; i++)
		token(r, t + (10 + 5 * i) * MS);
	chunk(r, t + (11 + 5 * ntok) * MS, "data: [DONE]\n\n");
	run__data(r, false, t + (12 + 5 * ntok) * MS, "0\r\n\r\n", 5);
}

/*
 * A header line of value bytes in a chat request, seen from the client (server_side false)
 * and from the server, the request moved in pieces of at most TS_CHUNK_MAX as the probes
 * move it; then its reply of two tokens. The record's JSON, or NULL when none was reported.
 */
static char *big_header_exchange(bool server_side, size_t value)
{
	static const char body[] = "{\"model\":\"m\",\"stream\":true}";
	size_t cap = value + 256, n;
	char *req = malloc(cap), *json;
	struct run r;

	assert_non_null(req);
	n = (size_t)snprintf(req, cap, "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nX-Big: ");
	memset(req + n, 'A', value);
	n += value;
	n += (size_t)snprintf(req + n, cap - n, "\r\nContent-Length: %zu\r\n\r\n%s",
			      strlen(body), body);
	run__init(&r);
	for (size_t off = 0; off < n; off += TS_CHUNK_MAX)
		run__data(&r, !server_side, T0, req + off, n - off < TS_CHUNK_MAX ? n - off : TS_CHUNK_MAX);
	run__data(&r, server_side, T0 + 2 * MS, resp_head, strlen(resp_head));
	for (int i = 0; i < 2; i++) {
		char ev[128];
		const char *tok = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";

		snprintf(ev, sizeof(ev), "%zx\r\n%s\r\n", strlen(tok), tok);
		run__data(&r, server_side, T0 + (10 + 5 * i) * MS, ev, strlen(ev));
	}
	run__data(&r, server_side, T0 + 21 * MS, "0\r\n\r\n", 5);
	run__finish(&r, T0 + 999 * MS);
	json = r.n == 1 ? strdup(r.json[0]) : NULL;
	run__free(&r);
	free(req);
	return json;
}

/* Header lines over 8 KiB (issue 38, case 5: an 8 300-byte one dropped the request at both
 * ends, with no record): measured whole as long as the head is within 64 KiB; past that a
 * record all the same, of the method and path, measured, with the error. */
static void test_big_header_lines(void **state)
{
	for (int server_side = 0; server_side < 2; server_side++) {
		const char *role = server_side ? "server" : "client";
		size_t sizes[] = { 8000, 8300, 40000 };
		char *j;

		for (size_t i = 0; i < 3; i++) {
			j = big_header_exchange(server_side, sizes[i]);
			assert_non_null(j);
			assert_string_equal(json_str(j, "role"), role);
			assert_int_equal(json_bool(j, "complete"), 1);
			assert_string_equal(json_str(j, "error"), "");
			assert_string_equal(json_str(j, "model"), "m");
			assert_float_equal(json_num(j, "ttft_ms"), 10, 1e-9);
			free(j);
		}
		j = big_header_exchange(server_side, 70000);
		assert_non_null(j);
		assert_string_equal(json_str(j, "role"), role);
		assert_string_equal(json_str(j, "error"), "http_header_too_large");
		assert_int_equal(json_bool(j, "headers_partial"), 1);
		assert_string_equal(json_str(j, "path"), "/v1/chat/completions");
		assert_float_equal(json_num(j, "ttft_ms"), 10, 1e-9);
		free(j);
	}
}

static void test_keepalive_three_requests(void **state)
{
	struct run r;

	run__init(&r);
	exchange(&r, T0, 3);
	exchange(&r, T0 + 100 * MS, 4);
	exchange(&r, T0 + 200 * MS, 5);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r.reqs[i].start_ns, T0 + i * 100 * MS);
		assert_float_equal(json_num(r.json[i], "ttft_ms"), 10, 1e-9);
		assert_float_equal(json_num(r.json[i], "tpot_ms"), 5, 1e-9);
		assert_float_equal(json_num(r.json[i], "output_tokens"), 3 + i, 0);
		assert_int_equal(json_bool(r.json[i], "complete"), 1);
	}
	assert_int_equal(pipeline__health(r.pl)->streams_http1, 1);
	run__free(&r);
}

/* Responses without a body by definition (a HEAD's, 204, 304) are whole, not malformed JSON,
 * and the keep-alive connection goes on past them: a HEAD's Content-Length announces no
 * bytes. */
static void test_responses_without_body(void **state)
{
	static const char head[] = "HEAD /v1/chat/completions HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char head_ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				      "Content-Length: 120\r\n\r\n";
	static const char no_content[] = "HTTP/1.1 204 No Content\r\n\r\n";
	static const char not_modified[] = "HTTP/1.1 304 Not Modified\r\n"
					   "Content-Type: application/json\r\n\r\n";
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, head, sizeof(head) - 1);
	run__data(&r, false, T0 + 1 * MS, head_ok, sizeof(head_ok) - 1);
	run__data(&r, true, T0 + 10 * MS, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 11 * MS, no_content, sizeof(no_content) - 1);
	run__data(&r, true, T0 + 20 * MS, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 21 * MS, not_modified, sizeof(not_modified) - 1);
	exchange(&r, T0 + 100 * MS, 3);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 4);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(json_str(r.json[i], "error"), "");
		assert_int_equal(json_bool(r.json[i], "complete"), 1);
	}
	assert_string_equal(json_str(r.json[0], "method"), "HEAD");
	assert_float_equal(json_num(r.json[1], "status"), 204, 0);
	assert_float_equal(json_num(r.json[2], "status"), 304, 0);
	assert_float_equal(json_num(r.json[3], "output_tokens"), 3, 0);
	assert_int_equal(json_bool(r.json[3], "complete"), 1);
	run__free(&r);
}

static void test_server_role(void **state)
{
	struct run r;

	run__init(&r);
	/* A server reads the request and writes the reply. */
	run__data(&r, false, T0, req_chat, strlen(req_chat));
	run__data(&r, true, T0 + 1 * MS, resp_head, strlen(resp_head));
	run__data(&r, true, T0 + 30 * MS, "2e\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\r\n",
		  52);
	run__data(&r, true, T0 + 31 * MS, "0\r\n\r\n", 5);
	run__finish(&r, T0 + 99 * MS);
	assert_int_equal(r.n, 1);
	assert_string_equal(json_str(r.json[0], "role"), "server");
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 30, 1e-9);
	run__free(&r);
}

/* A process in a pod (TS_REC_PROC_IDENTITY before its first record): its requests carry its
 * container, pod and namespace, a string the record left unterminated cut; another
 * process's carry none. */
static void test_identity(void **state)
{
	struct ts_rec_proc_identity id = { 0 };
	struct run r;

	(void)state;
	run__init(&r);
	id.hdr.type = TS_REC_PROC_IDENTITY;
	id.hdr.size = sizeof(id);
	id.hdr.ts_ns = T0 - MS;
	id.hdr.pid = r.pid;
	snprintf(id.container_id, sizeof(id.container_id), "%s",
		 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	snprintf(id.runtime, sizeof(id.runtime), "containerd");
	snprintf(id.pod_uid, sizeof(id.pod_uid), "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9");
	snprintf(id.pod_name, sizeof(id.pod_name), "vllm-0");
	memset(id.k8s_namespace, 'n', sizeof(id.k8s_namespace)); /* unterminated: cut */
	assert_int_equal(pipeline__feed(r.pl, &id, sizeof(id)), 0);
	run__data(&r, false, T0, req_chat, strlen(req_chat));
	run__data(&r, true, T0 + 1 * MS, resp_head, strlen(resp_head));
	run__data(&r, true, T0 + 30 * MS, "0\r\n\r\n", 5);
	r.pid = 101; /* another process: none */
	run__data(&r, false, T0 + 40 * MS, req_chat, strlen(req_chat));
	run__data(&r, true, T0 + 41 * MS, resp_head, strlen(resp_head));
	run__data(&r, true, T0 + 60 * MS, "0\r\n\r\n", 5);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_string_equal(json_str(r.json[0], "container_id"),
			    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_string_equal(json_str(r.json[0], "k8s_pod_uid"), "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9");
	assert_string_equal(json_str(r.json[0], "k8s_pod_name"), "vllm-0");
	assert_int_equal(strlen(json_str(r.json[0], "k8s_namespace_name")), 63);
	assert_string_equal(json_str(r.json[1], "container_id"), ""); /* null */
	assert_string_equal(json_str(r.json[1], "k8s_pod_name"), "");
	run__free(&r);
}

/* A sequence gap (ring buffer full): the request is incomplete and has no TTFT at all, and
 * the next request on the same connection is measured again. */
static void test_lost_pieces(void **state)
{
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
	r.seqs[0][1] += 2; /* two pieces never arrive */
	token(&r, T0 + 20 * MS);
	chunk(&r, T0 + 21 * MS, "data: [DONE]\n\n");
	run__data(&r, false, T0 + 22 * MS, "0\r\n\r\n", 5);
	exchange(&r, T0 + 100 * MS, 2);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_string_equal(json_str(r.json[0], "error"), "capture_loss");
	assert_true(isnan(json_num(r.json[0], "ttft_ms")));
	assert_true(isnan(json_num(r.json[0], "tpot_ms")));
	assert_int_equal(json_bool(r.json[1], "complete"), 1);
	assert_float_equal(json_num(r.json[1], "ttft_ms"), 10, 1e-9);
	assert_int_equal(pipeline__health(r.pl)->lost_pieces, 2);
	assert_int_equal(pipeline__health(r.pl)->requests_incomplete, 1);
	run__free(&r);
}

/* The connection's SSL_free. */
static void tls_free(struct run *r, uint64_t ts)
{
	struct ts_tls_free fr = { 0 };

	fr.hdr.type = TS_EV_TLS_FREE;
	fr.hdr.size = sizeof(fr);
	fr.hdr.ts_ns = ts;
	fr.hdr.pid = r->pid;
	fr.ssl = r->ssl;
	assert_int_equal(pipeline__feed(r->pl, &fr, sizeof(fr)), 0);
}

static void feed_drops(struct run *r, uint64_t ts, uint64_t drops)
{
	struct ts_rec_counters c = { 0 };

	c.hdr.type = TS_REC_COUNTERS;
	c.hdr.size = sizeof(c);
	c.hdr.ts_ns = ts;
	c.counters[TS_CNT_DROPS] = drops;
	assert_int_equal(pipeline__feed(r->pl, &c, sizeof(c)), 0);
}

/* The ring dropped records after a request's last one, and none of that stream came after to
 * show a gap (its end was among them): whatever ends the stream then, the capture's end or
 * its close (a small record the full ring still took), the request is capture_loss. A stream
 * seen again after the drops ends as before. */
static void test_loss_before_the_end(void **state)
{
	for (int later = 0; later < 2; later++) {
		for (int closed = 0; closed < 2; closed++) {
			struct run r;

			run__init(&r);
			run__data(&r, true, T0, req_chat, strlen(req_chat));
			run__data(&r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
			token(&r, T0 + 20 * MS);
			feed_drops(&r, T0 + 30 * MS, 7);
			if (later)
				token(&r, T0 + 40 * MS); /* its next piece came: none of its lost */
			if (closed)
				tls_free(&r, T0 + 50 * MS);
			run__finish(&r, T0 + 999 * MS);
			assert_int_equal(r.n, 1);
			assert_int_equal(json_bool(r.json[0], "complete"), 0);
			assert_string_equal(json_str(r.json[0], "error"),
					    later ? (closed ? "connection_closed" : "capture_ended")
						  : "capture_loss");
			run__free(&r);
		}
	}
}

/* The counters that show drops can come before records made earlier than they were read (the
 * reader marks the backlog, reads the counters, then takes what was drained up to the mark,
 * capture/live.c): a stream whose last piece was made before that read, then closed, may have
 * lost its end, and says capture_loss, though its last piece comes after the counters. */
static void test_loss_counted_before_its_records(void **state)
{
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
	feed_drops(&r, T0 + 100 * MS, 7); /* read at 100 ms */
	token(&r, T0 + 20 * MS);	  /* made before the read, handed over after it */
	tls_free(&r, T0 + 50 * MS);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 1);
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_string_equal(json_str(r.json[0], "error"), "capture_loss");
	run__free(&r);
}

static void keep_error(void *ctx, struct request *r)
{
	snprintf(ctx, REQ_ERROR_MAX, "%s", r->error);
	request__free(r);
}

/* A request in flight when its peer died says peer_exited, whatever ends it; but one whose
 * bytes may be missing says capture_loss, which matters more. */
static void test_loss_before_a_dead_peer(void **state)
{
	static const char *const ends[] = { "connection_closed", "capture_loss" };
	uint64_t next_id = 0;
	struct conn_counts counts = { 0 };
	struct h2_counts h2 = { 0 };
	struct jdoc json = { 0 };

	for (int i = 0; i < 2; i++) {
		char error[REQ_ERROR_MAX] = "";
		struct conn_sink sink = { .on_request = keep_error, .ctx = error, .next_id = &next_id,
					  .counts = &counts, .json = &json, .h2 = &h2 };
		struct stream_key key = { .pid = 1, .transport = TRANSPORT_TCP, .id = 7001 };
		struct conn *c = conn__new(&key, "client", &sink);
		char req[256];

		assert_non_null(c);
		snprintf(req, sizeof(req), "%s", req_chat);
		conn__data(c, true, (uint8_t *)req, strlen(req), T0);
		assert_int_equal(conn__inflight(c), 1);
		conn__peer_exited(c);
		conn__close(c, T0 + MS, ends[i]);
		assert_string_equal(error, i ? "capture_loss" : "peer_exited");
		conn__free(c);
	}
	jdoc__free(&json);
}

static void feed_proc(struct run *r, uint32_t type, uint64_t ts)
{
	struct ts_proc e = { 0 };

	e.hdr.type = type;
	e.hdr.size = sizeof(e);
	e.hdr.ts_ns = ts;
	e.hdr.pid = r->pid;
	assert_int_equal(pipeline__feed(r->pl, &e, sizeof(e)), 0);
}

static void test_process_dies_midstream(void **state)
{
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
	token(&r, T0 + 20 * MS);
	feed_proc(&r, TS_EV_EXIT, T0 + 25 * MS);
	run__tick(&r, T0 + 200 * MS);
	assert_int_equal(r.n, 1); /* reported at the exit, not at the end of capture */
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_string_equal(json_str(r.json[0], "error"), "process_exited");
	assert_float_equal(json_num(r.json[0], "end_ns"), (double)(T0 + 25 * MS), 0);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 1);
	run__free(&r);
}

static void test_ssl_free_and_capture_end(void **state)
{
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 2 * MS, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
		  52);
	run__data(&r, false, T0 + 9 * MS, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 48);
	/* A body delimited by the close is complete when the connection is freed. */
	tls_free(&r, T0 + 10 * MS);
	run__tick(&r, T0 + 200 * MS);
	assert_int_equal(r.n, 1);
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 9, 1e-9);

	/* A request still waiting when capture ends is reported, incomplete. */
	r.ssl = 0xdef;
	run__data(&r, true, T0 + 50 * MS, req_chat, strlen(req_chat));
	/* and one whose body runs to a close the capture did not see: not taken as whole */
	r.ssl = 0x123;
	run__data(&r, true, T0 + 51 * MS, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 52 * MS, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
		  52);
	run__data(&r, false, T0 + 55 * MS, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 48);
	run__finish(&r, T0 + 60 * MS);
	assert_int_equal(r.n, 3);
	for (size_t i = 1; i < 3; i++) {
		assert_int_equal(json_bool(r.json[i], "complete"), 0);
		assert_string_equal(json_str(r.json[i], "error"), "capture_ended");
	}
	run__free(&r);
}

static void test_unsupported_streams(void **state)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4";
	struct run r;

	run__init(&r);
	/* HTTP/2, even when its preface arrives a byte at a time */
	for (size_t i = 0; i < sizeof(preface) - 1; i++)
		run__data(&r, true, T0, preface + i, 1);
	r.ssl = 0x2;
	run__data(&r, true, T0, "\x16\x03\x01garbage that is no HTTP at all", 33);
	/* A malformed HTTP stream is marked and skipped... */
	r.ssl = 0x3;
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	run__data(&r, false, T0 + 1 * MS, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 51);
	/* ...and a good one beside it goes on. */
	r.ssl = 0x4;
	exchange(&r, T0, 2);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(pipeline__health(r.pl)->streams_http2, 1);
	assert_int_equal(pipeline__health(r.pl)->streams_other, 0); /* still undecided at the end */
	assert_int_equal(pipeline__health(r.pl)->conn.malformed, 1);
	assert_int_equal(r.n, 2);
	assert_string_equal(json_str(r.json[0], "error"), "malformed_http");
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_int_equal(json_bool(r.json[1], "complete"), 1);
	assert_float_equal(json_num(r.json[1], "ttft_ms"), 10, 1e-9);
	run__free(&r);
}

/*
 * 101 Switching Protocols: the bytes after it, either way, are not HTTP/1.1 any more. They
 * hold what would read as a reply and its tokens (an HTTP/1.1 head and SSE events inside
 * HTTP/2 DATA or WebSocket frames, here as plain text, the worst case): none of it may be
 * read. The request ends at the 101, saying what the connection became; after h2c it goes on
 * as stream 1, and ends when the client's bytes prove not to be HTTP/2.
 */
static void test_switching_protocols(void **state)
{
	static const char *const protos[][2] = { { "h2c", "h2_bad_preface" },
						 { "websocket", "switched_to_websocket" },
						 { "", "switched_protocols" } };
	static const char disguised[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
					"Content-Length: 45\r\n\r\n"
					"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";

	for (size_t i = 0; i < 3; i++) {
		char req[512], resp[256];
		struct run r;

		run__init(&r);
		snprintf(req, sizeof(req), "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n"
			 "Connection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\n\r\n",
			 protos[i][0][0] ? protos[i][0] : "x");
		snprintf(resp, sizeof(resp), "HTTP/1.1 101 Switching Protocols\r\n%s%s%s"
			 "Connection: Upgrade\r\n\r\n",
			 protos[i][0][0] ? "Upgrade: " : "", protos[i][0], protos[i][0][0] ? "\r\n" : "");
		run__data(&r, true, T0, req, strlen(req));
		run__data(&r, false, T0 + MS, resp, strlen(resp));
		run__data(&r, true, T0 + 2 * MS, req, strlen(req)); /* a "request" after it */
		run__data(&r, false, T0 + 3 * MS, disguised, sizeof(disguised) - 1);
		run__finish(&r, T0 + 999 * MS);
		assert_int_equal(r.n, 1);
		assert_string_equal(json_str(r.json[0], "error"), protos[i][1]);
		assert_int_equal(json_bool(r.json[0], "complete"), 0);
		/* h2c: the request goes on as stream 1, whose reply never came as HTTP/2 */
		if (i == 0)
			assert_true(isnan(json_num(r.json[0], "status")));
		else
			assert_float_equal(json_num(r.json[0], "status"), 101, 0);
		assert_float_equal(json_num(r.json[0], "token_events"), 0, 0);
		assert_int_equal(pipeline__health(r.pl)->streams_http2, i == 0);
		assert_int_equal(pipeline__health(r.pl)->streams_other, i != 0);
		assert_int_equal(pipeline__health(r.pl)->conn.malformed, i == 0);
		run__free(&r);
	}
}

static void test_non_llm_http_not_reported(void **state)
{
	static const char get[] = "GET /index.html HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi";
	struct run r;

	run__init(&r);
	run__data(&r, true, T0, get, sizeof(get) - 1);
	run__data(&r, false, T0 + MS, ok, sizeof(ok) - 1);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 0);
	assert_int_equal(pipeline__health(r.pl)->other_http, 1);
	run__free(&r);
}

/* A call larger than the piece budget: what was not sent is missing, and a body that the
 * framing can skip over stays parseable. */
static void test_truncated_request_body(void **state)
{
	const size_t body_len = (size_t)TS_MAX_PIECES * TS_CHUNK_MAX + 1000;
	char head[256];
	struct ts_tls_data *e = malloc(sizeof(*e) + TS_CHUNK_MAX);
	struct run r;
	int hn;

	run__init(&r);
	hn = snprintf(head, sizeof(head),
		      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", body_len);
	run__data(&r, true, T0, head, (size_t)hn);
	/* The body write: TS_MAX_PIECES pieces arrive, the tail does not. */
	for (uint32_t i = 0; i < TS_MAX_PIECES; i++) {
		memset(e, 0, sizeof(*e));
		e->hdr.type = TS_EV_TLS_DATA;
		e->hdr.size = sizeof(*e) + TS_CHUNK_MAX;
		e->hdr.ts_ns = T0;
		e->hdr.pid = r.pid;
		e->ssl = r.ssl;
		e->seq = r.seqs[0][1]++;
		e->dir = TS_DIR_WRITE;
		e->flags = TS_F_TRUNCATED;
		e->total_len = (uint32_t)body_len;
		e->offset = i * TS_CHUNK_MAX;
		e->len = TS_CHUNK_MAX;
		memset(e->data, i == 0 ? '{' : ' ', TS_CHUNK_MAX);
		assert_int_equal(pipeline__feed(r.pl, e, e->hdr.size), 0);
	}
	run__data(&r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
	token(&r, T0 + 40 * MS);
	run__data(&r, false, T0 + 41 * MS, "0\r\n\r\n", 5);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 1);
	/* The response was fully seen: its figures stand; the model could not be read. */
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 40, 1e-9);
	assert_string_equal(json_str(r.json[0], "model"), "");
	free(e);
	run__free(&r);
}

/* ---- plaintext TCP records ---- */

static const struct ts_sock_addr v4 = {
	.family = 2, .lport = 41000, .rport = 8000,
	.laddr = { 10, 0, 0, 1 }, .raddr = { 10, 0, 0, 2 },
};

/* One socket record of owner pid on socket ino: len bytes of data, or (data NULL) a record
 * saying total bytes were not captured, with flags. */
static void sock_rec(struct run *r, uint64_t ino, uint64_t seq, bool write, uint64_t ts,
		     const char *data, uint32_t total, uint32_t flags, const struct ts_sock_addr *a)
{
	uint32_t len = data ? (uint32_t)strlen(data) : 0;
	struct ts_sock_data *e = calloc(1, sizeof(*e) + len);

	assert_non_null(e);
	e->hdr.type = TS_EV_SOCK_DATA;
	e->hdr.size = sizeof(*e) + len;
	e->hdr.ts_ns = ts;
	e->hdr.pid = r->pid;
	strcpy(e->hdr.comm, "uvicorn");
	e->sock = ino;
	e->seq = seq;
	e->dir = write ? TS_DIR_WRITE : TS_DIR_READ;
	e->flags = flags;
	e->total_len = data ? len : total;
	e->len = len;
	e->owner = r->pid;
	e->addr = *a;
	memcpy(e->data, data ? data : "", len);
	assert_int_equal(pipeline__feed(r->pl, e, e->hdr.size), 0);
	free(e);
}

static void sock_close(struct run *r, uint64_t ino, uint64_t ts)
{
	struct ts_sock_close e = { 0 };

	e.hdr.type = TS_EV_SOCK_CLOSE;
	e.hdr.size = sizeof(e);
	e.hdr.ts_ns = ts;
	e.hdr.pid = r->pid;
	e.sock = ino;
	e.owner = r->pid;
	assert_int_equal(pipeline__feed(r->pl, &e, sizeof(e)), 0);
}

static const char *tok_chunk = "2f\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\r\n";

/* A server's exchange on socket ino, from sequence number *seq. */
static void sock_exchange(struct run *r, uint64_t ino, uint64_t *seq, uint64_t t, int ntok)
{
	sock_rec(r, ino, (*seq)++, false, t, req_chat, 0, 0, &v4);
	sock_rec(r, ino, (*seq)++, true, t + 1 * MS, resp_head, 0, 0, &v4);
	for (int i = 0; i < ntok; i++)
		sock_rec(r, ino, (*seq)++, true, t + (20 + 5 * i) * MS, tok_chunk, 0, 0, &v4);
	sock_rec(r, ino, (*seq)++, true, t + 49 * MS, "e\r\ndata: [DONE]\n\n\r\n", 0, 0, &v4);
	sock_rec(r, ino, (*seq)++, true, t + 50 * MS, "0\r\n\r\n", 0, 0, &v4);
}

/* Bytes of one direction over TLS (run__data) or a socket (sock_rec), in 1000-byte pieces. */
static void send_either(struct run *r, bool tcp, uint64_t *seq, bool write, uint64_t ts,
			const char *data, size_t len)
{
	char piece[1001];

	for (size_t off = 0; off < len; off += 1000) {
		size_t n = len - off < 1000 ? len - off : 1000;

		if (!tcp) {
			run__data(r, write, ts, data + off, n);
			continue;
		}
		memcpy(piece, data + off, n);
		piece[n] = 0;
		sock_rec(r, 7, (*seq)++, !write, ts, piece, 0, 0, &v4); /* the socket is the server's */
	}
}

/*
 * Valid JSON nested deeper than the reader goes (jansson's 2048 levels) is json_too_deep, not
 * malformed_json; bad syntax stays malformed_json. The same over TLS and over a socket.
 */
static void test_json_too_deep(void **state)
{
	const size_t depth = 3000;
	size_t n = 0;
	char *deep = malloc(2 * depth + 16), head[32];

	assert_non_null(deep);
	n += (size_t)sprintf(deep, "data: ");
	memset(deep + n, '[', depth);
	n += depth;
	memset(deep + n, ']', depth);
	n += depth;
	n += (size_t)sprintf(deep + n, "\n\n");
	for (int tcp = 0; tcp < 2; tcp++) {
		const char *events[] = { deep, "data: {\"choices\":[}\n\n" };
		const char *want[] = { "json_too_deep", "malformed_json" };
		uint64_t seq = 0;
		struct run r;

		run__init(&r);
		for (int i = 0; i < 2; i++) {
			uint64_t t = T0 + (uint64_t)i * 100 * MS;
			size_t len = strlen(events[i]);

			send_either(&r, tcp, &seq, true, t, req_chat, strlen(req_chat));
			send_either(&r, tcp, &seq, false, t + MS, resp_head, strlen(resp_head));
			snprintf(head, sizeof(head), "%zx\r\n", len);
			send_either(&r, tcp, &seq, false, t + 2 * MS, head, strlen(head));
			send_either(&r, tcp, &seq, false, t + 2 * MS, events[i], len);
			send_either(&r, tcp, &seq, false, t + 2 * MS, "\r\n0\r\n\r\n", 7);
		}
		run__finish(&r, T0 + 999 * MS);
		assert_int_equal(r.n, 2);
		for (int i = 0; i < 2; i++)
			assert_string_equal(json_str(r.json[i], "error"), want[i]);
		run__free(&r);
	}
	free(deep);
}

static void test_tcp_stream_addresses(void **state)
{
	struct ts_sock_addr v6 = { .family = 10, .lport = 8080, .rport = 50000 };
	uint64_t seq = 0, seq6 = 0;
	struct run r;

	v6.laddr[15] = 1; /* ::1 */
	v6.raddr[15] = 1;
	run__init(&r);
	sock_exchange(&r, 7001, &seq, T0, 3);
	sock_rec(&r, 7002, seq6++, false, T0 + 100 * MS, req_chat, 0, 0, &v6);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_string_equal(json_str(r.json[0], "transport"), "tcp");
	assert_string_equal(json_str(r.json[0], "role"), "server");
	assert_string_equal(json_str(r.json[0], "local"), "10.0.0.1:41000");
	assert_string_equal(json_str(r.json[0], "peer"), "10.0.0.2:8000");
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 20, 1e-9);
	assert_float_equal(json_num(r.json[0], "tpot_ms"), 5, 1e-9);
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_string_equal(json_str(r.json[1], "local"), "[::1]:8080");
	assert_string_equal(json_str(r.json[1], "peer"), "[::1]:50000");
	run__free(&r);
}

/*
 * A TCP socket's network namespace (bpf/sock.bpf.c sends it before its bytes) reaches its
 * records, and a translation found in conntrack (capture/nat.c, before it) their nat; a TLS
 * stream's namespace comes with its socket link, and a link record from a recording made
 * before there was one leaves it unknown.
 */
static void test_tcp_netns_and_nat(void **state)
{
	struct ts_sock_net net = { 0 };
	struct ts_rec_sock_nat nat = { 0 };
	struct ts_tls_sock link = { 0 };
	uint64_t seq = 0;
	json_t *j, *n;
	struct run r;

	run__init(&r);
	nat.hdr = (struct ts_event_hdr){ .type = TS_REC_SOCK_NAT, .size = sizeof(nat),
					 .ts_ns = T0 - MS, .pid = r.pid };
	nat.id = 7001;
	nat.stream = TS_NAT_TCP;
	nat.after = v4;
	nat.after.raddr[3] = 9; /* the server behind the Service address */
	nat.after.rport = 8443;
	assert_int_equal(pipeline__feed(r.pl, &nat, sizeof(nat)), 0);
	net.hdr = (struct ts_event_hdr){ .type = TS_EV_SOCK_NET, .size = sizeof(net),
					 .ts_ns = T0 - MS, .pid = r.pid };
	net.sock = 7001;
	net.owner = r.pid;
	net.netns = 4026532304u;
	net.addr = v4;
	assert_int_equal(pipeline__feed(r.pl, &net, sizeof(net)), 0);
	sock_exchange(&r, 7001, &seq, T0, 2);
	nat.stream = 7; /* no such stream kind: refused */
	assert_int_equal(pipeline__feed(r.pl, &nat, sizeof(nat)), -1);
	/* TLS: a link record as recordings before 2026-12-05 have it, then one with its netns */
	link.hdr = (struct ts_event_hdr){ .type = TS_EV_TLS_SOCK,
					  .size = offsetof(struct ts_tls_sock, netns),
					  .ts_ns = T0 + 99 * MS, .pid = r.pid };
	link.ssl = r.ssl;
	link.sock = 9001;
	link.exact = 1;
	link.addr = v4;
	link.netns = 4026531840u; /* past the record's end: not read */
	assert_int_equal(pipeline__feed(r.pl, &link, link.hdr.size), 0);
	exchange(&r, T0 + 100 * MS, 2);
	link.hdr.size = sizeof(link);
	link.ssl = ++r.ssl;
	assert_int_equal(pipeline__feed(r.pl, &link, sizeof(link)), 0);
	exchange(&r, T0 + 200 * MS, 2);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 3);
	assert_float_equal(json_num(r.json[0], "netns"), 4026532304.0, 0);
	j = json_loads(r.json[0], 0, NULL);
	n = json_object_get(j, "nat");
	assert_string_equal(json_string_value(json_object_get(n, "local")), "10.0.0.1:41000");
	assert_string_equal(json_string_value(json_object_get(n, "peer")), "10.0.0.9:8443");
	json_decref(j);
	j = json_loads(r.json[1], 0, NULL);
	assert_true(json_is_null(json_object_get(j, "netns")));
	assert_true(json_is_null(json_object_get(j, "nat")));
	json_decref(j);
	assert_float_equal(json_num(r.json[2], "netns"), 4026531840.0, 0);
	assert_int_equal(pipeline__health(r.pl)->streams_nat, 1);
	run__free(&r);
}

/* A captured Unix socket's path and peer, as bpf/sock.bpf.c sends it before its bytes. */
static void unix_sock(struct run *r, uint64_t ino, uint64_t peer_ino, uint32_t peer_pid,
		      const char *path, uint32_t path_len, uint64_t ts)
{
	struct ts_unix_sock e = { 0 };

	e.hdr.type = TS_EV_UNIX_SOCK;
	e.hdr.size = sizeof(e);
	e.hdr.ts_ns = ts;
	e.hdr.pid = r->pid;
	strcpy(e.hdr.comm, "uvicorn");
	e.sock = ino;
	e.peer_sock = peer_ino;
	e.owner = r->pid;
	e.peer_pid = peer_pid;
	e.path_len = path_len;
	memcpy(e.path, path, path_len);
	assert_int_equal(pipeline__feed(r->pl, &e, sizeof(e)), 0);
}

/* A Unix socket: transport unix, each end named by the socket's path and its own inode (the
 * peer by the other's, so that a client and its server join), the peer's process; an abstract
 * name as @name; a peer learnt later (a client that wrote before its server accepted) reaches
 * the request in flight; a close flagged TS_CLOSE_UNIX ends the Unix stream, not a TCP one. */
static void test_unix_socket(void **state)
{
	struct ts_sock_addr un = { .family = 1 /* AF_UNIX */ };
	uint64_t own = 9001, seq = 0;
	struct ts_sock_close c = { 0 };
	struct run r;

	memcpy(un.laddr, &own, sizeof(own)); /* the peer's inode unknown (0) in the data */
	run__init(&r);
	unix_sock(&r, 9001, 0, 0, "/run/app.sock", 13, T0 - MS);
	sock_rec(&r, 9001, seq++, false, T0, req_chat, 0, 0, &un);
	unix_sock(&r, 9001, 9002, 4242, "/run/app.sock", 13, T0 + MS / 2); /* peer now known */
	sock_rec(&r, 9001, seq++, true, T0 + 1 * MS, resp_head, 0, 0, &un);
	sock_rec(&r, 9001, seq++, true, T0 + 20 * MS, tok_chunk, 0, 0, &un);
	sock_rec(&r, 9001, seq++, true, T0 + 30 * MS, "e\r\ndata: [DONE]\n\n\r\n", 0, 0, &un);
	sock_rec(&r, 9001, seq++, true, T0 + 30 * MS, "0\r\n\r\n", 0, 0, &un);
	/* a close of the TCP socket with the same number ends nothing here: a second request on
	 * the Unix stream stays open until the close that names it */
	sock_rec(&r, 9001, seq++, false, T0 + 31 * MS, req_chat, 0, 0, &un);
	sock_close(&r, 9001, T0 + 31 * MS);
	c.hdr.type = TS_EV_SOCK_CLOSE;
	c.hdr.size = sizeof(c);
	c.hdr.ts_ns = T0 + 32 * MS;
	c.hdr.pid = r.pid;
	c.sock = 9001;
	c.owner = r.pid;
	c.flags = TS_CLOSE_UNIX;
	assert_int_equal(pipeline__feed(r.pl, &c, sizeof(c)), 0);
	/* an abstract socket */
	unix_sock(&r, 9003, 9004, 77, "\0abstract", 9, T0 + 40 * MS);
	sock_rec(&r, 9003, 0, false, T0 + 41 * MS, req_chat, 0, 0, &un);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 3);
	assert_string_equal(json_str(r.json[0], "transport"), "unix");
	assert_string_equal(json_str(r.json[0], "role"), "server");
	assert_string_equal(json_str(r.json[0], "local"), "unix:/run/app.sock#9001");
	assert_string_equal(json_str(r.json[0], "peer"), "unix:/run/app.sock#9002");
	assert_float_equal(json_num(r.json[0], "peer_pid"), 4242, 0);
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 20, 1e-9);
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_string_equal(json_str(r.json[1], "error"), "connection_closed");
	assert_string_equal(json_str(r.json[2], "local"), "unix:@abstract#9003");
	assert_string_equal(json_str(r.json[2], "peer"), "unix:@abstract#9004");
	assert_string_equal(json_str(r.json[2], "error"), "capture_ended");
	run__free(&r);
}

/* A server that closes and accepts in a loop: the kernel may hand the next socket the same
 * fd (and memory); its inode is new, and even a reused key after a close starts afresh. */
/* Each direction numbered on its own (TS_F_SEQ_PER_DIR), as two threads on one socket make
 * them: a reader's record may land among a writer's in any order. Nothing is lost; a number
 * missing within one direction still is. */
static void test_tcp_seq_per_direction(void **state)
{
	const uint32_t f = TS_F_SEQ_PER_DIR;
	const char *done = "e\r\ndata: [DONE]\n\n\r\n";
	struct run r;

	run__init(&r);
	/* phase: two requests read on one thread while the replies are written on another */
	sock_rec(&r, 7001, 0, false, T0, req_chat, 0, f, &v4);
	sock_rec(&r, 7001, 0, true, T0 + 1 * MS, resp_head, 0, f, &v4);
	sock_rec(&r, 7001, 1, true, T0 + 20 * MS, tok_chunk, 0, f, &v4);
	sock_rec(&r, 7001, 2, true, T0 + 25 * MS, tok_chunk, 0, f, &v4);
	sock_rec(&r, 7001, 1, false, T0 + 26 * MS, req_chat, 0, f, &v4);
	sock_rec(&r, 7001, 3, true, T0 + 30 * MS, done, 0, f, &v4);
	sock_rec(&r, 7001, 4, true, T0 + 31 * MS, "0\r\n\r\n", 0, f, &v4);
	sock_rec(&r, 7001, 5, true, T0 + 40 * MS, resp_head, 0, f, &v4);
	sock_rec(&r, 7001, 6, true, T0 + 50 * MS, tok_chunk, 0, f, &v4);
	sock_rec(&r, 7001, 7, true, T0 + 55 * MS, done, 0, f, &v4);
	sock_rec(&r, 7001, 8, true, T0 + 56 * MS, "0\r\n\r\n", 0, f, &v4);
	run__tick(&r, T0 + 300 * MS);
	assert_int_equal(r.n, 2);
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_int_equal(json_bool(r.json[1], "complete"), 1);
	assert_float_equal(json_num(r.json[0], "ttft_ms"), 20, 1e-9);
	assert_int_equal(pipeline__health(r.pl)->lost_pieces, 0);

	/* phase: a write numbered past the next one: one piece of that direction is lost */
	sock_rec(&r, 7001, 2, false, T0 + 100 * MS, req_chat, 0, f, &v4);
	sock_rec(&r, 7001, 9, true, T0 + 101 * MS, resp_head, 0, f, &v4);
	sock_rec(&r, 7001, 11, true, T0 + 120 * MS, tok_chunk, 0, f, &v4);
	sock_rec(&r, 7001, 12, true, T0 + 130 * MS, done, 0, f, &v4);
	sock_rec(&r, 7001, 13, true, T0 + 131 * MS, "0\r\n\r\n", 0, f, &v4);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 3);
	assert_string_equal(json_str(r.json[2], "error"), "capture_loss");
	assert_int_equal(pipeline__health(r.pl)->lost_pieces, 1);
	run__free(&r);
}

/* Both ends of one plaintext connection traced, the client's end parsed before the server's
 * though it came 1 ms later (two CPUs' records; seen under a CPU hog): records wait
 * REORDER_NS to be reported in the order their responses ended, so the client still names
 * its server's record. */
static void test_client_end_parsed_first(void **state)
{
	const struct ts_sock_addr cli = { .family = 2, .lport = 41000, .rport = 8000,
					  .laddr = { 10, 0, 0, 1 }, .raddr = { 10, 0, 0, 2 } };
	const struct ts_sock_addr srv = { .family = 2, .lport = 8000, .rport = 41000,
					  .laddr = { 10, 0, 0, 2 }, .raddr = { 10, 0, 0, 1 } };
	const uint32_t f = TS_F_SEQ_PER_DIR;
	const char *done = "e\r\ndata: [DONE]\n\n\r\n";
	struct run r;
	double server_id;

	run__init(&r);
	r.pid = 200; /* the client */
	sock_rec(&r, 9002, 0, true, T0, req_chat, 0, f, &cli);
	r.pid = 100; /* the server */
	sock_rec(&r, 9001, 0, false, T0 + MS / 10, req_chat, 0, f, &srv);
	sock_rec(&r, 9001, 0, true, T0 + 2 * MS, resp_head, 0, f, &srv);
	sock_rec(&r, 9001, 1, true, T0 + 20 * MS, tok_chunk, 0, f, &srv);
	sock_rec(&r, 9001, 2, true, T0 + 25 * MS, done, 0, f, &srv);
	r.pid = 200;
	sock_rec(&r, 9002, 0, false, T0 + 3 * MS, resp_head, 0, f, &cli);
	sock_rec(&r, 9002, 1, false, T0 + 21 * MS, tok_chunk, 0, f, &cli);
	sock_rec(&r, 9002, 2, false, T0 + 26 * MS, done, 0, f, &cli);
	sock_rec(&r, 9002, 3, false, T0 + 31 * MS, "0\r\n\r\n", 0, f, &cli); /* its end: first */
	r.pid = 100;
	sock_rec(&r, 9001, 3, true, T0 + 30 * MS, "0\r\n\r\n", 0, f, &srv); /* the server's */
	run__tick(&r, T0 + 500 * MS);
	assert_int_equal(r.n, 2);
	assert_string_equal(json_str(r.json[0], "role"), "server");
	assert_string_equal(json_str(r.json[1], "role"), "client");
	server_id = json_num(r.json[0], "id");
	assert_float_equal(json_num(r.json[1], "server_id"), server_id, 0);
	run__finish(&r, T0 + 999 * MS);
	run__free(&r);
}

static void test_tcp_close_and_reuse(void **state)
{
	uint64_t seq = 0;
	struct run r;

	run__init(&r);
	sock_exchange(&r, 7001, &seq, T0, 2);
	sock_close(&r, 7001, T0 + 60 * MS);
	seq = 0;
	sock_exchange(&r, 7002, &seq, T0 + 100 * MS, 3);
	sock_close(&r, 7002, T0 + 160 * MS);
	seq = 0;
	sock_exchange(&r, 7001, &seq, T0 + 200 * MS, 4);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(json_bool(r.json[i], "complete"), 1);
		assert_float_equal(json_num(r.json[i], "output_tokens"), 2 + i, 0);
	}
	assert_int_equal(pipeline__health(r.pl)->lost_pieces, 0);
	assert_int_equal(pipeline__health(r.pl)->streams, 3);
	run__free(&r);
}

/* sendfile in the middle of a reply: the bytes are unseen, the request incomplete, nothing
 * invented; the next request on the connection is measured. */
static void test_tcp_unseen_io(void **state)
{
	uint64_t seq = 0;
	struct run r;

	run__init(&r);
	sock_rec(&r, 7001, seq++, false, T0, req_chat, 0, 0, &v4);
	sock_rec(&r, 7001, seq++, true, T0 + 1 * MS, resp_head, 0, 0, &v4);
	sock_rec(&r, 7001, seq++, true, T0 + 20 * MS, NULL, 4096, TS_F_NO_USER_BUFFER, &v4);
	sock_exchange(&r, 7001, &seq, T0 + 100 * MS, 2);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_string_equal(json_str(r.json[0], "error"), "unsupported_io");
	assert_true(isnan(json_num(r.json[0], "ttft_ms")));
	assert_int_equal(json_bool(r.json[1], "complete"), 1);
	assert_float_equal(json_num(r.json[1], "ttft_ms"), 20, 1e-9);
	assert_int_equal(pipeline__health(r.pl)->sock_not_captured, 1);
	run__free(&r);
}

static void tls_link(struct run *r, uint64_t ts, uint16_t lport, bool exact)
{
	struct ts_tls_sock e = { 0 };

	e.hdr.type = TS_EV_TLS_SOCK;
	e.hdr.size = sizeof(e);
	e.hdr.ts_ns = ts;
	e.hdr.pid = r->pid;
	e.ssl = r->ssl;
	e.sock = 9000 + lport;
	e.exact = exact;
	e.addr = v4;
	e.addr.lport = lport;
	assert_int_equal(pipeline__feed(r->pl, &e, sizeof(e)), 0);
}

/* A memory BIO: the request is written before its socket is known, and the link that follows
 * still reaches it. An exact link replaces an inferred one, never the reverse. */
static void test_tls_socket_link(void **state)
{
	struct run r;

	run__init(&r);
	tls_link(&r, T0 - 5 * MS, 1111, false); /* before any byte: no stream counted */
	assert_int_equal(pipeline__health(r.pl)->streams, 0);
	exchange(&r, T0, 2);
	run__data(&r, true, T0 + 100 * MS, req_chat, strlen(req_chat));
	tls_link(&r, T0 + 101 * MS, 2222, true);
	tls_link(&r, T0 + 102 * MS, 3333, false);
	run__data(&r, false, T0 + 102 * MS, resp_head, strlen(resp_head));
	token(&r, T0 + 120 * MS);
	run__data(&r, false, T0 + 121 * MS, "0\r\n\r\n", 5);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_string_equal(json_str(r.json[0], "transport"), "tls");
	assert_string_equal(json_str(r.json[0], "local"), "10.0.0.1:1111");
	assert_string_equal(json_str(r.json[1], "local"), "10.0.0.1:2222");
	assert_string_equal(json_str(r.json[1], "peer"), "10.0.0.2:8000");
	assert_int_equal(pipeline__health(r.pl)->streams, 1);
	run__free(&r);
}

/* A model name from the traffic carrying terminal escapes (set the title, turn red, a C1
 * CSI): the text line and the summary show them as \xNN; JSON keeps the value, escaped the
 * JSON way. */
static void evil_exchange(struct run *r, const char *model_json)
{
	char req[512];
	int len = snprintf(req, sizeof(req),
			   "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %zu\r\n\r\n"
			   "{\"model\":\"%s\",\"stream\":true}",
			   strlen("{\"model\":\"\",\"stream\":true}") + strlen(model_json), model_json);

	run__data(r, true, T0, req, (size_t)len);
	run__data(r, false, T0 + 2 * MS, resp_head, strlen(resp_head));
	token(r, T0 + 10 * MS);
	chunk(r, T0 + 11 * MS, "data: [DONE]\n\n");
	run__data(r, false, T0 + 12 * MS, "0\r\n\r\n", 5);
}

static void test_terminal_escapes(void **state)
{
	/* as sent, in JSON; and as decoded */
	static const char evil_json[] = "m\\u001b]0;pwned\\u0007\\u001b[31mred\\u009b2J";
	static const char evil[] = "m\x1b]0;pwned\x07\x1b[31mred\xc2\x9b" "2J";
	char text[8192];
	FILE *lines = tmpfile();
	struct summary *sm = summary__new(lines, NULL, NULL);
	struct sinks sinks = { 0 };
	struct run r;
	size_t n;

	assert_non_null(lines);
	assert_non_null(sm);
	assert_int_equal(sinks__add(&sinks, &line_sink, lines), 0);
	assert_int_equal(sinks__add(&sinks, &summary_sink, sm), 0);
	run__init(&r);
	pipeline__free(r.pl);
	r.pl = pipeline__new(sinks__request, sinks__step, &sinks); /* the real text output */
	evil_exchange(&r, evil_json);
	pipeline__finish(r.pl, T0 + 99 * MS);
	assert_int_equal(sinks__finish(&sinks, pipeline__health(r.pl)), 0); /* the summary */
	rewind(lines);
	n = fread(text, 1, sizeof(text) - 1, lines);
	text[n] = 0;
	assert_null(strchr(text, 0x1b));
	assert_null(strchr(text, 0x07));
	assert_null(strstr(text, "\xc2\x9b"));
	assert_non_null(strstr(text, " m\\x1b]0;pwned\\x07\\x1b[31mred\\xc2\\x9b2J /v1/chat"));
	assert_non_null(strstr(text, "model=m\\x1b]0;pwned\\x07"));
	run__free(&r);
	summary__free(sm);
	fclose(lines);

	run__init(&r);
	evil_exchange(&r, evil_json);
	run__finish(&r, T0 + 99 * MS);
	assert_int_equal(r.n, 1);
	assert_non_null(strstr(r.json[0], "\"model\":\"m\\u001B]0;pwned\\u0007"));
	assert_string_equal(json_str(r.json[0], "model"), evil);
	run__free(&r);
}

/*
 * A fork-per-request client: 300 processes of one command, one request each, each exiting.
 * One summary line for them (by command, role, API and model), with their count, not 300.
 */
static void test_summary_by_command(void **state)
{
	char text[65536];
	FILE *lines = tmpfile();
	struct summary *sm = summary__new(lines, NULL, NULL);
	struct run r;
	size_t n;
	int groups = 0;

	assert_non_null(lines);
	assert_non_null(sm);
	run__init(&r);
	pipeline__free(r.pl);
	r.pl = pipeline__new(summary_sink.on_request, summary_sink.on_step, sm);
	pipeline__set_exit_fn(r.pl, summary_sink.on_exit);
	for (uint32_t i = 0; i < 300; i++) {
		r.pid = 1000 + i;
		memset(r.seqs, 0, sizeof(r.seqs));
		exchange(&r, T0 + i * 100 * MS, 2);
		if (i < 298) /* two still running at the end */
			feed_proc(&r, TS_EV_EXIT, T0 + i * 100 * MS + 50 * MS);
	}
	pipeline__finish(r.pl, T0 + 400 * 100 * MS);
	summary__print(sm, lines, pipeline__health(r.pl));
	rewind(lines);
	n = fread(text, 1, sizeof(text) - 1, lines);
	text[n] = 0;
	for (const char *l = text; (l = strstr(l, " model=")); l++)
		groups++;
	assert_int_equal(groups, 1);
	assert_non_null(strstr(text, "[300 pids] client openai.chat model=m requests=300 "));
	run__free(&r);
	summary__free(sm);
	fclose(lines);
}

/* Model names are whatever clients send: 5 000 of them make at most REQUEST_GROUPS_MAX groups
 * of their own, the rest one group of model "other" (its count theirs), said once. */
static void test_summary_many_models(void **state)
{
	enum { NAMES = 5000 };
	FILE *lines = tmpfile();
	struct summary *sm = summary__new(lines, NULL, NULL);
	char *text = NULL, want[128];
	size_t n = 0, size = 0;
	struct run r;
	int groups = 0;

	assert_non_null(lines);
	assert_non_null(sm);
	run__init(&r);
	pipeline__free(r.pl);
	r.pl = pipeline__new(summary_sink.on_request, summary_sink.on_step, sm);
	for (int i = 0; i < NAMES; i++) {
		char req[256], body[64];
		uint64_t t = T0 + (uint64_t)i * 10 * MS;

		snprintf(body, sizeof(body), "{\"model\":\"m-%d\",\"stream\":true}", i);
		snprintf(req, sizeof(req), "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n"
			 "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
		run__data(&r, true, t, req, strlen(req));
		run__data(&r, false, t + 1 * MS, resp_head, strlen(resp_head));
		token(&r, t + 2 * MS);
		chunk(&r, t + 3 * MS, "data: [DONE]\n\n");
		run__data(&r, false, t + 3 * MS, "0\r\n\r\n", 5);
	}
	pipeline__finish(r.pl, T0 + (NAMES + 1) * 10 * MS);
	summary__print(sm, lines, pipeline__health(r.pl));
	rewind(lines);
	assert_true(getdelim(&text, &size, 0, lines) > 0);
	for (const char *l = text; (l = strstr(l, " requests=")); l++)
		groups++;
	assert_int_equal(groups, REQUEST_GROUPS_MAX + 1);
	snprintf(want, sizeof(want), " model=other requests=%d ", NAMES - REQUEST_GROUPS_MAX);
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof(want), "%d requests of keys past the first %d groups",
		 NAMES - REQUEST_GROUPS_MAX, REQUEST_GROUPS_MAX);
	for (const char *l = text; (l = strstr(l, want)); l++)
		n++;
	assert_int_equal(n, 1);
	free(text);
	run__free(&r);
	summary__free(sm);
	fclose(lines);
}

/* Output files: never through a symlink, never a FIFO or device; an existing file is kept as
 * it was until the run starts; a file the run created is removed when it never starts. */
static void test_output_files(void **state)
{
	char dir[] = "/tmp/tokenscope-out-XXXXXX", target[64], link[64], fifo[64], plain[64],
	     fresh[64], buf[16] = "";
	struct outfile o;
	struct stat st;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(plain, sizeof(plain), "%s/plain", dir);
	snprintf(fresh, sizeof(fresh), "%s/fresh", dir);
	f = fopen(target, "w");
	fputs("precious", f);
	fclose(f);
	chmod(target, 0644);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);

	assert_int_equal(outfile__open(&o, link), -1);
	assert_int_equal(outfile__open(&o, fifo), -1);
	assert_int_equal(outfile__open(&o, dir), -1);
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_size, 8);
	assert_int_equal(st.st_mode & 0777, 0644);

	/* an existing file: untouched until start, then emptied and private */
	assert_int_equal(rename(target, plain), 0);
	assert_int_equal(outfile__open(&o, plain), 0);
	assert_int_equal(stat(plain, &st), 0);
	assert_int_equal(st.st_size, 8);
	outfile__abandon(&o); /* a run that never started */
	f = fopen(plain, "r");
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "precious");
	assert_int_equal(outfile__open(&o, plain), 0);
	assert_int_equal(outfile__start(&o), 0);
	assert_int_equal(stat(plain, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	outfile__abandon(&o); /* not created by it: stays */
	assert_int_equal(stat(plain, &st), 0);

	/* a new file: removed when the run never starts */
	assert_int_equal(outfile__open(&o, fresh), 0);
	assert_int_equal(stat(fresh, &st), 0);
	outfile__abandon(&o);
	assert_int_equal(stat(fresh, &st), -1);

	unlink(link);
	unlink(fifo);
	unlink(plain);
	rmdir(dir);
}

/* A gzip bomb: 16 MiB of newlines in ~16 KB. Past the decode budget the request is
 * incomplete (decode_budget_exceeded), counted, the rest of the body skipped; the next request
 * on the connection is measured as usual. */
static void test_gzip_bomb(void **state)
{
	const size_t plain_len = 16u << 20;
	uLongf zlen = compressBound(plain_len) + 64;
	uint8_t *plain = malloc(plain_len), *z = malloc(zlen);
	z_stream zs = { 0 };
	char head[256];
	struct run r;
	int n;

	assert_non_null(plain);
	assert_non_null(z);
	memset(plain, '\n', plain_len);
	assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
	zs.next_in = plain;
	zs.avail_in = (uInt)plain_len;
	zs.next_out = z;
	zs.avail_out = (uInt)zlen;
	assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
	zlen = zs.total_out;
	deflateEnd(&zs);
	assert_true(zlen < plain_len / 500);

	run__init(&r);
	run__data(&r, true, T0, req_chat, strlen(req_chat));
	n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
					 "Content-Encoding: gzip\r\nContent-Length: %lu\r\n\r\n",
		     (unsigned long)zlen);
	run__data(&r, false, T0 + 2 * MS, head, (size_t)n);
	for (size_t off = 0; off < zlen; off += TS_CHUNK_MAX)
		run__data(&r, false, T0 + 3 * MS, z + off,
			  zlen - off < TS_CHUNK_MAX ? zlen - off : TS_CHUNK_MAX);
	exchange(&r, T0 + 100 * MS, 2);
	run__finish(&r, T0 + 999 * MS);
	assert_int_equal(r.n, 2);
	assert_int_equal(json_bool(r.json[0], "complete"), 0);
	assert_string_equal(json_str(r.json[0], "error"), "decode_budget_exceeded");
	assert_true(isnan(json_num(r.json[0], "ttft_ms")));
	assert_int_equal(json_bool(r.json[1], "complete"), 1);
	assert_float_equal(json_num(r.json[1], "ttft_ms"), 10, 1e-9);
	assert_int_equal(pipeline__health(r.pl)->conn.decode_budget_exceeded, 1);
	run__free(&r);
	free(plain);
	free(z);
}

/* Streams whose end is never seen are let go: idle 10 minutes with nothing in flight, or an
 * hour with a request in flight (then reported incomplete: idle_timeout). */
static void test_idle_streams_age_out(void **state)
{
	const uint64_t min = 60 * 1000 * MS;
	struct run r;

	run__init(&r);
	r.ssl = 0xa;
	exchange(&r, T0, 2); /* done, connection kept open */
	run__tick(&r, T0 + 200 * MS);
	r.ssl = 0xb;
	run__data(&r, true, T0, req_chat, strlen(req_chat)); /* waits for its reply */
	r.ssl = 0xc;
	run__data(&r, true, T0 + 11 * min, "GET / HTTP/1.1\r\n", 16);
	assert_int_equal(pipeline__health(r.pl)->streams_aged_out, 1);
	assert_int_equal(r.n, 1); /* the finished one; the waiting one still waits */
	r.ssl = 0xd;
	run__data(&r, true, T0 + 61 * min, "GET / HTTP/1.1\r\n", 16);
	run__tick(&r, T0 + 61 * min + 200 * MS);
	/* the waiting one, and the one idle since minute 11 */
	assert_int_equal(pipeline__health(r.pl)->streams_aged_out, 3);
	assert_int_equal(r.n, 2);
	assert_int_equal(json_bool(r.json[0], "complete"), 1);
	assert_int_equal(json_bool(r.json[1], "complete"), 0);
	assert_string_equal(json_str(r.json[1], "error"), "idle_timeout");
	run__finish(&r, T0 + 62 * min);
	assert_int_equal(r.n, 2);
	run__free(&r);
}

static void test_malformed_records(void **state)
{
	struct ts_event_hdr h = { .type = 77, .size = sizeof(h) };
	struct run r;

	run__init(&r);
	assert_int_equal(pipeline__feed(r.pl, &h, sizeof(h)), -1);
	h.type = TS_EV_TLS_DATA; /* too short for its type */
	assert_int_equal(pipeline__feed(r.pl, &h, sizeof(h)), -1);
	h.size = 5;
	assert_int_equal(pipeline__feed(r.pl, &h, sizeof(h)), -1);
	assert_int_equal(pipeline__health(r.pl)->bad_events, 3);
	run__free(&r);
}

/* Random bytes after a valid request and response head: whatever they do to the parsers,
 * nothing crashes (the sanitizer build checks memory), every request still comes out once. */
static void test_garbage_never_crashes(void **state)
{
	static const char *heads[] = {
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: deflate\r\n"
		"Content-Length: 300\r\n\r\n",
	};

	for (unsigned seed = 1; seed <= 300; seed++) {
		unsigned x = seed;
		uint8_t buf[200];
		struct run r;

		run__init(&r);
		run__data(&r, true, T0, req_chat, strlen(req_chat));
		run__data(&r, false, T0 + MS, heads[seed % 3], strlen(heads[seed % 3]));
		for (int k = 0; k < 8; k++) {
			size_t n = 1 + (x >> 4) % sizeof(buf);

			for (size_t i = 0; i < n; i++) {
				x = x * 1103515245u + 12345u;
				/* mostly SSE-ish text, some binary */
				buf[i] = (x >> 16) % 4 ? "data: {}\r\n:0a\"x"[(x >> 8) % 16] : (uint8_t)(x >> 8);
			}
			run__data(&r, (x >> 20) % 5 == 0, T0 + (2 + k) * MS, buf, n);
		}
		run__finish(&r, T0 + 99 * MS);
		assert_true(r.n >= 1);
		run__free(&r);
	}
}

static int replay_into(void *ctx, void *rec, size_t size)
{
	pipeline__feed(ctx, rec, size);
	return 0;
}

static void test_recording_roundtrip(void **state)
{
	char path[] = "/tmp/tokenscope-test-XXXXXX";
	struct ts_rec_counters rc = { 0 };
	struct recording *rec;
	struct run live, replay;
	struct stat st;
	char *buf;
	FILE *f;
	int fd = mkstemp(path);

	struct outfile out;

	assert_true(fd >= 0);
	close(fd);
	chmod(path, 0644);
	assert_int_equal(outfile__open(&out, path), 0);
	assert_int_equal(outfile__start(&out), 0);
	rec = recording__create(&out);
	assert_non_null(rec);

	run__init(&live);
	pipeline__set_recording(live.pl, rec);
	exchange(&live, T0, 3);
	run__data(&live, true, T0 + 200 * MS, req_chat, strlen(req_chat)); /* left open */
	rc.hdr.type = TS_REC_COUNTERS;
	rc.hdr.size = sizeof(rc);
	rc.hdr.ts_ns = T0 + 300 * MS;
	rc.counters[TS_CNT_DROPS] = 4;
	assert_int_equal(pipeline__feed(live.pl, &rc, sizeof(rc)), 0);
	/* the counters of each second write out what is buffered: a tracer killed now would
	 * leave every record so far */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal((uint64_t)st.st_size, out.kept);
	assert_true((size_t)st.st_size > sizeof(struct ts_rec_file_header) + sizeof(rc));
	run__finish(&live, T0 + 300 * MS);
	assert_int_equal(recording__close(rec), 0);

	/* Private file; credentials masked in what was written. */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	buf = calloc(1, st.st_size + 1);
	f = fopen(path, "rb");
	assert_int_equal(fread(buf, 1, st.st_size, f), (size_t)st.st_size);
	fclose(f);
	assert_null(memmem(buf, st.st_size, "sk-SECRET", 9));
	assert_non_null(memmem(buf, st.st_size, "Authorization: ****** *********", 31));
	free(buf);

	run__init(&replay);
	assert_int_equal(recording__replay(path, NULL, replay_into, replay.pl), 0);
	run__finish(&replay, 0);
	assert_int_equal(replay.n, live.n);
	assert_int_equal(replay.n, 2);
	for (size_t i = 0; i < live.n; i++)
		assert_string_equal(replay.json[i], live.json[i]);
	assert_int_equal(pipeline__health(replay.pl)->bpf[TS_CNT_DROPS], 4);
	assert_int_equal(pipeline__health(replay.pl)->requests, 2);

	/* Not a recording, and a recording cut short: clear errors. */
	f = fopen(path, "r+b");
	fwrite("NOTATSRC", 1, 8, f);
	fclose(f);
	assert_int_equal(recording__replay(path, NULL, replay_into, replay.pl), -1);
	assert_int_equal(recording__replay("/nonexistent/x", NULL, replay_into, replay.pl), -1);
	run__free(&live);
	run__free(&replay);
	unlink(path);
}

/* Every record type has its one row: the pipeline reads it, and capture knows what to do
 * with it before (a new type without a row would skip the identity filters). */
static void test_record_kinds(void **state)
{
	size_t n;
	const struct record_kind *all = record_kinds__all(&n);
	bool seen[TS_REC__END] = { false };

	(void)state;
	for (uint32_t t = 1; t < TS_REC__END; t++) {
		const struct record_kind *k = record_kind__of(t);

		if (t >= TS_EV__END && t < TS_REC_COUNTERS) {
			assert_null(k);
			continue;
		}
		assert_non_null(k);
		assert_int_equal(k->type, t);
		assert_non_null(k->handle);
		assert_true(k->min_size >= sizeof(struct ts_event_hdr));
		assert_memory_equal(k->name, "TS_", 3);
		/* a stream's bytes are a process's own */
		assert_true(!(k->flags & REC_STREAM_BYTES) || (k->flags & REC_PROCESS));
	}
	for (size_t i = 0; i < n; i++) {
		assert_true(all[i].type < TS_REC__END);
		assert_false(seen[all[i].type]); /* one row a type */
		seen[all[i].type] = true;
	}
	assert_null(record_kind__of(TS_EV__END));
	assert_null(record_kind__of(0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keepalive_three_requests),
		cmocka_unit_test(test_responses_without_body),
		cmocka_unit_test(test_big_header_lines),
		cmocka_unit_test(test_server_role),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_lost_pieces),
		cmocka_unit_test(test_loss_before_the_end),
		cmocka_unit_test(test_loss_counted_before_its_records),
		cmocka_unit_test(test_loss_before_a_dead_peer),
		cmocka_unit_test(test_process_dies_midstream),
		cmocka_unit_test(test_ssl_free_and_capture_end),
		cmocka_unit_test(test_unsupported_streams),
		cmocka_unit_test(test_switching_protocols),
		cmocka_unit_test(test_summary_by_command),
		cmocka_unit_test(test_summary_many_models),
		cmocka_unit_test(test_json_too_deep),
		cmocka_unit_test(test_non_llm_http_not_reported),
		cmocka_unit_test(test_truncated_request_body),
		cmocka_unit_test(test_tcp_stream_addresses),
		cmocka_unit_test(test_tcp_netns_and_nat),
		cmocka_unit_test(test_unix_socket),
		cmocka_unit_test(test_tcp_seq_per_direction),
		cmocka_unit_test(test_client_end_parsed_first),
		cmocka_unit_test(test_tcp_close_and_reuse),
		cmocka_unit_test(test_tcp_unseen_io),
		cmocka_unit_test(test_tls_socket_link),
		cmocka_unit_test(test_terminal_escapes),
		cmocka_unit_test(test_output_files),
		cmocka_unit_test(test_gzip_bomb),
		cmocka_unit_test(test_idle_streams_age_out),
		cmocka_unit_test(test_malformed_records),
		cmocka_unit_test(test_garbage_never_crashes),
		cmocka_unit_test(test_recording_roundtrip),
		cmocka_unit_test(test_record_kinds),
	};

	return cmocka_run_group_tests_name("pipeline", tests, NULL, NULL);
}
