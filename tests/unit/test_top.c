// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `tokenscope top`'s figures (out/top.h) on hand-made requests and steps: windows against
 * percentiles computed here by nearest rank, the whole run against the summary's samples,
 * the tail's letters, engines' busy time, sorting, filtering and escaping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/stats.h"
#include "llm/attribution.h"
#include "llm/request.h"
#include "sinks/top.h"

#define MS 1000000ull
#define S 1000000000ull

/* A finished request of (comm, role, API, model), ended at end_ns, with this TTFT. */
static void feed(struct top *t, const char *comm, enum role role, const char *model,
		 uint64_t end_ns, double ttft_ms, int cache_hit, const struct attribution *a)
{
	struct request r = { .pid = 42, .role = role, .api = API_OPENAI_CHAT, .model = model,
			     .response_model = "", .path = "", .start_ns = end_ns - 100 * MS,
			     .end_ns = end_ns, .id = end_ns / MS };
	struct request_metrics m = { .ttft_ms = ttft_ms, .tpot_ms = ttft_ms / 10, .e2e_ms = 100,
				     .itl_max_ms = ttft_ms / 5, .cache_hit = cache_hit,
				     .complete = true };

	snprintf(r.comm, sizeof(r.comm), "%s", comm);
	r.attr = (struct attribution *)a;
	top__request(t, &r, &m);
}

static const struct top_row *row_of(const struct top_view *v, const char *model)
{
	for (size_t i = 0; i < v->nrows; i++) {
		if (!strcmp(v->rows[i].model, model))
			return &v->rows[i];
	}
	return NULL;
}

/* The window holds the requests that ended in it, and its percentiles are nearest rank. */
static void test_window(void **state)
{
	struct top *t = top__new(1000 * S);
	struct top_view v = { 0 };
	struct sample want = { 0 };
	const struct top_row *row;
	uint64_t now = 1000 * S + 200 * S;

	/* one request a second for 200 s, TTFT 1..200 ms */
	for (int i = 1; i <= 200; i++)
		feed(t, "api", ROLE_SERVER, "m", 1000 * S + (uint64_t)i * S, i, i % 4 == 0, NULL);
	assert_int_equal(top__view(t, NULL, now, TOP_W10S, TOP_ALL_GROUPS, &v), 0);
	row = row_of(&v, "m");
	assert_non_null(row);
	/* ended in (190 s, 200 s]: 191..200 */
	assert_int_equal(row->done, 10);
	for (int i = 191; i <= 200; i++)
		sample__add(&want, i);
	assert_float_equal(row->ttft[0], sample__pct(&want, 50), 0);
	assert_float_equal(row->ttft[2], sample__pct(&want, 99), 0);
	assert_float_equal(row->rps, 1.0, 1e-9);
	assert_float_equal(row->gap_max, 40.0, 1e-9);
	assert_float_equal(row->hit_share, 30.0, 1e-9); /* 192, 196, 200 of ten */
	assert_int_equal(v.nslow, 2); /* at or above the p90 (199), newest first */
	assert_non_null(strstr(v.slow[0].line, "ttft=200.0ms"));
	assert_non_null(strstr(v.slow[1].line, "ttft=199.0ms"));
	/* 60 s: 141..200 */
	assert_int_equal(top__view(t, NULL, now, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	row = row_of(&v, "m");
	assert_int_equal(row->done, 60);
	assert_float_equal(row->ttft[0], 170, 0);
	/* all: the summary's samples, whatever is kept */
	assert_int_equal(top__view(t, NULL, now, TOP_WALL, TOP_ALL_GROUPS, &v), 0);
	row = row_of(&v, "m");
	assert_int_equal(row->done, 200);
	assert_float_equal(row->ttft[0], 100, 0);
	assert_float_equal(row->rps, 1.0, 1e-9);
	/* a window that ends earlier (a request still held for attribution) leaves out later ends */
	assert_int_equal(top__view(t, NULL, now - 5 * S, TOP_W10S, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(row_of(&v, "m")->done, 10); /* 186..195 */
	assert_float_equal(row_of(&v, "m")->ttft[0], 190, 0);
	top_view__free(&v);
	sample__free(&want);
	top__free(t);
}

/* Kept: the last five minutes (and ten seconds); "all" still counts the whole run, and says
 * its tail is of what is kept. */
static void test_kept(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };

	for (int i = 0; i < 20; i++)
		feed(t, "api", ROLE_SERVER, "m", 1 * S + (uint64_t)i * MS, 500, -1, NULL);
	feed(t, "api", ROLE_SERVER, "m", 400 * S, 10, -1, NULL);
	assert_int_equal(top__view(t, NULL, 400 * S, TOP_W5MIN, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.rows[0].done, 1);
	assert_false(v.window_cut); /* the window holds nothing that was let go */
	assert_int_equal(top__view(t, NULL, 400 * S, TOP_WALL, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.rows[0].done, 21);
	assert_float_equal(v.rows[0].ttft[0], 500, 0); /* the summary's sample */
	assert_true(v.window_cut);
	top_view__free(&v);
	top__free(t);
}

/* The tail's letters: the attributed requests at or above the p90, by largest remainder. */
static void test_tail(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };
	struct attribution a = { .ok = true, .queue_ns = 65 * MS, .queue_busy_ns = 60 * MS,
				 .queue_idle_ns = 5 * MS, .prefill_ns = 30 * MS, .emit_ns = 5 * MS,
				 .prefill_steps = 2 };

	for (int i = 1; i <= 20; i++)
		feed(t, "api", ROLE_SERVER, "m", (uint64_t)i * S, i < 19 ? i : 100, 0,
		     i < 19 ? NULL : &a);
	assert_int_equal(top__view(t, NULL, 30 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	/* 60 % B, 5 % I, 30 % P, 5 % E: 6, 0 or 1, 3, 0 or 1 letters; the two halves tie */
	assert_int_equal(strlen(v.rows[0].tail), 10);
	assert_memory_equal(v.rows[0].tail, "BBBBBB", 6);
	assert_non_null(strstr(v.rows[0].tail, "PPP"));
	assert_int_equal(v.nslow, 3); /* the p90 is 18: 18 (not attributed), 19, 20 */
	assert_non_null(strstr(v.slow[0].line, "#20000 "));
	assert_non_null(strstr(v.slow[2].line, "[not attributed]"));
	assert_non_null(strstr(v.slow[0].line, "[queue=65.0 (busy 60.0) prefill=30.0/2 emit=5.0]"));
	top_view__free(&v);
	top__free(t);
}

/* The change line: the window against the run's first minute, in compare's words, remade
 * every 10 s; the sessions that ended in the window. */
static void test_judgements(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };
	struct attribution before = { .ok = true, .queue_ns = 5 * MS, .queue_busy_ns = 5 * MS,
				      .prefill_ns = 20 * MS, .emit_ns = 1 * MS, .prefill_steps = 1 };
	struct attribution after = before;
	struct session_call calls[3] = { { 1, 231 * S, 231 * S + 50 * MS, 232 * S },
					 { 2, 233 * S, 233 * S + 50 * MS, 234 * S },
					 { 3, 234 * S + 500 * MS, 235 * S - 100 * MS, 235 * S } };
	struct session s = { .ncalls = 3, .calls = calls, .role = ROLE_CLIENT,
			     .consumer = CONSUMER_AGENT };

	after.queue_ns = after.queue_busy_ns = 200 * MS;
	for (int i = 0; i < 60; i++) {
		const struct attribution *a = i < 30 ? &before : &after;
		uint64_t end = (uint64_t)(i < 30 ? 1 + i : 170 + i) * S;
		double ttft = (double)(a->queue_ns + a->prefill_ns + a->emit_ns) / 1e6 + (i % 7) * 0.1;
		struct request r = { .pid = 42, .role = ROLE_SERVER, .api = API_OPENAI_CHAT,
				     .model = "m", .response_model = "", .path = "",
				     .start_ns = end - 500 * MS, .end_ns = end, .id = (uint64_t)i + 1,
				     .attr = (struct attribution *)a };
		struct request_metrics m = { .ttft_ms = ttft, .tpot_ms = 5, .e2e_ms = 500,
					     .itl_max_ms = 6, .cache_hit = -1, .complete = true,
					     .slo_met = -1, .reading_headroom = NAN };

		snprintf(r.comm, sizeof(r.comm), "srv");
		top__request(t, &r, &m);
	}
	snprintf(s.comm, sizeof(s.comm), "agent");
	top_sink.on_session(t, &s);
	assert_int_equal(top__view(t, NULL, 240 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	if (!strstr(v.change, "change (the last 60s against the first minute): srv server "
			      "openai.chat model=m: TTFT p50 +") ||
	    !strstr(v.change, ": a capacity problem"))
		fail_msg("%s", v.change);
	assert_int_equal(v.nsessions, 1);
	assert_string_equal(v.sessions[0].name, "agent client agent");
	assert_int_equal(v.sessions[0].n, 1);
	assert_float_equal(v.sessions[0].total_p50_ms, 4000, 1e-6);
	assert_float_equal(v.sessions[0].share_p50, 100.0 * 2.5 / 4, 1e-6);
	/* 10 s on, the 10 s window: the session is out of it; the line (not due for 10 s) stays */
	assert_int_equal(top__view(t, NULL, 246 * S, TOP_W10S, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.nsessions, 0);
	assert_non_null(strstr(v.change, ": a capacity problem"));
	assert_int_equal(top__view(t, NULL, 246 * S, TOP_WALL, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.nsessions, 1); /* the whole run: every session kept */
	top_view__free(&v);
	top__free(t);

	/* before the window is past the first minute: no change line */
	t = top__new(0);
	assert_int_equal(top__view(t, NULL, 100 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_string_equal(v.change, "");
	top_view__free(&v);
	top__free(t);
}

/* An engine wire's split (its events: no busy or idle) lists its own parts and stays out of
 * the tail's letters, which are the steps' split. */
static void test_tail_engine_wire(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };
	struct attribution a = { .ok = true, .queue_ns = 37 * MS, .prefill_ns = 23 * MS,
				 .emit_ns = MS,
				 .wire = { .joined = true, .split = true, .events = true,
					   .frontend_ns = 2 * MS, .engine_queue_ns = 35 * MS } };

	for (int i = 1; i <= 20; i++)
		feed(t, "vllm", ROLE_SERVER, "m", (uint64_t)i * S, i < 19 ? i : 100, 0,
		     i < 19 ? NULL : &a);
	assert_int_equal(top__view(t, NULL, 30 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_string_equal(v.rows[0].tail, "");
	assert_int_equal(v.nslow, 3);
	assert_non_null(strstr(v.slow[0].line,
			       "[frontend=2.0 engine_queue=35.0 prefill=23.0 emit=1.0]"));
	top_view__free(&v);
	top__free(t);
}

/* Names from the traffic cannot reach the terminal as control bytes, nor as UTF-8. */
static void test_escaped(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };

	feed(t, "ev\x1b]0;x", ROLE_CLIENT, "m\x1b[2J\xc3\xa9", 1 * S, 5, -1, NULL);
	assert_int_equal(top__view(t, NULL, 2 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_string_equal(v.rows[0].model, "m\\x1b[2J\\xc3\\xa9");
	assert_string_equal(v.rows[0].name, "ev\\x1b]0;x[42]");
	assert_true(isnan(v.rows[0].hit_share));
	top_view__free(&v);
	top__free(t);
}

static void test_sort_filter(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };

	/* nothing yet: an empty view sorts and filters (under UBSan too: no NULL to qsort) */
	assert_int_equal(top__view(t, NULL, 1 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	top_view__sort(&v, TOP_COL_TTFT50, false);
	top_view__filter(&v, "x");
	assert_int_equal(v.nrows, 0);
	assert_int_equal(v.nengines, 0);
	for (int i = 1; i <= 3; i++)
		feed(t, "a", ROLE_CLIENT, "small", (uint64_t)i * S, 5, -1, NULL);
	feed(t, "b", ROLE_CLIENT, "big", 1 * S, 500, -1, NULL);
	feed(t, "c", ROLE_SERVER, "none", 1 * S, NAN, -1, NULL);
	assert_int_equal(top__view(t, NULL, 10 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	top_view__sort(&v, TOP_COL_TTFT50, false);
	assert_string_equal(v.rows[0].model, "big");
	assert_string_equal(v.rows[1].model, "small");
	assert_string_equal(v.rows[2].model, "none"); /* unknown last, either way */
	top_view__sort(&v, TOP_COL_TTFT50, true);
	assert_string_equal(v.rows[0].model, "small");
	assert_string_equal(v.rows[2].model, "none");
	top_view__sort(&v, TOP_COL_DONE, false);
	assert_string_equal(v.rows[0].model, "small");
	top_view__filter(&v, "SERV"); /* role, any case */
	assert_int_equal(v.nrows, 1);
	assert_string_equal(v.rows[0].model, "none");
	top_view__free(&v);
	top__free(t);
}

/* Busy: the union of the steps' work in the window; kinds from their sequences. */
static void test_engine(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };
	struct engine_step s = { .source = STEP_SOURCE_LLAMA, .pid = 7, .comm = "eng" };

	/* two overlapping steps (1.0-1.4 s, 1.2-1.6 s) and one that began before the window */
	s.start_ns = 1000 * MS, s.end_ns = 1400 * MS, s.nseqs = 1;
	s.seqs[0] = (struct step_seq){ 0, 1, 10, 10, 1 }, s.tokens = 1;
	top__step(t, &s);
	s.start_ns = 1200 * MS, s.end_ns = 1600 * MS;
	top__step(t, &s);
	s.start_ns = 0, s.end_ns = 12 * S + 500 * MS, s.nseqs = 0;
	top__step(t, &s);
	assert_int_equal(top__view(t, NULL, 20 * S, TOP_W10S, TOP_ALL_GROUPS, &v), 0);
	/* (10 s, 20 s]: only the long step, its 2.5 s in the window */
	assert_int_equal(v.engines[0].steps, 1);
	assert_float_equal(v.engines[0].busy, 25.0, 1e-6);
	assert_true(isnan(v.engines[0].decode_share));
	assert_int_equal(top__view(t, NULL, 20 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	/* the run's 20 s: 0.6 s + 12.5 s, overlaps once */
	assert_int_equal(v.engines[0].steps, 3);
	assert_float_equal(v.engines[0].busy, 100.0 * 12.5 / 20, 1e-6);
	assert_float_equal(v.engines[0].decode_share, 100, 1e-9);
	assert_float_equal(v.engines[0].batch_p50, 1, 0);
	assert_string_equal(v.engines[0].name, "eng[7]");
	/* a context of another model in the same process: an engine of its own */
	s.model = "tiny-b", s.start_ns = 19 * S, s.end_ns = 19 * S + 100 * MS;
	top__step(t, &s);
	assert_int_equal(top__view(t, NULL, 20 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.nengines, 2);
	assert_int_equal(v.engines[0].steps, 3);
	assert_int_equal(v.engines[1].steps, 1);
	assert_string_equal(v.engines[1].name, "eng[7] tiny-b");
	top_view__free(&v);
	top__free(t);
}

/* CUDA steps carry no batch: their kinds come from the requests attributed to them. A step
 * of a request's prefill is prefill, one that produced a token decode, one that did both for
 * two requests mixed; a step no attributed request ran on is not counted in the shares. */
static void test_cuda_kinds(void **state)
{
	struct top *t = top__new(0);
	struct top_view v = { 0 };
	struct engine_step s = { .source = STEP_SOURCE_CUDA, .pid = 9, .comm = "vllm" };
	static const uint64_t steps[][2] = { { 1000, 1100 }, { 1100, 1200 }, { 1200, 1250 },
					     { 1250, 1300 }, { 1300, 1350 }, { 1400, 1450 } };
	struct attrib_gap ga[3] = { { .producer_start_ns = 1200 * MS },
				    { .producer_start_ns = 1250 * MS },
				    { .producer_start_ns = 1300 * MS } };
	struct attrib_gap gb[1] = { { .producer_start_ns = 1300 * MS } };
	struct attribution a = { .ok = true, .engine_pids = { 9 }, .nengine_pids = 1,
				 .prefill_start_ns = 1000 * MS, .prefill_ns = 200 * MS,
				 .gaps = ga, .ngaps = 3 };
	struct attribution b = { .ok = true, .engine_pids = { 9 }, .nengine_pids = 1,
				 .prefill_start_ns = 1250 * MS, .prefill_ns = 50 * MS,
				 .gaps = gb, .ngaps = 1 };

	for (size_t i = 0; i < 6; i++) {
		s.start_ns = steps[i][0] * MS, s.end_ns = steps[i][1] * MS;
		top__step(t, &s);
	}
	assert_int_equal(top__view(t, NULL, 3 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_int_equal(v.engines[0].steps, 6);
	assert_true(isnan(v.engines[0].prefill_share)); /* nothing attributed yet */
	feed(t, "vllm", ROLE_SERVER, "m", 2 * S, 200, -1, &a);
	feed(t, "vllm", ROLE_SERVER, "m", 2 * S + MS, 50, -1, &b);
	assert_int_equal(top__view(t, NULL, 3 * S, TOP_W60S, TOP_ALL_GROUPS, &v), 0);
	assert_float_equal(v.engines[0].prefill_share, 40, 1e-9); /* the first two */
	assert_float_equal(v.engines[0].decode_share, 40, 1e-9);  /* 1.2 s and 1.3 s */
	assert_float_equal(v.engines[0].mixed_share, 20, 1e-9);	  /* 1.25 s: b's prompt, a's token */
	assert_true(isnan(v.engines[0].batch_p50));
	top_view__free(&v);
	top__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window),	    cmocka_unit_test(test_tail),
		cmocka_unit_test(test_tail_engine_wire),
		cmocka_unit_test(test_escaped),	    cmocka_unit_test(test_sort_filter),
		cmocka_unit_test(test_engine),	    cmocka_unit_test(test_kept),
		cmocka_unit_test(test_cuda_kinds), cmocka_unit_test(test_judgements),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
