// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ring buffer reader against rings laid out here as the kernel lays them out
 * (kernel/bpf/ringbuf.c): 8-byte headers (length, busy and discard bits), records 8-byte
 * aligned, positions that only grow. Ground truth: the bytes written.
 */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <linux/bpf.h>

#include "capture/ring.h"

#define SIZE 64 /* the data area: a power of two */

struct fake {
	unsigned long cons, prod;
	uint8_t data[SIZE];
};

struct got {
	size_t readable; /* what the reader promises readable of a long wrapped record; 0: all */
	int room;	 /* records taken at most (0: any number); past it, left in the ring */
	int n;
	size_t size[8];
	uint8_t bytes[8][SIZE];
};

static int collect(void *ctx, const void *data, size_t size)
{
	struct got *g = ctx;

	if (g->room && g->n >= g->room)
		return 1;
	assert_true(g->n < 8);
	g->size[g->n] = size;
	if (g->readable && size > g->readable)
		size = g->readable;
	memcpy(g->bytes[g->n], data, size < SIZE ? size : SIZE);
	g->n++;
	return 0;
}

/* Write a record at the producer position, as bpf_ringbuf_reserve + submit do. */
static void produce(struct fake *f, const void *bytes, uint32_t len, uint32_t flags)
{
	size_t at = f->prod & (SIZE - 1);

	memcpy(f->data + at, &(uint32_t){ len | flags }, 4);
	memcpy(f->data + at + 4, &(uint32_t){ 0 }, 4);
	for (uint32_t i = 0; i < len; i++)
		f->data[(at + 8 + i) & (SIZE - 1)] = ((const uint8_t *)bytes)[i];
	f->prod += (8 + len + 7) & ~7u;
}

static void test_in_order_and_given_back(void **state)
{
	struct fake f = { 0 };
	struct got g = { 0 };
	struct ring r;

	assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, SIZE, SIZE, collect, &g), 0);
	assert_int_equal(ring__consume(&r), 0); /* empty */
	produce(&f, "hello", 5, 0);
	produce(&f, "dropped", 7, BPF_RINGBUF_DISCARD_BIT);
	produce(&f, "world!!!", 8, 0);
	assert_int_equal(ring__consume(&r), 2);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.size[0], 5);
	assert_memory_equal(g.bytes[0], "hello", 5);
	assert_int_equal(g.size[1], 8);
	assert_memory_equal(g.bytes[1], "world!!!", 8);
	assert_int_equal(f.cons, f.prod); /* all space given back, the discarded record's too */
	ring__close(&r);
}

static void test_stops_at_a_busy_record(void **state)
{
	struct fake f = { 0 };
	struct got g = { 0 };
	struct ring r;
	unsigned long busy_at;

	assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, SIZE, SIZE, collect, &g), 0);
	produce(&f, "a", 1, 0);
	busy_at = f.prod;
	produce(&f, "bb", 2, BPF_RINGBUF_BUSY_BIT); /* reserved, not yet submitted */
	produce(&f, "ccc", 3, 0);
	assert_int_equal(ring__consume(&r), 1);
	assert_int_equal(f.cons, busy_at); /* nothing past the busy one, nothing given back */
	/* submitted: the rest follows, in order */
	f.data[busy_at & (SIZE - 1)] = 2;
	memset(f.data + (busy_at & (SIZE - 1)) + 1, 0, 3);
	assert_int_equal(ring__consume(&r), 2);
	assert_int_equal(g.n, 3);
	assert_memory_equal(g.bytes[1], "bb", 2);
	assert_memory_equal(g.bytes[2], "ccc", 3);
	assert_int_equal(f.cons, f.prod);
	ring__close(&r);
}

/* Records across the end of the data area come out contiguous, whatever the split. */
static void test_wrapped_records(void **state)
{
	const char *text = "0123456789abcdefghijklmnopqrstuv"; /* 32 bytes */

	for (unsigned long start = 0; start < 2 * SIZE; start += 8) {
		for (uint32_t len = 1; len <= 32; len++) {
			struct fake f = { .cons = start, .prod = start };
			struct got g = { 0 };
			struct ring r;

			assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, SIZE, SIZE,
							collect, &g), 0);
			produce(&f, text, len, 0);
			produce(&f, "next", 4, 0);
			assert_int_equal(ring__consume(&r), 2);
			assert_int_equal(g.size[0], len);
			assert_memory_equal(g.bytes[0], text, len);
			assert_memory_equal(g.bytes[1], "next", 4);
			assert_int_equal(f.cons, f.prod);
			ring__close(&r);
		}
	}
}

/* A wrapped record longer than the reader's buffer: its full size, its first bytes. */
static void test_wrapped_beyond_the_buffer(void **state)
{
	const char *text = "0123456789abcdefghijklmnopqrstuv";
	struct fake f = { .cons = 48, .prod = 48 };
	struct got g = { .readable = 12 };
	struct ring r;

	assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, SIZE, 12, collect, &g), 0);
	produce(&f, text, 32, 0);
	assert_int_equal(ring__consume(&r), 1);
	assert_int_equal(g.size[0], 32);
	assert_memory_equal(g.bytes[0], text, 12);
	assert_int_equal(f.cons, f.prod);
	ring__close(&r);
}

/* A record the taker has no room for stays in the ring, and every one after it: the next
 * consume starts there. */
static void test_left_when_the_taker_is_full(void **state)
{
	struct fake f = { 0 };
	struct got g = { .room = 1 };
	struct ring r;
	unsigned long after_first;

	assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, SIZE, SIZE, collect, &g), 0);
	produce(&f, "first", 5, 0);
	after_first = f.prod;
	produce(&f, "second!", 7, 0);
	produce(&f, "third", 5, 0);
	assert_int_equal(ring__consume(&r), 1);
	assert_int_equal(f.cons, after_first); /* the second's space not given back */
	assert_int_equal(ring__consume(&r), 0);
	g.room = 0;
	assert_int_equal(ring__consume(&r), 2);
	assert_int_equal(g.n, 3);
	assert_memory_equal(g.bytes[1], "second!", 7);
	assert_memory_equal(g.bytes[2], "third", 5);
	assert_int_equal(f.cons, f.prod);
	ring__close(&r);
}

static void test_bad_size_refused(void **state)
{
	struct fake f = { 0 };
	struct ring r;

	assert_int_equal(ring__init_mem(&r, &f.cons, &f.prod, f.data, 48, 8, collect, NULL),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_and_given_back),
		cmocka_unit_test(test_stops_at_a_busy_record),
		cmocka_unit_test(test_wrapped_records),
		cmocka_unit_test(test_wrapped_beyond_the_buffer),
		cmocka_unit_test(test_left_when_the_taker_is_full),
		cmocka_unit_test(test_bad_size_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
