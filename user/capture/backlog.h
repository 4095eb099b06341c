/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The reader's backlog: a thread of its own drains the kernel's ring buffer as soon as the
 * ring wakes it and keeps the records here, in order, until the pipeline takes them.
 *
 * Why a thread: the ring can then stay small. A probe writes each record into the ring's next
 * bytes, and in a ring of 64 MiB those bytes were last touched 64 MiB of records ago, long
 * out of every cache: each record's lines missed (about 300 ns of a captured plaintext call
 * here, docs/performance.md). A ring of a few MiB stays in cache; what a burst brings faster
 * than the pipeline handles waits here instead, in chunks that are given back once read.
 *
 * Nothing is lost silently: past its cap the backlog takes no more, the thread stops draining,
 * the ring fills, and the probes count what they could not write (TS_CNT_DROPS).
 *
 * One thread fills (backlog__start's), one takes (the caller's): a queue of chunks, each filled
 * at its end and published by its length (release), read up to that length (acquire).
 */
#ifndef TS_BACKLOG_H
#define TS_BACKLOG_H

#include <stddef.h>
#include <stdint.h>

#include "capture/ring.h"

struct backlog;

/* What takes the records: one at a time, in the order the ring held them. A record is in the
 * backlog's own memory, 8-byte aligned: the taker may change its size bytes in place (mask
 * them) until it returns, and not a byte past them. */
typedef void (*backlog_fn)(void *ctx, void *data, size_t size);

/* A backlog of at most cap bytes for ring r's records (not started: backlog__pass fills it in
 * the caller's thread). NULL when out of memory. */
struct backlog *backlog__new(struct ring *r, size_t cap);
/* The thread that drains r whenever its ring wakes it, and at least every poll_ms while
 * records come; after each pass that took none, its wait doubles, up to idle_ms (an idle
 * tracer wakes a few times a second, not fifty; idle_ms <= poll_ms: always poll_ms). 0, or
 * -errno. */
int backlog__start(struct backlog *b, int poll_ms, int idle_ms);
/* The thread's next wait after a pass that took `took` records, having waited ms. */
int backlog__next_wait(int ms, long took, int poll_ms, int idle_ms);
/* Stop the thread (and wait for it): the caller owns the ring again. */
void backlog__stop(struct backlog *b);
void backlog__free(struct backlog *b);

/* One pass over the ring: every committed record it can take, appended. Returns the records
 * taken (the thread's step; after backlog__stop, the caller's). */
long backlog__pass(struct backlog *b);

/* Wait up to timeout_ms for records the thread has drained (-EINTR: a signal came). Returns 1
 * when some may be waiting, 0 when none came, or -errno. */
int backlog__wait(struct backlog *b, int timeout_ms);
/* Where the backlog stands: the records drained so far, and when the last pass whose records
 * are among them began (CLOCK_MONOTONIC): every record committed before then is among them. */
struct backlog_mark {
	uint64_t records;
	uint64_t drained_ns;
};

void backlog__mark(struct backlog *b, struct backlog_mark *m);
/* Hand the records drained up to mark upto (NULL: every one so far) to fn, in order, and give
 * their memory back. What came after the mark waits for the next take: so a reader that reads
 * the drop counters between the mark and the take knows of every drop that came before the
 * records it hands over (capture/live.c). Returns the records handed over. */
long backlog__take(struct backlog *b, const struct backlog_mark *upto, backlog_fn fn, void *ctx);

/* What the backlog held at most, in bytes of chunks (a burst's depth): read once the thread
 * is stopped. */
size_t backlog__peak(const struct backlog *b);

#endif
