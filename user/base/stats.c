// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"

int sample__add(struct sample *s, double v)
{
	if (!s->seen++ || v > s->max)
		s->max = v;
	if (s->n == SAMPLE_MAX) {
		/* reservoir (Algorithm R): keep each value with probability SAMPLE_MAX / seen */
		uint64_t j;

		s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
		j = (s->rng >> 11) % s->seen;
		if (j < SAMPLE_MAX) {
			s->v[j] = v;
			s->sorted = 0;
		}
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		double *nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	s->sorted = 0;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static size_t rank_index(size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return k ? k - 1 : 0;
}

double sample__pct(struct sample *s, double p)
{
	if (!s->n)
		return NAN;
	if (!s->sorted) {
		qsort(s->v, s->n, sizeof(*s->v), cmp_double);
		s->sorted = 1;
	}
	return s->v[rank_index(s->n, p)];
}

double sample__max(struct sample *s)
{
	return s->seen ? s->max : NAN;
}

uint64_t sample__count(const struct sample *s)
{
	return s->seen;
}

void sample__free(struct sample *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

void sample__clear(struct sample *s)
{
	s->n = 0;
	s->seen = 0;
	s->max = 0;
	s->rng = 0;
	s->sorted = 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

void sort_ns(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t select_u64(uint64_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) { /* Hoare's partition around the middle value, then the side with k */
		uint64_t pivot = v[lo + (hi - lo) / 2], t;
		size_t i = lo, j = hi;

		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				if (!j--)
					break;
			}
		}
		if (k <= j && j != (size_t)-1)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

double pct_sorted_ns_ms(const uint64_t *sorted, size_t n, double p)
{
	return n ? (double)sorted[rank_index(n, p)] / 1e6 : NAN;
}

void sample__print(FILE *out, const char *label, struct sample *s)
{
	if (!sample__count(s))
		return;
	fprintf(out, "    %-15s n=%-6llu p50=%9.2f p90=%9.2f p99=%9.2f max=%9.2f\n", label,
		(unsigned long long)sample__count(s), sample__pct(s, 50), sample__pct(s, 90),
		sample__pct(s, 99), sample__max(s));
}
