// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report's breakdown charts: the TTFT split and the token gaps' causes, by
 * percentile band (html_state.h; docs/html-report.md). */
#include <math.h>
#include <stdlib.h>

#include "sinks/html_state.h"
#include "sinks/svg.h"

double html__y_ttft(const struct row *w)
{
	return w->ttft;
}

double html__y_tpot(const struct row *w)
{
	return w->tpot;
}

/* What a band chart splits: a row's sort key, and its components. */
struct split {
	const char *id, *title, *measured;
	double (*key)(const struct row *);
	const char *names[4], *colours[4];
	void (*parts)(const struct row *, double out[4]);
	int nparts;
	bool (*has)(const struct row *); /* the requests it splits */
};

/* A row with its sort key. */
struct keyed {
	double k;
	const struct row *w;
};

static int by_key(const void *a, const void *b)
{
	double x = ((const struct keyed *)a)->k, y = ((const struct keyed *)b)->k;

	return x < y ? -1 : x > y;
}

bool html__attributed(const struct row *w)
{
	return w->source != TTFT_NOT_ATTRIBUTED;
}

/* The steps' split: busy, idle, prefill, emit (an engine wire's says no busy or idle); an
 * engine wire's with the engine's events: front end, engine queue, prefill, emit. */
static bool split_by_steps(const struct row *w)
{
	return w->source == TTFT_STEPS;
}

static void ttft_parts(const struct row *w, double out[4])
{
	for (int i = 0; i < 4; i++)
		out[i] = w->parts[i].ms;
}

static void gap_parts(const struct row *w, double out[4])
{
	out[0] = w->decode - w->interference, out[1] = w->interference, out[2] = w->host;
	out[3] = 0;
}

static const struct split ttft_split = {
	"breakdown", "TTFT breakdown by percentile band of TTFT",
	"The requests the engine's steps split (an engine wire's split says no busy or idle), in "
	"four bands of their TTFT; a bar: the mean share of each "
	"phase in its requests' TTFT (docs/attribution.md).", html__y_ttft,
	{ "queue busy", "queue idle", "prefill", "emit" },
	{ "#d62728", "#ff9896", "#1f77b4", "#2ca02c" }, ttft_parts, 4, split_by_steps,
};
static bool split_by_wire(const struct row *w)
{
	return w->source == TTFT_WIRE_EVENTS;
}

static const struct split wire_split = {
	"wire_breakdown", "TTFT breakdown by percentile band of TTFT, the engine's own",
	"The requests an engine wire with the engine's events split, in four bands of their "
	"TTFT; a bar: the mean share of each phase in its requests' TTFT (docs/attribution.md).",
	html__y_ttft,
	{ "front end", "engine queue", "prefill", "emit" },
	{ "#9467bd", "#8c564b", "#1f77b4", "#2ca02c" }, ttft_parts, 4, split_by_wire,
};
static const struct split gap_split = {
	"gap_breakdown", "Token gaps' breakdown by percentile band of TPOT",
	"The attributed requests in four bands of their TPOT; a bar: the mean share of each "
	"cause in its requests' token gaps (docs/attribution.md).", html__y_tpot,
	{ "decode", "interference", "host" }, { "#1f77b4", "#d62728", "#bcbd22" }, gap_parts, 3,
	html__attributed,
};

/* The attributed requests in bands of the key (to p50, to p90, to p99, to the max): each
 * band's mean shares of the components, stacked. */
static void bands(struct html *h, const struct hgroup *g, const struct split *sp)
{
	static const double upto[] = { 50, 90, 99, 100 };
	static const char *const names[] = { "to p50", "p50-p90", "p90-p99", "p99-max" };
	struct keyed *v = malloc((g->nrows + 1) * sizeof(*v));
	struct svg_chart c;
	size_t n = 0, from = 0;

	for (size_t i = 0; v && i < g->nrows; i++) {
		if (sp->has(&g->rows[i]) && !isnan(sp->key(&g->rows[i])))
			v[n++] = (struct keyed){ sp->key(&g->rows[i]), &g->rows[i] };
	}
	if (!v || !n) {
		free(v);
		return;
	}
	qsort(v, n, sizeof(*v), by_key);
	svg__begin(&c, h->out, sp->id, sp->title, sp->measured, n,
		   &(struct svg_axis){ 0, 100, false, SVG_PERCENT, "mean share of the band's "
								 "requests (%)" },
		   &(struct svg_axis){ 0, 4, false, SVG_COUNT, NULL });
	for (int band = 0; band < 4; band++) {
		size_t to = (size_t)ceil(upto[band] / 100.0 * (double)n), k = 0;
		double share[4] = { 0 }, at = 0, y = c.top + 8 + 40 * band;
		const char *name = names[band];

		for (size_t i = from; i < to; i++, k++) {
			double part[4], total = 0;

			sp->parts(v[i].w, part);
			for (int p = 0; p < sp->nparts; p++)
				total += part[p] > 0 ? part[p] : 0;
			for (int p = 0; total > 0 && p < sp->nparts; p++)
				share[p] += (part[p] > 0 ? part[p] : 0) / total;
		}
		svg__put(&c, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s (%zu)"
			     "</text>",
			 c.left - 6, y + 14, name, k);
		for (int p = 0; p < sp->nparts && k; p++) {
			double x0 = svg__x(&c, at), x1;

			at += 100 * share[p] / (double)k;
			x1 = svg__x(&c, at);
			svg__put(&c, "<rect data-series=\"%s\" data-band=\"%d\" data-share=\"%.4f\" "
				     "x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\">"
				     "<title>%s, %zu requests: %s %.0f%%</title></rect>",
				 sp->names[p], band, share[p] / (double)k, x0, y, x1 - x0,
				 sp->colours[p], name, k, sp->names[p], 100 * share[p] / (double)k);
		}
		from = to;
	}
	for (int p = 0; p < sp->nparts; p++)
		svg__legend(&c, p, sp->colours[p], sp->names[p]);
	svg__axes(&c);
	svg__end(&c);
	free(v);
}

void html__bands(struct html *h, const struct hgroup *g)
{
	bands(h, g, &ttft_split);
	bands(h, g, &wire_split);
	bands(h, g, &gap_split);
}
