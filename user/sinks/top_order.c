// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE /* strcasestr, qsort_r */
/* `tokenscope top`'s windows and columns, and its rows in the order and selection its keys
 * ask for (top.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/dialect.h"
#include "sinks/top.h"

/* The windows and columns the keys choose: their lengths and names. */
uint64_t top_window__ns(enum top_window w)
{
	static const uint64_t ns[] = { 10ull * 1000000000ull, 60ull * 1000000000ull,
				       300ull * 1000000000ull, 0 };

	return ns[w];
}

const char *top_window__name(enum top_window w)
{
	static const char *const names[] = { "10s", "60s", "5min", "all" };

	return names[w];
}

const char *top_col__name(enum top_col c)
{
	static const char *const names[] = { "name", "done", "req/s", "flight", "ttft p50",
					     "ttft p90", "ttft p99", "tpot p50", "tpot p99",
					     "gap max", "hit%", "slo%", "good/s", "read" };

	return names[c];
}

/* A row's figure in column c (NAN sorts last). */
static double figure(const struct top_row *r, enum top_col c)
{
	switch (c) {
	case TOP_COL_DONE: return (double)r->done;
	case TOP_COL_RPS: return r->rps;
	case TOP_COL_FLIGHT: return (double)r->in_flight;
	case TOP_COL_TTFT50: return r->ttft[0];
	case TOP_COL_TTFT90: return r->ttft[1];
	case TOP_COL_TTFT99: return r->ttft[2];
	case TOP_COL_TPOT50: return r->tpot[0];
	case TOP_COL_TPOT99: return r->tpot[1];
	case TOP_COL_GAP: return r->gap_max;
	case TOP_COL_HIT: return r->hit_share;
	case TOP_COL_SLO: return r->slo_share;
	case TOP_COL_GOOD: return r->goodput;
	case TOP_COL_READ: return r->headroom;
	default: return NAN;
	}
}

struct sort_by {
	enum top_col col;
	bool reverse;
};

static int by_name(const struct top_row *a, const struct top_row *b)
{
	int c = strcmp(a->name, b->name);

	if (!c)
		c = (int)a->role - (int)b->role;
	if (!c)
		c = strcmp(api__name(a->api), api__name(b->api));
	return c ? c : strcmp(a->model, b->model);
}

static int by_col(const void *x, const void *y, void *ctx)
{
	const struct sort_by *by = ctx;
	const struct top_row *a = x, *b = y;
	double fa = figure(a, by->col), fb = figure(b, by->col);
	int c;

	if (by->col == TOP_COL_NAME)
		c = by_name(a, b);
	else if (isnan(fa) || isnan(fb))
		return isnan(fa) - isnan(fb); /* unknown figures last, either way */
	else
		c = fa > fb ? -1 : fa < fb; /* the largest first */
	if (by->reverse)
		c = -c;
	return c ? c : by_name(a, b);
}

void top_view__sort(struct top_view *v, enum top_col c, bool reverse)
{
	struct sort_by by = { c, reverse };

	if (v->nrows) /* rows may be NULL then */
		qsort_r(v->rows, v->nrows, sizeof(*v->rows), by_col, &by);
}

void top_view__filter(struct top_view *v, const char *text)
{
	size_t kept = 0;

	if (!text || !*text)
		return;
	for (size_t i = 0; i < v->nrows; i++) {
		const struct top_row *r = &v->rows[i];

		if (strcasestr(r->name, text) || strcasestr(role__name(r->role), text) ||
		    strcasestr(api__name(r->api), text) || strcasestr(r->model, text))
			v->rows[kept++] = *r;
	}
	v->nrows = kept;
}
