// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The reader's backlog (user/capture/backlog.c) between a ring laid out as the kernel lays it
 * out and a taker: every record comes out once, whole and in order, across chunks, with its
 * own thread draining while another writes the ring; past its cap it leaves records in the
 * ring, and its drained time does not claim them; a take stops at its mark. Ground truth: the
 * records written, each numbered and filled with a pattern of its number.
 */
#include <setjmp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <cmocka.h>

#include <linux/bpf.h>

#include "base/clock.h"
#include "capture/backlog.h"

#define RING (64u << 10)

struct fake {
	unsigned long cons, prod; /* cons: the reader's (atomic); prod: the writer's */
	uint8_t data[RING];
};

/* Record i: 8 + (i * 37) % 1500 bytes, its number first, then i's low byte over and over. */
static uint32_t rec_len(uint32_t i)
{
	return 8 + (i * 37) % 1500;
}

/* Write record i at the producer position, waiting for room, as bpf_ringbuf_reserve + submit
 * would (the space is the kernel's until the reader gives it back). */
static void produce(struct fake *f, uint32_t i)
{
	uint32_t len = rec_len(i);
	size_t need = (8 + len + 7) & ~7u, at;

	while (f->prod + need - __atomic_load_n(&f->cons, __ATOMIC_ACQUIRE) > RING)
		usleep(50);
	at = f->prod & (RING - 1);
	memcpy(f->data + at + 4, &(uint32_t){ 0 }, 4);
	for (uint32_t k = 0; k < len; k++)
		f->data[(at + 8 + k) & (RING - 1)] = k < 4 ? (uint8_t)(i >> (8 * k)) : (uint8_t)i;
	/* the header last, released: the record is committed */
	__atomic_store_n((uint32_t *)(f->data + at), len, __ATOMIC_RELEASE);
	__atomic_store_n(&f->prod, f->prod + need, __ATOMIC_RELEASE);
}

struct taken {
	uint32_t next; /* the number the next record must have */
	int bad;
};

static void check_record(void *ctx, void *data, size_t size)
{
	struct taken *t = ctx;
	const uint8_t *p = data;
	uint32_t i;

	memcpy(&i, p, 4);
	if (i != t->next || size != rec_len(i))
		t->bad++;
	for (size_t k = 4; k < size; k++)
		if (p[k] != (uint8_t)i) {
			t->bad++;
			break;
		}
	t->next = i + 1;
}

static void test_in_order_across_chunks(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct taken t = { 0 };
	struct ring r;
	struct backlog *b;
	uint32_t i = 0;

	assert_int_equal(ring__init_mem(&r, &f->cons, &f->prod, f->data, RING, 16384, NULL, NULL), 0);
	b = backlog__new(&r, 64u << 20);
	assert_non_null(b);
	/* 2 000 records (about 1.5 MB): several chunks' worth, drained in passes of a ring each */
	while (i < 2000) {
		while (i < 2000 && f->prod - f->cons + 8 + rec_len(i) + 8 <= RING)
			produce(f, i++);
		assert_true(backlog__pass(b) > 0);
	}
	assert_int_equal(f->cons, f->prod);
	assert_int_equal(backlog__take(b, NULL, check_record, &t), 2000);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.next, 2000);
	assert_true(backlog__peak(b) >= (1u << 20)); /* it held them all at once */
	assert_int_equal(backlog__take(b, NULL, check_record, &t), 0);
	backlog__free(b);
	ring__close(&r);
	free(f);
}

/* Past its cap the backlog leaves records in the ring (the kernel would then count what it
 * cannot write): they come later, none lost, none twice, and the drained time waits. */
static void test_full_leaves_records_in_the_ring(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct taken t = { 0 };
	struct ring r;
	struct backlog *b;
	uint64_t cut_began = 0;
	struct backlog_mark m;
	uint32_t i = 0;
	long n = 0;

	assert_int_equal(ring__init_mem(&r, &f->cons, &f->prod, f->data, RING, 16384, NULL, NULL), 0);
	b = backlog__new(&r, 0); /* the least: two chunks */
	assert_non_null(b);
	/* fill until a pass leaves records in the ring */
	do {
		while (f->prod - f->cons + 8 + rec_len(i) + 8 <= RING)
			produce(f, i++);
		cut_began = clock__now_ns();
		backlog__pass(b);
	} while (f->cons == f->prod);
	backlog__mark(b, &m);
	backlog__take(b, &m, check_record, &t);
	/* the pass cut short did not move the drained time: the ring holds records from before */
	assert_true(m.drained_ns < cut_began);
	assert_true(t.next < i);
	/* room again: the rest comes */
	while (f->cons != f->prod) {
		backlog__pass(b);
		backlog__mark(b, &m);
		n += backlog__take(b, &m, check_record, &t);
	}
	assert_true(n > 0);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.next, i);
	assert_true(m.drained_ns > cut_began);
	backlog__free(b);
	ring__close(&r);
	free(f);
}

/* A take stops at its mark: what was drained after the mark (the reader read the drop
 * counters in between) waits for the next take, across chunks, none lost, none twice. */
static void test_take_stops_at_its_mark(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct taken t = { 0 };
	struct backlog_mark m;
	struct ring r;
	struct backlog *b;
	uint32_t i = 0, marked = 0, before;

	assert_int_equal(ring__init_mem(&r, &f->cons, &f->prod, f->data, RING, 16384, NULL, NULL), 0);
	b = backlog__new(&r, 64u << 20);
	assert_non_null(b);
	for (int round = 0; round < 3; round++) {
		/* a chunk and more before the mark, then more after it */
		while (i < 500u * (round + 1)) {
			while (i < 500u * (round + 1) && f->prod - f->cons + 8 + rec_len(i) + 8 <= RING)
				produce(f, i++);
			backlog__pass(b);
		}
		backlog__mark(b, &m);
		marked = i;
		while (f->prod - f->cons + 8 + rec_len(i) + 8 <= RING)
			produce(f, i++);
		backlog__pass(b);
		assert_true(i > marked);
		before = t.next;
		assert_int_equal(backlog__take(b, &m, check_record, &t), marked - before);
		assert_int_equal(t.next, marked);
		assert_int_equal(backlog__take(b, &m, check_record, &t), 0); /* still at the mark */
	}
	assert_int_equal(backlog__take(b, NULL, check_record, &t), i - marked);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.next, i);
	backlog__free(b);
	ring__close(&r);
	free(f);
}

struct writer {
	struct fake *f;
	uint32_t count;
};

static void *write_all(void *arg)
{
	struct writer *w = arg;

	for (uint32_t i = 0; i < w->count; i++)
		produce(w->f, i);
	return NULL;
}

/* The thread drains while another thread writes and the taker takes: 30 000 records (about
 * 23 MB, 350 rings' worth), every one once and in order, with a small cap so that the
 * backlog fills and empties again. */
static void test_threads(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct writer w = { f, 30000 };
	struct taken t = { 0 };
	struct ring r;
	struct backlog *b;
	pthread_t writer;
	uint64_t deadline = clock__now_ns() + 60ull * 1000000000ull;

	assert_int_equal(ring__init_mem(&r, &f->cons, &f->prod, f->data, RING, 16384, NULL, NULL), 0);
	r.epoll_fd = epoll_create1(EPOLL_CLOEXEC); /* nothing in it: the thread passes every 1 ms */
	assert_true(r.epoll_fd >= 0);
	b = backlog__new(&r, 1u << 20);
	assert_non_null(b);
	assert_int_equal(backlog__start(b, 1, 1), 0);
	assert_int_equal(pthread_create(&writer, NULL, write_all, &w), 0);
	while (t.next < w.count && clock__now_ns() < deadline) {
		backlog__wait(b, 5);
		backlog__take(b, NULL, check_record, &t);
		if (t.next % 7 == 0)
			usleep(200); /* a slow taker now and then */
	}
	pthread_join(writer, NULL);
	backlog__stop(b);
	backlog__pass(b);
	backlog__take(b, NULL, check_record, &t);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.next, w.count);
	assert_int_equal(f->cons, f->prod);
	backlog__free(b);
	ring__close(&r);
	free(f);
}

/* The drain's wait: poll_ms while passes take records; after each that takes none, twice the
 * last, up to idle_ms; back to poll_ms at the first record. No back-off where idle_ms is not
 * above poll_ms. */
static void test_idle_back_off(void **state)
{
	static const int want[] = { 40, 80, 160, 160, 160 };
	int ms = 20;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ms = backlog__next_wait(ms, 0, 20, 160);
		assert_int_equal(ms, want[i]);
	}
	assert_int_equal(backlog__next_wait(ms, 3, 20, 160), 20);
	assert_int_equal(backlog__next_wait(20, 0, 20, 20), 20);
	assert_int_equal(backlog__next_wait(20, 0, 20, 50), 40);
	assert_int_equal(backlog__next_wait(40, 0, 20, 50), 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_across_chunks),
		cmocka_unit_test(test_full_leaves_records_in_the_ring),
		cmocka_unit_test(test_take_stops_at_its_mark),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_idle_back_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
