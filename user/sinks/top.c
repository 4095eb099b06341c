// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/stats.h"
#include "base/text.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/attribution.h"
#include "engine/llama_models.h"
#include "base/recent.h"
#include "sinks/top.h"

/* Requests (and steps) kept per group (and engine), at most: a window reaching past the
 * oldest kept one says it is cut. The summary's tail keeps as many. */
#define KEEP_MAX 262144
/* Records are reported nearly in the order they ended: a window is looked for this far past
 * its start before the scan stops. */
#define DISORDER_NS (10ull * 1000000000ull)

/* One finished request, as the view keeps it. */
struct kept_req {
	uint64_t end_ns, id;
	double ttft, tpot, gap_max, e2e; /* ms; NAN: not measured */
	int8_t cache_hit;		 /* -1 unknown */
	int8_t slo_met;			 /* -1: not judged */
	bool complete;
	double headroom;		 /* interactive streams' reading headroom (NAN: none) */
	enum ttft_source source; /* the TTFT split's (llm/attribution.h) */
	uint32_t prefill_steps;
	uint64_t queue;	  /* ns */
	struct {
		const char *name;
		uint64_t ns;
	} parts[TTFT_PARTS_MAX]; /* the split's; by the steps: busy, idle, prefill, emit */
	size_t nparts;
	struct cmp_request cmp; /* as tokenscope compare reads it (top_judge.h) */
};

/* Each group's requests and engine's steps are kept (base/recent.h) this long before the
 * newest: the longest window but all ("all" takes the summary's samples, and its tail and
 * slow requests from what is kept). */
#define HORIZON_NS (300ull * 1000000000ull + DISORDER_NS)

/* The summary's grouping (llm/group.h). */
struct group {
	struct request_group key; /* first: llm/group.h keeps the table */
	/* the whole run, as the summary counts it */
	uint64_t n, incomplete, hits, known_cache, judged, met;
	struct sample headroom;
	double gap_max;
	struct sample ttft, tpot;
	struct recent reqs; /* struct kept_req */
	uint64_t in_flight, waiting; /* of the view being made */
};

struct kept_step {
	uint64_t end_ns, start_ns; /* the end first, as in kept_req: recent_scan reads it */
	uint8_t kind; /* enum step_kind */
	uint8_t carried; /* CUDA: CARRIED_* that attributed requests showed it did */
	bool failed;
	uint32_t nseqs;
};

/* A CUDA step's batch is not read, so its kind comes from the requests attributed to it: a
 * step of a request's prefill carried a prompt, a step that produced one of its tokens a
 * decode; one that did both, for different requests, was mixed. */
enum { CARRIED_PREFILL = 1, CARRIED_DECODE = 2 };

struct engine {
	uint32_t pid;
	enum step_source source;
	char comm[TS_COMM_LEN];
	char model[LLAMA_MODEL_NAME_MAX]; /* llama.cpp: one engine per model the process serves */
	struct recent steps; /* struct kept_step */
};

struct top {
	uint64_t start_ns;
	struct request_groups groups; /* struct group */
	struct engine **engines;
	size_t nengines, capengines;
	uint64_t prev_records, prev_ns; /* at the previous view */
	struct sample scratch[4];	/* refilled by each view */
	uint64_t *intervals;		/* scratch: steps' [start, end) pairs */
	uint64_t unnamed_flight, unnamed_waiting; /* in flight, model not known yet */
	size_t capintervals;
	struct engine_sched sched[ENGINE_SCHED_MAX]; /* each engine's latest step */
	char sched_comm[ENGINE_SCHED_MAX][TS_COMM_LEN];
	size_t nsched;
	struct top_judge *judge;
};

struct top *top__new(uint64_t start_ns)
{
	struct top *t = calloc(1, sizeof(*t));

	if (t && !(t->judge = top_judge__new())) {
		free(t);
		return NULL;
	}
	if (t) {
		t->start_ns = t->prev_ns = start_ns;
		request_groups__init(&t->groups, sizeof(struct group));
	}
	return t;
}

void top__set_start(struct top *t, uint64_t start_ns)
{
	t->start_ns = t->prev_ns = start_ns;
}

static void group_free(void *group)
{
	struct group *g = group;

	sample__free(&g->ttft);
	sample__free(&g->tpot);
	sample__free(&g->headroom);
	recent__free(&g->reqs);
}

void top__free(struct top *t)
{
	if (!t)
		return;
	request_groups__free(&t->groups, group_free);
	for (size_t i = 0; i < t->nengines; i++) {
		recent__free(&t->engines[i]->steps);
		free(t->engines[i]);
	}
	for (size_t i = 0; i < sizeof(t->scratch) / sizeof(*t->scratch); i++)
		sample__free(&t->scratch[i]);
	top_judge__free(t->judge);
	free(t->engines);
	free(t->intervals);
	free(t);
}

static struct group *group_at(const struct top *t, size_t i)
{
	return t->groups.v[i];
}

static struct group *group_of(struct top *t, const struct request *r)
{
	struct group *g = request_groups__of(&t->groups, r);

	if (g && !g->reqs.size) /* new */
		recent__init(&g->reqs, sizeof(struct kept_req), KEEP_MAX, HORIZON_NS);
	return g;
}

static void keep_request(struct group *g, const struct request *r, const struct request_metrics *m)
{
	struct kept_req *k = recent__push(&g->reqs);
	struct ttft_split sp;

	if (!k)
		return; /* no memory: the group's whole-run figures still have it */
	*k = (struct kept_req){
		.end_ns = r->end_ns ? r->end_ns : r->last_token_ns ? r->last_token_ns : r->start_ns,
		.id = r->id, .ttft = m->ttft_ms, .tpot = m->tpot_ms, .gap_max = m->itl_max_ms,
		.e2e = m->e2e_ms, .cache_hit = (int8_t)m->cache_hit, .complete = m->complete,
		.slo_met = (int8_t)m->slo_met, .headroom = m->reading_headroom,
	};
	compare__describe(r, m, &k->cmp);
	attribution__ttft_split(r->attr, &sp);
	k->source = sp.source;
	k->prefill_steps = sp.prefill_steps;
	k->queue = sp.queue_ns;
	k->nparts = sp.nparts;
	for (size_t i = 0; i < sp.nparts; i++) {
		k->parts[i].name = sp.parts[i].name;
		k->parts[i].ns = sp.parts[i].ns;
	}
	recent__expire(&g->reqs, k->end_ns);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

/* Whether step k produced a token whose step began at one of the sorted starts: it began
 * there (a tensor-parallel rank: within its own length after the ranks' first start). */
static bool produced(const uint64_t *starts, size_t n, const struct kept_step *k)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first start after k's */
		size_t mid = (lo + hi) / 2;

		if (starts[mid] <= k->start_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && k->start_ns - starts[lo - 1] <= k->end_ns - k->start_ns;
}

/* Mark the CUDA steps an attributed server request ran on with what they carried for it. Its
 * steps are kept already: a request is reported ATTRIB_SETTLE_NS of record time after its end. */
static void mark_steps(struct top *t, const struct request *r)
{
	const struct attribution *a = r->attr;
	uint64_t prefill_end = a->prefill_start_ns + a->prefill_ns, *starts;
	size_t n = 0;

	starts = a->ngaps ? malloc(a->ngaps * sizeof(*starts)) : NULL;
	for (size_t g = 0; starts && g < a->ngaps; g++) {
		if (a->gaps[g].producer_start_ns)
			starts[n++] = a->gaps[g].producer_start_ns;
	}
	if (n)
		qsort(starts, n, sizeof(*starts), cmp_u64);
	for (size_t i = 0; i < t->nengines; i++) {
		const struct engine *e = t->engines[i];
		bool serves = false;

		for (uint32_t j = 0; j < a->nengine_pids; j++)
			serves |= a->engine_pids[j] == e->pid;
		if (!serves || e->source != STEP_SOURCE_CUDA)
			continue;
		for (size_t j = 0; j < e->steps.len; j++) {
			struct kept_step *k = recent__newest(&e->steps, j);

			if (k->end_ns + DISORDER_NS < a->prefill_start_ns)
				break;
			if (k->start_ns >= a->prefill_start_ns && k->start_ns < prefill_end)
				k->carried |= CARRIED_PREFILL;
			else if (n && produced(starts, n, k))
				k->carried |= CARRIED_DECODE;
		}
	}
	free(starts);
}

void top__request(struct top *t, const struct request *r, const struct request_metrics *m)
{
	struct group *g = group_of(t, r);

	if (!g)
		return;
	request_group__add_process(&g->key, r->pid);
	g->n++;
	if (!m->complete)
		g->incomplete++;
	if (!isnan(m->ttft_ms))
		sample__add(&g->ttft, m->ttft_ms);
	if (!isnan(m->tpot_ms))
		sample__add(&g->tpot, m->tpot_ms);
	if (!isnan(m->itl_max_ms) && m->itl_max_ms > g->gap_max)
		g->gap_max = m->itl_max_ms;
	if (m->cache_hit >= 0) {
		g->known_cache++;
		g->hits += m->cache_hit > 0;
	}
	if (m->slo_met >= 0) {
		g->judged++;
		g->met += m->slo_met;
	}
	if (!isnan(m->reading_headroom))
		sample__add(&g->headroom, m->reading_headroom);
	keep_request(g, r, m);
	top_judge__request(t->judge, r, m, t->start_ns);
	if (r->role == ROLE_SERVER && r->attr && r->attr->ok && !r->attr->by_sequence)
		mark_steps(t, r);
}

void top__process_exit(struct top *t, uint32_t pid)
{
	request_groups__process_exit(&t->groups, pid);
}

void top__step(struct top *t, const struct engine_step *s)
{
	struct engine *e = NULL;
	struct kept_step *k;

	for (size_t i = 0; i < t->nengines && !e; i++) {
		if (t->engines[i]->pid == s->pid && t->engines[i]->source == s->source &&
		    !strncmp(t->engines[i]->model, s->model ? s->model : "",
			     sizeof(t->engines[i]->model) - 1))
			e = t->engines[i];
	}
	if (!e) {
		if (!array__reserve((void **)&t->engines, &t->capengines, t->nengines + 1,
				    sizeof(*t->engines)) ||
		    !(e = calloc(1, sizeof(*e))))
			return;
		e->pid = s->pid;
		e->source = s->source;
		memcpy(e->comm, s->comm, sizeof(e->comm));
		snprintf(e->model, sizeof(e->model), "%s", s->model ? s->model : "");
		recent__init(&e->steps, sizeof(struct kept_step), KEEP_MAX, HORIZON_NS);
		t->engines[t->nengines++] = e;
	}
	k = recent__push(&e->steps);
	if (!k)
		return;
	*k = (struct kept_step){ s->end_ns > s->start_ns ? s->end_ns : s->start_ns, s->start_ns,
				 (uint8_t)step__kind(s), 0, s->failed, s->nseqs };
	recent__expire(&e->steps, k->end_ns);
}

/* ---- the view ---- */

/* The window [lo, hi] of a view: requests and steps that ended after lo, at or before hi. */
struct span {
	uint64_t lo, hi;
	bool all;
	double secs; /* what rates divide by: the window, or the run so far when shorter */
};

/* Calls keep(ctx, item) for each item of r that ended in the window, newest first. */
static void recent_scan(const struct recent *r, const struct span *w, void (*keep)(void *, void *),
		      void *ctx)
{
	for (size_t i = 0; i < r->len; i++) {
		void *item = recent__newest(r, i);
		uint64_t end = *(const uint64_t *)item; /* each item starts with... its end */

		if (end > w->hi)
			continue;
		if (!w->all && end <= w->lo) {
			if (end + DISORDER_NS <= w->lo)
				break;
			continue;
		}
		keep(ctx, item);
	}
}

struct row_acc {
	struct top *t;
	struct top_view *v;
	struct top_row *row;
	double p90; /* pass 2: the window's TTFT p90 */
	bool slow;  /* pass 2: list slow requests */
	uint64_t hits, known, split[4];
	uint64_t judged, met;
};

static void row_pass1(void *ctx, void *item)
{
	struct row_acc *a = ctx;
	const struct kept_req *k = item;

	a->row->done++;
	a->row->incomplete += !k->complete;
	if (!isnan(k->ttft))
		sample__add(&a->t->scratch[0], k->ttft);
	if (!isnan(k->tpot))
		sample__add(&a->t->scratch[1], k->tpot);
	if (!isnan(k->gap_max) && (isnan(a->row->gap_max) || k->gap_max > a->row->gap_max))
		a->row->gap_max = k->gap_max;
	if (k->cache_hit >= 0) {
		a->known++;
		a->hits += k->cache_hit > 0;
	}
	if (k->slo_met >= 0) {
		a->judged++;
		a->met += k->slo_met > 0;
	}
	if (!isnan(k->headroom))
		sample__add(&a->t->scratch[3], k->headroom);
}

static void slow_line(const struct top_row *row, const struct kept_req *k, char *out, size_t n)
{
	int o = snprintf(out, n, "#%llu %s %s %s %s ttft=%.1fms", (unsigned long long)k->id,
			 row->name, role__name(row->role), api__name(row->api),
			 row->model[0] ? row->model : "-", k->ttft);

	if (!isnan(k->tpot) && o > 0 && (size_t)o < n)
		o += snprintf(out + o, n - o, " tpot=%.1fms", k->tpot);
	if (!isnan(k->e2e) && o > 0 && (size_t)o < n)
		o += snprintf(out + o, n - o, " e2e=%.1fms", k->e2e);
	if (k->source == TTFT_STEPS && o > 0 && (size_t)o < n) {
		snprintf(out + o, n - o, " [queue=%.1f (busy %.1f) prefill=%.1f/%u emit=%.1f]",
			 k->queue / 1e6, k->parts[0].ns / 1e6, k->parts[2].ns / 1e6, k->prefill_steps,
			 k->parts[3].ns / 1e6);
	} else if (k->source != TTFT_NOT_ATTRIBUTED) {
		for (size_t i = 0; i < k->nparts && o > 0 && (size_t)o < n; i++)
			o += snprintf(out + o, n - o, "%s%s=%.1f", i ? " " : " [", k->parts[i].name,
				      k->parts[i].ns / 1e6);
		if (o > 0 && (size_t)o + 1 < n)
			strcat(out, "]");
	} else if (row->role == ROLE_SERVER && o > 0 && (size_t)o < n)
		snprintf(out + o, n - o, " [not attributed]");
	if (!k->complete && strlen(out) + 12 < n)
		strcat(out, " INCOMPLETE");
}

/* A slow request, into the view's list (newest first, at most TOP_SLOW_MAX). */
static void add_slow(struct top_view *v, const struct top_row *row, const struct kept_req *k)
{
	size_t at = v->nslow;

	while (at > 0 && v->slow[at - 1].end_ns < k->end_ns)
		at--;
	if (at == TOP_SLOW_MAX)
		return;
	if (v->nslow == TOP_SLOW_MAX)
		v->nslow--;
	memmove(&v->slow[at + 1], &v->slow[at], (v->nslow - at) * sizeof(*v->slow));
	v->nslow++;
	v->slow[at].end_ns = k->end_ns;
	v->slow[at].group = row->group;
	slow_line(row, k, v->slow[at].line, sizeof(v->slow[at].line));
}

static void row_pass2(void *ctx, void *item)
{
	struct row_acc *a = ctx;
	const struct kept_req *k = item;

	if (isnan(k->ttft) || k->ttft < a->p90)
		return;
	if (k->source == TTFT_STEPS) { /* busy, idle, prefill, emit */
		for (int i = 0; i < 4; i++)
			a->split[i] += k->parts[i].ns;
	}
	if (a->slow)
		add_slow(a->v, a->row, k);
}

/* The tail's split as TOP_TAIL_BAR letters, by largest remainder. */
static void tail_bar(const uint64_t split[4], char *out)
{
	static const char letters[] = "BIPE";
	uint64_t sum = split[0] + split[1] + split[2] + split[3];
	size_t cells[4], used = 0;
	double rem[4];

	out[0] = 0;
	if (!sum)
		return;
	for (int i = 0; i < 4; i++) {
		double exact = (double)split[i] * TOP_TAIL_BAR / (double)sum;

		cells[i] = (size_t)exact;
		rem[i] = exact - (double)cells[i];
		used += cells[i];
	}
	while (used < TOP_TAIL_BAR) {
		int best = 0;

		for (int i = 1; i < 4; i++)
			best = rem[i] > rem[best] ? i : best;
		cells[best]++;
		rem[best] = -1;
		used++;
	}
	for (int i = 0, o = 0; i < 4; i++) {
		for (size_t c = 0; c < cells[i]; c++)
			out[o++] = letters[i];
		out[o] = 0;
	}
}

static void group_row(struct top *t, struct top_view *v, struct group *g, size_t gi,
		      const struct span *w, bool list_slow)
{
	struct top_row *row = &v->rows[v->nrows++];
	struct row_acc a = { t, v, row };
	char comm[TS_COMM_LEN * 4 + 16], who[32], pod[TOP_NAME_MAX];
	struct sample *ttft = &t->scratch[0], *tpot = &t->scratch[1], *headroom = &t->scratch[3];

	memset(row, 0, sizeof(*row));
	request_group__who(&g->key, who, sizeof(who));
	if (g->key.pod[0]) /* a pod's process: its pod names the row */
		snprintf(row->name, sizeof(row->name), "%s:%s[%s]",
			 text__ascii(pod, sizeof(pod), g->key.pod),
			 text__ascii(comm, sizeof(comm), g->key.comm), who);
	else
		snprintf(row->name, sizeof(row->name), "%s[%s]",
			 text__ascii(comm, sizeof(comm), g->key.comm), who);
	row->role = g->key.role;
	row->api = g->key.api;
	text__ascii(row->model, sizeof(row->model), g->key.model);
	row->group = gi;
	row->gap_max = NAN;
	row->in_flight = g->in_flight;
	row->waiting = g->waiting;
	if (!w->all) {
		sample__clear(ttft);
		sample__clear(tpot);
		sample__clear(headroom);
		recent_scan(&g->reqs, w, row_pass1, &a);
	} else { /* the whole run: the summary's own figures, not a scan of what is kept */
		row->done = g->n;
		row->incomplete = g->incomplete;
		ttft = &g->ttft;
		tpot = &g->tpot;
		a.hits = g->hits;
		a.known = g->known_cache;
		a.judged = g->judged;
		a.met = g->met;
		headroom = &g->headroom;
		row->gap_max = g->n ? g->gap_max : NAN;
	}
	if (g->reqs.dropped && (w->all || g->reqs.dropped_ns > w->lo))
		v->window_cut = true; /* the window needs some of what was let go */
	row->rps = w->secs > 0 ? (double)row->done / w->secs : NAN;
	row->ttft[0] = sample__pct(ttft, 50);
	row->ttft[1] = a.p90 = sample__pct(ttft, 90);
	row->ttft[2] = sample__pct(ttft, 99);
	row->tpot[0] = sample__pct(tpot, 50);
	row->tpot[1] = sample__pct(tpot, 99);
	row->hit_share = a.known ? 100.0 * (double)a.hits / (double)a.known : NAN;
	row->slo_share = a.judged ? 100.0 * (double)a.met / (double)a.judged : NAN;
	row->goodput = a.judged && w->secs > 0 ? (double)a.met / w->secs : NAN;
	row->headroom = sample__pct(headroom, 10);
	if (!isnan(a.p90)) {
		a.slow = list_slow && sample__count(ttft) >= 10;
		recent_scan(&g->reqs, w, row_pass2, &a);
		tail_bar(a.split, row->tail);
	}
}

struct engine_acc {
	struct top *t;
	const struct span *w;
	struct top_engine_row *row;
	uint64_t kinds[STEP_KIND__N], known;
	size_t nintervals;
};

static void engine_pass(void *ctx, void *item)
{
	struct engine_acc *a = ctx;
	const struct kept_step *k = item;
	uint64_t lo = k->start_ns > a->w->lo || a->w->all ? k->start_ns : a->w->lo;

	a->row->steps++;
	a->row->failed += k->failed;
	if (k->nseqs) {
		a->known++;
		a->kinds[k->kind]++;
		sample__add(&a->t->scratch[2], k->nseqs);
	} else if (k->carried) {
		a->known++;
		a->kinds[k->carried == CARRIED_PREFILL  ? STEP_KIND_PREFILL
			 : k->carried == CARRIED_DECODE ? STEP_KIND_DECODE
							: STEP_KIND_MIXED]++;
	}
	if (k->end_ns > lo &&
	    array__reserve((void **)&a->t->intervals, &a->t->capintervals, 2 * (a->nintervals + 1),
			   sizeof(*a->t->intervals))) {
		a->t->intervals[2 * a->nintervals] = lo;
		a->t->intervals[2 * a->nintervals++ + 1] = k->end_ns;
	}
}

static int by_start(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y;

	return (a[0] > b[0]) - (a[0] < b[0]);
}

/* How long the intervals cover, overlaps counted once. */
static uint64_t covered_ns(uint64_t *iv, size_t n)
{
	uint64_t sum = 0, from = 0, to = 0;

	if (!n) /* iv may be NULL then */
		return 0;
	qsort(iv, n, 2 * sizeof(*iv), by_start);
	for (size_t i = 0; i < n; i++) {
		if (!i || iv[2 * i] > to) {
			sum += to - from;
			from = iv[2 * i];
			to = iv[2 * i + 1];
		} else if (iv[2 * i + 1] > to) {
			to = iv[2 * i + 1];
		}
	}
	return sum + (to - from);
}

static void engine_row(struct top *t, struct top_view *v, const struct engine *e,
		       const struct span *w)
{
	struct top_engine_row *row = &v->engines[v->nengines++];
	struct engine_acc a = { t, w, row };
	char comm[TS_COMM_LEN * 4 + 16];

	memset(row, 0, sizeof(*row));
	char model[LLAMA_MODEL_NAME_MAX * 4 + 16];

	snprintf(row->name, sizeof(row->name), "%s[%u]%s%s",
		 text__ascii(comm, sizeof(comm), e->comm), e->pid, e->model[0] ? " " : "",
		 text__ascii(model, sizeof(model), e->model));
	row->source = e->source == STEP_SOURCE_LLAMA ? "llama.cpp" : "cuda";
	sample__clear(&t->scratch[2]);
	recent_scan(&e->steps, w, engine_pass, &a);
	if (e->steps.dropped && (w->all || e->steps.dropped_ns > w->lo))
		v->window_cut = true;
	row->steps_per_s = w->secs > 0 ? (double)row->steps / w->secs : NAN;
	row->busy = w->secs > 0 ? 100.0 * (double)covered_ns(t->intervals, a.nintervals) / 1e9 /
					  w->secs
				: NAN;
	row->prefill_share = row->decode_share = row->mixed_share = NAN;
	if (a.known) {
		row->prefill_share = 100.0 * (double)(a.kinds[STEP_KIND_PREFILL] +
						      a.kinds[STEP_KIND_CHUNK]) / (double)a.known;
		row->decode_share = 100.0 * (double)a.kinds[STEP_KIND_DECODE] / (double)a.known;
		row->mixed_share = 100.0 * (double)a.kinds[STEP_KIND_MIXED] / (double)a.known;
	}
	row->batch_p50 = sample__pct(&t->scratch[2], 50);
}

static void count_open(void *ctx, const struct request *r)
{
	struct top *t = ctx;
	struct group *g;

	if (!*request__model(r)) { /* its body not read yet: the header counts it, no row */
		t->unnamed_flight++;
		t->unnamed_waiting += !r->first_token_ns;
		return;
	}
	g = group_of(t, r);
	if (!g)
		return;
	if (!g->key.npids) /* a group seen in flight first is named by its process already */
		request_group__add_process(&g->key, r->pid);
	g->in_flight++;
	g->waiting += !r->first_token_ns;
}

/* The view's header: times, rates, capture health. */
static void view_header(struct top *t, struct pipeline *pl, uint64_t now, struct top_view *v)
{
	const struct health *h = pipeline__health(pl);
	uint64_t records = h->events + h->gpu_marks + h->llama_steps;

	v->uptime_ns = now > t->start_ns ? now - t->start_ns : 0;
	v->events_per_s = now > t->prev_ns ? (double)(records - t->prev_records) /
						     ((double)(now - t->prev_ns) / 1e9)
					   : 0;
	t->prev_records = records;
	t->prev_ns = now;
	v->drops = h->bpf[TS_CNT_DROPS] + h->bpf[TS_CNT_GPU_DROPS] + h->bpf[TS_CNT_LLAMA_DROPS];
	v->lost = h->lost_pieces + h->bpf[TS_CNT_TRUNCATED];
}

struct to_cmp {
	struct top_judge *tj;
	const struct group *g;
};

/* A kept request of the window, as tokenscope compare reads it. */
static void to_compare(void *ctx, void *item)
{
	const struct to_cmp *c = ctx;

	top_judge__window_add(c->tj, c->g->key.comm, role__name(c->g->key.role),
			      api__name(c->g->key.api), c->g->key.model,
			      &((const struct kept_req *)item)->cmp);
}

int top__view(struct top *t, struct pipeline *pl, uint64_t now, enum top_window win,
	      size_t only_group, struct top_view *v)
{
	struct span w = { .all = win == TOP_WALL };
	uint64_t done = 0;

	top_view__free(v);
	for (size_t i = 0; i < t->groups.n; i++)
		group_at(t, i)->in_flight = group_at(t, i)->waiting = 0;
	t->unnamed_flight = t->unnamed_waiting = 0;
	if (pl) {
		pipeline__each_open(pl, count_open, t);
		view_header(t, pl, now, v);
		v->as_of_ns = pipeline__reported_through(pl, now);
	} else {
		v->as_of_ns = now;
	}
	v->lag_ns = now - v->as_of_ns;
	v->window_ns = top_window__ns(win);
	for (size_t i = 0; i < t->nsched; i++) {
		struct top_sched_row *q = &v->sched[v->nsched++];

		q->wire = t->sched[i].wire;
		snprintf(q->name, sizeof(q->name), "%s[%u]", t->sched[i].comm, t->sched[i].pid);
		q->engine = t->sched[i].engine_index;
		q->running = t->sched[i].running;
		q->waiting = t->sched[i].waiting;
		q->kv_cache_usage = t->sched[i].kv_cache_usage;
		q->age_ns = now > t->sched[i].ts ? now - t->sched[i].ts : 0;
	}
	w.hi = v->as_of_ns;
	w.lo = !w.all && w.hi > v->window_ns ? w.hi - v->window_ns : 0;
	w.secs = (double)(w.hi > t->start_ns ? w.hi - t->start_ns : 0) / 1e9;
	if (!w.all && w.secs > (double)v->window_ns / 1e9)
		w.secs = (double)v->window_ns / 1e9;
	v->rows = calloc(t->groups.n ? t->groups.n : 1, sizeof(*v->rows));
	v->engines = calloc(t->nengines ? t->nengines : 1, sizeof(*v->engines));
	if (!v->rows || !v->engines)
		return -1;
	for (size_t i = 0; i < t->groups.n; i++) {
		group_row(t, v, group_at(t, i), i, &w, only_group == TOP_ALL_GROUPS || only_group == i);
		done += v->rows[i].done;
		v->in_flight += v->rows[i].in_flight;
		v->waiting += v->rows[i].waiting;
	}
	v->in_flight += t->unnamed_flight;
	v->waiting += t->unnamed_waiting;
	v->rps = w.secs > 0 ? (double)done / w.secs : NAN;
	for (size_t i = 0; i < t->nengines; i++)
		engine_row(t, v, t->engines[i], &w);
	if (!w.all && top_judge__due(t->judge, w.hi, v->window_ns, t->start_ns)) {
		for (size_t i = 0; i < t->groups.n; i++)
			recent_scan(&group_at(t, i)->reqs, &w, to_compare,
				    &(struct to_cmp){ t->judge, group_at(t, i) });
		top_judge__change(t->judge, top_window__name(win), w.hi);
	}
	snprintf(v->change, sizeof(v->change), "%s", top_judge__line(t->judge));
	v->nsessions = top_judge__sessions(t->judge, w.lo, w.hi, w.all, v->sessions,
					   TOP_SESSION_ROWS);
	return 0;
}

void top_view__free(struct top_view *v)
{
	free(v->rows);
	free(v->engines);
	memset(v, 0, sizeof(*v));
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	top__request(self, r, m);
}

static void on_step(void *self, const struct engine_step *s)
{
	top__step(self, s);
}

/* An engine's scheduler: its latest step per process and engine index is the queue depth
 * shown. */
static void on_sched(void *self, const struct engine_sched *s)
{
	struct top *t = self;
	size_t i;

	for (i = 0; i < t->nsched; i++) {
		if (t->sched[i].pid == s->pid && t->sched[i].engine_index == s->engine_index &&
		    !strcmp(t->sched[i].wire, s->wire))
			break;
	}
	if (i == t->nsched) {
		if (t->nsched == ENGINE_SCHED_MAX)
			return;
		t->nsched++;
	}
	t->sched[i] = *s;
	snprintf(t->sched_comm[i], sizeof(t->sched_comm[i]), "%s", s->comm ? s->comm : "");
	t->sched[i].comm = t->sched_comm[i];
}

static void on_exit_(void *self, uint32_t pid)
{
	top__process_exit(self, pid);
}

static void on_session(void *self, const struct session *s)
{
	top_judge__session(((struct top *)self)->judge, s);
}

const struct sink_ops top_sink = { .name = "top", .on_request = on_request, .on_step = on_step,
				   .on_sched = on_sched, .on_exit = on_exit_,
				   .on_session = on_session };
