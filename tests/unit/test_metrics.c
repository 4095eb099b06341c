// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Metric definitions (docs/metrics.md) and content decoding, on hand-made inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "base/stats.h"
#include "proto/decode.h"
#include "llm/request.h"

#define MS 1000000ull

static void test_nearest_rank_percentiles(void **state)
{
	struct sample s = { 0 };

	assert_true(isnan(sample__pct(&s, 50)));
	for (int i = 100; i >= 1; i--)
		sample__add(&s, i);
	assert_float_equal(sample__pct(&s, 50), 50, 0);
	assert_float_equal(sample__pct(&s, 90), 90, 0);
	assert_float_equal(sample__pct(&s, 99), 99, 0);
	assert_float_equal(sample__max(&s), 100, 0);
	assert_float_equal(sample__pct(&s, 0), 1, 0);
	sample__free(&s);
	/* A bimodal TTFT: the p50 lands on a real value, never between the modes. */
	for (int i = 0; i < 6; i++)
		sample__add(&s, 20);
	for (int i = 0; i < 4; i++)
		sample__add(&s, 900);
	assert_float_equal(sample__pct(&s, 50), 20, 0);
	assert_float_equal(sample__pct(&s, 90), 900, 0);
	sample__free(&s);
}

/* Past SAMPLE_MAX values a uniform reservoir stands in: bounded memory, percentiles close,
 * count and maximum exact. */
static void test_bounded_sample(void **state)
{
	struct sample s = { 0 };
	const uint64_t n = 4 * SAMPLE_MAX;

	for (uint64_t i = 1; i <= n; i++)
		sample__add(&s, (double)((i * 7919) % n + 1)); /* 1..n, shuffled */
	assert_true(s.cap <= SAMPLE_MAX);
	assert_int_equal(sample__count(&s), n);
	assert_float_equal(sample__max(&s), (double)n, 0);
	assert_float_equal(sample__pct(&s, 50) / (double)n, 0.50, 0.01);
	assert_float_equal(sample__pct(&s, 90) / (double)n, 0.90, 0.01);
	assert_float_equal(sample__pct(&s, 99) / (double)n, 0.99, 0.01);
	sample__free(&s);
}

static void test_request_metrics(void **state)
{
	struct request *r = request__new();
	struct request_metrics m;

	r->start_ns = 1000 * MS;
	r->response_done = true;
	request__token(r, 1100 * MS);
	request__token(r, 1120 * MS);
	request__token(r, 1130 * MS);
	request__token(r, 1190 * MS);
	request__metrics(r, &m);
	assert_true(m.complete);
	assert_float_equal(m.ttft_ms, 100, 1e-9);
	assert_float_equal(m.e2e_ms, 190, 1e-9);
	/* No usage: output tokens are the token events, flagged as an estimate. */
	assert_true(m.output_tokens.set && m.output_tokens_estimated);
	assert_float_equal(m.tpot_ms, 30, 1e-9); /* (190-100)/(4-1) */
	assert_float_equal(m.itl_p50_ms, 20, 1e-9);
	assert_float_equal(m.itl_max_ms, 60, 1e-9);
	/* Usage says 10 tokens (chunks held several): TPOT divides by tokens, not events. */
	r->output_tokens = (struct opt_u64){ true, 10 };
	request__metrics(r, &m);
	assert_false(m.output_tokens_estimated);
	assert_float_equal(m.tpot_ms, 10, 1e-9);
	/* One token: no TPOT. */
	r->output_tokens = (struct opt_u64){ true, 1 };
	request__metrics(r, &m);
	assert_true(isnan(m.tpot_ms));
	/* Lost bytes: no figures at all, incomplete. */
	r->lossy = true;
	request__metrics(r, &m);
	assert_false(m.complete);
	assert_true(isnan(m.ttft_ms) && isnan(m.e2e_ms) && isnan(m.itl_p50_ms));
	/* First error wins. */
	request__error(r, "http_%d", 500);
	request__error(r, "capture_loss");
	assert_string_equal(r->error, "http_500");
	request__free(r);
}

struct sink {
	char out[256];
	size_t len;
	uint64_t ts[8];
	int calls;
};

static void collect(void *ctx, const uint8_t *d, size_t n, uint64_t ts)
{
	struct sink *s = ctx;

	memcpy(s->out + s->len, d, n);
	s->len += n;
	if (s->calls < 8)
		s->ts[s->calls] = ts;
	s->calls++;
}

static size_t compress_with(int window_bits, const char *in, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };
	size_t n;

	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (uint8_t *)in;
	z.avail_in = strlen(in);
	z.next_out = out;
	z.avail_out = cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	n = cap - z.avail_out;
	deflateEnd(&z);
	return n;
}

static void test_decoders(void **state)
{
	const char *text = "data: hello\n\ndata: world\n\n";
	const int bits[] = { 15 + 16, 15, -15 };
	const enum http_encoding enc[] = { HTTP_ENC_GZIP, HTTP_ENC_DEFLATE, HTTP_ENC_DEFLATE };

	for (int i = 0; i < 3; i++) {
		uint8_t z[256];
		size_t n = compress_with(bits[i], text, z, sizeof(z));
		struct sink s = { 0 };
		struct decoder *d = decoder__new(enc[i], collect, &s);

		/* byte by byte: output appears only once enough input came */
		for (size_t k = 0; k < n; k++)
			assert_int_equal(decoder__feed(d, z + k, 1, 100 + k), 0);
		assert_int_equal(s.len, strlen(text));
		assert_memory_equal(s.out, text, s.len);
		decoder__free(d);
	}
	/* corrupt input is an error, and stays one */
	{
		struct sink s = { 0 };
		struct decoder *d = decoder__new(HTTP_ENC_GZIP, collect, &s);

		assert_int_equal(decoder__feed(d, (const uint8_t *)"not gzip at all", 15, 1), -1);
		assert_int_equal(decoder__feed(d, (const uint8_t *)"x", 1, 2), -1);
		decoder__free(d);
	}
	assert_null(decoder__new(HTTP_ENC_UNSUPPORTED, collect, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nearest_rank_percentiles),
		cmocka_unit_test(test_bounded_sample),
		cmocka_unit_test(test_request_metrics),
		cmocka_unit_test(test_decoders),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
