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
#include "sinks/html_judge.h"
#include "sinks/html_state.h"
#include "sinks/html_text.h"
#include "sinks/svg.h"

struct html *html__new(const char *path)
{
	struct html *h = calloc(1, sizeof(struct html));

	if (h) {
		request_groups__init(&h->groups, sizeof(struct hgroup));
		h->path = path;
		judge__init(&h->defaults);
		h->judge = &h->defaults;
		if (!(h->sessions = html_sessions__new())) {
			free(h);
			return NULL;
		}
	}
	return h;
}

void html__set_judge(struct html *h, const struct judge *j)
{
	h->judge = j;
}

static void group_free(void *group)
{
	struct hgroup *g = group;

	free(g->rows);
	sample__free(&g->gap_ms);
	html_consumers__free(&g->consumers);
}

void html__free(struct html *h)
{
	if (!h)
		return;
	request_groups__free(&h->groups, group_free);
	html_sessions__free(h->sessions);
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
	if (g)
		html_consumers__add(&g->consumers, m);
	if (r->start_ns && (!h->first_ns || r->start_ns < h->first_ns))
		h->first_ns = r->start_ns;
	if (r->end_ns > h->last_ns)
		h->last_ns = r->end_ns;
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
			   .cache = m->cache, .g = g };
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

void html__put(struct html *h, const char *fmt, ...)
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

	html__put(h, "<td data-value=\"%llu\">%llu</td>", (unsigned long long)sample__count(s),
	    (unsigned long long)sample__count(s));
	for (int i = 0; i < 4; i++) {
		static const double p[] = { 50, 90, 99, 100 };
		double v = sample__count(s) ? (i < 3 ? sample__pct(s, p[i]) : sample__max(s)) : NAN;

		html__put(h, "<td data-value=\"%.6f\">%s</td>", isnan(v) ? 0.0 : v, html_text__when(v, t, sizeof(t)));
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

static double x_concurrency(const struct row *w)
{
	return (double)w->concurrency;
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

static void group_section(struct html *h, struct hgroup *g, int index)
{
	/* by enum cache_regime: unknown, miss, partial, hit */
	static const char *const cache_names[] = { "cache unknown", "cache miss", "cache partial",
						   "cache hit" };
	static const char *const cache_colours[] = { "#999999", "#1f77b4", "#ff7f0e", "#2ca02c" };
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
	uint64_t ttft[CACHE__COUNT][NBUCKETS] = { { 0 } }, tpot[1][NBUCKETS] = { { 0 } };
	struct sample s_ttft = { 0 }, s_tpot = { 0 }, s_regime[CACHE__COUNT] = { { 0 } };
	char comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6], model[TEXT_SAFE_MAX(REQ_MODEL_MAX) * 6];
	char pod[TEXT_SAFE_MAX(144) * 6];
	uint64_t attributed = 0;

	concurrency(g);
	for (size_t i = 0; i < g->nrows; i++) {
		const struct row *w = &g->rows[i];

		if (!isnan(w->ttft)) {
			ttft[w->cache][bucket_of(w->ttft)]++;
			sample__add(&s_ttft, w->ttft);
			sample__add(&s_regime[w->cache], w->ttft);
		}
		if (!isnan(w->tpot)) {
			tpot[0][bucket_of(w->tpot)]++;
			sample__add(&s_tpot, w->tpot);
		}
		attributed += html__attributed(w);
	}
	html__put(h, "<section class=\"group\" id=\"group-%d\" data-comm=\"%s\" data-role=\"%s\" "
	       "data-api=\"%s\" data-model=\"%s\" data-pod=\"%s\" data-requests=\"%zu\">"
	       "<h2>%s %s %s %s%s%s</h2>",
	    index, html_text__esc(g->key.comm, comm, sizeof(comm)), role__name(g->key.role),
	    api__name(g->key.api), html_text__esc(g->key.model, model, sizeof(model)),
	    html_text__esc(g->key.pod, pod, sizeof(pod)), g->nrows, comm, role__name(g->key.role),
	    api__name(g->key.api), *g->key.model ? model : "-", *g->key.pod ? " pod " : "", pod);
	html__put(h, "<table class=\"stats\"><tr><th></th><th>n</th><th>p50</th><th>p90</th><th>p99</th>"
	       "<th>max</th></tr><tr data-stat=\"ttft\"><th>TTFT</th>");
	stat_cells(h, &s_ttft);
	for (int c = CACHE__COUNT - 1; c >= 0; c--) { /* TTFT is bimodal: each cache regime */
		if (!sample__count(&s_regime[c]))
			continue;
		html__put(h, "</tr><tr data-stat=\"ttft_%s\"><th>TTFT, cache %s</th>",
		    cache_regime__name((enum cache_regime)c), cache_regime__name((enum cache_regime)c));
		stat_cells(h, &s_regime[c]);
		sample__free(&s_regime[c]);
	}
	html__put(h, "</tr><tr data-stat=\"tpot\"><th>TPOT</th>");
	stat_cells(h, &s_tpot);
	html__put(h, "</tr><tr data-stat=\"gap\"><th>token gap</th>");
	stat_cells(h, &g->gap_ms);
	html__put(h, "</tr></table>");
	if (html_consumers__table(h->out, &g->consumers, h->judge,
				  (double)(h->last_ns - h->first_ns) / 1e9))
		h->oom = true;
	histogram(h, (struct svg_histogram){ "ttft", "TTFT, by prompt-cache regime", ttft_measured,
					  "TTFT (ms, log scale)", "requests", CACHE__COUNT, cache_names,
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
					 "TTFT (ms, log scale)", "TTFT", x_prompt, html__y_ttft });
	scatter(h, g, &(struct scatter){ "tpot_concurrency", "TPOT against concurrent streams",
					 "Each request with a TPOT: a point; across, the group's "
					 "requests in flight at its first token, itself included.",
					 "requests in flight at the first token (streams)",
					 "streams in flight",
					 "TPOT (ms, log scale)", "TPOT", x_concurrency, html__y_tpot });
	if (attributed)
		html__bands(h, g);
	html__put(h, "</section>");
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
	html__put(h, "<section id=\"%s\"><h2>%s</h2><table class=\"slow\" data-table=\"%s\"><tr><th>id"
	       "</th><th>who</th><th>TTFT</th><th>worst gap</th><th>phases</th><th>interfered by"
	       "</th></tr>",
	    id, title, id);
	for (size_t i = 0; i < n; i++) {
		const struct row *w = top[i];
		char a[32], b[32], comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6];
		double total = 0, x = 0;

		for (int c = 0; c < w->nparts; c++)
			total += w->parts[c].ms;

		html__put(h, "<tr data-id=\"%llu\"><td>%llu</td><td>%s %s</td><td data-value=\"%.6f\">%s"
		       "</td><td data-value=\"%.6f\">%s</td><td><svg width=\"200\" height=\"12\">",
		    (unsigned long long)w->id, (unsigned long long)w->id,
		    html_text__esc(w->g->key.comm, comm, sizeof(comm)), role__name(w->g->key.role),
		    isnan(w->ttft) ? 0.0 : w->ttft, html_text__when(w->ttft, a, sizeof(a)),
		    isnan(w->worst_gap) ? 0.0 : w->worst_gap, html_text__when(w->worst_gap, b, sizeof(b)));
		for (int c = 0; html__attributed(w) && total > 0 && c < w->nparts; c++) {
			html__put(h, "<rect x=\"%.1f\" width=\"%.1f\" height=\"12\" fill=\"%s\"><title>"
			       "request %llu: %s %s</title></rect>",
			    x, w->parts[c].ms / total * 200, html_text__phase_colour(w->parts[c].name),
			    (unsigned long long)w->id, html_text__phase_words(w->parts[c].name),
			    html_text__when(w->parts[c].ms, a, sizeof(a)));
			x += w->parts[c].ms / total * 200;
		}
		if (!html__attributed(w))
			html__put(h, "<rect width=\"200\" height=\"12\" fill=\"#999999\"><title>request "
			       "%llu: TTFT %s, not attributed</title></rect>",
			    (unsigned long long)w->id, html_text__when(w->ttft, a, sizeof(a)));
		html__put(h, "</svg></td><td>");
		for (uint32_t k = 0; k < w->ninterfered; k++)
			html__put(h, "%s%llu", k ? ", " : "", (unsigned long long)w->interfered_by[k]);
		html__put(h, "</td></tr>");
	}
	html__put(h, "</table></section>");
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
	html__put(h, "<section id=\"engines\"><h2>Engine steps</h2>");
	for (struct hsteps *s = h->steps; s; s = s->next) {
		double span = (double)(s->last_ns - s->first_ns) / 1e9;
		char comm[TEXT_SAFE_MAX(TS_COMM_LEN) * 6], model[TEXT_SAFE_MAX(LLAMA_MODEL_NAME_MAX) * 6 + 8];

		if (s->model[0]) {
			strcpy(model, " of ");
			html_text__esc(s->model, model + 4, sizeof(model) - 4);
		} else {
			model[0] = 0;
		}
		html__put(h, "<h3 data-steps=\"%llu\">%s[%u] %s 0x%llx%s: %llu steps (%llu failed), %.3g "
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
			html__put(h, "<tr data-stat=\"%s\"><th>%s</th>", kinds[k], kinds[k]);
			stat_cells(h, &s->ms[k]);
			html__put(h, "</tr>");
		}
		html__put(h, "</table>");
		histogram(h, (struct svg_histogram){ "steps", "Step time by kind",
						  "Each step's time from its start to its end "
						  "(docs/gpu.md, docs/llama.md), by the kind of work "
						  "its batch carried.", "step time (ms, log scale)",
						  "steps", STEP_KIND__N, kinds, colours },
			  s->hist);
	}
	html__put(h, "</section>");
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
	html__put(h, "<section id=\"health\" data-requests=\"%llu\">", (unsigned long long)requests);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad[i].n)
			html__put(h, "<p class=\"warn\" data-health=\"%zu\">%llu %s</p>", i,
			    (unsigned long long)bad[i].n, bad[i].what);
	}
	html__put(h, "<p>%llu requests, %llu streams, %llu events captured.</p></section>",
	    (unsigned long long)requests, (unsigned long long)hl->streams,
	    (unsigned long long)hl->events);
}

int html__render(struct html *h, const struct health *hl, struct buf *out)
{
	int index = 0;

	buf__reset(out);
	h->out = out;
	h->oom = false;
	html__put(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tokenscope "
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
	if (html_sessions__section(h->out, h->sessions))
		h->oom = true;
	slowest(h, "slowest-ttft", "The 20 slowest requests by TTFT", key_ttft);
	slowest(h, "slowest-gap", "The 20 slowest requests by worst token gap", key_worst_gap);
	engines(h);
	html__put(h, "</body></html>\n");
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

static void on_session(void *self, const struct session *s)
{
	struct html *h = self;

	html_sessions__add(h->sessions, s);
}

const struct sink_ops html_sink = { .name = "html", .on_request = on_request, .on_step = on_step,
				    .on_session = on_session, .finish = finish };
