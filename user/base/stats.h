/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Percentiles over a growing sample (nearest-rank definition): exact up to SAMPLE_MAX values,
 * then over a uniform reservoir of SAMPLE_MAX of them, so a long run's memory stays bounded.
 * The count and the maximum stay exact. */
#ifndef TS_STATS_H
#define TS_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SAMPLE_MAX 65536

struct sample {
	double *v;
	size_t n, cap; /* n: values kept (at most SAMPLE_MAX) */
	uint64_t seen; /* values added */
	double max;
	uint64_t rng;
	int sorted;
};

int sample__add(struct sample *s, double v);
/* p in [0, 100]; NAN when empty. Nearest rank: the smallest value with at least p% of the
 * sample at or below it. */
double sample__pct(struct sample *s, double p);
double sample__max(struct sample *s);
/* Values added (not only those kept). */
uint64_t sample__count(const struct sample *s);
void sample__free(struct sample *s);
/* Empty again, keeping its memory (a sample refilled once a refresh). */
void sample__clear(struct sample *s);
/* The summary's line for s (nothing when empty): label, count, p50, p90, p99, max. */
void sample__print(FILE *out, const char *label, struct sample *s);
/* Sort nanosecond values in place, once; then read any number of percentiles from them. */
void sort_ns(uint64_t *v, size_t n);
/* The k-th smallest of v[0..n) (k < n), found in place (v is reordered), in O(n): one value
 * where a sort would order all. */
uint64_t select_u64(uint64_t *v, size_t n, size_t k);
/* The p-th percentile of sorted nanosecond values, in milliseconds (NAN when n is 0). */
double pct_sorted_ns_ms(const uint64_t *sorted, size_t n, double p);

#endif
