// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report (html.h; docs/html-report.md). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "base/stats.h"
#include "base/text.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "engine/cuda_steps.h"
#include "engine/llama_models.h"
#include "sinks/html.h"
#include "sinks/html_text.h"
#include "sinks/svg.h"

#define ROWS_MAX 100000 /* requests kept for the charts and tables; more are counted */
#define SLOWEST 20
#define NBUCKETS 36	/* log buckets: 6 per decade from 0.01 ms to 10^4 s */
#define BUCKET_MIN_MS 0.01
#define PER_DECADE 6

/* One finished request, as much as the page shows of it. */
struct row {
	uint64_t id, start, first, end;
	double ttft, tpot, worst_gap; /* ms; NAN when none */
	int64_t prompt;		      /* input tokens, -1 unknown */
	int cache;		      /* 1 hit, 0 miss, -1 unknown */
	enum ttft_source source; /* the TTFT split's (llm/attribution.h); NOT_ATTRIBUTED: none */
	struct {
		const char *name;
		double ms;
	} parts[TTFT_PARTS_MAX]; /* the split's; by the steps: busy, idle, prefill, emit */
	int nparts;
	double decode, host, interference; /* ms */
	uint64_t interfered_by[4];
	uint32_t ninterfered, concurrency;
	const struct hgroup *g;
};

struct hgroup {
	struct request_group key; /* first: llm/group.h keeps the table */
	struct row *rows;
	size_t nrows, caprows;
	uint64_t gaps[NBUCKETS], ngaps;
	struct sample gap_ms;
};

/* One step stream: a process's CUDA stream, a llama.cpp context. */
struct hsteps {
	uint32_t pid;
	char comm[TS_COMM_LEN];
	char model[LLAMA_MODEL_NAME_MAX]; /* a llama.cpp context's model, where known */
	bool cuda;
	uint64_t stream, n, failed, busy_ns, first_ns, last_ns;
	uint64_t hist[STEP_KIND__N][NBUCKETS];
	struct sample ms[STEP_KIND__N];
	struct hsteps *next;
};

struct html {
	struct request_groups groups; /* struct hgroup */
	struct hsteps *steps;
	uint64_t requests, not_kept;
	struct buf *out;
	bool oom;
	const char *path; /* written there at the end (NULL: none) */
};

struct html *html__new(const char *path)
{
	struct html *h = calloc(1, sizeof(struct html));

	if (h) {
		request_groups__init(&h->groups, sizeof(struct hgroup));
		h->path = path;
	}
	return h;
}

static void group_free(void *group)
{
	struct hgroup *g = group;

	free(g->rows);
	sample__free(&g->gap_ms);
}

void html__free(struct html *h)
{
	if (!h)
		return;
	request_groups__free(&h->groups, group_free);
	while (h->steps) {
		struct hsteps *s = h->steps;

		h->steps = s->next;
		for (int k = 0; k < STEP_KIND__N; k++)
			sample__free(&s->ms[k]);
		free(s);
	}
	free(h);
}

static int bucket_of(double ms)
{
	int b = ms > BUCKET_MIN_MS ? (int)floor(log10(ms / BUCKET_MIN_MS) * PER_DECADE) : 0;

	return b < 0 ? 0 : b >= NBUCKETS ? NBUCKETS - 1 : b;
}

static double bucket_low(int b)
{
	return BUCKET_MIN_MS * pow(10.0, (double)b / PER_DECADE);
}

/* ---- what is kept ---- */

static void attribution_of(struct row *w, const struct attribution *a)
{
	struct ttft_split sp;

	attribution__ttft_split(a, &sp);
	w->source = sp.source;
	for (size_t i = 0; i < sp.nparts; i++) {
		w->parts[i].name = sp.parts[i].name;
		w->parts[i].ms = (double)sp.parts[i].ns / 1e6;
	}
	w->nparts = (int)sp.nparts;
	w->decode = (double)a->decode_ns / 1e6;
	w->host = (double)a->host_ns / 1e6;
	w->interference = (double)a->interference_ns / 1e6;
	for (size_t i = 0; i < a->ninterfered_by && w->ninterfered < 4; i++)
		w->interfered_by[w->ninterfered++] = a->interfered_by[i];
}

void html__request(struct html *h, const struct request *r, const struct request_metrics *m)
{
	struct hgroup *g = request_groups__of(&h->groups, r);
	struct row *w;

	h->requests++;
	if (!g || h->requests > ROWS_MAX ||
	    !array__reserve((void **)&g->rows, &g->caprows, g->nrows + 1, sizeof(*g->rows))) {
		h->not_kept++;
		return;
	}
	w = &g->rows[g->nrows++];
	*w = (struct row){ .id = r->id, .start = r->start_ns, .first = r->first_token_ns,
			   .end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns,
			   .ttft = m->ttft_ms, .tpot = m->tpot_ms, .worst_gap = m->itl_max_ms,
			   .prompt = r->input_tokens.set ? (int64_t)r->input_tokens.v : -1,
			   .cache = m->cache_hit, .g = g };
	if (r->attr && r->attr->ok)
		attribution_of(w, r->attr);
	if (r->lossy)
		return;
	for (uint64_t i = 0; i + 1 < r->token_events; i++) {
		double ms = (double)r->gaps_ns[i] / 1e6;

		g->gaps[bucket_of(ms)]++;
		g->ngaps++;
		sample__add(&g->gap_ms, ms);
	}
}

void html__step(struct html *h, const struct engine_step *s)
{
	uint64_t stream = s->cuda ? s->cuda->stream : s->context;
	struct hsteps **link = &h->steps, *st;
	double ms = (double)(s->end_ns - s->start_ns) / 1e6;
	enum step_kind k = s->cuda ? STEP_KIND_UNKNOWN : step__kind(s);

	for (; *link; link = &(*link)->next) {
		if ((*link)->pid == s->pid && (*link)->stream == stream && (*link)->cuda == !!s->cuda)
			break;
	}
	st = *link;
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return;
		st->pid = s->pid;
		st->stream = stream;
		st->cuda = s->cuda != NULL;
		memcpy(st->comm, s->comm, sizeof(st->comm));
		st->first_ns = s->start_ns;
		*link = st;
	}
	if (s->model && !st->model[0])
		snprintf(st->model, sizeof(st->model), "%s", s->model);
	st->n++;
	if (s->end_ns > st->last_ns)
		st->last_ns = s->end_ns;
	if (s->failed) {
		st->failed++;
		return;
	}
	st->busy_ns += s->end_ns - s->start_ns;
	st->hist[k][bucket_of(ms)]++;
	sample__add(&st->ms[k], ms);
}

/* ---- writing ---- */

static void put(struct html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct html *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (buf__vprintf(h->out, SIZE_MAX >> 1, fmt, ap))
		h->oom = true;
	va_end(ap);
}

static void stat_cells(struct html *h, struct sample *s)
{
	char t[32];

	put(h, "<td data-value=\"%llu\">%llu</td>", (unsigned long long)sample__count(s),
	    (unsigned long long)sample__count(s));
	for (int i = 0; i < 4; i++) {
		static const double p[] = { 50, 90, 99, 100 };
		double v = sample__count(s) ? (i < 3 ? sample__pct(s, p[i]) : sample__max(s)) : NAN;

		put(h, "<td data-value=\"%.6f\">%s</td>", isnan(v) ? 0.0 : v, html_text__when(v, t, sizeof(t)));
	}
}

/* A histogram of times on the log buckets (svg.h). */
static void histogram(struct html *h, struct svg_histogram hs, uint64_t counts[][NBUCKETS])
{
	hs.nbuckets = NBUCKETS;
	hs.bucket_low = bucket_low;
	svg__histogram(h->out, &hs, &counts[0][0]);
}

/* A scatter plot, linear x from 0, log y: (x, y) of each row that has both. */
struct scatter {
	const char *id, *title, *measured, *xtitle, *xname, *ytitle, *yname;
	double (*x)(const struct row *);
	double (*y)(const struct row *);
};

static void scatter(struct html *h, const struct hgroup *g, const struct scatter *sc)
{
	double xmax = 1, ymin = INFINITY, ymax = 0;
	struct svg_chart c;
	size_t n = 0;

	for (size_t i = 0; i < g->nrows; i++) {
		double x = sc->x(&g->rows[i]), y = sc->y(&g->rows[i]);

		if (isnan(x) || isnan(y) || y <= 0)
			continue;
		n++;
		xmax = x > xmax ? x : xmax;
		ymin = y < ymin ? y : ymin;
		ymax = y > ymax ? y : ymax;
	}
	if (!n)
		ymin = 1, ymax = 10;
	if (ymax <= ymin)
		ymax = ymin * 10;
	svg__begin(&c, h->out, sc->id, sc->title, sc->measured, n,
		   &(struct svg_axis){ 0, xmax, false, SVG_COUNT, sc->xtitle },
		   &(struct svg_axis){ ymin, ymax, true, SVG_MS, sc->ytitle });
	if (!n) {
		svg__empty(&c);
		svg__end(&c);
		return;
	}
	for (size_t i = 0; i < g->nrows; i++) {
		const struct row *w = &g->rows[i];
		double x = sc->x(w), y = sc->y(w);
		char t[32];

		if (isnan(x) || isnan(y) || y <= 0)
			continue;
		svg__put(&c, "<circle data-point=\"1\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>request "
			     "%llu: %.0f %s, %s %s</title></circle>",
			 svg__x(&c, x), svg__y(&c, y), (unsigned long long)w->id, x, sc->xname,
			 sc->yname, svg__label(SVG_MS, y, t, sizeof(t)));
	}
	svg__axes(&c);
	svg__end(&c);
}

static double x_prompt(const struct row *w)
{
	return w->prompt >= 0 ? (double)w->prompt : NAN;
}

static double y_ttft(const struct row *w)
{
	return w->ttft;
}

static double x_concurrency(const struct row *w)
{
	return (double)w->concurrency;
}

static double y_tpot(const struct row *w)
{
	return w->tpot;
}

static int by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Requests of the group in flight when each produced its first token (itself included). */
static void concurrency(struct hgroup *g)
{
	uint64_t *starts = malloc((g->nrows + 1) * sizeof(*starts));
	uint64_t *ends = malloc((g->nrows + 1) * sizeof(*ends));

	if (starts && ends) {
		for (size_t i = 0; i < g->nrows; i++) {
			starts[i] = g->rows[i].start;
			ends[i] = g->rows[i].end;
		}
		qsort(starts, g->nrows, sizeof(*starts), by_u64);
		qsort(ends, g->nrows, sizeof(*ends), by_u64);
		for (size_t i = 0; i < g->nrows; i++) {
			uint64_t t = g->rows[i].first ? g->rows[i].first : g->rows[i].start;
			size_t a = 0, b = 0, lo = 0, hi = g->nrows;

			while (lo < hi) { /* starts at or before t */
				size_t mid = (lo + hi) / 2;

				if (starts[mid] <= t)
					lo = mid + 1;
				else
					hi = mid;
			}
			a = lo;
			lo = 0, hi = g->nrows;
			while (lo < hi) { /* ends before t */
				size_t mid = (lo + hi) / 2;

				if (ends[mid] < t)
					lo = mid + 1;
				else
					hi = mid;
			}
			b = lo;
			g->rows[i].concurrency = (uint32_t)(a - b);
		}
	}
	free(starts);
	free(ends);
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

static bool attributed_row(const struct row *w)
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
	"phase in its requests' TTFT (docs/attribution.md).", y_ttft,
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
	y_ttft,
	{ "front end", "engine queue", "prefill", "emit" },
	{ "#9467bd", "#8c564b", "#1f77b4", "#2ca02c" }, ttft_parts, 4, split_by_wire,
};
static const struct split gap_split = {
	"gap_breakdown", "Token gaps' breakdown by percentile band of TPOT",
	"The attributed requests in four bands of their TPOT; a bar: the mean share of each "
	"cause in its requests' token gaps (docs/attribution.md).", y_tpot,
	{ "decode", "interference", "host" }, { "#1f77b4", "#d62728", "#bcbd22" }, gap_parts, 3,
	attributed_row,
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

static void group_section(struct html *h, struct hgroup *g, int index)
{
	static const char *const cache_names[] = { "cache hit", "cache miss", "cache unknown" };
	static const char *const cache_colours[] = { "#2ca02c", "#1f77b4", "#999999" };
	static const char *const one_name[] = { "requests" };
	static const char *const one_colour[] = { "#1f77b4" };
	static const char *const gap_name[] = { "gaps" };
	bool client = g->key.role == ROLE_CLIENT;
	const char *ttft_measured = client ? "Each request's time from writing its request to "
					     "reading its first content token (not the first "
					     "byte), as this client saw it."
					   : "Each request's time from reading its request to "
					     "writing its first content token (not the first "
					     "byte), as this server saw it.";
	const char *tpot_measured = "Each request's time per output token after the first: "
				    "(last token event - first) / (output tokens - 1).";
	const char *gap_measured = "Every gap between two token events of a request (each "
				   "request's inter-token latencies, all of them).";
	uint64_t ttft[3][NBUCKETS] = { { 0 } }, tpot[1][NBUCKETS] = { { 0 } };
	struct sample s_ttft = { 0 }, s_tpot = { 0 };
	char comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6], model[TEXT_SAFE_MAX(REQ_MODEL_MAX) * 6];
	char pod[TEXT_SAFE_MAX(144) * 6];
	uint64_t attributed = 0;

	concurrency(g);
	for (size_t i = 0; i < g->nrows; i++) {
		const struct row *w = &g->rows[i];

		if (!isnan(w->ttft)) {
			ttft[w->cache > 0 ? 0 : w->cache == 0 ? 1 : 2][bucket_of(w->ttft)]++;
			sample__add(&s_ttft, w->ttft);
		}
		if (!isnan(w->tpot)) {
			tpot[0][bucket_of(w->tpot)]++;
			sample__add(&s_tpot, w->tpot);
		}
		attributed += attributed_row(w);
	}
	put(h, "<section class=\"group\" id=\"group-%d\" data-comm=\"%s\" data-role=\"%s\" "
	       "data-api=\"%s\" data-model=\"%s\" data-pod=\"%s\" data-requests=\"%zu\">"
	       "<h2>%s %s %s %s%s%s</h2>",
	    index, html_text__esc(g->key.comm, comm, sizeof(comm)), role__name(g->key.role),
	    api__name(g->key.api), html_text__esc(g->key.model, model, sizeof(model)),
	    html_text__esc(g->key.pod, pod, sizeof(pod)), g->nrows, comm, role__name(g->key.role),
	    api__name(g->key.api), *g->key.model ? model : "-", *g->key.pod ? " pod " : "", pod);
	put(h, "<table class=\"stats\"><tr><th></th><th>n</th><th>p50</th><th>p90</th><th>p99</th>"
	       "<th>max</th></tr><tr data-stat=\"ttft\"><th>TTFT</th>");
	stat_cells(h, &s_ttft);
	put(h, "</tr><tr data-stat=\"tpot\"><th>TPOT</th>");
	stat_cells(h, &s_tpot);
	put(h, "</tr><tr data-stat=\"gap\"><th>token gap</th>");
	stat_cells(h, &g->gap_ms);
	put(h, "</tr></table>");
	histogram(h, (struct svg_histogram){ "ttft", "TTFT, by prompt-cache hit", ttft_measured,
					  "TTFT (ms, log scale)", "requests", 3, cache_names,
					  cache_colours },
		  ttft);
	histogram(h, (struct svg_histogram){ "tpot", "TPOT", tpot_measured, "TPOT (ms, log scale)",
					  "requests", 1, one_name, one_colour },
		  tpot);
	histogram(h, (struct svg_histogram){ "gaps", "Token gaps", gap_measured,
					  "gap between token events (ms, log scale)", "gaps", 1,
					  gap_name, one_colour },
		  (uint64_t(*)[NBUCKETS])g->gaps);
	scatter(h, g, &(struct scatter){ "ttft_prompt", "TTFT against prompt length",
					 "Each request with a prompt length (its usage's input "
					 "tokens): a point.", "prompt length (tokens)", "prompt tokens",
					 "TTFT (ms, log scale)", "TTFT", x_prompt, y_ttft });
	scatter(h, g, &(struct scatter){ "tpot_concurrency", "TPOT against concurrent streams",
					 "Each request with a TPOT: a point; across, the group's "
					 "requests in flight at its first token, itself included.",
					 "requests in flight at the first token (streams)",
					 "streams in flight",
					 "TPOT (ms, log scale)", "TPOT", x_concurrency, y_tpot });
	if (attributed) {
		bands(h, g, &ttft_split);
		bands(h, g, &wire_split);
		bands(h, g, &gap_split);
	}
	put(h, "</section>");
	sample__free(&s_ttft);
	sample__free(&s_tpot);
}

static void slowest(struct html *h, const char *id, const char *title,
		    double (*key)(const struct row *))
{
	const struct row *top[SLOWEST] = { 0 };
	size_t n = 0;

	for (size_t gi = 0; gi < h->groups.n; gi++) {
		const struct hgroup *g = h->groups.v[gi];

		for (size_t i = 0; i < g->nrows; i++) {
			const struct row *w = &g->rows[i];
			size_t k;

			if (isnan(key(w)) || (n == SLOWEST && key(top[n - 1]) >= key(w)))
				continue;
			/* insert it in order, the last one dropping off when the list is full */
			if (n < SLOWEST)
				n++;
			for (k = n - 1; k > 0 && key(top[k - 1]) < key(w); k--)
				top[k] = top[k - 1];
			top[k] = w;
		}
	}
	put(h, "<section id=\"%s\"><h2>%s</h2><table class=\"slow\" data-table=\"%s\"><tr><th>id"
	       "</th><th>who</th><th>TTFT</th><th>worst gap</th><th>phases</th><th>interfered by"
	       "</th></tr>",
	    id, title, id);
	for (size_t i = 0; i < n; i++) {
		const struct row *w = top[i];
		char a[32], b[32], comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6];
		double total = 0, x = 0;

		for (int c = 0; c < w->nparts; c++)
			total += w->parts[c].ms;

		put(h, "<tr data-id=\"%llu\"><td>%llu</td><td>%s %s</td><td data-value=\"%.6f\">%s"
		       "</td><td data-value=\"%.6f\">%s</td><td><svg width=\"200\" height=\"12\">",
		    (unsigned long long)w->id, (unsigned long long)w->id,
		    html_text__esc(w->g->key.comm, comm, sizeof(comm)), role__name(w->g->key.role),
		    isnan(w->ttft) ? 0.0 : w->ttft, html_text__when(w->ttft, a, sizeof(a)),
		    isnan(w->worst_gap) ? 0.0 : w->worst_gap, html_text__when(w->worst_gap, b, sizeof(b)));
		for (int c = 0; attributed_row(w) && total > 0 && c < w->nparts; c++) {
			put(h, "<rect x=\"%.1f\" width=\"%.1f\" height=\"12\" fill=\"%s\"><title>"
			       "request %llu: %s %s</title></rect>",
			    x, w->parts[c].ms / total * 200, html_text__phase_colour(w->parts[c].name),
			    (unsigned long long)w->id, html_text__phase_words(w->parts[c].name),
			    html_text__when(w->parts[c].ms, a, sizeof(a)));
			x += w->parts[c].ms / total * 200;
		}
		if (!attributed_row(w))
			put(h, "<rect width=\"200\" height=\"12\" fill=\"#999999\"><title>request "
			       "%llu: TTFT %s, not attributed</title></rect>",
			    (unsigned long long)w->id, html_text__when(w->ttft, a, sizeof(a)));
		put(h, "</svg></td><td>");
		for (uint32_t k = 0; k < w->ninterfered; k++)
			put(h, "%s%llu", k ? ", " : "", (unsigned long long)w->interfered_by[k]);
		put(h, "</td></tr>");
	}
	put(h, "</table></section>");
}

static double key_ttft(const struct row *w)
{
	return w->ttft;
}

static double key_worst_gap(const struct row *w)
{
	return w->worst_gap;
}

static void engines(struct html *h)
{
	static const char *const kinds[] = { "step", "decode", "prefill", "chunk", "mixed", "embed" };
	static const char *const colours[] = { "#7f7f7f", "#1f77b4", "#d62728", "#ff7f0e",
					       "#9467bd", "#17becf" };

	if (!h->steps)
		return;
	put(h, "<section id=\"engines\"><h2>Engine steps</h2>");
	for (struct hsteps *s = h->steps; s; s = s->next) {
		double span = (double)(s->last_ns - s->first_ns) / 1e9;
		char comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6], model[TEXT_SAFE_MAX(LLAMA_MODEL_NAME_MAX) * 6 + 8];

		if (s->model[0]) {
			strcpy(model, " of ");
			html_text__esc(s->model, model + 4, sizeof(model) - 4);
		} else {
			model[0] = 0;
		}
		put(h, "<h3 data-steps=\"%llu\">%s[%u] %s 0x%llx%s: %llu steps (%llu failed), %.3g "
		       "steps/s, busy %.0f%%</h3><table class=\"stats\"><tr><th>step time</th><th>n"
		       "</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>",
		    (unsigned long long)s->n, html_text__esc(s->comm, comm, sizeof(comm)), s->pid,
		    s->cuda ? "CUDA stream" : "llama.cpp context", (unsigned long long)s->stream,
		    model, (unsigned long long)s->n, (unsigned long long)s->failed,
		    span > 0 ? (double)s->n / span : 0.0,
		    span > 0 ? 100 * (double)s->busy_ns / 1e9 / span : 0.0);
		for (int k = 0; k < STEP_KIND__N; k++) {
			if (!sample__count(&s->ms[k]))
				continue;
			put(h, "<tr data-stat=\"%s\"><th>%s</th>", kinds[k], kinds[k]);
			stat_cells(h, &s->ms[k]);
			put(h, "</tr>");
		}
		put(h, "</table>");
		histogram(h, (struct svg_histogram){ "steps", "Step time by kind",
						  "Each step's time from its start to its end "
						  "(docs/gpu.md, docs/llama.md), by the kind of work "
						  "its batch carried.", "step time (ms, log scale)",
						  "steps", STEP_KIND__N, kinds, colours },
			  s->hist);
	}
	put(h, "</section>");
}

_Static_assert(REQUEST_GROUPS_MAX == 1024, "the health line below names it");

static void health(struct html *h, const struct health *hl)
{
	uint64_t requests = 0;
	struct {
		const char *what;
		uint64_t n;
	} bad[] = {
		{ "records lost to a full ring buffer", hl->bpf[TS_CNT_DROPS] },
		{ "CUDA marks lost", hl->bpf[TS_CNT_GPU_DROPS] },
		{ "llama.cpp steps lost", hl->bpf[TS_CNT_LLAMA_DROPS] },
		{ "gaps in streams (lost pieces)", hl->lost_pieces },
		{ "malformed records", hl->bad_events },
		{ "HTTP/2 streams not measured (open before capture, or past the limit)",
		  hl->h2.streams_unseen_start + hl->h2.streams_untracked },
		{ "HTTP/2 connections no longer read (framing errors)", hl->h2.frame_errors },
		{ "requests not in this report (past its limit)", h->not_kept },
		{ "requests in a group of model \"other\" (past the first 1024 groups)",
		  h->groups.folded },
		{ "incomplete requests", 0 },
	};

	for (size_t i = 0; i < h->groups.n; i++)
		requests += ((const struct hgroup *)h->groups.v[i])->nrows;
	bad[sizeof(bad) / sizeof(bad[0]) - 1].n = hl->requests_incomplete;
	put(h, "<section id=\"health\" data-requests=\"%llu\">", (unsigned long long)requests);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad[i].n)
			put(h, "<p class=\"warn\" data-health=\"%zu\">%llu %s</p>", i,
			    (unsigned long long)bad[i].n, bad[i].what);
	}
	put(h, "<p>%llu requests, %llu streams, %llu events captured.</p></section>",
	    (unsigned long long)requests, (unsigned long long)hl->streams,
	    (unsigned long long)hl->events);
}

int html__render(struct html *h, const struct health *hl, struct buf *out)
{
	int index = 0;

	buf__reset(out);
	h->out = out;
	h->oom = false;
	put(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tokenscope "
	       "report</title><style>body{font:14px sans-serif;margin:2em;color:#222}"
	       "h2{border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:.5em 0}"
	       "td,th{padding:2px 8px;text-align:right}"
	       "figure{display:inline-block;margin:1em;vertical-align:top}"
	       "figcaption{max-width:620px}.measured{font-size:12px;color:#555}.tick{font-size:10px}"
	       ".axis-title{font-size:11px}.warn{color:#b00;font-weight:"
	       "bold}circle{fill:#1f77b4;fill-opacity:.6}</style></head><body><h1>tokenscope "
	       "report</h1>\n");
	health(h, hl);
	for (size_t i = 0; i < h->groups.n; i++)
		group_section(h, h->groups.v[i], index++);
	slowest(h, "slowest-ttft", "The 20 slowest requests by TTFT", key_ttft);
	slowest(h, "slowest-gap", "The 20 slowest requests by worst token gap", key_worst_gap);
	engines(h);
	put(h, "</body></html>\n");
	return h->oom ? -1 : 0;
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	html__request(self, r, m);
}

static void on_step(void *self, const struct engine_step *s)
{
	html__step(self, s);
}

/* The page, at the end, one record (whole or not at all). */
static int finish(void *self, const struct health *hl)
{
	struct html *h = self;
	struct buf page = { 0 };
	int err;

	if (!h->path)
		return 0;
	err = html__render(h, hl, &page);
	err = outfile__write_whole(h->path, err ? NULL : page.p ? page.p : "", page.len);
	buf__free(&page);
	return err;
}

const struct sink_ops html_sink = { .name = "html", .on_request = on_request, .on_step = on_step,
				    .finish = finish };
