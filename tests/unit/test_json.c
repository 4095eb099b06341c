// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * user/llm/json.c against its ground truth, jansson's json_loadb(buf, len, 0): the same inputs
 * accepted, and the same values read from them. Hand-picked edge cases, then random documents
 * and random mutations of them (a fixed seed: a failure reproduces).
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "llm/json.h"
#include "json_oracle.h"

static struct jdoc doc;
/* a document that keeps its recent parses (jdoc__keep_recent): each input is parsed in it
 * twice, the second from what it kept, and both must read as jansson does */
static struct jdoc recent;
static size_t accepted, refused, accepted_small;

static void differs(const json_t *j, const struct jval *v, const char *buf, size_t len,
		    const char *how)
{
	fprintf(stderr, "differs (jansson %s, json.c %s%s) on %zu bytes:", j ? "accepts" : "refuses",
		v ? "accepts" : "refuses", how, len);
	for (size_t i = 0; i < len; i++)
		fprintf(stderr, (unsigned char)buf[i] >= 0x20 && buf[i] < 0x7f ? "%c" : "\\x%02x",
			(unsigned char)buf[i]);
	fprintf(stderr, "\n");
	fail();
}

static void check_one(const char *buf, size_t len)
{
	json_t *j = json_loadb(buf, len, 0, NULL);
	const struct jval *v = jdoc__parse(&doc, buf, len);

	if (!!j != !!v || (j && !json_same(j, v)))
		differs(j, v, buf, len, "");
	if (!recent.recent)
		assert_true(jdoc__keep_recent(&recent));
	for (int k = 0; k < 2; k++) {
		v = jdoc__parse(&recent, buf, len);
		if (!!j != !!v || (j && !json_same(j, v)))
			differs(j, v, buf, len, k ? ", parsed again, keeping" : ", keeping");
		if (!v && recent.too_deep != doc.too_deep)
			differs(j, v, buf, len, ", another reason");
	}
	if (j)
		accepted++;
	else
		refused++;
	accepted_small += j && len <= 4096;
	json_decref(j);
}

static void check_str(const char *s)
{
	check_one(s, strlen(s));
}

static void test_edge_cases(void **state)
{
	static const char *const cases[] = {
		"{}", "[]", " {} ", "\t[\r\n]\n", "\f{}", "{}\v", "1", "\"a\"", "true", "null", "",
		"   ", "{", "[", "}", "{}}", "[] []", "{}x", "{\"a\":1e400}", "{\"a\":-1e400}",
		"{\"a\":1e-400}", "{\"a\":-0}", "{\"a\":-0.0e-0}", "{\"a\":1E+2}", "{\"a\":1.5e308}",
		"{\"a\":1.8e308}", "{\"a\":01}", "{\"a\":00}", "{\"a\":1.}", "{\"a\":.5}",
		"{\"a\":+1}", "{\"a\":-}", "{\"a\":1e}", "{\"a\":1e+}", "{\"a\":--1}",
		"{\"a\":9223372036854775807}", "{\"a\":9223372036854775808}",
		"{\"a\":-9223372036854775808}", "{\"a\":-9223372036854775809}",
		"{\"a\":99999999999999999999999}", "{\"a\":99999999999999999999999.5}", "[1,]",
		"{\"a\":1,}", "[,1]", "[1 2]", "{\"a\" 1}", "{a:1}", "{'a':1}", "{\"a\":NaN}",
		"{\"a\":Infinity}", "[tru]", "[truee]", "[True]", "[nul]", "[true1]", "[-a]",
		"{\"a\":true,\"a\":false}", "{\"a\":{\"b\":1},\"a\":[2]}", "{\"\":0}",
		"{\"\\u0061\":1}", "{\"a\":\"\\/\\\"\\\\\\b\\f\\n\\r\\t\"}", "{\"a\":\"\\x\"}",
		"{\"a\":\"\\u0000\"}", "{\"a\":\"\\u00\"}", "{\"a\":\"\\u00zz\"}", "{\"a\":\"\\ud800\"}",
		"{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800\\udc00\"}", "{\"a\":\"\\uD834\\uDD1E\"}",
		"{\"a\":\"\\ud800\\u0041\"}", "{\"a\":\"\\ud800\\ud800\"}", "{\"a\":\"\\ud800x\"}",
		"{\"a\":\"\\u00e9\\u20ac\"}", "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
		"{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xc1\xbf\"}", "{\"a\":\"\xe0\x80\xaf\"}",
		"{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf0\x80\x80\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}",
		"{\"a\":\"\xf5\x80\x80\x80\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\x80\"}", "{\"a\":\"\xc3\"}",
		"{\"a\":\"\xe2\x82\"}", "{\"a\":\"\t\"}", "{\"a\":\"\x1f\"}", "{\"a\":\"\x7f\"}",
		"{\"a\":\"unterminated}", "{\"a\":\"\\", "[\"\xc3\xa9\"]\xc3\xa9", "{\"\xff\":1}",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_str(cases[i]);
	check_one("{}\0", 3);		   /* a NUL after the value */
	check_one("{\"a\":\"x\0y\"}", 11); /* a NUL byte in a string */
	check_one("[1]", 2);		   /* cut short */
	/* jansson skips one NUL byte right after a number or a word (user/llm/json.c says why) */
	check_one("[1\0]", 4);
	check_one("[true\0]", 7);
	check_one("[1\0\0]", 5);
	check_one("[\"a\"\0]", 6);
	check_one("{\"a\":null\0}", 11);
}

static void test_depth_limit(void **state)
{
	static char buf[4 * 2100 + 16];

	/* jansson counts every value, scalars too, up to 2048 deep */
	for (int d = 2046; d <= 2050; d++) {
		for (int scalar = 0; scalar < 2; scalar++) {
			size_t n = 0;

			for (int i = 0; i < d; i++)
				buf[n++] = '[';
			if (scalar)
				buf[n++] = '1';
			for (int i = 0; i < d; i++)
				buf[n++] = ']';
			check_one(buf, n);
		}
	}
}

/* ---- random documents and mutations ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void put(struct buf *b, const char *s)
{
	buf__add(b, s, strlen(s), 1 << 20);
}

static void random_ws(struct buf *b)
{
	static const char *const ws[] = { "", "", "", " ", "\n", "\t", "\r\n  " };

	put(b, ws[rnd(7)]);
}

static void random_string(struct buf *b)
{
	static const char *const parts[] = {
		"a",	  "model", "delta", "\\n", "\\\"",     "\\\\",	     "\\/",   "\\u00e9",
		"\\u20AC", "\\ud83d\\ude00",	"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		" ",	  "\\t",   "content", "choices", "0",	      "\\u0041",
	};
	int n = rnd(5);

	put(b, "\"");
	for (int i = 0; i < n; i++)
		put(b, parts[rnd(sizeof(parts) / sizeof(parts[0]))]);
	put(b, "\"");
}

static void random_value(struct buf *b, int depth)
{
	static const char *const scalars[] = {
		"0", "-0", "1", "-17", "42", "9223372036854775807", "-9223372036854775808", "1.5",
		"-2.25e-3", "6E+2", "1e-400", "true", "false", "null", "3.14159265358979",
	};
	int k = depth > 4 ? rnd(2) : rnd(4);

	random_ws(b);
	if (k == 0) {
		put(b, scalars[rnd(sizeof(scalars) / sizeof(scalars[0]))]);
	} else if (k == 1) {
		random_string(b);
	} else {
		bool object = k == 3;
		int n = rnd(5);

		put(b, object ? "{" : "[");
		for (int i = 0; i < n; i++) {
			if (i)
				put(b, ",");
			if (object) {
				random_ws(b);
				random_string(b);
				random_ws(b);
				put(b, ":");
			}
			random_value(b, depth + 1);
		}
		random_ws(b);
		put(b, object ? "}" : "]");
	}
	random_ws(b);
}

static void test_random_documents_and_mutations(void **state)
{
	static const char special[] = "\"\\u{}[],:0123456789-+.eE \t\nDdcCfFtrnl\x00\x01\x1f\x7f"
				      "\x80\xbf\xc0\xc2\xdf\xe0\xed\xef\xf0\xf4\xf5\xff";
	struct buf b = { 0 }, m = { 0 };
	/* TS_JSON_ITERATIONS: more, for a longer hunt */
	int iterations = getenv("TS_JSON_ITERATIONS") ? atoi(getenv("TS_JSON_ITERATIONS")) : 20000;

	for (int iter = 0; iter < iterations; iter++) {
		buf__reset(&b);
		put(&b, rnd(2) ? "{" : "[");
		if (b.p[0] == '{') {
			random_string(&b);
			put(&b, ":");
		}
		random_value(&b, 1);
		put(&b, b.p[0] == '{' ? "}" : "]");
		check_one(b.p, b.len);
		for (int k = 0; k < 8; k++) {
			size_t at = rnd((uint32_t)b.len + 1);
			char c = special[rnd(sizeof(special) - 1)];

			buf__reset(&m);
			buf__add(&m, b.p, b.len, 1 << 20);
			switch (rnd(4)) {
			case 0: /* replace a byte */
				if (at < m.len)
					m.p[at] = c;
				break;
			case 1: /* insert one */
				buf__reset(&m);
				buf__add(&m, b.p, at, 1 << 20);
				buf__add(&m, &c, 1, 1 << 20);
				buf__add(&m, b.p + at, b.len - at, 1 << 20);
				break;
			case 2: /* delete one */
				if (at < m.len) {
					memmove(m.p + at, m.p + at + 1, m.len - at - 1);
					m.len--;
				}
				break;
			default: /* cut short */
				m.len = at;
				break;
			}
			check_one(m.p, m.len);
		}
	}
	buf__free(&b);
	buf__free(&m);
	/* both outcomes were exercised, many times */
	assert_true(accepted > (size_t)iterations);
	assert_true(refused > (size_t)iterations * 5 / 2);
	/* an input accepted once is answered from the kept document when parsed again (inputs
	 * that came up twice add more) */
	assert_true(recent.recent_hits >= accepted_small);
}

static void test_reading_values(void **state)
{
	const char *s = "{\"choices\":[{\"delta\":{\"content\":\"hi \\u00e9\"},\"index\":0},"
			"{\"delta\":{}}],\"usage\":{\"prompt_tokens\":12,\"prompt_tokens\":13},"
			"\"x\":-5e-1}";
	const struct jval *o = jdoc__parse(&doc, s, strlen(s)), *c, *e;
	size_t i, n = 0;

	assert_non_null(o);
	c = jv_get(o, "choices");
	assert_int_equal(jv_array_size(c), 2);
	jv_array_foreach(c, i, e) {
		assert_true(jv_is(e, J_OBJECT));
		n++;
	}
	assert_int_equal(n, 2);
	assert_string_equal(jv_str(jv_get(jv_get(c + 1, "delta"), "content")), "hi \xc3\xa9");
	assert_int_equal(jv_get(jv_get(o, "usage"), "prompt_tokens")->i, 13); /* the last one */
	assert_true(jv_get(o, "x")->d == -0.5);
	assert_null(jv_get(o, "missing"));
	assert_null(jv_get(c, "choices")); /* not an object */
	jv_array_foreach(jv_get(o, "usage"), i, e)
		fail(); /* not an array: no elements */
}

/* Kept documents are found by their whole bytes: inputs that differ in one byte, more of
 * them than there are kept documents, each read as its own, again and again. */
static void test_kept_documents(void **state)
{
	struct jdoc d = { 0 };
	char s[64];

	assert_true(jdoc__keep_recent(&d));
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 300; i++) {
			const struct jval *o;
			int n = snprintf(s, sizeof(s), "{\"choices\":[{\"delta\":{\"content\":\"%03d\"}}]}", i);

			o = jdoc__parse(&d, s, (size_t)n);
			assert_non_null(o);
			assert_int_equal(atoi(jv_str(jv_get(jv_get(jv_get(o, "choices") + 1, "delta"),
							    "content"))),
					 i);
		}
	}
	assert_true(d.recent_hits > 0 && d.recent_hits < 600); /* some were put out by others */
	/* a refusal is not kept: its reason again, then a success clears it */
	memset(s, '[', 40);
	assert_null(jdoc__parse(&d, s, 40));
	assert_false(d.too_deep);
	assert_null(jdoc__parse(&d, s, 40));
	assert_non_null(jdoc__parse(&d, "[1]", 3));
	assert_non_null(jdoc__parse(&d, "[1]", 3));
	assert_false(d.too_deep);
	jdoc__free(&d);
	assert_null(d.recent);
}

/* A large document's memory is given back at the next small one. */
static void test_large_then_small(void **state)
{
	size_t n = 0;
	char *big = malloc(200016);

	big[n++] = '[';
	while (n < 200000) {
		big[n++] = '0';
		big[n++] = ',';
	}
	big[n++] = '0';
	big[n++] = ']';
	assert_non_null(jdoc__parse(&doc, big, n));
	assert_true(doc.textcap > n && doc.vcap > n / 2);
	assert_non_null(jdoc__parse(&doc, "{\"a\":1}", 7));
	assert_true(doc.textcap <= 65536 && doc.vcap <= 65536);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edge_cases),
		cmocka_unit_test(test_depth_limit),
		cmocka_unit_test(test_reading_values),
		cmocka_unit_test(test_large_then_small),
		cmocka_unit_test(test_kept_documents),
		cmocka_unit_test(test_random_documents_and_mutations),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	jdoc__free(&doc);
	jdoc__free(&recent);
	return rc;
}
