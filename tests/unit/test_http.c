// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTTP/1.1 parser alone: framing, keep-alive, credential masking, malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/request.h"
#include "proto/http1.h"

struct seen {
	int heads, ends;
	struct http_head last;
	char body[4096];
	size_t body_len;
	uint64_t end_ts[8];
	bool no_body; /* what on_head answers */
};

static bool on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct seen *s = ctx;

	s->heads++;
	s->last = *h;
	return !s->no_body;
}

static void on_body(void *ctx, const uint8_t *d, size_t n, uint64_t ts)
{
	struct seen *s = ctx;

	assert_true(s->body_len + n < sizeof(s->body));
	memcpy(s->body + s->body_len, d, n);
	s->body_len += n;
}

static void on_end(void *ctx, uint64_t ts)
{
	struct seen *s = ctx;

	if (s->ends < 8)
		s->end_ts[s->ends] = ts;
	s->ends++;
}

static const struct http_callbacks cbs = { on_head, on_body, on_end };

/* Feed text (copied: the parser may mask it) in pieces of `step` bytes (0: whole). */
static enum http_error feed(struct http_parser *p, const char *text, size_t step, uint64_t ts,
			    char *masked_out)
{
	size_t len = strlen(text), off = 0;
	char *copy = strdup(text);
	enum http_error e = HTTP_OK;

	while (off < len && !e) {
		size_t n = step && step < len - off ? step : len - off;

		e = http_parser__feed(p, (uint8_t *)copy + off, n, ts);
		off += n;
	}
	if (masked_out)
		strcpy(masked_out, copy);
	free(copy);
	return e;
}

static void test_keepalive_responses(void **state)
{
	const char *three = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
			    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
			    "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"
			    "HTTP/1.1 204 No Content\r\n\r\n";
	/* sizes in either case, with leading zeros, and the largest 64 bits hold */
	const char *hex = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			  "A\r\n0123456789\r\n000b\r\nabcdefghijk\r\n0\r\n\r\n"
			  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx";

	for (size_t step = 0; step <= 7; step++) {
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(false, &cbs, &s);

		assert_int_equal(feed(p, three, step, 1, NULL), HTTP_OK);
		assert_int_equal(s.heads, 3);
		assert_int_equal(s.ends, 3);
		assert_int_equal(s.body_len, 10);
		assert_memory_equal(s.body, "helloabcde", 10);
		assert_int_equal(s.last.status, 204);
		assert_false(http_parser__eof(p, 0)); /* nothing left unfinished */
		http_parser__free(p);
	}
	for (size_t step = 0; step <= 7; step++) {
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(false, &cbs, &s);

		assert_int_equal(feed(p, hex, step, 1, NULL), HTTP_OK);
		assert_int_equal(s.ends, 1);
		assert_int_equal(s.body_len, 22);
		assert_memory_equal(s.body, "0123456789abcdefghijkx", 22);
		assert_true(http_parser__eof(p, 0)); /* the second is 2^64 - 2 bytes short */
		http_parser__free(p);
	}
}

static void test_request_line_and_headers(void **state)
{
	struct seen s = { 0 };
	struct http_parser *p = http_parser__new(true, &cbs, &s);
	char masked[1024];
	const char *req = "POST /v1beta/models/g:streamGenerateContent?alt=sse&key=SECRET1 HTTP/1.1\r\n"
			  "Host: x\r\nauthorization: Bearer SECRET2\r\nX-Api-Key:SECRET3\r\n"
			  "Cookie: a=SECRET4;\r\n b=SECRET5\r\nContent-Type: application/json\r\n"
			  "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}";

	assert_int_equal(feed(p, req, 3, 7, masked), HTTP_OK);
	assert_int_equal(s.heads, 1);
	assert_int_equal(s.ends, 1);
	assert_string_equal(s.last.method, "POST");
	assert_string_equal(s.last.path, "/v1beta/models/g:streamGenerateContent");
	assert_int_equal(s.last.encoding, HTTP_ENC_GZIP);
	assert_int_equal(s.last.ctype, HTTP_CT_JSON);
	assert_int_equal(s.last.content_length, 2);
	assert_int_equal(s.last.start_ns, 7);
	/* Credential values (folded continuation too) and the query string are masked in place,
	 * lengths kept; nothing else is touched. */
	assert_null(strstr(masked, "SECRET"));
	assert_int_equal(strlen(masked), strlen(req));
	assert_non_null(strstr(masked, "authorization: ****** *******\r\n"));
	assert_non_null(strstr(masked, "Host: x\r\n"));
	assert_non_null(strstr(masked, "Content-Length: 2\r\n\r\n{}"));
	http_parser__free(p);
}

/* Lines longer than the parser's inline buffer (it grows, then shrinks back at each line's
 * end): long request lines, a long credential masked whole, a long header before a short
 * one, in pieces of every size that crosses the growth points. */
static void test_long_lines(void **state)
{
	static char req[16000], masked[16000], want_path[300];
	size_t n = 0;

	n += sprintf(req + n, "POST /v1/");
	memset(req + n, 'p', 200);
	memcpy(want_path, req + 5, 4 + 200);
	n += 200;
	n += sprintf(req + n, "?key=%0300d HTTP/1.1\r\nAuthorization: Bearer ", 7);
	memset(req + n, 'S', 5000);
	n += 5000;
	n += sprintf(req + n, "\r\nX-Long: ");
	memset(req + n, 'v', 8000);
	n += 8000;
	n += sprintf(req + n, "\r\nContent-Length: 2\r\n\r\n{}");
	for (size_t step = 0; step <= 300; step += 61) {
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(true, &cbs, &s);

		assert_int_equal(feed(p, req, step, 1, masked), HTTP_OK);
		assert_int_equal(s.heads, 1);
		assert_int_equal(s.ends, 1);
		assert_string_equal(s.last.path, want_path);
		assert_int_equal(s.last.content_length, 2);
		assert_null(strstr(masked, "SSSS"));
		assert_null(strstr(masked, "0007"));
		assert_non_null(strstr(masked, "vvvvvvvv"));
		http_parser__free(p);
	}
}

static void test_until_close_and_eof(void **state)
{
	struct seen s = { 0 };
	struct http_parser *p = http_parser__new(false, &cbs, &s);

	assert_int_equal(feed(p, "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n",
			      0, 1, NULL), HTTP_OK);
	assert_int_equal(s.ends, 0);
	assert_false(http_parser__eof(p, 9)); /* the close ends the body: not unfinished */
	assert_int_equal(s.ends, 1);
	assert_int_equal(s.end_ts[0], 9);
	assert_int_equal(s.last.ctype, HTTP_CT_SSE);
	http_parser__free(p);
}

static void test_interim_and_head(void **state)
{
	struct seen s = { .no_body = true };
	struct http_parser *p = http_parser__new(false, &cbs, &s);

	/* 100 Continue is no message of its own; a HEAD reply has no body despite its length. */
	assert_int_equal(feed(p, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
				 "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 1, NULL), HTTP_OK);
	assert_int_equal(s.heads, 2);
	assert_int_equal(s.ends, 2);
	http_parser__free(p);
}

static void test_malformed(void **state)
{
	const char *bad[] = {
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		/* a sign or blanks before a size: strtoull would read "-5" as 2^64 - 5 */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabcde\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nabcde\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nabcde\r\n",
		/* hex digits only, and a size that fits 64 bits (2^64 does not) */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nabcde\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nab\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
		"SSH-2.0-OpenSSH\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(false, &cbs, &s);

		assert_int_equal(feed(p, bad[i], 0, 1, NULL), HTTP_ERR_SYNTAX);
		assert_int_equal(http_parser__error(p), HTTP_ERR_SYNTAX);
		/* Once failed, it stays failed and swallows nothing else. */
		assert_int_equal(feed(p, "HTTP/1.1 200 OK\r\n\r\n", 0, 1, NULL), HTTP_ERR_SYNTAX);
		http_parser__free(p);
	}
}

/* A header line past the 8 KiB line buffer: one whose value is not read is cut and the head
 * goes on; one whose value is (Content-Type here) is too large; so is a head past 64 KiB. */
static void test_header_too_large(void **state)
{
	const char *names[] = { "X-Big", "Content-Type" };
	char *big = malloc(80000);

	for (size_t i = 0; i < 2; i++) {
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(false, &cbs, &s);
		size_t n = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\n%s: ", names[i]);

		memset(big + n, 'a', 15000);
		strcpy(big + n + 15000, "\r\nContent-Length: 2\r\n\r\nok");
		assert_int_equal(feed(p, big, 0, 1, NULL), i ? HTTP_ERR_TOO_LARGE : HTTP_OK);
		assert_int_equal(s.ends, i ? 0 : 1);
		http_parser__free(p);
	}
	{
		struct seen s = { 0 };
		struct http_parser *p = http_parser__new(false, &cbs, &s);
		size_t n = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\n");

		for (int k = 0; k < 9; k++) {
			n += (size_t)sprintf(big + n, "X-Big-%d: ", k);
			memset(big + n, 'a', 7500);
			n += 7500;
			n += (size_t)sprintf(big + n, "\r\n");
		}
		strcpy(big + n, "\r\n");
		assert_int_equal(feed(p, big, 0, 1, NULL), HTTP_ERR_TOO_LARGE);
		http_parser__free(p);
	}
	free(big);
}

static void test_gap_inside_body_and_resync(void **state)
{
	struct seen s = { 0 };
	struct http_parser *p = http_parser__new(false, &cbs, &s);

	assert_int_equal(feed(p, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, 1, NULL), HTTP_OK);
	/* 4 lost bytes inside a sized body are skipped... */
	assert_int_equal(http_parser__gap(p, 4, 2), HTTP_OK);
	assert_int_equal(feed(p, "xyz", 0, 3, NULL), HTTP_OK);
	assert_int_equal(s.ends, 1);
	/* ...lost bytes between messages lose sync; the next response start resyncs. */
	assert_int_equal(http_parser__gap(p, 100, 4), HTTP_ERR_LOST_SYNC);
	assert_int_equal(feed(p, "tail of something", 0, 5, NULL), HTTP_OK);
	assert_int_equal(s.heads, 1);
	assert_int_equal(feed(p, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 6, NULL), HTTP_OK);
	assert_int_equal(s.heads, 2);
	assert_int_equal(s.ends, 2);
	http_parser__free(p);
}

static void test_classifiers(void **state)
{
	assert_true(http__looks_like_request((const uint8_t *)"POST /x HTTP/1.1", 16));
	assert_false(http__looks_like_request((const uint8_t *)"POS", 3));
	assert_false(http__looks_like_request((const uint8_t *)"HTTP/1.1 200", 12));
	assert_true(http__looks_like_h2_preface((const uint8_t *)"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24));
	assert_false(http__looks_like_h2_preface((const uint8_t *)"PRI * HTTP/1.1", 14));
}

static bool keep_traceparent(void *ctx, const struct http_head *h, uint64_t ts)
{
	(void)ts;
	assert_int_equal(strlen(h->traceparent), HTTP_TRACEPARENT_ROOM - 1);
	request__set_traceparent(ctx, h->traceparent);
	return false;
}

/* W3C trace context: a well-formed traceparent names the trace and the caller's span; one
 * malformed, or with an all-zero id, names nothing. */
static void test_traceparent(void **state)
{
	struct request *r = request__new();
	static const uint8_t trace[16] = { 0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
					   0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36 };
	static const char *const bad[] = {
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",   /* short */
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* upper case */
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* zero span */
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00 with more */
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /* no '-' after */
	};

	(void)state;
	/* the header as the parser keeps it, cut one character past its four fields: a later
	 * version's value still names its trace */
	{
		static const struct http_callbacks cb = { .on_head = keep_traceparent };
		struct http_parser *p = http_parser__new(true, &cb, r);
		char req[] = "GET / HTTP/1.1\r\nHost: x\r\ntraceparent: "
			     "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future\r\n\r\n";

		assert_int_equal(http_parser__feed(p, (uint8_t *)req, strlen(req), 1), HTTP_OK);
		http_parser__free(p);
		assert_true(r->traced);
		assert_memory_equal(r->trace_id, trace, 16);
	}
	request__set_traceparent(r, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	assert_true(r->traced);
	assert_memory_equal(r->trace_id, trace, 16);
	assert_int_equal(r->parent_span_id[0], 0x00);
	assert_int_equal(r->parent_span_id[7], 0xb7);
	assert_int_equal(r->trace_flags, 1);
	/* a later version: its first four fields read as 00's */
	request__set_traceparent(r, "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-ext");
	assert_true(r->traced);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		request__set_traceparent(r, bad[i]);
		assert_false(r->traced);
	}
	request__free(r);
}

static bool keep_tracestate(void *ctx, const struct http_head *h, uint64_t ts)
{
	(void)ts;
	request__set_traceparent(ctx, h->traceparent);
	assert_true(request__set_tracestate(ctx, h->tracestate));
	return false;
}

/* tracestate: its headers joined, kept with a traceparent only, printable, and past 512
 * characters cut after the last whole member. */
static void test_tracestate(void **state)
{
	static const struct http_callbacks cb = { .on_head = keep_tracestate };
	struct request *r = request__new();
	struct http_parser *p = http_parser__new(true, &cb, r);
	char req[] = "GET / HTTP/1.1\r\nHost: x\r\n"
		     "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
		     "tracestate: vendor1=alpha\r\ntracestate: vendor2=beta\r\n\r\n";
	char long_list[700] = "";

	(void)state;
	assert_int_equal(http_parser__feed(p, (uint8_t *)req, strlen(req), 1), HTTP_OK);
	http_parser__free(p);
	assert_string_equal(r->tracestate, "vendor1=alpha,vendor2=beta");
	/* 30 members of 20 characters: 24 fit in 512 (with their commas), the 25th is cut */
	for (int i = 0; i < 30; i++)
		snprintf(long_list + strlen(long_list), sizeof(long_list) - strlen(long_list),
			 "%svendor%02d=%011d", i ? "," : "", i, i);
	assert_true(request__set_tracestate(r, long_list));
	assert_int_equal(strlen(r->tracestate), 24 * 21 - 1);
	assert_memory_equal(r->tracestate, long_list, 24 * 21 - 1);
	assert_true(request__set_tracestate(r, "a=b\x01")); /* not a list: the one before stays */
	assert_int_equal(strlen(r->tracestate), 24 * 21 - 1);
	request__free(r);
	/* without a traceparent there is no trace to carry it */
	r = request__new();
	assert_true(request__set_tracestate(r, "vendor1=alpha"));
	assert_string_equal(r->tracestate, "");
	request__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keepalive_responses),
		cmocka_unit_test(test_request_line_and_headers),
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_until_close_and_eof),
		cmocka_unit_test(test_interim_and_head),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_header_too_large),
		cmocka_unit_test(test_gap_inside_body_and_resync),
		cmocka_unit_test(test_classifiers),
		cmocka_unit_test(test_traceparent),
		cmocka_unit_test(test_tracestate),
	};

	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
