// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Why TTFT changed between two runs (compare.h; docs/judgements.md#why-ttft-changed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/compare.h"
#include "llm/compare_state.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/json.h"

static const char *const cause_names[CAUSE__COUNT] = {
	[CAUSE_NONE] = "none",	   [CAUSE_CAPACITY] = "capacity", [CAUSE_PROMPT] = "prompt",
	[CAUSE_CACHE] = "cache",   [CAUSE_ENGINE] = "engine",	  [CAUSE_NETWORK] = "network",
	[CAUSE_UNKNOWN] = "unknown",
};

const char *cmp_cause__name(enum cmp_cause c)
{
	return c < CAUSE__COUNT ? cause_names[c] : "unknown";
}

struct compare *compare__new(void)
{
	return calloc(1, sizeof(struct compare));
}

void compare__free(struct compare *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ng; i++) {
		free(c->g[i].side[0].v);
		free(c->g[i].side[1].v);
	}
	free(c->g);
	for (int s = 0; s < 2; s++) {
		free(c->s[s].busy);
		free(c->s[s].srv);
	}
	jdoc__free(&c->doc);
	free(c);
}

uint64_t compare__bad(const struct compare *c, enum cmp_side side)
{
	return c->s[side].bad;
}

uint64_t compare__requests(const struct compare *c, enum cmp_side side)
{
	return c->s[side].requests;
}

/* ---- reading a side ---- */

static double num(const struct jval *v)
{
	if (jv_is(v, J_INT))
		return (double)v->i;
	if (jv_is(v, J_REAL))
		return v->d;
	return NAN;
}

static uint64_t u64(const struct jval *v)
{
	return jv_is(v, J_INT) && v->i > 0 ? (uint64_t)v->i : 0;
}

/* A name from a record, cut to n and made printable (it is printed as text). */
static void copy(char *dst, size_t n, const char *s)
{
	snprintf(dst, n, "%s", s && *s ? s : "-");
	for (; *dst; dst++)
		if ((unsigned char)*dst < 0x20 || *dst == 0x7f)
			*dst = '?';
}

static bool grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return true;
	ncap = *cap ? *cap * 2 : 16;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return false;
	*v = nv;
	*cap = ncap;
	return true;
}

static struct cgroup *group_of(struct compare *c, const char *comm, const char *role,
				const char *api, const char *model)
{
	struct cgroup k = { 0 };

	copy(k.comm, sizeof(k.comm), comm);
	copy(k.role, sizeof(k.role), role);
	copy(k.api, sizeof(k.api), api);
	copy(k.model, sizeof(k.model), model);
	for (size_t i = 0; i < c->ng; i++) {
		struct cgroup *g = &c->g[i];

		if (!strcmp(g->comm, k.comm) && !strcmp(g->role, k.role) && !strcmp(g->api, k.api) &&
		    !strcmp(g->model, k.model))
			return g;
	}
	if (!grow((void **)&c->g, &c->capg, c->ng, sizeof(*c->g)))
		return NULL;
	c->g[c->ng] = k;
	return &c->g[c->ng++];
}

/* A client's server, among the newest SERVERS_LOOKED server records: a client's record follows
 * its server's within the requests that finished meanwhile (one not found: parts unknown). */
#define SERVERS_LOOKED 4096

static const double *server_parts(struct side_state *s, uint64_t id)
{
	for (size_t i = s->nsrv, k = 0; id && i-- > 0 && k < SERVERS_LOOKED; k++) {
		if (s->srv[i].id == id)
			return s->srv[i].parts;
	}
	return NULL;
}

/* A request into its group's side: a server's parts kept by its id for its clients; a
 * client joined to its server (server_id) takes them, and its upstream time as the network's. */
static int add_request(struct side_state *s, struct reqs *side, struct cmp_request q)
{
	if (q.server && q.id) {
		if (!grow((void **)&s->srv, &s->capsrv, s->nsrv, sizeof(*s->srv)))
			return -1;
		s->srv[s->nsrv].id = q.id;
		s->srv[s->nsrv].end = q.end;
		memcpy(s->srv[s->nsrv++].parts, q.parts, sizeof(q.parts));
	} else if (!q.server) {
		const double *sp = server_parts(s, q.server_id);
		double upstream = q.parts[P_NETWORK];

		if (sp)
			memcpy(q.parts, sp, sizeof(q.parts));
		q.parts[P_NETWORK] = upstream;
	}
	if (q.start && (!s->first || q.start < s->first))
		s->first = q.start;
	if (q.end > s->last)
		s->last = q.end;
	s->requests++;
	if (!grow((void **)&side->v, &side->cap, side->n, sizeof(*side->v)))
		return -1;
	side->v[side->n++] = q;
	return 0;
}

static void add_busy(struct side_state *s, uint32_t pid, uint64_t start, uint64_t end)
{
	size_t i;

	if (!start || end <= start)
		return;
	for (i = 0; i < s->nbusy && s->busy[i].pid != pid; i++)
		;
	if (i == s->nbusy) {
		if (!grow((void **)&s->busy, &s->capbusy, s->nbusy, sizeof(*s->busy)))
			return;
		s->busy[s->nbusy++] = (struct busy){ pid, 0 };
	}
	s->busy[i].ns += end - start;
}

int compare__line(struct compare *c, enum cmp_side side, const char *line, size_t len)
{
	const struct jval *o = jdoc__parse(&c->doc, line, len);
	struct side_state *s = &c->s[side];
	const char *type;
	struct cgroup *g;

	if (!jv_is(o, J_OBJECT)) {
		s->bad++;
		return -1;
	}
	type = jv_str(jv_get(o, "type"));
	if (!type)
		return 0;
	if (!strcmp(type, "request")) {
		const struct jval *a = jv_get(o, "attribution");
		const char *role = jv_str(jv_get(o, "role"));
		bool server = role && !strcmp(role, "server");
		struct cmp_request q = { .ttft = num(jv_get(o, "ttft_ms")), .e2e = num(jv_get(o, "e2e_ms")),
				  .input = num(jv_get(o, "input_tokens")),
				  .cached = num(jv_get(o, "cached_tokens")),
				  .start = u64(jv_get(o, "start_ns")), .end = u64(jv_get(o, "end_ns")),
				  .parts = { num(jv_get(a, "queue_ms")), num(jv_get(a, "prefill_ms")),
					     num(jv_get(a, "emit_ms")),
					     server ? NAN : num(jv_get(o, "upstream_ms")) },
				  .id = u64(jv_get(o, "id")), .server_id = u64(jv_get(o, "server_id")),
				  .server = server };

		g = group_of(c, jv_str(jv_get(o, "comm")), role, jv_str(jv_get(o, "api")),
			     jv_str(jv_get(o, "model")));
		return g ? add_request(s, &g->side[side], q) : -1;
	}
	if (!strcmp(type, "engine_step"))
		add_busy(s, (uint32_t)u64(jv_get(o, "pid")), u64(jv_get(o, "start_ns")),
			 u64(jv_get(o, "end_ns")));
	else if (!strcmp(type, "gpu_step"))
		add_busy(s, (uint32_t)u64(jv_get(o, "pid")), u64(jv_get(o, "first_launch_ns")),
			 u64(jv_get(o, "gpu_done_ns")));
	else if (jv_get(o, "waiting") && !isnan(num(jv_get(o, "waiting")))) {
		/* an engine wire's step (vllm_step): its scheduler's waiting queue */
		s->waiting_sum += num(jv_get(o, "waiting"));
		s->waiting_n++;
	}
	return 0;
}

void compare__describe(const struct request *r, const struct request_metrics *m,
		       struct cmp_request *q)
{
	*q = (struct cmp_request){ .ttft = m->ttft_ms, .e2e = m->e2e_ms,
			    .input = r->input_tokens.set ? (double)r->input_tokens.v : NAN,
			    .cached = r->cached_tokens.set ? (double)r->cached_tokens.v : NAN,
			    .start = r->start_ns, .end = r->end_ns,
			    .parts = { NAN, NAN, NAN, NAN }, .id = r->id, .server_id = r->server_id,
			    .server = r->role == ROLE_SERVER };
	if (r->attr && r->attr->ok) { /* as the record's attribution says it (sinks/jsonl.c) */
		struct ttft_split sp;

		attribution__ttft_split(r->attr, &sp);
		q->parts[P_QUEUE] = sp.queue_apart ? (double)sp.queue_ns / 1e6 : NAN;
		q->parts[P_PREFILL] = sp.queue_apart ? (double)sp.prefill_ns / 1e6 : NAN;
		q->parts[P_EMIT] = (double)sp.emit_ns / 1e6;
	}
	if (!q->server && r->upstream_set)
		q->parts[P_NETWORK] = (double)r->upstream_ns / 1e6;
}

int compare__add(struct compare *c, enum cmp_side side, const char *comm, const char *role,
		 const char *api, const char *model, const struct cmp_request *q)
{
	struct cgroup *g = group_of(c, comm, role, api, model);

	return g ? add_request(&c->s[side], &g->side[side], *q) : -1;
}

int compare__request(struct compare *c, enum cmp_side side, const struct request *r,
		     const struct request_metrics *m)
{
	struct cmp_request q;

	compare__describe(r, m, &q);
	return compare__add(c, side, r->comm, role__name(r->role), api__name(r->api),
			    request__model(r), &q);
}

void compare__expire(struct compare *c, enum cmp_side side, uint64_t before_ns)
{
	struct side_state *s = &c->s[side];
	size_t k = 0;

	s->requests = 0;
	s->first = 0;
	for (size_t i = 0; i < c->ng; i++) {
		struct reqs *r = &c->g[i].side[side];

		k = 0;
		for (size_t j = 0; j < r->n; j++) {
			if (r->v[j].end < before_ns)
				continue;
			r->v[k++] = r->v[j];
			if (r->v[j].start && (!s->first || r->v[j].start < s->first))
				s->first = r->v[j].start;
		}
		r->n = k;
		s->requests += k;
	}
	k = 0;
	for (size_t j = 0; j < s->nsrv; j++) {
		if (s->srv[j].end >= before_ns)
			s->srv[k++] = s->srv[j];
	}
	s->nsrv = k;
}

/* ---- the statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest rank, as base/stats.c: the smallest value with at least p % at or below it. */
static size_t rank(size_t n, double p)
{
	size_t k = (size_t)ceil(p / 100.0 * (double)n);

	return k ? k - 1 : 0;
}

static uint64_t next(uint64_t *rng)
{
	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	return *rng;
}

/* p of a resample (with replacement) of v, using tmp. */
static double resampled(const double *v, size_t n, double p, double *tmp, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++)
		tmp[i] = v[next(rng) % n];
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return tmp[rank(n, p)];
}

/* The 95 % bootstrap interval of after's p minus before's (each side resampled on its own,
 * CMP_RESAMPLES times, a fixed seed: the same runs give the same interval). */
static int interval(const double *b, size_t nb, const double *a, size_t na, double p, double *lo,
		    double *hi)
{
	double *d = malloc(CMP_RESAMPLES * sizeof(*d)), *tmp = malloc((nb > na ? nb : na) * sizeof(*tmp));
	uint64_t rng = 20261206;

	if (!d || !tmp) {
		free(d);
		free(tmp);
		return -1;
	}
	for (size_t i = 0; i < CMP_RESAMPLES; i++)
		d[i] = resampled(a, na, p, tmp, &rng) - resampled(b, nb, p, tmp, &rng);
	qsort(d, CMP_RESAMPLES, sizeof(*d), cmp_double);
	*lo = d[(size_t)(0.025 * CMP_RESAMPLES)];
	*hi = d[(size_t)(0.975 * CMP_RESAMPLES) - 1];
	free(d);
	free(tmp);
	return 0;
}

/* ---- one group, one percentile ---- */

static int by_ttft(const void *x, const void *y)
{
	return cmp_double(&((const struct cmp_request *)x)->ttft, &((const struct cmp_request *)y)->ttft);
}

static void band_of(const struct cmp_request *v, size_t n, double p, struct band *b)
{
	size_t from = rank(n, p >= 99 ? 95 : p - 10), to = rank(n, p >= 99 ? 100 : p + 10);
	double sum[P__COUNT] = { 0 }, ttft = 0, input = 0, cached = 0;
	size_t have[P__COUNT] = { 0 }, tokens = 0, m = to - from + 1;

	for (size_t i = from; i <= to; i++) {
		const struct cmp_request *q = &v[i];

		ttft += q->ttft;
		for (int k = 0; k < P__COUNT; k++) {
			if (!isnan(q->parts[k])) {
				sum[k] += q->parts[k];
				have[k]++;
			}
		}
		if (!isnan(q->input) && !isnan(q->cached) && !isnan(q->parts[P_PREFILL])) {
			input += q->input;
			cached += q->cached;
			tokens++;
		}
	}
	b->ttft = ttft / (double)m;
	/* a part most of the band does not tell is not told */
	for (int k = 0; k < P__COUNT; k++)
		b->parts[k] = have[k] * 2 > m ? sum[k] / (double)have[k] : NAN;
	b->input = tokens * 2 > m ? input / (double)tokens : NAN;
	b->cached = tokens * 2 > m ? cached / (double)tokens : NAN;
}

static double diff(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a - b;
}

/* Prefill's cost of one more uncached token: the slope of prefill over uncached tokens, fitted
 * (least squares) over both sides' requests together, so that the same engine reads the same
 * on both; 0 where it comes out below 0, NAN where the tokens do not vary. A step costs more
 * than its tokens (a fixed part, and on some engines a part that grows with the context): the
 * slope alone is what more or fewer tokens change. */
static double per_token(const struct cmp_request *const sides[2], const size_t n[2])
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0, var;

	for (int s = 0; s < 2; s++) {
		for (size_t i = 0; i < n[s]; i++) {
			const struct cmp_request *q = &sides[s][i];
			double u = q->input - q->cached;

			if (isnan(u) || isnan(q->parts[P_PREFILL]))
				continue;
			sx += u;
			sy += q->parts[P_PREFILL];
			sxx += u * u;
			sxy += u * q->parts[P_PREFILL];
			k++;
		}
	}
	var = k * sxx - sx * sx;
	if (k < 3 || var <= 1e-9 * (k * sxx + 1))
		return NAN;
	return fmax(0, (k * sxy - sx * sy) / var);
}

/* Each cause's share of the change: queueing is capacity's; prefill is prompt's (more prompt
 * tokens, at the fitted cost of a token), cache's (fewer cached ones, the same) and the
 * engine's (the rest: the same tokens taking longer), which sum to it exactly; emit and
 * upstream are the network's. A prefill change without token counts is unknown's. */
static void split(struct change *ch)
{
	const struct band *b = &ch->bb, *a = &ch->ba;
	double prefill = diff(a->parts[P_PREFILL], b->parts[P_PREFILL]), told = 0;
	double emit = diff(a->parts[P_EMIT], b->parts[P_EMIT]);
	double net = diff(a->parts[P_NETWORK], b->parts[P_NETWORK]);

	for (int k = 0; k < CAUSE__COUNT; k++)
		ch->by[k] = NAN;
	ch->by[CAUSE_CAPACITY] = diff(a->parts[P_QUEUE], b->parts[P_QUEUE]);
	if (!isnan(prefill) && !isnan(a->input) && !isnan(b->input)) {
		double c = isnan(ch->per_token) ? 0 : ch->per_token;

		ch->by[CAUSE_PROMPT] = (a->input - b->input) * c;
		ch->by[CAUSE_CACHE] = -(a->cached - b->cached) * c;
		ch->by[CAUSE_ENGINE] = prefill - ch->by[CAUSE_PROMPT] - ch->by[CAUSE_CACHE];
	} else if (!isnan(prefill)) {
		ch->by[CAUSE_UNKNOWN] = prefill;
	}
	if (!isnan(emit) || !isnan(net))
		ch->by[CAUSE_NETWORK] = (isnan(emit) ? 0 : emit) + (isnan(net) ? 0 : net);
	for (int k = 0; k < CAUSE__COUNT; k++)
		told += isnan(ch->by[k]) ? 0 : ch->by[k];
	ch->other = a->ttft - b->ttft - told;
}

/* Requests a side needs for a verdict on p: CMP_LEAST, and one past p at least (p99: 100;
 * with fewer, p99 is the largest value, which one request moves). */
size_t compare__least(double p)
{
	size_t past = (size_t)ceil(100.0 / (100.0 - p) - 1e-9);

	return past > CMP_LEAST ? past : CMP_LEAST;
}

void compare__judge(const struct cgroup *g, double p, struct change *ch, double *tb,
			 double *ta)
{
	const struct reqs *B = &g->side[CMP_BEFORE], *A = &g->side[CMP_AFTER];
	double best = 0, dir;
	struct cmp_request *sb, *sa;

	memset(ch, 0, sizeof(*ch));
	ch->p = p;
	ch->cause = CAUSE_NONE;
	/* the requests with a TTFT, by it */
	for (size_t i = 0; i < B->n; i++)
		if (!isnan(B->v[i].ttft))
			tb[ch->nb++] = B->v[i].ttft;
	for (size_t i = 0; i < A->n; i++)
		if (!isnan(A->v[i].ttft))
			ta[ch->na++] = A->v[i].ttft;
	if (ch->nb < compare__least(p) || ch->na < compare__least(p)) {
		ch->cause = CAUSE_UNKNOWN; /* too few to tell noise from a change */
		return;
	}
	qsort(tb, ch->nb, sizeof(*tb), cmp_double);
	qsort(ta, ch->na, sizeof(*ta), cmp_double);
	ch->before = tb[rank(ch->nb, p)];
	ch->after = ta[rank(ch->na, p)];
	if (interval(tb, ch->nb, ta, ch->na, p, &ch->lo, &ch->hi))
		return;
	ch->judged = true;
	ch->significant = (ch->lo > 0 || ch->hi < 0) &&
			  fabs(ch->after - ch->before) >= fmax(CMP_FLOOR_MS, CMP_FLOOR_SHARE * ch->before);
	/* the bands, from the requests sorted by TTFT (those without one last) */
	sb = malloc(B->n * sizeof(*sb));
	sa = malloc(A->n * sizeof(*sa));
	if (!sb || !sa) {
		free(sb);
		free(sa);
		ch->judged = false;
		return;
	}
	for (size_t i = 0, k = 0; i < B->n; i++)
		if (!isnan(B->v[i].ttft))
			sb[k++] = B->v[i];
	for (size_t i = 0, k = 0; i < A->n; i++)
		if (!isnan(A->v[i].ttft))
			sa[k++] = A->v[i];
	qsort(sb, ch->nb, sizeof(*sb), by_ttft);
	qsort(sa, ch->na, sizeof(*sa), by_ttft);
	band_of(sb, ch->nb, p, &ch->bb);
	band_of(sa, ch->na, p, &ch->ba);
	ch->per_token = per_token((const struct cmp_request *const[2]){ sb, sa },
				  (const size_t[2]){ ch->nb, ch->na });
	free(sb);
	free(sa);
	split(ch);
	if (!ch->significant)
		return;
	/* the cause that moved it most, in the change's direction */
	dir = ch->after > ch->before ? 1 : -1;
	ch->cause = CAUSE_UNKNOWN;
	for (int k = CAUSE_CAPACITY; k < CAUSE__COUNT; k++) {
		if (!isnan(ch->by[k]) && dir * ch->by[k] > best) {
			best = dir * ch->by[k];
			ch->cause = (enum cmp_cause)k;
		}
	}
}

/* ---- the evidence: what the load, the prompts and the cache were on each side ---- */

void compare__evidence(const struct side_state *s, const struct reqs *r, struct evidence *e)
{
	uint64_t first = 0, last = 0, end = 0;
	double e2e = 0, input = 0, cached = 0, hits = 0, known = 0;
	double *prompts = malloc(3 * (r->n ? r->n : 1) * sizeof(*prompts));
	double *prefills = prompts ? prompts + r->n : NULL, *uncached = prefills ? prefills + r->n : NULL;
	size_t np = 0, nu = 0;
	double span = (double)(s->last - s->first) / 1e9, most = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct cmp_request *q = &r->v[i];

		if (q->start && (!first || q->start < first))
			first = q->start;
		if (q->start > last)
			last = q->start;
		if (q->end > end)
			end = q->end;
		e2e += isnan(q->e2e) ? 0 : q->e2e;
		if (!isnan(q->input) && !isnan(q->cached)) {
			input += q->input;
			cached += q->cached;
			hits += q->cached >= 0.9 * q->input && q->input > 0;
			known++;
			if (!isnan(q->parts[P_PREFILL]) && prompts) {
				prefills[nu] = q->parts[P_PREFILL];
				uncached[nu++] = q->input - q->cached;
			}
		}
		if (!isnan(q->input) && prompts)
			prompts[np++] = q->input;
	}
	e->arrivals = last > first ? (double)(r->n - 1) / ((double)(last - first) / 1e9) : NAN;
	e->concurrency = end > first ? e2e / ((double)(end - first) / 1e6) : NAN;
	for (size_t i = 0; i < s->nbusy; i++)
		most = fmax(most, (double)s->busy[i].ns / 1e9);
	e->busy = s->nbusy && span > 0 ? fmin(1, most / span) : NAN;
	e->waiting = s->waiting_n ? s->waiting_sum / (double)s->waiting_n : NAN;
	e->prompt_p50 = e->prefill_p50 = e->uncached_p50 = NAN;
	if (np) {
		qsort(prompts, np, sizeof(*prompts), cmp_double);
		e->prompt_p50 = prompts[rank(np, 50)];
	}
	if (nu) {
		qsort(prefills, nu, sizeof(*prefills), cmp_double);
		qsort(uncached, nu, sizeof(*uncached), cmp_double);
		e->prefill_p50 = prefills[rank(nu, 50)];
		e->uncached_p50 = uncached[rank(nu, 50)];
	}
	free(prompts);
	e->cached_share = input > 0 ? cached / input : NAN;
	e->hit_share = known ? hits / known : NAN;
}
