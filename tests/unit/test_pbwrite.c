// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The protobuf writer (base/pbwrite.h) against bytes worked out from the encoding's rules
 * (protobuf.dev/programming-guides/encoding), and its refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/pbwrite.h"

static void test_scalars(void **state)
{
	struct pbw w = { 0 };
	/* field 1 varint 150: 08 96 01; field 2 fixed64 1: 11 01 00..; field 3 "hi": 1a 02 68 69 */
	static const uint8_t want[] = { 0x08, 0x96, 0x01, 0x11, 1, 0, 0, 0, 0, 0, 0, 0,
					0x1a, 0x02, 'h', 'i' };

	(void)state;
	pbw__uint(&w, 1, 150);
	pbw__fixed64(&w, 2, 1);
	pbw__string(&w, 3, "hi");
	assert_false(w.failed);
	assert_int_equal(w.b.len, sizeof(want));
	assert_memory_equal(w.b.p, want, sizeof(want));
	pbw__reset(&w);
	pbw__double(&w, 4, 1.0); /* 0x3ff0000000000000, little-endian */
	assert_int_equal(w.b.len, 9);
	assert_int_equal((uint8_t)w.b.p[0], 0x21);
	assert_int_equal((uint8_t)w.b.p[7], 0xf0);
	assert_int_equal((uint8_t)w.b.p[8], 0x3f);
	pbw__free(&w);
}

/* A nested message's length is a 4-byte varint, filled in at its end. */
static void test_nested(void **state)
{
	struct pbw w = { 0 };
	static const uint8_t want[] = { 0x0a, 0x88, 0x80, 0x80, 0x00, /* field 1, length 8 */
					0x12, 0x83, 0x80, 0x80, 0x00, /* field 2, length 3 */
					0x08, 0x96, 0x01 };

	(void)state;
	pbw__begin(&w, 1);
	pbw__begin(&w, 2);
	pbw__uint(&w, 1, 150);
	pbw__end(&w);
	pbw__end(&w);
	assert_false(w.failed);
	/* the outer length counts the inner message whole: its key, its length, its body */
	assert_int_equal(w.b.len, sizeof(want));
	assert_memory_equal(w.b.p, want, sizeof(want));
	pbw__free(&w);
}

/* Nested past its depth, or ended more than begun: failed, never a wrong message. */
static void test_refusals(void **state)
{
	struct pbw w = { 0 };

	(void)state;
	for (int i = 0; i <= PBW_MAX_DEPTH; i++)
		pbw__begin(&w, 1);
	assert_true(w.failed);
	pbw__reset(&w);
	assert_false(w.failed);
	pbw__end(&w);
	assert_true(w.failed);
	pbw__free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests_name("pbwrite", tests, NULL, NULL);
}
