// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Attribution on hand-made steps and requests whose split is known by construction: the TTFT
 * split, a server that writes late (or later and later), the engine found through the process tree, tensor-parallel
 * ranks merged, chunked prefill, and every case that must give no attribution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/request.h"
#include "engine/attrib.h"

#define MS 1000000ull
#define US 1000ull
#define T0 (100 * MS)
#define HTTP_PID 100
#define ENGINE_PID 200

/* One engine step: launched at start, done on the GPU at done, seen by the host just after. */
static void step(struct attrib *a, uint32_t pid, uint64_t start, uint64_t done)
{
	struct engine_step s = { .source = STEP_SOURCE_CUDA, .pid = pid, .start_ns = start,
				 .end_ns = done, .host_seen_ns = done + 10 * US };

	attrib__step(a, &s);
}

/* Steps k = 0..n-1 of `len` ms each, 1 ms apart (host time between), from T0. */
static uint64_t step_start(int k, uint64_t len)
{
	return T0 + (uint64_t)k * (len + 1) * MS;
}

static void steps(struct attrib *a, uint32_t pid, int n, uint64_t len)
{
	for (int k = 0; k < n; k++)
		step(a, pid, step_start(k, len), step_start(k, len) + len * MS);
}

static struct request *server_request(uint64_t id, uint64_t arrival)
{
	struct request *r = request__new();

	assert_non_null(r);
	r->id = id;
	r->pid = HTTP_PID;
	r->role = ROLE_SERVER;
	r->start_ns = arrival;
	return r;
}

/* The engine is the HTTP server's child. */
static struct attrib *new_attrib(void)
{
	struct attrib *a = attrib__new();
	const uint32_t http_anc[] = { 50, 1 }, engine_anc[] = { HTTP_PID, 50, 1 };

	assert_non_null(a);
	attrib__proc_tree(a, HTTP_PID, http_anc, 2);
	attrib__proc_tree(a, ENGINE_PID, engine_anc, 3);
	return a;
}

/* The engine's outputs (vLLM's engine wire): n of one token each, output j made just after
 * step 2 + j was seen complete; the first is the request's first output. */
static void engine_outputs(struct request *r, size_t n)
{
	r->engine_out_ts = calloc(n, sizeof(*r->engine_out_ts));
	r->engine_out_tokens = calloc(n, sizeof(*r->engine_out_tokens));
	assert_non_null(r->engine_out_ts);
	assert_non_null(r->engine_out_tokens);
	for (size_t j = 0; j < n; j++) {
		r->engine_out_ts[j] = step_start(2 + (int)j, 4) + 4 * MS + 50 * US;
		r->engine_out_tokens[j] = 1;
	}
	r->engine_outs = n;
	r->engine_output_ns = r->engine_out_ts[0];
}

/* Token events written `delay` after the host saw steps first..last complete. */
static void tokens(struct attrib *a, struct request *r, int first, int last, uint64_t len,
		   uint64_t delay)
{
	for (int k = first; k <= last; k++)
		request__token(r, step_start(k, len) + len * MS + 10 * US + delay);
	r->end_ns = r->last_token_ns + 100 * US;
	attrib__first_token(a, r); /* as the pipeline's hook does at the first token */
}

static void test_ttft_split(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, step_start(2, 4) + 2 * MS); /* during step 2 */
	const struct attribution *at;

	steps(a, ENGINE_PID, 12, 4);
	tokens(a, r, 4, 9, 4, 500 * US); /* prefill in step 4: steps 3 and 4 after arrival */
	attrib__finished(a, r);
	attrib__compute(a, r);
	at = r->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_int_equal(at->nengine_pids, 1);
	assert_int_equal(at->engine_pids[0], ENGINE_PID);
	assert_true(at->estimated & EST_ENGINE);
	/* queue: from arrival to step 4's launch; busy: the rest of step 2 (2 ms) and step 3 */
	assert_int_equal(at->prefill_start_ns, step_start(4, 4));
	assert_int_equal(at->queue_ns, step_start(4, 4) - r->start_ns);
	assert_int_equal(at->queue_busy_ns, 2 * MS + 4 * MS);
	assert_int_equal(at->queue_idle_ns, at->queue_ns - at->queue_busy_ns);
	assert_int_equal(at->prefill_ns, 4 * MS);
	assert_int_equal(at->prefill_steps, 1);
	assert_int_equal(at->emit_ns, 10 * US + 500 * US);
	assert_int_equal(at->queue_ns + at->prefill_ns + at->emit_ns,
			 r->first_token_ns - r->start_ns);
	/* each gap: one decode step of 4 ms, 1 ms of host time */
	assert_int_equal(at->ngaps, 5);
	for (size_t g = 0; g < at->ngaps; g++) {
		assert_int_equal(at->gaps[g].steps, 1);
		assert_int_equal(at->gaps[g].decode_ns, 4 * MS);
		assert_int_equal(at->gaps[g].host_ns, 1 * MS);
		assert_int_equal(at->gaps[g].producer_start_ns, step_start(5 + (int)g, 4));
		assert_false(at->gaps[g].interfered);
	}
	request__free(r);
	attrib__free(a);
}

/* A server that writes its events after the next step was already seen: the events are still
 * put on consecutive steps, anchored by the one event written in time. */
static void test_late_server(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0 + 1 * MS);
	const struct attribution *at;

	steps(a, ENGINE_PID, 14, 4);
	for (int k = 2; k <= 8; k++) /* steps 2..8, each written 6 ms late (past the next) */
		request__token(r, step_start(k, 4) + 4 * MS + (k == 6 ? 200 * US : 6 * MS));
	r->end_ns = r->last_token_ns + 100 * US;
	attrib__first_token(a, r);
	attrib__finished(a, r);
	attrib__compute(a, r);
	at = r->attr;
	assert_true(at->ok);
	assert_true(at->estimated & EST_TOKEN_STEPS);
	assert_int_equal(at->prefill_start_ns, step_start(2, 4));
	for (size_t g = 0; g < at->ngaps; g++)
		assert_int_equal(at->gaps[g].producer_start_ns, step_start(3 + (int)g, 4));
	request__free(r);
	attrib__free(a);
}

/* A server a step late for its whole stream (each event written after the next step was seen,
 * as an API server behind its engine's asynchronous scheduling is): from the events alone the
 * first token's step is the one after the truth's. The engine's own output of the first token
 * (vLLM's engine wire: sent once it had step 4's tokens, before step 5 was seen) puts it, and
 * the events after it, on the right steps; an engine time outside the request (another
 * clock's) is not used. */
static void test_engine_output_bounds_first_step(void **state)
{
	const uint64_t outputs[] = { 0, step_start(4, 4) + 4 * MS + 30 * US, 1 };

	for (size_t c = 0; c < 3; c++) {
		struct attrib *a = new_attrib();
		struct request *r = server_request(1, T0 + 1 * MS);
		const struct attribution *at;
		int first = c == 1 ? 4 : 5; /* the steps it is put on: from step 4, else 5 */

		steps(a, ENGINE_PID, 14, 4);
		r->engine_output_ns = outputs[c];
		tokens(a, r, 5, 10, 4, 500 * US); /* steps 4..9's tokens, a step late */
		attrib__finished(a, r);
		attrib__compute(a, r);
		at = r->attr;
		assert_true(at->ok);
		assert_int_equal(at->prefill_start_ns, step_start(first, 4));
		assert_int_equal(at->emit_ns, r->first_token_ns - (step_start(first, 4) + 4 * MS));
		for (size_t g = 0; g < at->ngaps; g++)
			assert_int_equal(at->gaps[g].producer_start_ns, step_start(first + 1 + (int)g, 4));
		request__free(r);
		attrib__free(a);
	}
}

/* A server whose lag comes and goes: the events of steps 2..9, those of steps 4 and 7 written
 * a step and a half late (after the next step was seen), the rest at once. From the events
 * alone the late ones look like the next step's. The engine's own outputs (vLLM's engine
 * wire: one per step, made just after the host saw it) put every event on its step, known
 * (no token_steps estimate); with an output fewer than the events (not the wire's of this
 * stream), the events place themselves, and the record says so. */
static void test_engine_outputs_place_every_event(void **state)
{
	for (int c = 0; c < 2; c++) {
		struct attrib *a = new_attrib();
		struct request *r = server_request(1, T0 + 1 * MS);
		const struct attribution *at;
		size_t outs = c == 0 ? 8 : 7;

		steps(a, ENGINE_PID, 14, 4);
		for (int k = 2; k <= 9; k++)
			request__token(r, step_start(k, 4) + 4 * MS +
						  (k == 4 || k == 7 ? 7500 * US : 300 * US));
		r->end_ns = r->last_token_ns + 100 * US;
		engine_outputs(r, outs);
		attrib__first_token(a, r);
		attrib__finished(a, r);
		attrib__compute(a, r);
		at = r->attr;
		assert_true(at->ok);
		assert_int_equal(at->prefill_start_ns, step_start(2, 4));
		if (c == 0) {
			assert_false(at->estimated & EST_TOKEN_STEPS);
			for (size_t g = 0; g < at->ngaps; g++)
				assert_int_equal(at->gaps[g].producer_start_ns,
						 step_start(3 + (int)g, 4));
		} else {
			/* placed by the events (one a step, here right), and said so */
			assert_true(at->estimated & EST_TOKEN_STEPS);
		}
		request__free(r);
		attrib__free(a);
	}
}

/* A server that falls behind and merges: the engine's outputs 0..11 come from steps 2..13, one
 * a step; the six events carry outputs up to 2, 3, 4, 7, 8 and 11, each written just after its
 * last output was made. The first token is output 0's, of step 2, however late the first
 * event. With usage on every chunk (vLLM's continuous_usage_stats: tokens so far 3, 4, 5, 8,
 * 9, 12) every event is on its last output's step, known. Without it (or with
 * counts that end inside an output, which no server sends), what the outputs allow leaves
 * some events more than one step: those gaps say they are inferred, and every gap, inferred
 * or not, lies within those bounds. */
static void test_merged_events(void **state)
{
	static const size_t last[6] = { 2, 3, 4, 7, 8, 11 };
	static const uint32_t counts[3][6] = { { 3, 4, 5, 8, 9, 12 }, { 0 }, { 3, 4, 6, 8, 9, 12 } };

	for (int c = 0; c < 3; c++) {
		struct attrib *a = new_attrib();
		struct request *r = server_request(1, T0 + 1 * MS);
		const struct attribution *at;
		size_t inferred = 0;

		steps(a, ENGINE_PID, 20, 4);
		engine_outputs(r, 12);
		for (size_t i = 0; i < 6; i++) {
			request__token(r, step_start(2 + (int)last[i], 4) + 4 * MS + 300 * US);
			if (counts[c][i])
				request__event_tokens(r, counts[c][i]);
			if (!i)
				attrib__first_token(a, r);
		}
		r->end_ns = r->last_token_ns + 100 * US;
		attrib__finished(a, r);
		attrib__compute(a, r);
		at = r->attr;
		assert_true(at->ok);
		assert_int_equal(at->prefill_start_ns, step_start(2, 4));
		assert_int_equal(at->emit_ns, r->first_token_ns - (step_start(2, 4) + 4 * MS));
		assert_int_equal(at->ngaps, 5);
		for (size_t g = 0; g < at->ngaps; g++) {
			const struct attrib_gap *gp = &at->gaps[g];
			uint64_t right = step_start(2 + (int)last[g + 1], 4);

			inferred += gp->step_inferred;
			if (!gp->step_inferred)
				assert_int_equal(gp->producer_start_ns, right);
			/* within the bounds: from output g + 1's step to its own last output's */
			assert_true(gp->producer_start_ns >= step_start(3 + (int)g, 4) &&
				    gp->producer_start_ns <= right);
		}
		if (c == 0) {
			assert_int_equal(inferred, 0);
			assert_false(at->estimated & EST_TOKEN_STEPS);
		} else {
			assert_true(inferred > 0);
			assert_true(at->estimated & EST_TOKEN_STEPS);
		}
		request__free(r);
		attrib__free(a);
	}
}

/* One output per event from steps 2..9, but the host saw step 5 end 3 ms late, after the
 * engine had made its output (a tensor-parallel rank's late end): that output's latest seen
 * step is 4, the previous event's, and the server wrote that event before the host saw step 5
 * end. Step 5 is the only step begun after 4 by the time the output was made, so it is the
 * event's, known. */
static void test_output_seen_late(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0 + 1 * MS);
	const struct attribution *at;

	for (int k = 0; k < 12; k++) {
		uint64_t s = step_start(k, 4), done = s + 4 * MS;
		struct engine_step st = { .source = STEP_SOURCE_CUDA, .pid = ENGINE_PID, .start_ns = s,
					  .end_ns = done,
					  .host_seen_ns = done + (k == 5 ? 3 * MS : 10 * US) };

		attrib__step(a, &st);
	}
	engine_outputs(r, 8);
	for (int k = 2; k <= 9; k++) {
		request__token(r, step_start(k, 4) + 4 * MS + (k == 5 ? 800 * US : 300 * US));
		if (k == 2)
			attrib__first_token(a, r);
	}
	r->end_ns = r->last_token_ns + 100 * US;
	attrib__finished(a, r);
	attrib__compute(a, r);
	at = r->attr;
	assert_true(at->ok);
	assert_false(at->estimated & EST_TOKEN_STEPS);
	for (size_t g = 0; g < at->ngaps; g++) {
		assert_false(at->gaps[g].step_inferred);
		assert_int_equal(at->gaps[g].producer_start_ns, step_start(3 + (int)g, 4));
	}
	request__free(r);
	attrib__free(a);
}

/* A stream interval of 4 steps: events on steps 2 (the first token), 6, 10, ..., 30 and the
 * remainder on 32. The event of step 18 is written after step 19 was seen (the server a step
 * behind for a moment): it goes back onto the interval's grid, with or without usage's count. */
static void test_stream_interval(void **state)
{
	for (int known = 0; known < 2; known++) {
		struct attrib *a = new_attrib();
		struct request *r = server_request(1, T0 + 1 * MS);
		const struct attribution *at;
		int want[8] = { 6, 10, 14, 18, 22, 26, 30, 32 }, k;

		steps(a, ENGINE_PID, 40, 4);
		request__token(r, step_start(2, 4) + 4 * MS + 500 * US);
		for (int i = 0; i < 8; i++) {
			k = want[i];
			request__token(r, step_start(k, 4) + 4 * MS + (k == 18 ? 6 * MS : 500 * US));
		}
		if (known)
			r->output_tokens = (struct opt_u64){ .set = true, .v = 31 };
		r->end_ns = r->last_token_ns + 100 * US;
		attrib__first_token(a, r);
		attrib__finished(a, r);
		attrib__compute(a, r);
		at = r->attr;
		assert_true(at->ok);
		assert_true(at->estimated & EST_TOKEN_STEPS);
		assert_int_equal(at->prefill_start_ns, step_start(2, 4));
		assert_int_equal(at->ngaps, 8);
		for (size_t g = 0; g < at->ngaps; g++)
			assert_int_equal(at->gaps[g].producer_start_ns, step_start(want[g], 4));
		assert_int_equal(at->gaps[3].steps, 4);
		request__free(r);
		attrib__free(a);
	}
}

/* Another request's first token in a step inside this one's gaps: interference, by id. */
/* Events of one token each from steps first, first + 1, ..., written lag[i] steps behind the
 * latest step seen (each step takes 5 ms: 4 on the GPU, 1 between). */
static void late_tokens(struct attrib *a, struct request *r, int first, const int *lag, int ne)
{
	for (int i = 0; i < ne; i++)
		request__token(r, step_start(first + i, 4) + 4 * MS + 10 * US +
					  (uint64_t)lag[i] * 5 * MS + 500 * US);
	r->end_ns = r->last_token_ns + 100 * US;
	attrib__first_token(a, r);
	attrib__finished(a, r);
}

/* A server that falls ever further behind its engine (its receiver of the engine's outputs
 * starved), with no usage count: the events span half again as many steps as they are, as a
 * stream interval's would, but two are written after the same latest step, which a server
 * that merges or keeps an interval would not do. Each is still one token, one step. */
static void test_server_falling_behind(void **state)
{
	const int lag[10] = { 0, 1, 3, 4, 3, 6, 8, 7, 9, 10 };
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0 + 1 * MS);
	const struct attribution *at;

	steps(a, ENGINE_PID, 40, 4);
	late_tokens(a, r, 2, lag, 10);
	attrib__compute(a, r);
	at = r->attr;
	assert_true(at->ok);
	assert_int_equal(at->prefill_start_ns, step_start(2, 4));
	assert_int_equal(at->ngaps, 9);
	for (size_t g = 0; g < at->ngaps; g++)
		assert_int_equal(at->gaps[g].producer_start_ns, step_start(3 + (int)g, 4));
	request__free(r);
	attrib__free(a);
}

/* The same server's requests that had usage's count streamed one token per event: one without
 * a count, its events two steps apart (the server a step further behind at each), is one token
 * per event too, not a stream interval of 2. */
static void test_server_streams_every_token(void **state)
{
	const int on_time[6] = { 0 }, falling[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct attrib *a = new_attrib();
	struct request *counted[2], *r;
	const struct attribution *at;

	steps(a, ENGINE_PID, 40, 4);
	for (int i = 0; i < 2; i++) {
		counted[i] = server_request(1 + (uint64_t)i, T0 + 1 * MS);
		counted[i]->output_tokens = (struct opt_u64){ .set = true, .v = 6 };
		late_tokens(a, counted[i], 2, on_time, 6);
	}
	r = server_request(3, step_start(9, 4) + 1 * MS);
	late_tokens(a, r, 11, falling, 8);
	attrib__compute(a, r);
	at = r->attr;
	assert_true(at->ok);
	assert_int_equal(at->prefill_start_ns, step_start(11, 4));
	assert_int_equal(at->ngaps, 7);
	for (size_t g = 0; g < at->ngaps; g++) {
		assert_int_equal(at->gaps[g].producer_start_ns, step_start(12 + (int)g, 4));
		assert_int_equal(at->gaps[g].steps, 1);
	}
	for (int i = 0; i < 2; i++)
		request__free(counted[i]);
	request__free(r);
	attrib__free(a);
}

static void test_interference(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0), *other = server_request(2, step_start(3, 4));

	steps(a, ENGINE_PID, 10, 4);
	step(a, ENGINE_PID, step_start(10, 4), step_start(10, 4) + 12 * MS); /* prefill of 2 */
	for (int k = 11; k < 16; k++)
		step(a, ENGINE_PID, step_start(10, 4) + (uint64_t)(k - 10) * 13 * MS,
		     step_start(10, 4) + (uint64_t)(k - 10) * 13 * MS + 4 * MS);
	request__token(other, step_start(10, 4) + 12 * MS + 500 * US);
	other->end_ns = other->last_token_ns;
	attrib__first_token(a, other);
	tokens(a, r, 0, 9, 4, 300 * US);
	/* its token of step 10 (where it decoded beside the other's prefill), then 11..13 */
	request__token(r, step_start(10, 4) + 12 * MS + 300 * US);
	for (int k = 11; k < 14; k++)
		request__token(r, step_start(10, 4) + (uint64_t)(k - 10) * 13 * MS + 4 * MS + 300 * US);
	r->end_ns = r->last_token_ns;
	attrib__finished(a, r);
	attrib__compute(a, r);
	assert_true(r->attr->ok);
	/* the gap from step 9's token to step 10's: the prefill step */
	assert_int_equal(r->attr->gaps[9].steps, 1);
	assert_true(r->attr->gaps[9].interfered);
	assert_int_equal(r->attr->gaps[9].interference_ns, 12 * MS - 4 * MS);
	assert_int_equal(r->attr->ninterfered_by, 1);
	assert_int_equal(r->attr->interfered_by[0], 2);
	for (size_t g = 0; g < r->attr->ngaps; g++) {
		if (g != 9)
			assert_false(r->attr->gaps[g].interfered);
	}
	request__free(r);
	request__free(other);
	attrib__free(a);
}

/* Two tensor-parallel ranks stepping in lockstep are one engine; two that do not are not. */
static void test_tensor_parallel(void **state)
{
	struct attrib *a = new_attrib();
	const uint32_t anc[] = { HTTP_PID, 50, 1 };
	struct request *r = server_request(1, T0);

	attrib__proc_tree(a, ENGINE_PID + 1, anc, 3);
	for (int k = 0; k < 10; k++) {
		step(a, ENGINE_PID, step_start(k, 4), step_start(k, 4) + 4 * MS);
		step(a, ENGINE_PID + 1, step_start(k, 4) + 50 * US, step_start(k, 4) + 4 * MS + 200 * US);
	}
	tokens(a, r, 1, 6, 4, 800 * US);
	attrib__finished(a, r);
	attrib__compute(a, r);
	assert_true(r->attr->ok);
	assert_int_equal(r->attr->nengine_pids, 2);
	/* the merged step ends with its slower rank */
	assert_int_equal(r->attr->prefill_ns, 4 * MS + 200 * US);
	assert_int_equal(r->attr->gaps[0].steps, 1);
	request__free(r);
	attrib__free(a);

	a = new_attrib();
	attrib__proc_tree(a, ENGINE_PID + 1, anc, 3);
	r = server_request(1, T0);
	steps(a, ENGINE_PID, 10, 4);
	for (int k = 0; k < 6; k++) /* a second engine, out of step with the first */
		step(a, ENGINE_PID + 1, T0 + 4500 * US + (uint64_t)k * 9 * MS,
		     T0 + 4900 * US + (uint64_t)k * 9 * MS);
	tokens(a, r, 1, 6, 4, 800 * US);
	attrib__compute(a, r);
	assert_false(r->attr->ok);
	assert_non_null(strstr(r->attr->error, "lockstep"));
	request__free(r);
	attrib__free(a);
}

/* Chunked prefill: a long prompt's earlier chunks (long steps without first tokens) count. */
static void test_chunked_prefill(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0 + 30 * MS), *o[2];
	uint64_t t = T0;
	uint64_t chunk_start[3];
	int c = 0;

	/* decodes of 4 ms; two long prompts of 3 chunks (20 ms steps) from 40 ms on */
	for (int k = 0; k < 30; k++) {
		bool chunk = (k >= 10 && k < 13) || (k >= 20 && k < 23);
		uint64_t len = chunk ? 20 * MS : 4 * MS;

		if (k >= 20 && k < 23)
			chunk_start[c++] = t;
		step(a, ENGINE_PID, t, t + len);
		t += len + 1 * MS;
	}
	/* the first long prompt belongs to request 2 (first token after step 12), the second
	 * to request 1 (after step 22); two short requests' first tokens mark their steps */
	o[0] = server_request(2, T0 + 20 * MS);
	request__token(o[0], T0 + 10 * 5 * MS + 3 * 21 * MS - 1 * MS + 300 * US);
	o[0]->end_ns = o[0]->last_token_ns;
	attrib__first_token(a, o[0]);
	attrib__finished(a, o[0]);
	o[1] = server_request(3, T0);
	request__token(o[1], T0 + 4 * MS + 300 * US);
	o[1]->end_ns = o[1]->last_token_ns;
	attrib__first_token(a, o[1]);
	attrib__finished(a, o[1]);
	request__token(r, chunk_start[2] + 20 * MS + 300 * US);
	for (int k = 1; k <= 4; k++)
		request__token(r, chunk_start[2] + 21 * MS + (uint64_t)k * 5 * MS - 1 * MS + 300 * US);
	r->end_ns = r->last_token_ns;
	attrib__first_token(a, r);
	attrib__finished(a, r);
	attrib__compute(a, r);
	assert_true(r->attr->ok);
	assert_true(r->attr->estimated & EST_PREFILL_START);
	assert_int_equal(r->attr->prefill_steps, 3);
	assert_int_equal(r->attr->prefill_start_ns, chunk_start[0]);
	request__free(r);
	request__free(o[0]);
	request__free(o[1]);
	attrib__free(a);
}

static void note_chunked(void *ctx, const struct attrib_engine_stats *st)
{
	*(bool *)ctx |= st->chunked;
}

/* Runs of slow steps that lead into no first token (a GPU shared, or the stand-in's virtual
 * GPU on a loaded host), as even as full prefill chunks: not chunked prefill. The request's
 * prefill is its first token's step alone. */
static void test_slow_steps_not_chunks(void **state)
{
	struct attrib *a = new_attrib();
	struct request *r = server_request(1, T0 + 30 * MS);
	uint64_t t = T0, ft_step = 0;
	bool chunked = false;

	for (int k = 0; k < 30; k++) { /* decodes of 4 ms; steps 5-7 and 12-14 take 20 ms */
		uint64_t len = (k >= 5 && k < 8) || (k >= 12 && k < 15) ? 20 * MS : 4 * MS;

		if (k == 20)
			ft_step = t;
		step(a, ENGINE_PID, t, t + len);
		t += len + 1 * MS;
	}
	for (int k = 0; k < 5; k++) /* the first token from step 20, then 21..24 */
		request__token(r, ft_step + (uint64_t)k * 5 * MS + 4 * MS + 300 * US);
	r->end_ns = r->last_token_ns;
	attrib__first_token(a, r);
	attrib__finished(a, r);
	attrib__compute(a, r);
	assert_true(r->attr->ok);
	assert_false(r->attr->estimated & EST_PREFILL_START);
	assert_int_equal(r->attr->prefill_steps, 1);
	assert_int_equal(r->attr->prefill_start_ns, ft_step);
	attrib__engines(a, note_chunked, &chunked);
	assert_false(chunked);
	request__free(r);
	attrib__free(a);
}

/* Never a guess: no steps, no process tree, a proxy, lost marks, --engine. */
static void test_not_attributed(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = server_request(1, T0), *c;

	tokens(a, r, 1, 3, 4, 100 * US);
	attrib__compute(a, r);
	assert_false(r->attr->ok);
	assert_non_null(strstr(r->attr->error, "no engine steps"));

	steps(a, ENGINE_PID, 6, 4); /* steps, but nothing says whose */
	attrib__compute(a, r);
	assert_false(r->attr->ok);
	assert_non_null(strstr(r->attr->error, "process tree"));

	assert_int_equal(attrib__override(a, "100=200"), 0); /* --engine says */
	attrib__compute(a, r);
	assert_true(r->attr->ok);
	assert_false(r->attr->estimated & EST_ENGINE);
	assert_int_equal(attrib__override(a, "100="), -1);
	assert_int_equal(attrib__override(a, "x=1"), -1);
	assert_int_equal(attrib__override(a, "1=2,,3"), -1);

	attrib__step_loss(a, T0 + 12 * MS); /* step records lost while it streamed */
	attrib__compute(a, r);
	assert_false(r->attr->ok);
	assert_non_null(strstr(r->attr->error, "lost"));
	request__free(r);
	attrib__free(a);

	/* a server that is also a client of an LLM API forwards: the upstream is attributed */
	a = new_attrib();
	steps(a, ENGINE_PID, 6, 4);
	c = request__new();
	c->pid = HTTP_PID;
	c->role = ROLE_CLIENT;
	c->first_token_ns = T0;
	attrib__first_token(a, c);
	r = server_request(1, T0);
	tokens(a, r, 1, 3, 4, 100 * US);
	attrib__compute(a, r);
	assert_false(r->attr->ok);
	assert_non_null(strstr(r->attr->error, "proxy"));
	request__free(c);
	request__free(r);
	attrib__free(a);
}

/* Which split the outputs read: each source's parts in time order, the figures it tells. */
static void test_split_sources(void **state)
{
	struct attribution a = { .ok = true, .queue_ns = 9 * MS, .queue_busy_ns = 6 * MS,
				 .queue_idle_ns = 3 * MS, .prefill_ns = 20 * MS, .emit_ns = MS,
				 .prefill_steps = 2 };
	struct ttft_split sp;

	(void)state;
	attribution__ttft_split(NULL, &sp);
	assert_int_equal(sp.source, TTFT_NOT_ATTRIBUTED);
	assert_int_equal(sp.nparts, 0);
	assert_null(sp.source_name);
	attribution__ttft_split(&a, &sp);
	assert_int_equal(sp.source, TTFT_STEPS);
	assert_string_equal(sp.source_name, "steps");
	assert_int_equal(sp.nparts, 4);
	assert_string_equal(sp.parts[0].name, "queue_busy");
	assert_int_equal(sp.parts[1].ns, 3 * MS);
	assert_string_equal(sp.parts[3].name, "emit");
	assert_true(sp.queue_apart && sp.busy_idle && !sp.wire);

	/* an engine wire with its events: its own queue, no busy or idle */
	a.wire = (struct attrib_wire){ .joined = true, .split = true, .events = true,
				       .frontend_ns = 2 * MS, .engine_queue_ns = 7 * MS };
	attribution__ttft_split(&a, &sp);
	assert_int_equal(sp.source, TTFT_WIRE_EVENTS);
	assert_string_equal(sp.source_name, "engine_wire");
	assert_int_equal(sp.nparts, 4);
	assert_string_equal(sp.parts[0].name, "frontend");
	assert_string_equal(sp.parts[1].name, "engine_queue");
	assert_int_equal(sp.parts[1].ns, 7 * MS);
	assert_true(sp.queue_apart && !sp.busy_idle && sp.engine_events);

	/* without its events, no steps: queue and prefill are one engine span */
	a.wire.events = false;
	a.wire.engine_ns = 27 * MS;
	attribution__ttft_split(&a, &sp);
	assert_int_equal(sp.source, TTFT_WIRE_SPAN);
	assert_int_equal(sp.nparts, 3);
	assert_string_equal(sp.parts[1].name, "engine");
	assert_int_equal(sp.parts[1].ns, 27 * MS);
	assert_false(sp.queue_apart);

	/* without its events, CUDA steps split it: the steps' split, the front end beside it */
	a.wire.cuda = true;
	attribution__ttft_split(&a, &sp);
	assert_int_equal(sp.source, TTFT_STEPS);
	assert_true(sp.wire && sp.queue_apart && sp.busy_idle);
	assert_int_equal(sp.frontend_ns, 2 * MS);

	a.ok = false;
	attribution__ttft_split(&a, &sp);
	assert_int_equal(sp.source, TTFT_NOT_ATTRIBUTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ttft_split),
		cmocka_unit_test(test_split_sources),
		cmocka_unit_test(test_late_server),
		cmocka_unit_test(test_engine_output_bounds_first_step),
		cmocka_unit_test(test_engine_outputs_place_every_event),
		cmocka_unit_test(test_merged_events),
		cmocka_unit_test(test_output_seen_late),
		cmocka_unit_test(test_stream_interval),
		cmocka_unit_test(test_server_falling_behind),
		cmocka_unit_test(test_server_streams_every_token),
		cmocka_unit_test(test_interference),
		cmocka_unit_test(test_tensor_parallel),
		cmocka_unit_test(test_chunked_prefill),
		cmocka_unit_test(test_slow_steps_not_chunks),
		cmocka_unit_test(test_not_attributed),
	};

	return cmocka_run_group_tests_name("attrib", tests, NULL, NULL);
}
