/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The newest items of one size, oldest first, each starting with its end time (a uint64_t,
 * ns): at most max of them, and none that ended more than horizon_ns before the newest.
 * What is let go is counted, with the latest end among it, so that a window reaching past
 * the oldest kept item can say it is cut. `tokenscope top` keeps each group's requests and
 * each engine's steps so.
 */
#ifndef TS_RECENT_H
#define TS_RECENT_H

#include <stddef.h>
#include <stdint.h>

struct recent {
	void *v;
	size_t size, head, len, cap;
	size_t max;	     /* items kept at most */
	uint64_t horizon_ns; /* how far before the newest end an item may have ended */
	uint64_t dropped;    /* items let go (too old, or past max) */
	uint64_t dropped_ns; /* the latest end of those */
};

void recent__init(struct recent *r, size_t size, size_t max, uint64_t horizon_ns);
void recent__free(struct recent *r);
/* Room for one more (the caller fills it, its end first), the oldest let go when max are
 * kept; NULL without memory. */
void *recent__push(struct recent *r);
/* Items that ended more than horizon_ns before newest_ns are let go. */
void recent__expire(struct recent *r, uint64_t newest_ns);
/* The i-th newest item (0: the newest), i < len. */
void *recent__newest(const struct recent *r, size_t i);

#endif
