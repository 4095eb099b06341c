// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tokenscope compare` (llm/compare.h) on records whose parts the test sets: each cause named
 * alone where only its part moved, none within noise, unknown where the records do not split
 * TTFT or are too few; a client joined to its server takes its parts; the evidence; bad
 * lines counted; the JSON document well formed (jansson reads it).
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/compare.h"

/* One side's shape: n requests, each a queue, a prefill of a fixed part and per_token ms for
 * each uncached token, an emit; noise (a share, deterministic) on every part. */
struct shape {
	int n;
	double queue, fixed, per_token, emit, noise;
	int input, cached;
	bool attributed;
	double gap_ms; /* between starts */
};

static uint64_t rng = 1;

static double jitter(double share)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return 1 + share * ((double)(rng >> 11) / (double)(1ull << 53) * 2 - 1);
}

static void side(struct compare *c, enum cmp_side s, const struct shape *sh)
{
	char line[1024];

	for (int i = 0; i < sh->n; i++) {
		double q = sh->queue * jitter(sh->noise),
		       pf = (sh->fixed + sh->per_token * (sh->input - sh->cached)) * jitter(sh->noise),
		       em = sh->emit * jitter(sh->noise), ttft = q + pf + em;
		uint64_t start = 1000000000ull + (uint64_t)(i * sh->gap_ms * 1e6);
		char attr[256] = "null";

		if (sh->attributed)
			snprintf(attr, sizeof(attr),
				 "{\"source\":\"steps\",\"queue_ms\":%.6f,\"prefill_ms\":%.6f,"
				 "\"emit_ms\":%.6f}", q, pf, em);
		snprintf(line, sizeof(line),
			 "{\"type\":\"request\",\"id\":%d,\"comm\":\"srv\",\"role\":\"server\","
			 "\"api\":\"openai.chat\",\"model\":\"m\",\"ttft_ms\":%.6f,\"e2e_ms\":%.6f,"
			 "\"input_tokens\":%d,\"cached_tokens\":%d,\"start_ns\":%llu,\"end_ns\":%llu,"
			 "\"attribution\":%s}\n",
			 i + 1, ttft, ttft + 20, sh->input, sh->cached, (unsigned long long)start,
			 (unsigned long long)(start + (uint64_t)((ttft + 20) * 1e6)), attr);
		assert_int_equal(compare__line(c, s, line, strlen(line)), 0);
	}
}

/* The verdict's cause, and the document as JSON (caller decrefs). */
static enum cmp_cause judged(const struct shape *b, const struct shape *a, json_t **doc)
{
	struct compare *c = compare__new();
	enum cmp_cause cause;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_error_t err;

	assert_non_null(c);
	side(c, CMP_BEFORE, b);
	side(c, CMP_AFTER, a);
	assert_int_equal(compare__report(c, f, true, &cause), 0);
	fclose(f);
	*doc = json_loads(text, 0, &err);
	if (!*doc)
		fail_msg("not JSON (%s): %s", err.text, text);
	free(text);
	compare__free(c);
	return cause;
}

static const struct shape base = { .n = 200, .queue = 5, .fixed = 2, .per_token = 0.05,
				   .emit = 0.5, .noise = 0.1, .input = 200, .cached = 0,
				   .attributed = true, .gap_ms = 100 };

static void expect(const struct shape *b, const struct shape *a, enum cmp_cause want)
{
	json_t *doc;
	enum cmp_cause got = judged(b, a, &doc);
	json_t *g = json_array_get(json_object_get(doc, "groups"), 0);

	if (got != want)
		fail_msg("%s, want %s: %s", cmp_cause__name(got), cmp_cause__name(want),
			 json_string_value(json_object_get(doc, "verdict")));
	/* each percentile judged names the cause or none, never another */
	for (const char *p = "p50"; p; p = strcmp(p, "p50") ? NULL : "p99") {
		const char *c = json_string_value(json_object_get(json_object_get(g, p), "cause"));

		if (strcmp(c, cmp_cause__name(want)) && strcmp(c, "none"))
			fail_msg("%s names %s, want %s", p, c, cmp_cause__name(want));
	}
	assert_string_equal(json_string_value(json_object_get(doc, "cause")), cmp_cause__name(want));
	json_decref(doc);
}

static void test_causes(void **state)
{
	struct shape s;

	(void)state;
	/* the same load twice (its own noise): none */
	expect(&base, &base, CAUSE_NONE);
	s = base;
	s.queue = 60; /* queued behind the engine */
	expect(&base, &s, CAUSE_CAPACITY);
	s = base;
	s.input = 1000; /* longer prompts, the same cost a token */
	expect(&base, &s, CAUSE_PROMPT);
	{
		struct shape hit = base, miss = base;

		hit.input = miss.input = 1000;
		hit.cached = 900; /* the cache lost, at one prompt length */
		expect(&hit, &miss, CAUSE_CACHE);
	}
	s = base;
	s.per_token = 0.2; /* the same prompts, a slower engine */
	s.fixed = 8;
	expect(&base, &s, CAUSE_ENGINE);
	s = base;
	s.emit = 30;
	expect(&base, &s, CAUSE_NETWORK);
	/* a fall is named by what fell */
	s = base;
	s.queue = 60;
	expect(&s, &base, CAUSE_CAPACITY);
	/* a real rise the records do not split */
	{
		struct shape b = base, a = base;

		b.attributed = a.attributed = false;
		a.queue = 60;
		expect(&b, &a, CAUSE_UNKNOWN);
	}
	/* a change under the floor (2 ms, 10 %), however sure: none */
	{
		struct shape b = base, a = base;

		b.noise = a.noise = 0;
		a.emit = 1.5;
		expect(&b, &a, CAUSE_NONE);
	}
}

static void test_too_few(void **state)
{
	struct shape b = base, a = base;
	json_t *doc, *g;

	(void)state;
	b.n = a.n = 9;
	a.queue = 600;
	assert_int_equal(judged(&b, &a, &doc), CAUSE_UNKNOWN);
	assert_non_null(strstr(json_string_value(json_object_get(doc, "verdict")), "too few"));
	json_decref(doc);
	/* 50 a side: p50 judged, p99 not (100 wanted) */
	b.n = a.n = 50;
	assert_int_equal(judged(&b, &a, &doc), CAUSE_CAPACITY);
	g = json_array_get(json_object_get(doc, "groups"), 0);
	assert_true(json_is_null(json_object_get(json_object_get(g, "p99"), "before_ms")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(g, "p99"), "cause")),
			    "unknown");
	json_decref(doc);
}

/* A client joined to its server takes the server's parts, and its upstream time as the
 * network's; engine steps give the engine's busy share, an engine wire's steps its waiting. */
static void test_joins_and_evidence(void **state)
{
	struct compare *c = compare__new();
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	enum cmp_cause cause;
	json_t *doc, *g;
	static const char *const bad = "not json\n";

	(void)state;
	for (int s = 0; s < 2; s++) {
		for (int i = 0; i < 40; i++) {
			char line[768];
			uint64_t t = 1000000000ull + (uint64_t)i * 100000000ull;
			double up = s ? 40 : 1; /* the path to the server grew */

			snprintf(line, sizeof(line),
				 "{\"type\":\"request\",\"id\":%d,\"comm\":\"srv\",\"role\":\"server\","
				 "\"api\":\"openai.chat\",\"model\":\"m\",\"ttft_ms\":10,\"start_ns\":%llu,"
				 "\"end_ns\":%llu,\"attribution\":{\"queue_ms\":2,\"prefill_ms\":7,"
				 "\"emit_ms\":1}}",
				 2 * i + 1, (unsigned long long)t, (unsigned long long)t + 50000000);
			compare__line(c, (enum cmp_side)s, line, strlen(line));
			snprintf(line, sizeof(line),
				 "{\"type\":\"request\",\"id\":%d,\"comm\":\"cli\",\"role\":\"client\","
				 "\"api\":\"openai.chat\",\"model\":\"m\",\"ttft_ms\":%g,\"start_ns\":%llu,"
				 "\"end_ns\":%llu,\"server_id\":%d,\"upstream_ms\":%g}",
				 2 * i + 2, 10 + up, (unsigned long long)t, (unsigned long long)t + 60000000,
				 2 * i + 1, up);
			compare__line(c, (enum cmp_side)s, line, strlen(line));
			snprintf(line, sizeof(line),
				 "{\"type\":\"vllm_step\",\"pid\":7,\"ts_ns\":%llu,\"waiting\":%d}",
				 (unsigned long long)t, s ? 8 : 2);
			compare__line(c, (enum cmp_side)s, line, strlen(line));
			snprintf(line, sizeof(line),
				 "{\"type\":\"engine_step\",\"pid\":7,\"start_ns\":%llu,\"end_ns\":%llu}",
				 (unsigned long long)t, (unsigned long long)t + (s ? 90000000 : 30000000));
			compare__line(c, (enum cmp_side)s, line, strlen(line));
		}
	}
	assert_int_equal(compare__line(c, CMP_AFTER, bad, strlen(bad)), -1);
	assert_int_equal(compare__bad(c, CMP_AFTER), 1);
	assert_int_equal(compare__requests(c, CMP_BEFORE), 80);
	assert_int_equal(compare__report(c, f, true, &cause), 0);
	fclose(f);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(cause, CAUSE_NETWORK);
	g = json_array_get(json_object_get(doc, "groups"), 1); /* the client's group, second */
	assert_string_equal(json_string_value(json_object_get(g, "role")), "client");
	assert_string_equal(json_string_value(json_object_get(json_object_get(g, "p50"), "cause")),
			    "network");
	assert_float_equal(json_number_value(json_object_get(json_object_get(
				   json_object_get(g, "p50"), "parts_ms"), "network")), 39, 1e-6);
	assert_float_equal(json_number_value(json_object_get(json_object_get(g, "before"), "waiting")),
			   2, 1e-9);
	assert_float_equal(json_number_value(json_object_get(json_object_get(g, "after"), "waiting")),
			   8, 1e-9);
	/* 90 ms of steps every 100 ms: 3.6 s over the requests' 3.96 s */
	assert_float_equal(json_number_value(json_object_get(json_object_get(g, "after"),
							     "engine_busy")), 3.6 / 3.96, 1e-6);
	json_decref(doc);
	free(text);
	compare__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_causes),
		cmocka_unit_test(test_too_few),
		cmocka_unit_test(test_joins_and_evidence),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
