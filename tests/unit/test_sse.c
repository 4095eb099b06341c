// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* SSE grammar and NDJSON framing, fed whole, at every split point and byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/sse.h"

struct events {
	char text[4096]; /* "event|data|ts;" per dispatch ("event|data;" without times) */
	bool no_times;
};

static void on_event(void *ctx, const char *event, const char *data, size_t len, uint64_t ts)
{
	struct events *e = ctx;
	char one[1024];

	assert_int_equal(strlen(data), len);
	if (e->no_times)
		snprintf(one, sizeof(one), "%s|%s;", event, data);
	else
		snprintf(one, sizeof(one), "%s|%s|%llu;", event, data, (unsigned long long)ts);
	assert_true(strlen(e->text) + strlen(one) < sizeof(e->text));
	strcat(e->text, one);
}

/* Parse input split at byte k (k = 0: whole; k = SIZE_MAX: byte by byte); the first piece
 * has time 1, the rest time 2. */
static void parse(bool ndjson, const char *in, size_t len, size_t k, struct events *out)
{
	struct sse_parser *p = sse_parser__new(ndjson, on_event, out);
	bool no_times = out->no_times;

	memset(out, 0, sizeof(*out));
	out->no_times = no_times;
	if (k == SIZE_MAX) {
		for (size_t i = 0; i < len; i++)
			assert_int_equal(sse_parser__feed(p, (const uint8_t *)in + i, 1, i ? 2 : 1), 0);
	} else if (k && k < len) {
		assert_int_equal(sse_parser__feed(p, (const uint8_t *)in, k, 1), 0);
		assert_int_equal(sse_parser__feed(p, (const uint8_t *)in + k, len - k, 2), 0);
	} else {
		assert_int_equal(sse_parser__feed(p, (const uint8_t *)in, len, 1), 0);
	}
	sse_parser__finish(p, 3);
	sse_parser__free(p);
}

/* Events and data must not depend on where the input was split (times may). */
static void check(bool ndjson, const char *in, size_t len, const char *want)
{
	struct events e = { .no_times = true };

	parse(ndjson, in, len, 0, &e);
	assert_string_equal(e.text, want);
	for (size_t k = 1; k <= len; k++) {
		parse(ndjson, in, len, k == len ? SIZE_MAX : k, &e);
		if (strcmp(e.text, want))
			fail_msg("split at %zu: got '%s' want '%s'", k, e.text, want);
	}
}

static void test_line_endings_and_fields(void **state)
{
	static const char in[] = "\xef\xbb\xbf"
				 ": comment\r\n"
				 "event: a\r\ndata: one\r\n\r\n"
				 "data:two\rdata:  three\r\r"
				 "data\n\n"
				 "id: 7\nretry: 10\nunknown: x\ndata: four\n\n"
				 "event: b\n\n"
				 "data: tail-without-blank-line";

	check(false, in, sizeof(in) - 1,
	      "a|one;"
	      "|two\n three;"
	      "|;"
	      "|four;");
}

static void test_times_are_those_of_the_completing_bytes(void **state)
{
	static const char in[] = "data: x\n\n";
	struct events e = { 0 };

	/* split after "data: x\n": the blank line that dispatches arrives at time 2 */
	parse(false, in, sizeof(in) - 1, 8, &e);
	assert_string_equal(e.text, "|x|2;");
	/* a CRLF split between its CR and LF is one line end, not two */
	parse(false, "data: y\r\n\r\n", 11, 8, &e);
	assert_string_equal(e.text, "|y|2;");
	parse(false, "data: y\r\n\r\n", 11, 9, &e);
	assert_string_equal(e.text, "|y|2;");
}

static void test_ndjson(void **state)
{
	static const char in[] = "{\"a\":1}\n\n{\"b\":2}\r\n  \n{\"c\":3}";

	check(true, in, sizeof(in) - 1, "|{\"a\":1};|{\"b\":2};|{\"c\":3};");
}

static void test_oversized_event(void **state)
{
	struct events e = { 0 };
	struct sse_parser *p = sse_parser__new(false, on_event, &e);
	size_t n = 5u << 20;
	char *big = malloc(n);

	memset(big, 'a', n);
	memcpy(big, "data: ", 6);
	assert_int_equal(sse_parser__feed(p, (const uint8_t *)big, n, 1), -1);
	assert_int_equal(sse_parser__feed(p, (const uint8_t *)"\n\n", 2, 1), -1);
	assert_string_equal(e.text, "");
	free(big);
	sse_parser__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_endings_and_fields),
		cmocka_unit_test(test_times_are_those_of_the_completing_bytes),
		cmocka_unit_test(test_ndjson),
		cmocka_unit_test(test_oversized_event),
	};

	return cmocka_run_group_tests_name("sse", tests, NULL, NULL);
}
