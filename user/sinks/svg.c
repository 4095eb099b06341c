// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The report's SVG charts (sinks/svg.h). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "sinks/svg.h"

#define WIDTH 620
#define HEIGHT 250
#define LEFT 70	  /* room for the y ticks' labels and the y title */
#define RIGHT 130 /* room for the legend */
#define TOP 10
#define BOTTOM 45 /* room for the x ticks' labels and the x title */
#define TICKS_MAX 12

void svg__put(struct svg_chart *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf__vprintf(c->out, SIZE_MAX >> 1, fmt, ap);
	va_end(ap);
}

const char *svg__label(enum svg_unit unit, double v, char *out, size_t n)
{
	if (unit == SVG_MS && v >= 1000)
		snprintf(out, n, "%.3g s", v / 1000);
	else if (unit == SVG_MS)
		snprintf(out, n, "%.3g ms", v);
	else if (unit == SVG_PERCENT)
		snprintf(out, n, "%.0f%%", v);
	else
		snprintf(out, n, "%.6g", v);
	return out;
}

static double frac(const struct svg_axis *a, double v)
{
	double f;

	if (a->hi <= a->lo)
		return 0;
	f = a->log ? (log10(v > 0 ? v : a->lo) - log10(a->lo)) / (log10(a->hi) - log10(a->lo))
		   : (v - a->lo) / (a->hi - a->lo);
	return f < 0 ? 0 : f > 1 ? 1 : f;
}

double svg__x(const struct svg_chart *c, double v)
{
	return c->left + frac(&c->x, v) * (c->right - c->left);
}

double svg__y(const struct svg_chart *c, double v)
{
	return c->bottom - frac(&c->y, v) * (c->bottom - c->top);
}

/* Round values in [lo, hi]: on a log axis its decades, or 1-2-3-5 within them where fewer than
 * two decades fall inside; on a linear one steps of 1, 2 or 5 times a power of ten, about
 * four of them. The ends are ticks too where nothing round falls inside. */
static size_t ticks(const struct svg_axis *a, double *t)
{
	size_t n = 0;

	if (a->hi <= a->lo) {
		t[n++] = a->lo;
		return n;
	}
	if (a->log) {
		static const double steps[] = { 1, 2, 3, 5 };

		for (int d = (int)floor(log10(a->lo)); d <= (int)ceil(log10(a->hi)); d++) {
			double v = pow(10, d);

			if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9) && n < TICKS_MAX)
				t[n++] = v;
		}
		if (n < 2) {
			n = 0;
			for (int d = (int)floor(log10(a->lo)); d <= (int)ceil(log10(a->hi)); d++) {
				for (int s = 0; s < 4; s++) {
					double v = steps[s] * pow(10, d);

					if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9) &&
					    n < TICKS_MAX)
						t[n++] = v;
				}
			}
		}
	} else {
		double raw = (a->hi - a->lo) / 4, p = pow(10, floor(log10(raw))), step;

		step = raw / p < 1.5 ? p : raw / p < 3.5 ? 2 * p : raw / p < 7.5 ? 5 * p : 10 * p;
		if (a->unit == SVG_COUNT && step < 1) /* no half a request */
			step = 1;
		for (double v = ceil(a->lo / step) * step; v <= a->hi + step * 1e-9 && n < TICKS_MAX;
		     v += step)
			t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	}
	if (n < 2) {
		n = 0;
		t[n++] = a->lo;
		t[n++] = a->hi;
	}
	return n;
}

void svg__begin(struct svg_chart *c, struct buf *out, const char *id, const char *title,
		const char *measured, uint64_t count, const struct svg_axis *x,
		const struct svg_axis *y)
{
	*c = (struct svg_chart){ .out = out, .width = WIDTH, .height = HEIGHT, .left = LEFT,
				 .right = WIDTH - RIGHT, .top = TOP, .bottom = HEIGHT - BOTTOM,
				 .x = *x, .y = *y };
	svg__put(c, "<figure><figcaption><b>%s</b><br><span class=\"measured\">%s</span>"
		    "</figcaption><svg class=\"chart\" data-chart=\"%s\" data-count=\"%llu\" "
		    "viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\">",
		 title, measured, id, (unsigned long long)count, c->width, c->height, c->width,
		 c->height);
}

static void axis(struct svg_chart *c, const struct svg_axis *a, bool is_x)
{
	double t[TICKS_MAX];
	size_t n = ticks(a, t);
	char label[32];

	if (is_x)
		svg__put(c, "<g class=\"axis\" data-axis=\"x\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
			    "y2=\"%d\" stroke=\"#333\"/>",
			 c->left, c->bottom, c->right, c->bottom);
	else
		svg__put(c, "<g class=\"axis\" data-axis=\"y\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
			    "y2=\"%d\" stroke=\"#333\"/>",
			 c->left, c->top, c->left, c->bottom);
	for (size_t i = 0; i < n; i++) {
		svg__label(a->unit, t[i], label, sizeof(label));
		if (is_x)
			svg__put(c, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
				    "stroke=\"#333\"/><text class=\"tick\" data-tick=\"%g\" x=\"%.1f\" "
				    "y=\"%d\" text-anchor=\"middle\">%s</text>",
				 svg__x(c, t[i]), c->bottom, svg__x(c, t[i]), c->bottom + 4, t[i],
				 svg__x(c, t[i]), c->bottom + 15, label);
		else
			svg__put(c, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
				    "stroke=\"#333\"/><text class=\"tick\" data-tick=\"%g\" x=\"%d\" "
				    "y=\"%.1f\" text-anchor=\"end\">%s</text>",
				 c->left - 4, svg__y(c, t[i]), c->left, svg__y(c, t[i]), t[i],
				 c->left - 6, svg__y(c, t[i]) + 3, label);
	}
	if (is_x)
		svg__put(c, "<text class=\"axis-title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s"
			    "</text></g>",
			 (c->left + c->right) / 2, c->bottom + 33, a->title);
	else
		svg__put(c, "<text class=\"axis-title\" transform=\"rotate(-90)\" x=\"%d\" y=\"14\" "
			    "text-anchor=\"middle\">%s</text></g>",
			 -(c->top + c->bottom) / 2, a->title);
}

void svg__axes(struct svg_chart *c)
{
	if (c->x.title)
		axis(c, &c->x, true);
	if (c->y.title)
		axis(c, &c->y, false);
}

void svg__legend(struct svg_chart *c, int i, const char *colour, const char *name)
{
	svg__put(c, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text "
		    "x=\"%d\" y=\"%d\" class=\"tick\">%s</text>",
		 c->right + 14, c->top + 15 * i, colour, c->right + 29, c->top + 9 + 15 * i, name);
}

void svg__empty(struct svg_chart *c)
{
	svg__put(c, "<text x=\"%d\" y=\"%d\">none</text>", c->left, (c->top + c->bottom) / 2);
}

void svg__end(struct svg_chart *c)
{
	svg__put(c, "</svg></figure>");
}

void svg__histogram(struct buf *out, const struct svg_histogram *hs, const uint64_t *counts)
{
	uint64_t top = 1, total = 0;
	int lo = hs->nbuckets, hi = -1;
	struct svg_chart c;
	char ytitle[64];

	for (int b = 0; b < hs->nbuckets; b++) {
		uint64_t sum = 0;

		for (int s = 0; s < hs->nseries; s++)
			sum += counts[s * hs->nbuckets + b];
		if (sum) {
			lo = b < lo ? b : lo;
			hi = b;
		}
		top = sum > top ? sum : top;
		total += sum;
	}
	snprintf(ytitle, sizeof(ytitle), "%s per bucket", hs->what);
	svg__begin(&c, out, hs->id, hs->title, hs->measured, total,
		   &(struct svg_axis){ hi < 0 ? 1 : hs->bucket_low(lo),
				       hi < 0 ? 10 : hs->bucket_low(hi + 1), true, SVG_MS,
				       hs->xtitle },
		   &(struct svg_axis){ 0, (double)top, false, SVG_COUNT, ytitle });
	if (hi < 0) {
		svg__empty(&c);
		svg__end(&c);
		return;
	}
	for (int b = lo; b <= hi; b++) {
		double x = svg__x(&c, hs->bucket_low(b));
		double w = svg__x(&c, hs->bucket_low(b + 1)) - x - 1, base = 0;
		char t1[32], t2[32];

		for (int s = 0; s < hs->nseries; s++) {
			uint64_t n = counts[s * hs->nbuckets + b];
			double y0, y1;

			if (!n)
				continue;
			y0 = svg__y(&c, base);
			base += (double)n;
			y1 = svg__y(&c, base);
			svg__put(&c, "<rect data-series=\"%s\" data-count=\"%llu\" x=\"%.1f\" y=\"%.1f\" "
				     "width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s, %s to %s: "
				     "%llu %s</title></rect>",
				 hs->names[s], (unsigned long long)n, x, y1, w > 0 ? w : 0.5, y0 - y1,
				 hs->colours[s], hs->names[s],
				 svg__label(SVG_MS, hs->bucket_low(b), t1, sizeof(t1)),
				 svg__label(SVG_MS, hs->bucket_low(b + 1), t2, sizeof(t2)),
				 (unsigned long long)n, hs->what);
		}
	}
	for (int s = 0; hs->nseries > 1 && s < hs->nseries; s++)
		svg__legend(&c, s, hs->colours[s], hs->names[s]);
	svg__axes(&c);
	svg__end(&c);
}
