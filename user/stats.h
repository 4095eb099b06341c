/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Exact percentiles over a growing sample (nearest-rank definition). */
#ifndef TS_STATS_H
#define TS_STATS_H

#include <stddef.h>
#include <stdint.h>

struct sample {
	double *v;
	size_t n, cap;
	int sorted;
};

int sample__add(struct sample *s, double v);
/* p in [0, 100]; NAN when empty. Nearest rank: the smallest value with at least p% of the
 * sample at or below it. */
double sample__pct(struct sample *s, double p);
double sample__max(struct sample *s);
void sample__free(struct sample *s);
/* The same over a plain array of nanosecond values (sorted in place), in milliseconds. */
double pct_ns_ms(uint64_t *v, size_t n, double p);

#endif
