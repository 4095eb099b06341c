/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The reader of the BPF ring buffer (BPF_MAP_TYPE_RINGBUF), in place of libbpf's.
 *
 * libbpf maps the data area twice, back to back, so that a record that wraps around the end
 * reads as one piece; the kernel maps every page at mmap time, so the ring counts twice in
 * the tracer's RSS from the first second (128 MiB for the default 64 MiB ring). This reader
 * maps it once and copies the rare wrapped record into a buffer of its own. The protocol is
 * the kernel's (kernel/bpf/ringbuf.c): a consumer position the reader owns, a producer
 * position the kernel owns, each record an 8-byte header (length, busy and discard bits)
 * and its bytes, 8-byte aligned.
 */
#ifndef TS_RING_H
#define TS_RING_H

#include <stddef.h>
#include <stdint.h>

/* One committed record: its bytes, contiguous, valid until fn returns. 0: taken; nonzero:
 * left in the ring, with every record after it (the taker has no room now). */
typedef int (*ring_fn)(void *ctx, const void *data, size_t size);

struct ring {
	unsigned long *consumer_pos;	   /* the reader's page (writable) */
	const unsigned long *producer_pos; /* the kernel's page */
	const uint8_t *data;		   /* size bytes, mapped once */
	size_t size;			   /* a power of two */
	uint8_t *bounce;		   /* a wrapped record, made contiguous */
	size_t bounce_cap;
	ring_fn fn;
	void *ctx;
	/* live rings only */
	int epoll_fd;
	void *cons_map, *prod_map;
	size_t cons_len, prod_len;
};

/* Map the ring buffer map_fd whose data area is size bytes (its max_entries). Records longer
 * than bounce_cap that wrap are handed over cut to bounce_cap bytes, with their full size: fn
 * must not read past bounce_cap then (the largest record the probes write is smaller).
 * Returns 0, or -errno. */
int ring__open(struct ring *r, int map_fd, size_t size, size_t bounce_cap, ring_fn fn, void *ctx);
void ring__close(struct ring *r);

/* Hand every committed record to fn, in order, and give its space back to the kernel.
 * Stops at a record still being written, or one fn left. Returns the records taken. */
long ring__consume(struct ring *r);
/* Wait up to timeout_ms for the kernel's wake-up, then consume. Returns the records handed
 * over, or -errno (-EINTR when a signal came). */
long ring__poll(struct ring *r, int timeout_ms);

/* A ring over memory laid out by the caller, as the kernel would (tests). */
int ring__init_mem(struct ring *r, unsigned long *consumer_pos, const unsigned long *producer_pos,
		   const uint8_t *data, size_t size, size_t bounce_cap, ring_fn fn, void *ctx);

#endif
