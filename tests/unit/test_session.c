// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Agent sessions (llm/session.h): calls chained by a previous response, a tool's result fed
 * back and a growing conversation, each only to its own client; what does not chain (one
 * conversation sent again, another client, a lone call); the ends (idle, exit, the trace's,
 * too many open); the times (parallel calls counted once); and, through the whole pipeline,
 * the request bodies' conversation hashes chaining two real HTTP calls.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/session.h"
#include "helpers.h"

#define S 1000000000ull

struct got {
	struct session v[16];
	size_t n;
};

/* A copy of what was handed on (the tracker frees its own). */
static void collect(void *ctx, const struct session *s)
{
	struct got *g = ctx;

	assert_true(g->n < 16);
	g->v[g->n] = *s;
	g->v[g->n].calls = malloc(s->ncalls * sizeof(*s->calls));
	memcpy(g->v[g->n].calls, s->calls, s->ncalls * sizeof(*s->calls));
	g->v[g->n].conv = NULL;
	g->n++;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i].calls);
}

static uint64_t next_id;

/* A call of client pid, [start, end] in ms, its conversation hashes conv[0..nconv). */
static struct request *call(uint32_t pid, double start, double end, const uint64_t *conv,
			    uint32_t nconv)
{
	struct request *r = request__new();

	r->id = ++next_id;
	r->pid = pid;
	snprintf(r->comm, sizeof(r->comm), "agent");
	r->role = ROLE_CLIENT;
	r->api = API_OPENAI_CHAT;
	r->start_ns = S + (uint64_t)(start * 1e6);
	r->first_token_ns = r->start_ns + 10000000; /* 10 ms */
	r->end_ns = S + (uint64_t)(end * 1e6);
	if (nconv) {
		r->conv = malloc(nconv * sizeof(*r->conv));
		memcpy(r->conv, conv, nconv * sizeof(*conv));
		r->nconv = nconv;
	}
	return r;
}

static void feed(struct sessions *t, struct request *r, enum consumer c)
{
	struct request_metrics m = { .consumer = c };

	sessions__request(t, r, &m);
	request__free(r);
}

static void test_chains(void **state)
{
	struct got g = { 0 };
	struct sessions *t = sessions__new(collect, &g);
	const uint64_t a[] = { 11, 12, 13, 14, 15, 16 }, b[] = { 21, 22, 23 };
	struct request *r;

	(void)state;
	/* client 1: a tool loop in one conversation */
	r = call(1, 0, 100, a, 1);
	r->tools_offered = true;
	snprintf(r->finish_reason, sizeof(r->finish_reason), "tool_calls");
	feed(t, r, CONSUMER_AGENT);
	r = call(1, 150, 250, a, 3); /* [user, assistant(call), tool] */
	r->tool_result = true;
	feed(t, r, CONSUMER_AGENT);
	r = call(1, 300, 400, a, 5); /* the answer and the next question: conversation */
	feed(t, r, CONSUMER_PROGRAMMATIC);
	/* client 2 (another pid), beginning like client 1: not client 1's */
	feed(t, call(2, 310, 420, a, 6), CONSUMER_UNKNOWN);
	/* client 1 again, the same conversation as its last call: sent again, not a chain */
	feed(t, call(1, 450, 500, a, 5), CONSUMER_UNKNOWN);
	/* Responses: chained by previous_response_id, whatever the client */
	r = call(3, 0, 50, NULL, 0);
	snprintf(r->response_id, sizeof(r->response_id), "resp_1");
	feed(t, r, CONSUMER_UNKNOWN);
	r = call(4, 80, 120, b, 1);
	snprintf(r->previous_response_id, sizeof(r->previous_response_id), "resp_1");
	feed(t, r, CONSUMER_UNKNOWN);
	sessions__finish(t);

	assert_int_equal(g.n, 2);
	/* ended in the order they began (all at the trace's end) */
	assert_int_equal(g.v[0].ncalls, 3);
	assert_int_equal(g.v[0].pid, 1);
	assert_int_equal(g.v[0].chained[CHAIN_TOOL_RESULT], 1);
	assert_int_equal(g.v[0].chained[CHAIN_CONVERSATION], 1);
	assert_int_equal(g.v[0].consumer, CONSUMER_AGENT);
	assert_int_equal(g.v[0].end, SESSION_TRACE_END);
	assert_int_equal(g.v[1].ncalls, 2);
	assert_int_equal(g.v[1].chained[CHAIN_PREVIOUS_RESPONSE], 1);
	{
		struct session_times tm;

		session__times(&g.v[0], &tm);
		assert_int_equal(tm.total_ns, 400000000);
		assert_int_equal(tm.model_ns, 300000000);
		assert_int_equal(tm.between_ns, 100000000);
		assert_int_equal(tm.ttft_ns, 30000000);
		assert_int_equal(tm.streaming_ns, 270000000);
	}
	got_free(&g);
	sessions__free(t);
}

/* A session ends idle past the idle time (at the next call's start or a tick), at its client's
 * exit; too many open end the oldest. */
static void test_ends(void **state)
{
	struct got g = { 0 };
	struct sessions *t = sessions__new(collect, &g);
	const uint64_t a[] = { 1, 2, 3, 4 }, b[] = { 7, 8, 9 };

	(void)state;
	sessions__set_idle(t, 1 * S);
	feed(t, call(1, 0, 100, a, 1), CONSUMER_UNKNOWN);
	feed(t, call(1, 200, 300, a, 2), CONSUMER_UNKNOWN);
	/* 1.2 s later: idle past 1 s, so a new session */
	feed(t, call(1, 1500, 1600, a, 3), CONSUMER_UNKNOWN);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.v[0].end, SESSION_IDLE);
	assert_int_equal(g.v[0].ncalls, 2);
	feed(t, call(1, 1700, 1800, a, 4), CONSUMER_UNKNOWN);
	feed(t, call(5, 1700, 1800, b, 1), CONSUMER_UNKNOWN);
	feed(t, call(5, 1900, 2000, b, 2), CONSUMER_UNKNOWN);
	sessions__exit(t, 1);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.v[1].end, SESSION_EXIT);
	assert_int_equal(g.v[1].pid, 1);
	sessions__tick(t, S + 2000000000ull + 1000000000ull + 1);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.v[2].pid, 5);
	assert_int_equal(g.v[2].end, SESSION_IDLE);
	/* a lone call is no session */
	feed(t, call(6, 5000, 5100, a, 1), CONSUMER_UNKNOWN);
	sessions__finish(t);
	assert_int_equal(g.n, 3);
	got_free(&g);
	sessions__free(t);

	/* room: SESSIONS_OPEN_MAX open, one more ends the oldest ("full"), counted */
	memset(&g, 0, sizeof(g));
	t = sessions__new(collect, &g);
	feed(t, call(1, 0, 10, a, 1), CONSUMER_UNKNOWN);
	feed(t, call(1, 20, 30, a, 2), CONSUMER_UNKNOWN);
	for (uint32_t i = 0; i < SESSIONS_OPEN_MAX; i++) {
		uint64_t c = 1000 + i;

		feed(t, call(100 + i, 40, 50, &c, 1), CONSUMER_UNKNOWN);
	}
	assert_int_equal(g.n, 1);
	assert_int_equal(g.v[0].end, SESSION_FULL);
	assert_int_equal(sessions__evicted(t), 1);
	got_free(&g);
	sessions__free(t);
}

/* Parallel calls: their overlap counts once inside calls. */
static void test_parallel(void **state)
{
	struct session s = { .ncalls = 3 };
	struct session_call c[] = {
		{ 1, 0, 10, 100 },	 /* 0..100, first token at 10 */
		{ 2, 50, 60, 150 },	 /* overlaps: 100..150 counts, all streaming */
		{ 3, 300, 320, 400 },
	};
	struct session_times t;

	(void)state;
	s.calls = c;
	session__times(&s, &t);
	assert_int_equal(t.total_ns, 400);
	assert_int_equal(t.model_ns, 100 + 50 + 100);
	assert_int_equal(t.ttft_ns, 10 + 20);
	assert_int_equal(t.between_ns, 150);
	assert_int_equal(t.slowest->id, 1);
}

/* Two real calls through the pipeline: the second's body carries the first's conversation and
 * more, written otherwise (spaces, an escape): one session of two, chained by conversation. */
static void test_pipeline_bodies(void **state)
{
	static const char *const bodies[] = {
		"{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
		"{ \"model\": \"m\", \"stream\": true, \"messages\": [ {\"content\": \"h\\u0069\", "
		"\"role\": \"user\"}, {\"role\":\"assistant\",\"content\":\"yo\"}, "
		"{\"role\":\"user\",\"content\":\"more\"} ] }",
	};
	struct run r;

	(void)state;
	run__init(&r);
	for (int i = 0; i < 2; i++) {
		char req[512];
		uint64_t t = 1000 * MS + (uint64_t)i * 200 * MS;
		static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
					   "Transfer-Encoding: chunked\r\n\r\n";
		static const char ev[] = "2a\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\r\n";
		static const char done[] = "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";

		snprintf(req, sizeof(req), "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n"
			 "Content-Length: %zu\r\n\r\n%s", strlen(bodies[i]), bodies[i]);
		run__data(&r, true, t, req, strlen(req));
		run__data(&r, false, t + 10 * MS, head, strlen(head));
		run__data(&r, false, t + 20 * MS, ev, strlen(ev));
		run__data(&r, false, t + 30 * MS, done, strlen(done));
	}
	run__finish(&r, 2000 * MS);
	assert_int_equal(r.n, 2);
	assert_int_equal(pipeline__health(r.pl)->sessions, 1);
	run__free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chains),
		cmocka_unit_test(test_ends),
		cmocka_unit_test(test_parallel),
		cmocka_unit_test(test_pipeline_bodies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
