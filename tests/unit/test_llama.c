// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* llama.cpp steps: the record read into the source-neutral step, what kind of step a batch
 * makes, and the step through the whole pipeline to its JSON Lines object, summary lines and
 * metrics, failed calls and malformed records included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/outfile.h"
#include "llm/request.h"
#include "engine/attrib.h"
#include "engine/llama_models.h"
#include "engine/llama_steps.h"
#include "stream/pipeline.h"
#include "sinks/metrics.h"
#include "sinks/jsonl.h"
#include "sinks/sink.h"
#include "sinks/summary.h"

#define MS 1000000ull

/* A step record of ctx with n sequences: seq i has tokens[i] tokens from position pos[i], and
 * outputs[i] outputs. Returns its size. */
static size_t make_step(struct ts_llama_step *r, uint64_t ctx, uint64_t start, uint64_t end,
			int32_t result, uint32_t n, const uint32_t *tokens, const int32_t *pos,
			const uint32_t *outputs)
{
	memset(r, 0, sizeof(*r));
	r->hdr.type = TS_EV_LLAMA_STEP;
	r->hdr.ts_ns = end;
	r->hdr.pid = 4242;
	r->hdr.tid = 4243;
	memcpy(r->hdr.comm, "node", 5);
	r->ctx = ctx;
	r->enter_ns = start;
	r->result = result;
	r->nseqs = n;
	for (uint32_t i = 0; i < n; i++) {
		r->seqs[i] = (struct ts_llama_seq){ (int32_t)i, tokens[i], pos[i],
						    pos[i] + (int32_t)tokens[i] - 1, outputs[i] };
		r->n_tokens += tokens[i];
		r->outputs += outputs[i];
	}
	r->hdr.size = (uint32_t)(offsetof(struct ts_llama_step, seqs) + n * sizeof(r->seqs[0]));
	return r->hdr.size;
}

static void test_record_to_step(void **state)
{
	struct ts_llama_step r;
	struct engine_step s;
	const uint32_t tokens[] = { 7, 1 }, outputs[] = { 1, 1 };
	const int32_t pos[] = { 12, 40 };
	size_t size = make_step(&r, 0xc0ffee, 10 * MS, 13 * MS, 0, 2, tokens, pos, outputs);

	assert_int_equal(llama_steps__read(&r, size, &s), 0);
	assert_int_equal(s.source, STEP_SOURCE_LLAMA);
	assert_int_equal(s.pid, 4242);
	assert_string_equal(s.comm, "node");
	assert_int_equal(s.start_ns, 10 * MS);
	assert_int_equal(s.end_ns, 13 * MS);
	assert_false(s.end_bound); /* the call's return is the end itself */
	assert_int_equal(s.host_seen_ns, 13 * MS);
	assert_int_equal(s.context, 0xc0ffee);
	assert_false(s.failed);
	assert_int_equal(s.tokens, 8);
	assert_int_equal(s.nseqs, 2);
	assert_int_equal(s.seqs[0].tokens, 7);
	assert_int_equal(s.seqs[0].first_pos, 12); /* 12 cells of KV cache reused */
	assert_int_equal(s.seqs[0].last_pos, 18);
	assert_int_equal(s.seqs[1].outputs, 1);
	assert_ptr_equal(s.llama, &r);
	assert_int_equal(step__kind(&s), STEP_KIND_MIXED);
	assert_string_equal(llama_steps__call(&r), "decode");

	/* a size that does not hold its sequences, too many sequences, an end before the start */
	assert_int_equal(llama_steps__read(&r, size - 1, &s), -1);
	assert_int_equal(llama_steps__read(&r, offsetof(struct ts_llama_step, seqs) - 4, &s), -1);
	r.nseqs = TS_LLAMA_SEQS + 1;
	assert_int_equal(llama_steps__read(&r, sizeof(r), &s), -1);
	make_step(&r, 1, 13 * MS, 10 * MS, 0, 2, tokens, pos, outputs);
	assert_int_equal(llama_steps__read(&r, size, &s), -1);
}

static void test_step_kinds(void **state)
{
	struct engine_step s = { .nseqs = 2 };

	assert_int_equal(step__kind(&(struct engine_step){ 0 }), STEP_KIND_UNKNOWN);
	s.seqs[0] = (struct step_seq){ 0, 1, 20, 20, 1 };
	s.seqs[1] = (struct step_seq){ 1, 1, 30, 30, 1 };
	assert_int_equal(step__kind(&s), STEP_KIND_DECODE);
	s.seqs[1] = (struct step_seq){ 1, 64, 0, 63, 1 };
	assert_int_equal(step__kind(&s), STEP_KIND_MIXED);
	s.nseqs = 1;
	s.seqs[0] = (struct step_seq){ 0, 512, 0, 511, 0 }; /* a chunk: samples nothing */
	assert_int_equal(step__kind(&s), STEP_KIND_CHUNK);
	s.seqs[0].outputs = 1;
	assert_int_equal(step__kind(&s), STEP_KIND_PREFILL);
	assert_string_equal(step_kind__name(STEP_KIND_CHUNK), "chunk");
}

static char *slurp(FILE *f)
{
	static char text[65536];
	size_t n;

	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = 0;
	return text;
}

/* Three steps of one context (a prefill of two prompts, a decode, a call that found no KV
 * slot), one of another context, and a malformed record: their JSON Lines objects, the
 * summary's lines per context, the metrics families. */
static void test_steps_through_the_pipeline(void **state)
{
	char path[] = "/tmp/tokenscope-llama-XXXXXX", *text;
	int fd = mkstemp(path);
	struct outfile jsonl = { .fd = -1 };
	FILE *lines = tmpfile(), *f;
	struct jsonl *j;
	struct summary *sm;
	struct sinks sinks = { 0 };
	struct pipeline *pl;
	struct metrics *m = metrics__new(100, NULL);
	struct buf expo = { 0 };
	struct ts_llama_step r;
	const uint32_t prompt[] = { 9, 5 }, one[] = { 1, 1 }, outs[] = { 1, 1 }, none[] = { 0, 0 };
	const int32_t zero[] = { 0, 0 }, after[] = { 9, 5 };
	size_t size;

	assert_true(fd >= 0 && lines && m);
	close(fd);
	assert_int_equal(outfile__open(&jsonl, path), 0);
	assert_int_equal(outfile__start(&jsonl), 0);
	j = jsonl__new(&jsonl, false);
	sm = summary__new(lines, NULL, NULL);
	assert_true(j && sm);
	assert_int_equal(sinks__add(&sinks, &jsonl_sink, j), 0);
	assert_int_equal(sinks__add(&sinks, &summary_sink, sm), 0);
	assert_int_equal(sinks__add(&sinks, &metrics_sink, m), 0);
	pl = pipeline__new(sinks__request, sinks__step, &sinks);
	assert_non_null(pl);
	size = make_step(&r, 0xa0, 10 * MS, 14 * MS, 0, 2, prompt, zero, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	size = make_step(&r, 0xa0, 15 * MS, 16 * MS, 0, 2, one, after, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	size = make_step(&r, 0xa0, 17 * MS, 17 * MS + 10000, 1, 2, one, after, none);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	size = make_step(&r, 0xb0, 18 * MS, 19 * MS, 0, 1, one, after, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	assert_int_equal(pipeline__feed(pl, &r, size - 4), -1); /* counted as a bad record */
	pipeline__finish(pl, 20 * MS);
	assert_int_equal(pipeline__health(pl)->llama_steps, 4);
	assert_int_equal(pipeline__health(pl)->failed_steps, 1);
	assert_int_equal(pipeline__health(pl)->bad_events, 1);
	assert_true(attrib__has_steps(pipeline__attrib(pl))); /* the failed call is not one */
	assert_int_equal(sinks__finish(&sinks, pipeline__health(pl)), 0); /* the summary */
	assert_int_equal(outfile__close(&jsonl), 0);

	f = fopen(path, "r");
	text = slurp(f);
	fclose(f);
	assert_non_null(strstr(text, "{\"type\":\"engine_step\",\"source\":\"llama.cpp\",\"pid\":4242,"
				     "\"tid\":4243,\"comm\":\"node\",\"context\":\"0xa0\",\"model\":null,\"call\":"
				     "\"decode\",\"start_ns\":10000000,\"end_ns\":14000000,"
				     "\"duration_ms\":4.0,\"result\":0,\"did_work\":true,\"kind\":"
				     "\"prefill\",\"tokens\":14,\"outputs\":2,\"sequences\":[{\"seq\":0,"
				     "\"tokens\":9,\"first_pos\":0,\"last_pos\":8,\"outputs\":1},"));
	assert_non_null(strstr(text, "\"result\":1,\"did_work\":false,"));
	assert_non_null(strstr(text, "\"context\":\"0xb0\""));

	text = slurp(lines);
	assert_non_null(strstr(text, "node[4242] llama.cpp context 0xa0 steps=3 (failed 1)"));
	assert_non_null(strstr(text, "    time by kind: decode 1 steps 1.0 ms prefill 1 steps 4.0 ms\n"));
	assert_non_null(strstr(text, "node[4242] llama.cpp context 0xb0 steps=1 (failed 0)"));

	assert_int_equal(metrics__render(m, pipeline__health(pl), &expo), 0);
	assert_non_null(strstr(expo.p, "tokenscope_engine_steps_total{process=\"node\",source="
					"\"llama.cpp\",model=\"\",kind=\"prefill\"} 1\n"));
	assert_non_null(strstr(expo.p, "tokenscope_engine_step_tokens_total{process=\"node\","
					"source=\"llama.cpp\",model=\"\",kind=\"decode\"} 3\n"));
	assert_non_null(strstr(expo.p, "tokenscope_engine_steps_failed_total{process=\"node\","
					"source=\"llama.cpp\",model=\"\",kind=\"failed\"} 1\n"));
	assert_null(strstr(expo.p, "tokenscope_gpu_steps_total{")); /* no CUDA step here */

	buf__free(&expo);
	pipeline__free(pl);
	jsonl__free(j);
	summary__free(sm);
	metrics__free(m);
	fclose(lines);
	unlink(path);
}

#define US 1000ull
#define CTX 0xa0
#define HTTP_PID 100 /* serves and steps: llama.cpp in the HTTP server's process */

/* A step of context ctx, of the model named model (NULL: not known), from start to end (us),
 * its sequences {seq, tokens, first_pos, outputs}. */
static void model_step(struct attrib *a, uint64_t ctx, const char *model, uint64_t start,
		       uint64_t end, uint32_t n, const struct step_seq *seqs)
{
	struct engine_step s = { .source = STEP_SOURCE_LLAMA, .pid = HTTP_PID, .start_ns = start * US,
				 .end_ns = end * US, .host_seen_ns = end * US, .context = ctx,
				 .model = model, .model_key = llama_model__key(model), .nseqs = n };

	for (uint32_t i = 0; i < n; i++) {
		s.seqs[i] = seqs[i];
		s.tokens += seqs[i].tokens;
	}
	attrib__step(a, &s);
}

/* An embedding step of context ctx (its embeddings flag on), from start to end (us): one
 * sequence's tokens, the last one's output. */
static void embed_step(struct attrib *a, uint64_t ctx, uint64_t start, uint64_t end, int32_t seq,
		       uint32_t tokens)
{
	struct engine_step s = { .source = STEP_SOURCE_LLAMA, .pid = HTTP_PID, .start_ns = start * US,
				 .end_ns = end * US, .host_seen_ns = end * US, .context = ctx,
				 .embeddings = true, .nseqs = 1, .tokens = tokens };

	s.seqs[0] = (struct step_seq){ seq, tokens, 0, (int32_t)tokens - 1, 1 };
	assert_int_equal(step__kind(&s), STEP_KIND_EMBED);
	attrib__step(a, &s);
}

/* A step of CTX, its model not known. */
static void llama_step(struct attrib *a, uint64_t start, uint64_t end, uint32_t n,
		       const struct step_seq *seqs)
{
	model_step(a, CTX, NULL, start, end, n, seqs);
}

static struct request *request_at(uint64_t id, uint64_t arrival_us, uint64_t prompt_tokens)
{
	struct request *r = request__new();

	assert_non_null(r);
	r->id = id;
	r->pid = HTTP_PID;
	r->role = ROLE_SERVER;
	r->start_ns = arrival_us * US;
	r->input_tokens = (struct opt_u64){ true, prompt_tokens };
	return r;
}

static void token_at(struct attrib *a, struct request *r, uint64_t us)
{
	bool first = !r->token_events;

	request__token(r, us * US);
	r->output_tokens = (struct opt_u64){ true, r->token_events };
	r->end_ns = r->last_token_ns + 50 * US;
	if (first)
		attrib__first_token(a, r);
}

/*
 * Two requests on one context, their split from the sequences the steps name:
 *   A (seq 0, arrives at 1 ms): a 16-token prompt over two steps (a chunk, then the step that
 *   samples), 4 tokens of cache before it; then decodes, one of them beside B's prompt;
 *   B (seq 1, arrives at 6 ms): a 10-token prompt in that step, then a decode.
 */
static void test_attribution_by_sequence(void **state)
{
	struct attrib *a = attrib__new();
	struct request *ra = request_at(1, 1000, 20), *rb = request_at(2, 6000, 10);
	struct request *wrong = request_at(3, 1000, 21);
	const struct attribution *at;

	assert_non_null(a);
	llama_step(a, 2000, 3000, 1, (struct step_seq[]){ { 0, 8, 4, 11, 0 } });
	llama_step(a, 3000, 5000, 1, (struct step_seq[]){ { 0, 8, 12, 19, 1 } });
	token_at(a, ra, 5500);
	llama_step(a, 6000, 6500, 1, (struct step_seq[]){ { 0, 1, 20, 20, 1 } });
	token_at(a, ra, 6800);
	llama_step(a, 7000, 9000, 2, (struct step_seq[]){ { 0, 1, 21, 21, 1 }, { 1, 10, 0, 9, 1 } });
	token_at(a, ra, 9200);
	token_at(a, rb, 9400);
	llama_step(a, 9500, 10000, 2, (struct step_seq[]){ { 0, 1, 22, 22, 1 }, { 1, 1, 10, 10, 1 } });
	token_at(a, ra, 10200);
	token_at(a, rb, 10300);
	token_at(a, wrong, 5500);

	attrib__compute(a, ra);
	at = ra->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_true(at->by_sequence);
	assert_true(at->estimated & EST_SEQUENCE);
	assert_int_equal(at->seq, 0);
	assert_int_equal(at->context, CTX);
	assert_int_equal(at->cached_tokens, 4);
	assert_int_equal(at->prompt_tokens, 16);
	assert_int_equal(at->prefill_steps, 2);
	assert_int_equal(at->prefill_chunks, 1);
	assert_int_equal(at->prefill_start_ns, 2000 * US);
	assert_int_equal(at->queue_ns, 1000 * US);
	assert_int_equal(at->queue_idle_ns, 1000 * US);
	assert_int_equal(at->prefill_ns, 3000 * US);
	assert_int_equal(at->emit_ns, 500 * US);
	assert_int_equal(at->ngaps, 3);
	assert_int_equal(at->gaps[0].producer_start_ns, 6000 * US);
	assert_false(at->gaps[0].interfered);
	assert_int_equal(at->gaps[1].producer_start_ns, 7000 * US);
	assert_true(at->gaps[1].interfered); /* B's prompt shared the step */
	assert_int_equal(at->gaps[1].decode_ns, 2000 * US);
	assert_int_equal(at->gaps[1].host_ns, 400 * US);
	assert_int_equal(at->ninterfered_by, 1);
	assert_int_equal(at->interfered_by[0], 2);
	assert_int_equal(at->gaps[2].producer_start_ns, 9500 * US);

	attrib__compute(a, rb);
	at = rb->attr;
	assert_true(at->ok);
	assert_int_equal(at->seq, 1);
	assert_int_equal(at->cached_tokens, 0);
	assert_int_equal(at->prefill_chunks, 0);
	assert_int_equal(at->queue_ns, 1000 * US);
	assert_int_equal(at->queue_busy_ns, 500 * US); /* A's decode from 6 to 6.5 ms */
	assert_int_equal(at->prefill_ns, 2000 * US);
	assert_int_equal(at->emit_ns, 400 * US);
	assert_int_equal(at->gaps[0].producer_start_ns, 9500 * US);

	/* a prompt length no run had (a template's token counted): split all the same, from the
	 * run its times fit, and said */
	attrib__compute(a, wrong);
	assert_true(wrong->attr->ok);
	assert_int_equal(wrong->attr->seq, 0);
	assert_true(wrong->attr->usage_mismatch);
	assert_int_equal(wrong->attr->usage_reported, 21);
	assert_int_equal(wrong->attr->usage_evaluated, 20);
	assert_false(ra->attr->usage_mismatch);

	request__free(ra);
	request__free(rb);
	request__free(wrong);
	attrib__free(a);
}

/*
 * Usage as evidence, not a gate (issue 35). Three runs end before a request's first token at
 * 5.2 ms: seq 2's 10-token prompt sampled at 2 ms (a worse fit by 3 ms), and two prompts
 * chunked and sampled together in one batched step at 5 ms, which fit alike: seq 0's of 21
 * tokens (4 cached, 17 computed) and seq 1's of 13 (4 cached, 9 computed). The usage picks
 * between the two that fit alike, the cached part counted in (vLLM, llama-server) or left out
 * (Ollama); a count that is off by a template's or BOS's tokens, or says nothing, leaves the
 * best fit; a count that is off but equals the worse-fitting run's length (seq 2's 10) does
 * not take that run. A disagreement is said with both figures.
 */
static void test_usage_as_evidence(void **state)
{
	static const struct {
		uint64_t usage;
		bool set;
		int32_t seq;
		bool mismatch;
		uint64_t evaluated;
	} cases[] = {
		{ 13, true, 1, false, 0 },  /* seq 1's, cached counted in */
		{ 9, true, 1, false, 0 },   /* seq 1's, cached left out (prompt_eval_count) */
		{ 21, true, 0, false, 0 },  /* seq 0's */
		{ 17, true, 0, false, 0 },  /* seq 0's, cached left out */
		{ 23, true, 0, true, 21 },  /* a template's 2 tokens more than any run: the two
					       fit alike, the first is taken, and said */
		{ 10, true, 0, true, 21 },  /* seq 2's length, but seq 2 fits worse by a step */
		{ 0, false, 0, false, 0 },  /* no usage at all */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, cases[i].usage);
		const struct attribution *at;

		r->input_tokens.set = cases[i].set;
		llama_step(a, 1000, 2000, 1, (struct step_seq[]){ { 2, 10, 0, 9, 1 } });
		llama_step(a, 2000, 4000, 2, (struct step_seq[]){ { 0, 16, 4, 19, 0 }, { 1, 8, 4, 11, 0 } });
		llama_step(a, 4000, 5000, 2, (struct step_seq[]){ { 0, 1, 20, 20, 1 }, { 1, 1, 12, 12, 1 } });
		token_at(a, r, 5200);
		attrib__compute(a, r);
		at = r->attr;
		assert_non_null(at);
		assert_true(at->ok);
		assert_int_equal(at->seq, cases[i].seq);
		assert_int_equal(at->usage_mismatch, cases[i].mismatch);
		if (cases[i].mismatch) {
			assert_int_equal(at->usage_reported, cases[i].usage);
			assert_int_equal(at->usage_evaluated, cases[i].evaluated);
		}
		request__free(r);
		attrib__free(a);
	}
}

/*
 * Two requests batched into the same steps but sampled a step apart (seen in CI under a CPU
 * hog on 32 sequences): A (seq 0, 12 tokens, arrives at 1 ms) sampled at 1.5 ms, B (seq 1,
 * 8 tokens, arrives at 1.1 ms) at 2.2 ms, after a short step. The server wrote A's first
 * token late, at 2.3 ms, just before B's: A's times fit B's run by 0.7 ms better, more than
 * the usage's worth (2 of B's 0.2 ms sampling steps). B's usage names its run, so once B has
 * finished A takes its own; while B has not, A's timing picks B's run and says so.
 */
static void test_usage_of_another(void **state)
{
	for (int b_finished = 0; b_finished < 2; b_finished++) {
		struct attrib *a = attrib__new();
		struct request *ra = request_at(1, 1000, 12), *rb = request_at(2, 1100, 8);

		llama_step(a, 1200, 1500, 1, (struct step_seq[]){ { 0, 12, 0, 11, 1 } });
		llama_step(a, 2000, 2200, 1, (struct step_seq[]){ { 1, 8, 0, 7, 1 } });
		token_at(a, ra, 2300);
		token_at(a, rb, 2350);
		llama_step(a, 2400, 2600, 2,
			   (struct step_seq[]){ { 0, 1, 12, 12, 1 }, { 1, 1, 8, 8, 1 } });
		token_at(a, ra, 2700);
		token_at(a, rb, 2710);
		if (b_finished)
			attrib__finished(a, rb);
		attrib__compute(a, ra);
		assert_true(ra->attr->ok);
		assert_int_equal(ra->attr->seq, b_finished ? 0 : 1);
		assert_int_equal(ra->attr->usage_mismatch, !b_finished);
		attrib__compute(a, rb);
		assert_true(rb->attr->ok);
		assert_int_equal(rb->attr->seq, 1);
		assert_false(rb->attr->usage_mismatch);
		request__free(ra);
		request__free(rb);
		attrib__free(a);
	}
}

/* Seqs 3 and 1 prompted in one step and decoding in the same steps; the request (no usage)
 * writes a token after each and ends at 5.55 ms. */
static struct request *batched_twins(struct attrib *a)
{
	struct request *r = request_at(1, 1000, 0);

	r->input_tokens.set = false;
	llama_step(a, 2000, 4000, 2, (struct step_seq[]){ { 3, 30, 0, 29, 1 }, { 1, 12, 0, 11, 1 } });
	token_at(a, r, 4100);
	llama_step(a, 4200, 4700, 2, (struct step_seq[]){ { 3, 1, 30, 30, 1 }, { 1, 1, 12, 12, 1 } });
	token_at(a, r, 4800);
	llama_step(a, 4900, 5400, 2, (struct step_seq[]){ { 3, 1, 31, 31, 1 }, { 1, 1, 13, 13, 1 } });
	token_at(a, r, 5500);
	return r;
}

/*
 * Two prompts sampled in one batched step, decoding in the same steps after, fit a request
 * alike. The request's sequence is the one that stops when the request ends: the other goes
 * on decoding at its next positions in steps begun after the end (a longer request's), so it
 * is not this request's run, though it comes first in the batch and fits no worse (seen on
 * the live server: a sequence whose request's write was late, so that it sat out a step,
 * fitted worse than the batched neighbour that went on).
 */
static void test_sequence_living_on(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = batched_twins(a);
	const struct attribution *at;

	/* the request has ended (5.55 ms); seq 3 goes on, seq 1 is done */
	llama_step(a, 5600, 6000, 1, (struct step_seq[]){ { 3, 1, 32, 32, 1 } });
	llama_step(a, 6100, 6500, 1, (struct step_seq[]){ { 3, 1, 33, 33, 1 } });
	attrib__compute(a, r);
	at = r->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_int_equal(at->seq, 1);
	assert_int_equal(at->prompt_tokens, 12);
	request__free(r);
	attrib__free(a);

	/* one step begun after the end is enough (seen under a CPU hog: two requests of one
	 * prompt length, 10 and 11 tokens out, batched); one begun before it, the engine under
	 * way as the stream ended, does not rule seq 3 out: the first of the two that fit alike */
	for (int before = 0; before < 2; before++) {
		a = attrib__new();
		r = batched_twins(a);
		llama_step(a, before ? 5520 : 5600, 6000, 1, (struct step_seq[]){ { 3, 1, 32, 32, 1 } });
		attrib__compute(a, r);
		assert_true(r->attr->ok);
		assert_int_equal(r->attr->seq, before ? 3 : 1);
		request__free(r);
		attrib__free(a);
	}
}

/*
 * No usage, so an event may carry several tokens: each is from the latest output step seen
 * before it, but one that leaves a step for every event after it. The server wrote token 1
 * only after the step of token 2 was over (its thread busy elsewhere; seen live under a CPU
 * hog): token 1 is still from its own step, and token 2 from the next.
 */
static void test_late_write_keeps_its_step(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = request_at(1, 1000, 0);
	const struct attribution *at;

	r->input_tokens.set = false;
	llama_step(a, 2000, 4000, 1, (struct step_seq[]){ { 0, 12, 0, 11, 1 } });
	request__token(r, 4100 * US);
	attrib__first_token(a, r);
	llama_step(a, 4200, 4500, 1, (struct step_seq[]){ { 0, 1, 12, 12, 1 } });
	llama_step(a, 4600, 4900, 1, (struct step_seq[]){ { 0, 1, 13, 13, 1 } });
	request__token(r, 4950 * US);
	request__token(r, 5000 * US);
	r->end_ns = 5050 * US;
	attrib__compute(a, r);
	at = r->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_int_equal(at->ngaps, 2);
	assert_int_equal(at->gaps[0].producer_start_ns, 4200 * US);
	assert_int_equal(at->gaps[1].producer_start_ns, 4600 * US);
	request__free(r);
	attrib__free(a);
}

/*
 * A context shift mid-stream is the request's own, not a new prompt. node-llama-cpp clears
 * the sequence and evaluates the kept tokens again from position 1 (a chunk that samples
 * nothing, then the step that samples the next token); llama-server shifts the cache in
 * place and decodes on at a lower position. Either way the gap says context_shift, the
 * re-evaluation's time is its shift_ns, and the request counts its shifts.
 */
static void test_context_shift(void **state)
{
	for (int style = 0; style < 2; style++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, 0);
		const struct attribution *at;

		r->input_tokens.set = false;
		llama_step(a, 2000, 4000, 1, (struct step_seq[]){ { 0, 12, 0, 11, 1 } });
		token_at(a, r, 4100);
		llama_step(a, 4200, 4400, 1, (struct step_seq[]){ { 0, 1, 12, 12, 1 } });
		token_at(a, r, 4500);
		if (style == 0) { /* cleared, the kept 12 tokens evaluated again from position 1 */
			llama_step(a, 4600, 5600, 1, (struct step_seq[]){ { 0, 8, 1, 8, 0 } });
			llama_step(a, 5600, 6000, 1, (struct step_seq[]){ { 0, 5, 9, 13, 1 } });
		} else { /* shifted in place by 8: decodes on at 13 - 8 */
			llama_step(a, 5600, 6000, 1, (struct step_seq[]){ { 0, 1, 5, 5, 1 } });
		}
		token_at(a, r, 6100);
		llama_step(a, 6200, 6400, 1,
			   (struct step_seq[]){ { 0, 1, style ? 6 : 14, style ? 6 : 14, 1 } });
		token_at(a, r, 6500);
		attrib__compute(a, r);
		at = r->attr;
		assert_non_null(at);
		assert_true(at->ok);
		assert_int_equal(at->prompt_tokens, 12);
		assert_int_equal(at->ngaps, 3);
		assert_false(at->gaps[0].context_shift);
		assert_true(at->gaps[1].context_shift);
		assert_false(at->gaps[2].context_shift);
		assert_int_equal(at->gaps[1].shift_ns, style ? 0 : 1400 * US);
		assert_int_equal(at->gaps[1].producer_start_ns, 5600 * US);
		assert_int_equal(at->context_shifts, 1);
		assert_int_equal(at->shift_ns, style ? 0 : 1400 * US);
		request__free(r);
		attrib__free(a);
	}
}

/*
 * A request with no usage (a server that says nothing unless asked), on a sequence that
 * evaluated one more token of its previous request after this one arrived, without logits,
 * at a position its prompt does not join (the prompt reuses 8 cells and goes on from there):
 * that step is not the prompt's first chunk; the prompt is the two steps that join.
 */
static void test_prompt_chunks_join(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = request_at(1, 1000, 0);
	const struct attribution *at;

	assert_non_null(a);
	r->input_tokens.set = false;
	llama_step(a, 1200, 1400, 1, (struct step_seq[]){ { 0, 1, 30, 30, 0 } });
	llama_step(a, 2000, 3000, 1, (struct step_seq[]){ { 0, 8, 8, 15, 0 } });
	llama_step(a, 3000, 4000, 1, (struct step_seq[]){ { 0, 4, 16, 19, 1 } });
	token_at(a, r, 4200);
	llama_step(a, 4300, 4500, 1, (struct step_seq[]){ { 0, 1, 20, 20, 1 } });
	token_at(a, r, 4600);
	attrib__compute(a, r);
	at = r->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_int_equal(at->prefill_start_ns, 2000 * US);
	assert_int_equal(at->prefill_steps, 2);
	assert_int_equal(at->cached_tokens, 8);
	assert_int_equal(at->prompt_tokens, 12);
	assert_int_equal(at->queue_ns, 1000 * US);
	request__free(r);
	attrib__free(a);
}


/*
 * A step whose sequence begins below the position it had reached says so in its record
 * (rewound_from): a context shift or a prompt that kept less of the sequence's history.
 * Drafted tokens a verifying step rejected are removed as a matter of course: the step
 * after it begins past its own token, not past its last draft, and is no rewind.
 */
static void test_rewound_positions(void **state)
{
	char path[] = "/tmp/tokenscope-llama-XXXXXX", *text;
	int fd = mkstemp(path);
	struct outfile jsonl = { .fd = -1 };
	struct sinks sinks = { 0 };
	struct pipeline *pl;
	struct jsonl *j;
	struct ts_llama_step r;
	FILE *f;
	static const struct {
		uint32_t tokens, outputs;
		int32_t pos;
	} steps[] = {
		{ 10, 1, 0 }, /* a prompt, 0..9 */
		{ 1, 1, 10 }, /* a decode */
		{ 3, 1, 3 },  /* back below 11: rewound_from 11 */
		{ 4, 4, 6 },  /* verifies 3 drafts after its own token at 6 */
		{ 1, 1, 7 },  /* none accepted: no rewind */
		{ 1, 1, 2 },  /* back below 8: rewound_from 8 */
	};

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(outfile__open(&jsonl, path), 0);
	assert_int_equal(outfile__start(&jsonl), 0);
	j = jsonl__new(&jsonl, false);
	assert_non_null(j);
	assert_int_equal(sinks__add(&sinks, &jsonl_sink, j), 0);
	pl = pipeline__new(sinks__request, sinks__step, &sinks);
	assert_non_null(pl);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		size_t size = make_step(&r, 0xc0, (10 + i) * MS, (10 + i) * MS + 500000, 0, 1,
					&steps[i].tokens, &steps[i].pos, &steps[i].outputs);

		assert_int_equal(pipeline__feed(pl, &r, size), 0);
	}
	pipeline__finish(pl, 20 * MS);
	assert_int_equal(outfile__close(&jsonl), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	text = slurp(f);
	fclose(f);
	assert_non_null(strstr(text, "\"first_pos\":3,\"last_pos\":5,\"rewound_from\":11,"));
	assert_non_null(strstr(text, "\"first_pos\":2,\"last_pos\":2,\"rewound_from\":8,"));
	assert_non_null(strstr(text, "\"first_pos\":7,\"last_pos\":7,\"outputs\""));
	assert_int_equal(strstr(strstr(text, "rewound_from") + 1, "rewound_from") != NULL, 1);
	assert_null(strstr(strstr(strstr(text, "rewound_from") + 1, "rewound_from") + 1,
			   "rewound_from"));
	pipeline__free(pl);
	jsonl__free(j);
	unlink(path);
}

/* A model's name from its file, as a request names it: base name, no ".gguf", no split's
 * suffix; the key folds case. */
static void test_model_names(void **state)
{
	char name[LLAMA_MODEL_NAME_MAX];

	llama_model__name("/models/Qwen2-7B-Q4_K_M-00001-of-00003.gguf", name);
	assert_string_equal(name, "Qwen2-7B-Q4_K_M");
	llama_model__name("tiny.GGUF", name);
	assert_string_equal(name, "tiny");
	llama_model__name("/blobs/sha256-6a0746a1ec1a", name); /* Ollama's: no extension */
	assert_string_equal(name, "sha256-6a0746a1ec1a");
	assert_true(llama_model__key("qwen2-7b-q4_k_m") ==
		    llama_model__key("/models/Qwen2-7B-Q4_K_M-00001-of-00003.gguf"));
	assert_true(llama_model__key("tiny") != llama_model__key("tiny-b"));
	assert_true(llama_model__key("models/tiny-b.gguf") == llama_model__key("tiny-b"));
	assert_int_equal(llama_model__key(NULL), 0);
	assert_int_equal(llama_model__key(""), 0);
}

static size_t model_record(struct ts_llama_model *m, uint64_t model, const char *path)
{
	memset(m, 0, sizeof(*m));
	m->hdr = (struct ts_event_hdr){ .type = TS_EV_LLAMA_MODEL, .size = sizeof(*m),
					.ts_ns = 1 * MS, .pid = 4242, .tid = 4243 };
	m->model = model;
	snprintf(m->path, sizeof(m->path), "%s", path);
	return sizeof(*m);
}

static size_t context_record(struct ts_llama_context *c, uint64_t ctx, uint64_t model)
{
	*c = (struct ts_llama_context){ .hdr = { .type = TS_EV_LLAMA_CONTEXT, .size = sizeof(*c),
						 .ts_ns = 2 * MS, .pid = 4242, .tid = 4243 },
					.ctx = ctx, .model = model };
	return sizeof(*c);
}

/*
 * Two models in one process: each context's steps are named by the model they were made of,
 * in the records, the summary and the metrics; a context whose making was not seen has none.
 * A pointer freed and given again to another model is the newer one's; the process's exit
 * lets its models go.
 */
static void test_contexts_named_by_model(void **state)
{
	FILE *lines = tmpfile();
	struct summary *sm = summary__new(lines, NULL, NULL);
	struct metrics *m = metrics__new(100, NULL);
	struct sinks sinks = { 0 };
	struct pipeline *pl;
	struct buf expo = { 0 };
	struct ts_llama_model mr;
	struct ts_llama_context cr;
	struct ts_llama_step r;
	struct ts_exit x = { .hdr = { .type = TS_EV_EXIT, .size = sizeof(x), .ts_ns = 30 * MS,
				      .pid = 4242, .tid = 4242 } };
	const uint32_t one[] = { 1 }, outs[] = { 1 };
	const int32_t at[] = { 7 };
	size_t size;
	char *text;

	assert_true(lines && sm && m);
	assert_int_equal(sinks__add(&sinks, &summary_sink, sm), 0);
	assert_int_equal(sinks__add(&sinks, &metrics_sink, m), 0);
	pl = pipeline__new(sinks__request, sinks__step, &sinks);
	assert_non_null(pl);
	assert_int_equal(pipeline__feed(pl, &mr, model_record(&mr, 0x1000, "/m/old.gguf")), 0);
	assert_int_equal(pipeline__feed(pl, &mr, model_record(&mr, 0x1000, "/m/tiny.gguf")), 0);
	assert_int_equal(pipeline__feed(pl, &mr, model_record(&mr, 0x2000, "/m/tiny-b.gguf")), 0);
	assert_int_equal(pipeline__feed(pl, &mr, model_record(&mr, 0, "/m/missing.gguf")), 0);
	assert_int_equal(pipeline__feed(pl, &cr, context_record(&cr, 0xa0, 0x1000)), 0);
	assert_int_equal(pipeline__feed(pl, &cr, context_record(&cr, 0xb0, 0x2000)), 0);
	assert_int_equal(pipeline__feed(pl, &cr, sizeof(cr) - 8), -1); /* short: counted bad */
	size = make_step(&r, 0xa0, 10 * MS, 11 * MS, 0, 1, one, at, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	size = make_step(&r, 0xb0, 12 * MS, 13 * MS, 0, 1, one, at, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	size = make_step(&r, 0xc0, 14 * MS, 15 * MS, 0, 1, one, at, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0);
	assert_int_equal(pipeline__feed(pl, &x, sizeof(x)), 0);
	size = make_step(&r, 0xa0, 31 * MS, 32 * MS, 0, 1, one, at, outs);
	assert_int_equal(pipeline__feed(pl, &r, size), 0); /* after the exit: its pid's again */
	pipeline__finish(pl, 40 * MS);
	assert_int_equal(pipeline__health(pl)->bad_events, 1);
	assert_int_equal(sinks__finish(&sinks, pipeline__health(pl)), 0);

	text = slurp(lines);
	assert_non_null(strstr(text, "node[4242] llama.cpp context 0xa0 model tiny steps=2 "));
	assert_non_null(strstr(text, "node[4242] llama.cpp context 0xb0 model tiny-b steps=1 "));
	assert_non_null(strstr(text, "node[4242] llama.cpp context 0xc0 steps=1 "));
	assert_null(strstr(text, "old"));
	assert_int_equal(metrics__render(m, pipeline__health(pl), &expo), 0);
	assert_non_null(strstr(expo.p, "tokenscope_engine_steps_total{process=\"node\",source="
					"\"llama.cpp\",model=\"tiny-b\",kind=\"decode\"} 1\n"));
	/* the step after the exit is the context's own, its model no longer known */
	assert_non_null(strstr(expo.p, "tokenscope_engine_steps_total{process=\"node\",source="
					"\"llama.cpp\",model=\"tiny\",kind=\"decode\"} 1\n"));
	buf__free(&expo);
	pipeline__free(pl);
	summary__free(sm);
	metrics__free(m);
	fclose(lines);
}

/*
 * The server's own timings name the run. Two prompts sampled in one step of context 0xa0:
 * sequence 0 evaluated 12 tokens after 4 cached, sequence 1 evaluated 16 with none cached;
 * both then decode in the same steps. Each request's first token is written after that
 * step; by time they fit alike (the same steps). The timings (prompt_n, cache_n) pick each
 * its own run, exactly: "sequence" is not estimated, and the record's counts are the
 * server's. Timings that name no run leave the request unsplit, saying so.
 */
static void test_timings_name_the_run(void **state)
{
	static const struct {
		uint64_t evaluated, cached;
		int32_t seq; /* -1: no run */
	} cases[] = { { 12, 4, 0 }, { 16, 0, 1 }, { 16, 4, -1 } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, 0);

		r->input_tokens.set = false;
		r->timings.evaluated = (struct opt_u64){ true, cases[i].evaluated };
		r->timings.cached = (struct opt_u64){ true, cases[i].cached };
		model_step(a, 0xa0, "tiny", 1100, 2000, 2,
			   (struct step_seq[]){ { 0, 12, 4, 15, 1 }, { 1, 16, 0, 15, 1 } });
		model_step(a, 0xa0, "tiny", 2100, 2500, 2,
			   (struct step_seq[]){ { 0, 1, 16, 16, 1 }, { 1, 1, 16, 16, 1 } });
		token_at(a, r, 2050);
		token_at(a, r, 2550);
		r->output_tokens.set = false;
		attrib__compute(a, r);
		assert_non_null(r->attr);
		if (cases[i].seq < 0) {
			assert_false(r->attr->ok);
			assert_non_null(strstr(r->attr->error, "timings state (16 computed, 4 cached)"));
		} else {
			assert_true(r->attr->ok);
			assert_int_equal(r->attr->seq, cases[i].seq);
			assert_true(r->attr->by_timings);
			assert_false(r->attr->estimated & EST_SEQUENCE);
			assert_int_equal(r->attr->prompt_tokens, cases[i].evaluated);
			assert_int_equal(r->attr->cached_tokens, cases[i].cached);
			assert_int_equal(r->attr->output_tokens, 2);
			request__engine_counts(r);
			assert_true(r->input_tokens.set);
			assert_int_equal(r->input_tokens.v, cases[i].evaluated + cases[i].cached);
			assert_int_equal(r->input_source, COUNT_LLAMA_STEPS);
			assert_int_equal(r->cached_tokens.v, cases[i].cached);
			assert_int_equal(r->output_tokens.v, 2);
			assert_int_equal(r->output_source, COUNT_LLAMA_STEPS);
		}
		request__free(r);
		attrib__free(a);
	}
}

/*
 * Two runs that fit alike and split a request otherwise, with nothing to tell them apart
 * (no timings, no usage, no model named): prompts of one length on two contexts of one
 * model, sampled 0.1 ms apart by steps of 0.9 ms. A first token written after both is
 * ambiguous: nothing is split, the two candidates are named, the better fit first.
 */
static void test_alike_runs_are_ambiguous(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = request_at(1, 1000, 0);

	r->input_tokens.set = false;
	model_step(a, 0xa0, "tiny", 1100, 2000, 1, (struct step_seq[]){ { 0, 10, 0, 9, 1 } });
	model_step(a, 0xb0, "tiny", 1200, 2100, 1, (struct step_seq[]){ { 0, 10, 0, 9, 1 } });
	token_at(a, r, 2200);
	attrib__compute(a, r);
	assert_non_null(r->attr);
	assert_false(r->attr->ok);
	assert_true(r->attr->ambiguous);
	assert_int_equal(r->attr->candidates[0].context, 0xb0);
	assert_int_equal(r->attr->candidates[1].context, 0xa0);
	request__free(r);
	attrib__free(a);
}

/*
 * Two models in one process, a context each (0xa0 of "tiny", 0xb0 of "tiny-b"), each with a
 * 10-token prompt sampled: tiny's at 2 ms, tiny-b's at 1.5 ms. A request that arrived at
 * 1 ms and wrote its first token at 2.1 ms fits tiny's run best, by less than a step; it
 * names tiny-b, whose context fits too, so it is tiny-b's. A request that names no model, or
 * one no context is known to be (a server's alias), fits both alike: it is ambiguous, its two
 * candidates named, nothing split.
 */
static void test_request_to_its_model(void **state)
{
	static const struct {
		const char *model;
		uint64_t ctx;
	} cases[] = {
		{ "tiny-b", 0xb0 }, { "TINY-B", 0xb0 }, { "tiny", 0xa0 }, { NULL, 0 },
		{ "my-alias", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, 10);

		if (cases[i].model)
			assert_true(request__set_str(&r->model, cases[i].model,
						     strlen(cases[i].model)));
		model_step(a, 0xb0, "tiny-b", 1100, 1500, 1, (struct step_seq[]){ { 0, 10, 0, 9, 1 } });
		model_step(a, 0xa0, "tiny", 1200, 2000, 1, (struct step_seq[]){ { 0, 10, 0, 9, 1 } });
		token_at(a, r, 2100);
		attrib__compute(a, r);
		assert_non_null(r->attr);
		if (!cases[i].ctx) {
			assert_false(r->attr->ok);
			assert_true(r->attr->ambiguous);
			assert_int_equal(r->attr->candidates[0].context, 0xa0);
			assert_int_equal(r->attr->candidates[1].context, 0xb0);
			assert_non_null(strstr(r->attr->error, "ambiguous"));
		} else {
			assert_true(r->attr->ok);
			assert_int_equal(r->attr->context, cases[i].ctx);
		}
		request__free(r);
		attrib__free(a);
	}
}

/*
 * Embeddings beside chat. A chat request (seq 0 of CTX, arrives at 1 ms) streams 6 tokens.
 * An embeddings call E (arrives at 2.3 ms, answered at 3.35 ms) runs its step on a context of
 * its own (0xe0, 2.4 to 3.3 ms: node-llama-cpp's embedding context) beside the chat's decode
 * step of 2.5 to 3.4 ms, which takes 0.9 ms against the usual 0.1; another, F (3.41 to
 * 3.7 ms), runs its step on the chat's own context between two decodes (llama-server
 * switches the context's embeddings on for that batch). Each gap they ran in names its call,
 * with the time its own steps took above the usual decode step; no embedding step is taken
 * for the chat's prompt, and the embeddings calls are not split themselves.
 */
static void test_embeddings_beside_chat(void **state)
{
	struct attrib *a = attrib__new();
	struct request *r = request_at(1, 1000, 9), *e = request_at(9, 2300, 20),
		       *f = request_at(10, 3410, 20);
	const struct attribution *at;

	r->api = API_OPENAI_CHAT;
	e->api = f->api = API_OPENAI_EMBEDDINGS;
	/* an embedding step that fits the chat's prompt better than its own: never its */
	embed_step(a, 0xe0, 1050, 1450, 0, 9);
	llama_step(a, 1100, 1500, 1, (struct step_seq[]){ { 0, 9, 0, 8, 1 } });
	token_at(a, r, 1600);
	llama_step(a, 2000, 2100, 1, (struct step_seq[]){ { 0, 1, 9, 9, 1 } });
	token_at(a, r, 2200);
	embed_step(a, 0xe0, 2400, 3300, 0, 20);
	llama_step(a, 2500, 3400, 1, (struct step_seq[]){ { 0, 1, 10, 10, 1 } });
	token_at(a, r, 3500);
	embed_step(a, CTX, 3420, 3580, 3, 20);
	llama_step(a, 3600, 3700, 1, (struct step_seq[]){ { 0, 1, 11, 11, 1 } });
	token_at(a, r, 3800);
	llama_step(a, 3900, 4000, 1, (struct step_seq[]){ { 0, 1, 12, 12, 1 } });
	token_at(a, r, 4100);
	llama_step(a, 4200, 4300, 1, (struct step_seq[]){ { 0, 1, 13, 13, 1 } });
	token_at(a, r, 4400);
	e->end_ns = 3350 * US;
	f->end_ns = 3700 * US;
	attrib__finished(a, e);
	attrib__finished(a, f);

	attrib__compute(a, r);
	at = r->attr;
	assert_non_null(at);
	assert_true(at->ok);
	assert_int_equal(at->context, CTX);
	assert_int_equal(at->prefill_start_ns, 1100 * US);
	assert_int_equal(at->ngaps, 5);
	assert_false(at->gaps[0].interfered);
	assert_true(at->gaps[1].interfered); /* E's step beside the 0.9 ms decode */
	assert_int_equal(at->gaps[1].interference_ns, 800 * US);
	assert_true(at->gaps[2].interfered); /* F's step on the chat's own context */
	assert_int_equal(at->gaps[2].interference_ns, 60 * US);
	assert_int_equal(at->gaps[2].producer_start_ns, 3600 * US);
	assert_false(at->gaps[3].interfered);
	assert_int_equal(at->ninterfered_by, 2);
	assert_int_equal(at->ninterfered_by, 2);
	assert_int_equal(at->interfered_by[0], 9);
	assert_int_equal(at->interfered_by[1], 10);

	attrib__compute(a, e);
	assert_false(e->attr->ok);
	assert_string_equal(e->attr->error, "an embeddings call: no token to split");
	request__free(r);
	request__free(e);
	request__free(f);
	attrib__free(a);
}

/*
 * Speculative decoding (node-llama-cpp's draft predictor, as the llama integration test saw
 * it). A request (seq 0 of CTX, arrives at 1 ms) whose every step verifies tokens a draft
 * model proposed: outputs for its last token and each drafted one. Its prompt step carries
 * 9 prompt tokens and 1 drafted (outputs 2); the sequence's next step begins at position 10,
 * so that draft was accepted and the step produced 2 tokens. Then [10, 11] verifies 1 and
 * the next begins at 11: none accepted, 1 token. Then [11..14] verifies 3 and the next
 * begins at 14: 2 accepted, 3 tokens. Then a plain decode. 7 tokens in all, one an event;
 * the draft model's context (0xd0) steps twice in between. With usage (one token an event)
 * and without it (taken from the last event back) alike: verify steps 3, drafted 5, accepted
 * 3, each gap on the step that produced it (none between tokens of one step), the prompt 9.
 */
static void test_speculative_decoding(void **state)
{
	for (int usage = 0; usage < 2; usage++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, 9);
		const struct attribution *at;
		const uint64_t producers[] = { 1100, 1100, 2000, 2500, 2500, 2500, 3000 };

		llama_step(a, 1100, 1500, 1, (struct step_seq[]){ { 0, 10, 0, 9, 2 } });
		token_at(a, r, 1600);
		token_at(a, r, 1650);
		model_step(a, 0xd0, NULL, 1700, 1800, 1, (struct step_seq[]){ { 0, 1, 10, 10, 1 } });
		llama_step(a, 2000, 2100, 1, (struct step_seq[]){ { 0, 2, 10, 11, 2 } });
		token_at(a, r, 2200);
		model_step(a, 0xd0, NULL, 2300, 2400, 1, (struct step_seq[]){ { 0, 1, 11, 11, 1 } });
		llama_step(a, 2500, 2700, 1, (struct step_seq[]){ { 0, 4, 11, 14, 4 } });
		token_at(a, r, 2800);
		token_at(a, r, 2850);
		token_at(a, r, 2900);
		llama_step(a, 3000, 3100, 1, (struct step_seq[]){ { 0, 1, 14, 14, 1 } });
		token_at(a, r, 3200);
		if (!usage)
			r->output_tokens.set = false;
		attrib__compute(a, r);
		at = r->attr;
		assert_non_null(at);
		assert_true(at->ok);
		assert_int_equal(at->prompt_tokens, 9);
		assert_int_equal(at->cached_tokens, 0);
		assert_int_equal(at->prefill_start_ns, 1100 * US);
		assert_int_equal(at->verify_steps, 3);
		assert_int_equal(at->drafted, 5);
		assert_int_equal(at->accepted, 3);
		assert_int_equal(at->draft_steps, 2);
		assert_int_equal(at->draft_ns, 200 * US);
		assert_int_equal(at->draft_context, 0xd0);
		assert_int_equal(at->ngaps, 6);
		for (size_t g = 0; g < at->ngaps; g++)
			assert_int_equal(at->gaps[g].producer_start_ns, producers[g + 1] * US);
		assert_int_equal(at->gaps[0].steps, 0); /* the prompt step's second token */
		assert_true(at->gaps[1].verify);
		assert_int_equal(at->gaps[1].drafted, 1);
		assert_int_equal(at->gaps[1].accepted, 0);
		assert_true(at->gaps[2].verify);
		assert_int_equal(at->gaps[2].drafted, 3);
		assert_int_equal(at->gaps[2].accepted, 2);
		assert_false(at->gaps[3].verify); /* counted once, at its first token */
		assert_int_equal(at->gaps[3].steps, 0);
		assert_false(at->gaps[5].verify);
		request__free(r);
		attrib__free(a);
	}
}

/*
 * A prompt in chunks whose last chunk is its one last token, verified with a drafted one
 * (node-llama-cpp's draft predictor: a 129-token prompt evaluated 64 + 32 + 16 + 16 + 1). That
 * step's every token has an output, yet only the first is the prompt's: the prompt is 9
 * tokens (8 in the first chunk), and the step produced 2 (the next step begins at 10), the
 * usage's 9 agreeing. Without its earlier chunk such a step would be a prompt that asked for
 * logits at every token.
 */
static void test_speculative_last_chunk_of_one(void **state)
{
	for (int usage = 0; usage < 2; usage++) {
		struct attrib *a = attrib__new();
		struct request *r = request_at(1, 1000, 9);
		const struct attribution *at;

		llama_step(a, 1050, 1090, 1, (struct step_seq[]){ { 0, 8, 0, 7, 0 } });
		llama_step(a, 1100, 1500, 1, (struct step_seq[]){ { 0, 2, 8, 9, 2 } });
		token_at(a, r, 1600);
		token_at(a, r, 1650);
		llama_step(a, 2000, 2100, 1, (struct step_seq[]){ { 0, 1, 10, 10, 1 } });
		token_at(a, r, 2200);
		if (!usage)
			r->output_tokens.set = false;
		attrib__compute(a, r);
		at = r->attr;
		assert_non_null(at);
		assert_true(at->ok);
		assert_false(at->usage_mismatch);
		assert_int_equal(at->prompt_tokens, 9);
		assert_int_equal(at->prefill_chunks, 1);
		assert_int_equal(at->prefill_start_ns, 1050 * US);
		assert_int_equal(at->verify_steps, 1);
		assert_int_equal(at->drafted, 1);
		assert_int_equal(at->accepted, 1);
		assert_int_equal(at->ngaps, 2);
		assert_int_equal(at->gaps[0].producer_start_ns, 1100 * US);
		assert_int_equal(at->gaps[1].producer_start_ns, 2000 * US);
		request__free(r);
		attrib__free(a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_to_step),
		cmocka_unit_test(test_step_kinds),
		cmocka_unit_test(test_steps_through_the_pipeline),
		cmocka_unit_test(test_attribution_by_sequence),
		cmocka_unit_test(test_prompt_chunks_join),
		cmocka_unit_test(test_usage_as_evidence),
		cmocka_unit_test(test_usage_of_another),
		cmocka_unit_test(test_sequence_living_on),
		cmocka_unit_test(test_late_write_keeps_its_step),
		cmocka_unit_test(test_context_shift),
		cmocka_unit_test(test_model_names),
		cmocka_unit_test(test_rewound_positions),
		cmocka_unit_test(test_contexts_named_by_model),
		cmocka_unit_test(test_request_to_its_model),
		cmocka_unit_test(test_timings_name_the_run),
		cmocka_unit_test(test_alike_runs_are_ambiguous),
		cmocka_unit_test(test_embeddings_beside_chat),
		cmocka_unit_test(test_speculative_decoding),
		cmocka_unit_test(test_speculative_last_chunk_of_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
