/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The HTML report's charts (sinks/html.c) as SVG: a figure with its title and what was
 * measured, a plot area with both axes (a line, ticks at round values with their labels, a
 * title with the unit), and the marks the caller draws in it through the axes' scales. Every
 * mark carries a tooltip (<title>); the report has no script.
 */
#ifndef TS_SVG_H
#define TS_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

enum svg_unit {
	SVG_MS,	     /* a time in ms: labels "250 ms", "1.5 s" */
	SVG_COUNT,   /* how many */
	SVG_PERCENT, /* 0 to 100 */
};

struct svg_axis {
	double lo, hi;	   /* what the axis spans (log: lo > 0) */
	bool log;	   /* log10 scale */
	enum svg_unit unit;
	const char *title; /* with its unit, "TTFT (ms, log scale)"; NULL: the axis is not drawn */
};

struct svg_chart {
	struct buf *out;
	int width, height;		 /* the whole picture */
	int left, right, top, bottom;	 /* the plot area's edges */
	struct svg_axis x, y;
};

/* A figure: title and what was measured above it (both HTML-safe already), then an <svg> of
 * class "chart" with data-chart id and data-count count. x and y are the axes; a categorical
 * y (bands) has y.title NULL. */
void svg__begin(struct svg_chart *c, struct buf *out, const char *id, const char *title,
		const char *measured, uint64_t count, const struct svg_axis *x,
		const struct svg_axis *y);
/* The axes, their ticks and titles (after the marks, so that they are drawn on top). */
void svg__axes(struct svg_chart *c);
/* A legend entry in the right margin (i: its row). */
void svg__legend(struct svg_chart *c, int i, const char *colour, const char *name);
/* "none" in an empty chart. */
void svg__empty(struct svg_chart *c);
void svg__end(struct svg_chart *c);

/* Where v falls on each axis (pixels; clamped to the plot area). */
double svg__x(const struct svg_chart *c, double v);
double svg__y(const struct svg_chart *c, double v);

/* A histogram of times on log buckets (bucket b spans [bucket_low(b), bucket_low(b + 1)) ms),
 * series stacked per bucket: counts[series * nbuckets + bucket]. what: the noun its counts
 * count ("requests", "gaps", "steps"), in the y title and the tooltips. */
struct svg_histogram {
	const char *id, *title, *measured, *xtitle, *what;
	int nseries;
	const char *const *names, *const *colours;
	int nbuckets;
	double (*bucket_low)(int b);
};

void svg__histogram(struct buf *out, const struct svg_histogram *hs, const uint64_t *counts);

/* v as an axis of that unit labels it. */
const char *svg__label(enum svg_unit unit, double v, char *out, size_t n);
/* Append to the chart, printf-style. */
void svg__put(struct svg_chart *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
