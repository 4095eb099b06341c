// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attribution (attrib.h; definitions in docs/attribution.md).
 *
 * Kept: the steps of every GPU process (compact, for KEEP_NS), every server request's first
 * token (same), each process's ancestors, and the times GPU marks were lost. A finished request
 * is attributed against the steps of its engine in a window around it:
 *   1. the engine: --engine, else the HTTP process itself if it stepped a GPU, else the GPU
 *      processes stepping during the request whose nearest common ancestor with it (other
 *      than init) is nearest; several such processes must step in lockstep (tensor parallel)
 *      and their steps are merged by time;
 *   2. which step produced each token event: one the host saw complete before it, placed so
 *      that a request's events are on successive steps (align_tokens), which undoes the delay
 *      of a server that writes late; finished requests' first tokens are placed so at once
 *      (attrib__finished), for the requests attributed after them;
 *   3. which steps carried prefill: those that produced some request's first token (exact),
 *      and, with chunked prefill, the steps well above the decode baseline that produced no
 *      first token (the earlier chunks of a long prompt);
 *   4. the TTFT split and the gaps' steps follow from the definitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "llm/request.h"
#include "engine/attrib.h"

#define KEEP_NS (900ull * 1000000000ull)    /* steps and first tokens kept: 15 min */
#define LOOKBACK_NS (2000000000ull)	     /* steps before arrival read for baselines */
#define BASELINE_STEPS 8		     /* decode baseline: from at least this many steps */
#define MAX_ANCESTORS 16
#define TREE_BUCKETS 1024
#define MAX_LOSSES 256

/* A step of one GPU process, as much as attribution needs. */
struct astep {
	uint64_t start; /* first launch */
	uint64_t done;	/* GPU completion (or its upper bound) */
	uint64_t seen;	/* host observed completion */
	bool bound;
};

struct gpu_proc {
	uint32_t pid;
	struct astep *v; /* by seen, oldest first */
	size_t n, cap;
};

struct tree {
	uint32_t pid;
	uint32_t anc[MAX_ANCESTORS];
	uint32_t n;
	struct tree *next;
};

struct first_token {
	uint64_t ft, arrival, id;
	uint64_t step_start; /* first launch of the step that produced it, once the request
				finished and its events were aligned (0: the latest seen before ft) */
	uint32_t http_pid;
};

/* A first token placed on a step of the window being attributed. */
struct mark {
	size_t k;  /* the step */
	size_t f;  /* fts[f] */
	size_t ls; /* the latest step seen before it */
	bool aligned;
};

struct engine {
	uint32_t pids[ATTRIB_MAX_PIDS];
	uint32_t npids;
	bool chunked;		  /* in the window being attributed */
	uint64_t chunk_excess_ns; /* typical excess of a full prefill chunk over decode */
	uint64_t counted_to;	  /* steps seen up to here are in the stats */
	struct attrib_engine_stats st;
	struct engine *next;
};

struct http_engine {
	uint32_t http_pid;
	struct engine *e;
};

struct override {
	uint32_t http_pid;
	uint32_t pids[ATTRIB_MAX_PIDS];
	uint32_t npids;
};

struct attrib {
	struct gpu_proc *procs;
	size_t nprocs, capprocs;
	struct tree *trees[TREE_BUCKETS];
	struct first_token *fts; /* by ft */
	size_t nfts, capfts;
	uint64_t losses[MAX_LOSSES];
	size_t nlosses;
	uint64_t pruned_before; /* nothing older than this is kept */
	struct engine *engines;
	struct http_engine *http;
	size_t nhttp, caphttp;
	struct override *overrides;
	size_t noverrides;
	uint32_t *clients; /* processes that made LLM API calls themselves: proxies, gateways */
	size_t nclients, capclients;
	struct mark *marks; /* of the window being attributed, by step */
	size_t nmarks, capmarks;
};

/* A step of the engine (merged across tensor-parallel ranks) in the window of one request. */
struct estep {
	uint64_t start, done, seen, busy_start;
	bool bound;
	uint32_t ranks;		/* bit per engine pid */
	size_t mk_lo, mk_hi;	/* the first tokens it produced: marks[mk_lo..mk_hi) */
	uint64_t baseline;	/* the window's decode baseline (0: not known) */
	bool orphan;		/* carried prefill that produced no first token: an earlier chunk */
	bool maybe_first;	/* a first token not aligned yet may have come from it */
};

struct attrib *attrib__new(void)
{
	return calloc(1, sizeof(struct attrib));
}

void attrib__free(struct attrib *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nprocs; i++)
		free(a->procs[i].v);
	free(a->procs);
	for (size_t b = 0; b < TREE_BUCKETS; b++) {
		while (a->trees[b]) {
			struct tree *t = a->trees[b];

			a->trees[b] = t->next;
			free(t);
		}
	}
	while (a->engines) {
		struct engine *e = a->engines;

		a->engines = e->next;
		free(e);
	}
	free(a->fts);
	free(a->marks);
	free(a->clients);
	free(a->http);
	free(a->overrides);
	free(a);
}

int attrib__override(struct attrib *a, const char *spec)
{
	struct override o = { 0 };
	const char *p = spec;
	char *end;
	unsigned long v = strtoul(p, &end, 10);
	void *np;

	if (end == p || *end != '=' || !v || v > UINT32_MAX)
		return -1;
	o.http_pid = (uint32_t)v;
	p = end + 1;
	for (;;) {
		v = strtoul(p, &end, 10);
		if (end == p || !v || v > UINT32_MAX || o.npids == ATTRIB_MAX_PIDS)
			return -1;
		o.pids[o.npids++] = (uint32_t)v;
		if (!*end)
			break;
		if (*end != ',')
			return -1;
		p = end + 1;
	}
	np = realloc(a->overrides, (a->noverrides + 1) * sizeof(o));
	if (!np)
		return -1;
	a->overrides = np;
	a->overrides[a->noverrides++] = o;
	return 0;
}

/* ---- what is kept ---- */

void attrib__proc_tree(struct attrib *a, uint32_t pid, const uint32_t *anc, size_t n)
{
	struct tree **link = &a->trees[pid % TREE_BUCKETS], *t;

	while (*link && (*link)->pid != pid)
		link = &(*link)->next;
	t = *link;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return; /* its requests say the tree is unknown */
		t->pid = pid;
		*link = t;
	}
	t->n = n < MAX_ANCESTORS ? (uint32_t)n : MAX_ANCESTORS;
	memcpy(t->anc, anc, t->n * sizeof(*anc));
}

static const struct tree *tree_of(const struct attrib *a, uint32_t pid)
{
	const struct tree *t = a->trees[pid % TREE_BUCKETS];

	while (t && t->pid != pid)
		t = t->next;
	return t;
}

static struct gpu_proc *proc_of(struct attrib *a, uint32_t pid, bool create)
{
	for (size_t i = 0; i < a->nprocs; i++) {
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	}
	if (!create || !array__reserve((void **)&a->procs, &a->capprocs, a->nprocs + 1,
				       sizeof(*a->procs)))
		return NULL;
	a->procs[a->nprocs] = (struct gpu_proc){ .pid = pid };
	return &a->procs[a->nprocs++];
}

void attrib__step(struct attrib *a, const struct engine_step *s)
{
	struct gpu_proc *p = proc_of(a, s->pid, true);
	struct astep st = { s->start_ns, s->end_ns, s->host_seen_ns, s->end_bound };
	size_t i;

	if (!p || !array__reserve((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return; /* a lost step is a loss: requests in its time are not attributed */
	/* Steps come in the order the host saw them, nearly: keep the array sorted by seen. */
	for (i = p->n; i > 0 && p->v[i - 1].seen > st.seen; i--)
		;
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(st));
	p->v[i] = st;
	p->n++;
}

void attrib__exit(struct attrib *a, uint32_t pid)
{
	struct tree **link = &a->trees[pid % TREE_BUCKETS];

	for (size_t i = 0; i < a->nclients; i++) {
		if (a->clients[i] == pid) {
			a->clients[i] = a->clients[--a->nclients];
			break;
		}
	}
	/* an engine's tree stays: its steps are still matched to its server's requests */
	if (proc_of(a, pid, false))
		return;
	while (*link && (*link)->pid != pid)
		link = &(*link)->next;
	if (*link) {
		struct tree *t = *link;

		*link = t->next;
		free(t);
	}
}

static bool is_client(const struct attrib *a, uint32_t pid)
{
	for (size_t i = 0; i < a->nclients; i++) {
		if (a->clients[i] == pid)
			return true;
	}
	return false;
}

bool attrib__has_steps(const struct attrib *a)
{
	return a->nprocs > 0;
}

void attrib__first_token(struct attrib *a, const struct request *r)
{
	struct first_token f = { r->first_token_ns, r->start_ns, r->id, 0, r->pid };
	size_t i;

	if (r->role == ROLE_CLIENT) {
		/* a server that is also a client forwards what it serves: its first tokens are
		 * its upstream's, already counted there */
		if (!is_client(a, r->pid) &&
		    array__reserve((void **)&a->clients, &a->capclients, a->nclients + 1,
				   sizeof(*a->clients)))
			a->clients[a->nclients++] = r->pid;
		return;
	}
	if (is_client(a, r->pid))
		return;
	if (!array__reserve((void **)&a->fts, &a->capfts, a->nfts + 1, sizeof(*a->fts)))
		return;
	for (i = a->nfts; i > 0 && a->fts[i - 1].ft > f.ft; i--)
		;
	memmove(&a->fts[i + 1], &a->fts[i], (a->nfts - i) * sizeof(f));
	a->fts[i] = f;
	a->nfts++;
}

void attrib__gpu_loss(struct attrib *a, uint64_t ts)
{
	if (a->nlosses == MAX_LOSSES) {
		memmove(a->losses, a->losses + 1, (MAX_LOSSES - 1) * sizeof(*a->losses));
		a->nlosses--;
	}
	a->losses[a->nlosses++] = ts;
}

void attrib__prune(struct attrib *a, uint64_t ts)
{
	uint64_t before = ts > KEEP_NS ? ts - KEEP_NS : 0;
	size_t k;

	if (before <= a->pruned_before)
		return;
	a->pruned_before = before;
	for (size_t i = 0; i < a->nprocs; i++) {
		struct gpu_proc *p = &a->procs[i];

		for (k = 0; k < p->n && p->v[k].seen < before; k++)
			;
		if (k) {
			memmove(p->v, p->v + k, (p->n - k) * sizeof(*p->v));
			p->n -= k;
		}
	}
	for (k = 0; k < a->nfts && a->fts[k].ft < before; k++)
		;
	if (k) {
		memmove(a->fts, a->fts + k, (a->nfts - k) * sizeof(*a->fts));
		a->nfts -= k;
	}
}

/* ---- the engine of an HTTP process ---- */

/* Index of the first step seen at or after t. */
static size_t first_seen_at(const struct astep *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid].seen < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool stepped_between(const struct gpu_proc *p, uint64_t from, uint64_t to)
{
	size_t i = first_seen_at(p->v, p->n, from);

	return i < p->n && p->v[i].seen <= to;
}

static bool in_list(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == x)
			return true;
	}
	return false;
}

/* How far up pid's ancestry (0: pid itself) the nearest ancestor it shares with gpu_pid is;
 * -1 when they share none but init. */
static int shared_depth(const struct attrib *a, uint32_t pid, const struct tree *pt, uint32_t gpu_pid)
{
	const struct tree *gt = tree_of(a, gpu_pid);
	uint32_t gchain[MAX_ANCESTORS + 1];
	size_t gn = 0;

	gchain[gn++] = gpu_pid;
	if (gt) {
		memcpy(gchain + 1, gt->anc, gt->n * sizeof(*gt->anc));
		gn += gt->n;
	}
	if (in_list(gchain, gn, pid))
		return 0;
	for (uint32_t i = 0; i < pt->n; i++) {
		if (pt->anc[i] > 1 && in_list(gchain, gn, pt->anc[i]))
			return (int)i + 1;
	}
	return -1;
}

static int find_engine(struct attrib *a, const struct request *r, uint64_t to,
		       struct attribution *out)
{
	int best = -1, depth[64];
	const struct tree *pt;
	size_t ncand = 0;
	uint32_t cand[64];

	for (size_t i = 0; i < a->noverrides; i++) {
		if (a->overrides[i].http_pid == r->pid) {
			memcpy(out->engine_pids, a->overrides[i].pids, sizeof(out->engine_pids));
			out->nengine_pids = a->overrides[i].npids;
			return 0;
		}
	}
	for (size_t i = 0; i < a->nprocs && ncand < 64; i++) {
		if (stepped_between(&a->procs[i], r->start_ns, to))
			cand[ncand++] = a->procs[i].pid;
	}
	if (!ncand) {
		snprintf(out->error, sizeof(out->error),
			 "no GPU steps were seen during this request (engine on another host, or "
			 "its CUDA libraries not probed)");
		return -1;
	}
	if (in_list(cand, ncand, r->pid)) {
		out->engine_pids[0] = r->pid;
		out->nengine_pids = 1;
		return 0;
	}
	if (is_client(a, r->pid)) {
		snprintf(out->error, sizeof(out->error),
			 "pid %u forwards LLM requests to an upstream server (a proxy): the upstream's "
			 "records are attributed",
			 r->pid);
		return -1;
	}
	pt = tree_of(a, r->pid);
	if (!pt) {
		snprintf(out->error, sizeof(out->error),
			 "the process tree of pid %u is not known; name its engine with --engine",
			 r->pid);
		return -1;
	}
	for (size_t i = 0; i < ncand; i++) {
		depth[i] = shared_depth(a, r->pid, pt, cand[i]);
		if (depth[i] >= 0 && (best < 0 || depth[i] < best))
			best = depth[i];
	}
	if (best < 0) {
		snprintf(out->error, sizeof(out->error),
			 "no GPU process shares an ancestor other than init with pid %u; name its "
			 "engine with --engine",
			 r->pid);
		return -1;
	}
	for (size_t i = 0; i < ncand && out->nengine_pids < ATTRIB_MAX_PIDS; i++) {
		if (depth[i] == best)
			out->engine_pids[out->nengine_pids++] = cand[i];
	}
	out->estimated |= EST_ENGINE;
	return 0;
}

static struct engine *engine_of(struct attrib *a, const uint32_t *pids, uint32_t n)
{
	struct engine *e;

	for (e = a->engines; e; e = e->next) {
		if (e->npids == n && !memcmp(e->pids, pids, n * sizeof(*pids)))
			return e;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	memcpy(e->pids, pids, n * sizeof(*pids));
	e->npids = n;
	memcpy(e->st.pids, pids, n * sizeof(*pids));
	e->st.npids = n;
	e->next = a->engines;
	a->engines = e;
	return e;
}

static void remember_http(struct attrib *a, uint32_t http_pid, struct engine *e)
{
	for (size_t i = 0; i < a->nhttp; i++) {
		if (a->http[i].http_pid == http_pid) {
			a->http[i].e = e;
			return;
		}
	}
	if (!array__reserve((void **)&a->http, &a->caphttp, a->nhttp + 1, sizeof(*a->http)))
		return;
	a->http[a->nhttp++] = (struct http_engine){ http_pid, e };
}

/* Whether first tokens written by http_pid come from engine e's steps. */
static bool serves(const struct attrib *a, uint32_t http_pid, uint32_t own_pid, const struct engine *e)
{
	if (http_pid == own_pid)
		return true;
	for (size_t i = 0; i < a->nhttp; i++) {
		if (a->http[i].http_pid == http_pid)
			return a->http[i].e == e;
	}
	return false;
}

/* ---- the engine's steps around one request ---- */

static int by_start(const void *x, const void *y)
{
	const struct estep *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static int by_seen(const void *x, const void *y)
{
	const struct estep *a = x, *b = y;

	return a->seen < b->seen ? -1 : a->seen > b->seen;
}

static int by_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * The engine's steps seen in [from, to], tensor-parallel ranks merged: a rank's step joins a
 * recent merged step it overlaps that lacks that rank. Returns the count (*out malloc'd), or
 * -1 with out->error set.
 */
static long gather_steps(struct attrib *a, const struct attribution *at, uint64_t from,
			 uint64_t to, struct estep **out, char *err, size_t errn)
{
	struct estep *v = NULL;
	size_t n = 0, cap = 0, m = 0, partial = 0;

	for (uint32_t r = 0; r < at->nengine_pids; r++) {
		struct gpu_proc *p = proc_of(a, at->engine_pids[r], false);

		if (!p)
			continue;
		for (size_t i = first_seen_at(p->v, p->n, from); i < p->n && p->v[i].seen <= to; i++) {
			if (!array__reserve((void **)&v, &cap, n + 1, sizeof(*v))) {
				free(v);
				snprintf(err, errn, "out of memory");
				return -1;
			}
			v[n++] = (struct estep){ .start = p->v[i].start, .done = p->v[i].done,
						 .seen = p->v[i].seen, .bound = p->v[i].bound,
						 .ranks = 1u << r };
		}
	}
	if (!n) {
		*out = v;
		return 0;
	}
	qsort(v, n, sizeof(*v), by_start);
	for (size_t i = 0; i < n; i++) {
		size_t j = m;
		bool joined = false;

		while (j > 0 && m - j < at->nengine_pids) {
			struct estep *c = &v[--j];

			if (!(c->ranks & v[i].ranks) && v[i].start <= c->done && c->start <= v[i].done) {
				c->done = c->done > v[i].done ? c->done : v[i].done;
				c->seen = c->seen > v[i].seen ? c->seen : v[i].seen;
				c->bound |= v[i].bound;
				c->ranks |= v[i].ranks;
				joined = true;
				break;
			}
		}
		if (!joined)
			v[m++] = v[i];
	}
	for (size_t i = 0; i < m; i++)
		partial += v[i].ranks != (1u << at->nengine_pids) - 1;
	if (at->nengine_pids > 1 && partial * 10 > m) {
		free(v);
		snprintf(err, errn,
			 "the GPU processes of this engine do not step in lockstep (%zu of %zu "
			 "steps on some only): several engines; name one with --engine",
			 partial, m);
		return -1;
	}
	qsort(v, m, sizeof(*v), by_seen);
	*out = v;
	return (long)m;
}

static uint64_t busy(const struct estep *s)
{
	return s->done > s->busy_start ? s->done - s->busy_start : 0;
}

static size_t latest_seen(const struct estep *v, size_t n, uint64_t t);

static int by_size(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;

	return a < b ? -1 : a > b;
}

static int by_mark(const void *x, const void *y)
{
	const struct mark *a = x, *b = y;

	return a->k < b->k ? -1 : a->k > b->k;
}

/* The step of the window that produced first token f: the one its own alignment found, else
 * the latest seen complete before it. n when none. */
static size_t step_of(const struct first_token *f, const struct estep *v, size_t n)
{
	size_t k = latest_seen(v, n, f->ft);

	if (k == n || !f->step_start)
		return k;
	for (size_t back = 0; back < 256 && back <= k; back++) {
		if (v[k - back].start == f->step_start)
			return k - back;
	}
	return k;
}

/* The first tokens of this engine's requests written in [v[0].seen, to], on their steps. A
 * request still streaming is not aligned yet: its first token is put as far behind the latest
 * step seen before it as the aligned ones around it were (the HTTP server's delay). */
static void place_first_tokens(struct attrib *a, const struct engine *e, uint32_t own_pid,
			       struct estep *v, size_t n, uint64_t to)
{
	size_t f = 0, hi = a->nfts, m = 0, nlags = 0, lag = 0, lags[64];

	a->nmarks = 0;
	while (n && f < hi) {
		size_t mid = (f + hi) / 2;

		if (a->fts[mid].ft < v[0].seen)
			f = mid + 1;
		else
			hi = mid;
	}
	for (size_t pass = 0; pass < 2; pass++) {
		for (size_t i = f; n && i < a->nfts && a->fts[i].ft <= to; i++) {
			const struct first_token *ft = &a->fts[i];
			size_t k, ls;

			if (!serves(a, ft->http_pid, own_pid, e) || (pass == 0) != !!ft->step_start)
				continue;
			ls = latest_seen(v, n, ft->ft);
			if (ls == n)
				continue;
			k = ft->step_start ? step_of(ft, v, n) : ls - (lag < ls ? lag : ls);
			if (pass == 0 && nlags < 64)
				lags[nlags++] = ls - k;
			if (!array__reserve((void **)&a->marks, &a->capmarks, a->nmarks + 1,
					    sizeof(*a->marks)))
				continue;
			a->marks[a->nmarks++] = (struct mark){ k, i, ls, !!ft->step_start };
		}
		if (pass == 0 && nlags) {
			qsort(lags, nlags, sizeof(*lags), by_size);
			lag = lags[nlags / 2];
		}
	}
	if (a->nmarks)
		qsort(a->marks, a->nmarks, sizeof(*a->marks), by_mark);
	for (size_t k = 0; k < n; k++) {
		v[k].mk_lo = m;
		while (m < a->nmarks && a->marks[m].k == k)
			m++;
		v[k].mk_hi = m;
	}
	/* where an unaligned first token came from is a guess: any step between the latest seen
	 * before it and as far back as the HTTP server was seen to lag may be it */
	for (size_t i = 0; i < a->nmarks; i++) {
		size_t ls = a->marks[i].ls, back = nlags ? lags[nlags - 1] + 1 : 2;

		for (size_t k = ls > back ? ls - back : 0; !a->marks[i].aligned && k <= ls; k++)
			v[k].maybe_first = true;
	}
}

/*
 * First tokens per step, GPU busy starts, the decode baseline, earlier prefill chunks.
 * The baseline is a low percentile of the GPU time of the window's steps that produced no
 * first token: an engine busy with long prompts has few steps of decodes alone, and a median
 * of recent ones would be a prefill chunk's.
 */
static void classify_steps(struct attrib *a, struct engine *e, uint32_t own_pid, struct estep *v,
			   size_t n, uint64_t to)
{
	uint64_t prev_done = 0, baseline = 0, excess[64], *plain = malloc(n * sizeof(*plain));
	size_t nplain = 0, nexcess = 0, pairs = 0;

	place_first_tokens(a, e, own_pid, v, n, to);
	for (size_t k = 0; k < n; k++) {
		/* The GPU runs one step after the other: a step launched early starts when the
		 * previous one ends. Steps are in seen order, the GPU order. */
		v[k].busy_start = v[k].start > prev_done ? v[k].start : prev_done;
		prev_done = v[k].done > prev_done ? v[k].done : prev_done;
		if (plain && v[k].mk_hi == v[k].mk_lo)
			plain[nplain++] = busy(&v[k]);
	}
	if (nplain >= BASELINE_STEPS) {
		qsort(plain, nplain, sizeof(*plain), by_u64);
		baseline = plain[nplain / 10];
	}
	free(plain);
	for (size_t k = 0; k < n; k++) {
		v[k].baseline = baseline;
		if (!baseline || v[k].mk_hi > v[k].mk_lo || v[k].maybe_first ||
		    busy(&v[k]) <= 3 * baseline + 500000)
			continue;
		v[k].orphan = true;
		if (nexcess < 64)
			excess[nexcess++] = busy(&v[k]) - baseline;
	}
	/* Earlier chunks of a long prompt show as runs of steps that carried prefill without
	 * producing a first token. A lone one can be a first token placed on the wrong step (a
	 * request still streaming, not aligned yet); runs of two, twice, may be chunked prefill */
	for (size_t k = 1; k < n; k++)
		pairs += v[k].orphan && v[k - 1].orphan;
	/* and the middle chunks of long prompts fill the step's token budget: most of them take
	 * about the same time (prompts computed whole, placed on the wrong step, would not) */
	e->chunked = false;
	if (pairs >= 2 && nexcess >= 4) {
		size_t near = 0;

		qsort(excess, nexcess, sizeof(*excess), by_u64);
		e->chunk_excess_ns = excess[nexcess / 2];
		for (size_t i = 0; i < nexcess; i++)
			near += excess[i] * 20 >= e->chunk_excess_ns * 17 &&
				excess[i] * 20 <= e->chunk_excess_ns * 23;
		e->chunked = near * 5 >= nexcess * 3;
	}
	if (e->chunked) {
		e->st.chunked = true;
	} else {
		/* without chunked prefill, a long step without first tokens is a slow decode */
		for (size_t k = 0; k < n; k++)
			v[k].orphan = false;
	}
}

/* Whether step s produced a first token of a request of this engine other than id. */
static bool prefill_of_other(const struct attrib *a, const struct estep *s, uint64_t id)
{
	for (size_t i = s->mk_lo; i < s->mk_hi; i++) {
		if (a->fts[a->marks[i].f].id != id)
			return true;
	}
	return false;
}

static int add_id(struct attribution *at, uint64_t id)
{
	size_t i;

	for (i = 0; i < at->ninterfered_by; i++) {
		if (at->interfered_by[i] == id)
			return 0;
	}
	uint64_t *np = realloc(at->interfered_by, (at->ninterfered_by + 1) * sizeof(*np));

	if (!np)
		return -1;
	at->interfered_by = np;
	np[at->ninterfered_by++] = id;
	return 0;
}

/* The requests whose prefill step k carried: those whose first token it produced, or for an
 * earlier chunk, the ones of the next step that produced first tokens. */
static void note_interference(const struct attrib *a, const struct estep *v, size_t n, size_t k,
			      struct attribution *at, uint64_t self)
{
	size_t j = k;

	if (v[k].orphan) {
		while (j < n && v[j].mk_lo == v[j].mk_hi)
			j++;
		if (j == n)
			return;
	}
	for (size_t i = v[j].mk_lo; i < v[j].mk_hi; i++) {
		const struct first_token *f = &a->fts[a->marks[i].f];

		if (f->id != self && (!v[k].orphan || f->arrival <= v[k].start))
			add_id(at, f->id);
	}
}

/* Time in [from, to) the GPU was running steps. */
static uint64_t busy_within(const struct estep *v, size_t n, uint64_t from, uint64_t to)
{
	uint64_t sum = 0;

	for (size_t k = 0; k < n; k++) {
		uint64_t s = v[k].busy_start > from ? v[k].busy_start : from;
		uint64_t d = v[k].done < to ? v[k].done : to;

		if (d > s)
			sum += d - s;
	}
	return sum;
}

/* Whether every request of the window that arrived before `arrival` had its first token by
 * step `by` (-1: before the window's steps): then a request arriving at `arrival` was first
 * in line for the steps after. */
static bool first_in_line(const struct attrib *a, long by, uint64_t arrival, uint64_t self)
{
	for (size_t i = 0; i < a->nmarks; i++) {
		const struct first_token *f = &a->fts[a->marks[i].f];

		if (f->id != self && f->arrival < arrival && (long)a->marks[i].k > by)
			return false;
	}
	return true;
}

/*
 * The step that began this request's prefill, given the one that produced its first token.
 * The scheduler serves prompts first come, first served, a step's token budget at a time. So
 * with chunked prefill, going back from that step: a step that carried prefill and produced
 * no first token was an earlier chunk of this prompt if every request that arrived before it
 * was done with its prefill by then; and the step before those, which produced some first
 * tokens, also carried this prompt's first chunk if it was full (the last chunk of the prompt
 * before left room) and every request that arrived before it was done there.
 */
static size_t prefill_start_step(const struct attrib *a, const struct engine *e,
				 const struct estep *v, size_t sft, const struct request *r,
				 struct attribution *at)
{
	size_t k = sft;

	if (!e->chunked)
		return sft;
	at->estimated |= EST_PREFILL_START;
	while (k > 0 && v[k - 1].start >= r->start_ns) {
		const struct estep *s = &v[k - 1];

		if (s->orphan && first_in_line(a, (long)k - 2, r->start_ns, r->id)) {
			k--;
			continue;
		}
		if (s->mk_hi > s->mk_lo && s->baseline && busy(s) > s->baseline &&
		    (busy(s) - s->baseline) * 10 >= e->chunk_excess_ns * 8 &&
		    first_in_line(a, (long)k - 1, r->start_ns, r->id))
			k--;
		break;
	}
	return k;
}

static void account_steps(struct engine *e, const struct estep *v, size_t n, uint64_t upto)
{
	for (size_t k = 0; k < n; k++) {
		if (v[k].seen <= e->counted_to || v[k].seen > upto)
			continue;
		e->st.steps++;
		if (v[k].mk_hi > v[k].mk_lo || v[k].orphan)
			e->st.prefill_steps++;
		else
			e->st.decode_steps++;
		e->st.busy_ns += busy(&v[k]);
		if (!e->st.first_ns || v[k].busy_start < e->st.first_ns)
			e->st.first_ns = v[k].busy_start;
		if (v[k].done > e->st.last_ns)
			e->st.last_ns = v[k].done;
	}
	if (upto > e->counted_to)
		e->counted_to = upto;
}

/* Index of the latest step seen complete at or before t; n when none. */
static size_t latest_seen(const struct estep *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid].seen <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : n;
}

#define GRID_MAX 64 /* stream intervals looked for: 2 .. GRID_MAX - 1 steps */

/* The stream interval of events 1 .. ne - 2 (not the first token's, not the last, which may
 * be a remainder), placed lag steps behind their latest seen steps: the commonest spacing k
 * of at least two thirds of the spacings, and the commonest step number modulo k of at least
 * two thirds of the events. Returns k (0: no interval found) and the phase. */
static size_t stream_grid(const size_t *q, size_t ne, size_t lag, size_t *phase)
{
	uint32_t count[GRID_MAX] = { 0 };
	size_t m = ne >= 2 ? ne - 2 : 0, k = 2;

	if (m < 4)
		return 0;
	for (size_t i = 1; i + 1 < ne - 1; i++) {
		size_t d = q[i + 1] - q[i];

		if (d < GRID_MAX)
			count[d]++;
	}
	for (size_t d = 3; d < GRID_MAX; d++) {
		if (count[d] > count[k])
			k = d;
	}
	if (3 * count[k] < 2 * (m - 1))
		return 0;
	memset(count, 0, sizeof(count));
	for (size_t i = 1; i < ne - 1; i++)
		count[(q[i] - (q[i] >= lag ? lag : q[i])) % k]++;
	*phase = 0;
	for (size_t p = 1; p < k; p++) {
		if (count[p] > count[*phase])
			*phase = p;
	}
	return 3 * count[*phase] >= 2 * m ? k : 0;
}

/*
 * Which step produced each token event (q[0]: the first token's). A token written at t comes
 * from a step the host saw complete before t, at the latest the latest one (ls). An HTTP
 * server that falls behind writes later than that, so its latest is too late. But a running
 * request gets one token per engine step (continuous batching that runs prefills and decodes
 * in the same steps, as vLLM V1), so event i comes from i steps after the first token's:
 * ls[j] - j, for every event j, bounds where the first token's step s0 can be, and the event
 * written with the least delay sets it. Then:
 *   - one token per event (usage says so, or the events follow the steps one to one): event i
 *     comes from step s0 + i;
 *   - several (a stream interval, merged outputs): each event is as late behind its latest
 *     seen step as the first (or, with a token count, the last, if less) was, and the last
 *     one ends on s0 + tokens - 1 when usage gives the count. With a stream interval of k
 *     steps, the events between are k steps apart (merged ones a multiple): one that fell
 *     off that grid (the server a step behind for a moment) goes back down onto it.
 * Returns false when that is not consistent with a first step that began after arrival
 * (then the latest-seen rule is used throughout).
 */
static bool align_tokens(const struct estep *v, size_t n, const struct request *r, size_t *q,
			 bool *moved)
{
	size_t ne = r->token_events, s0 = n, lag, grid, phase = 0;
	bool known = r->output_tokens.set && r->output_tokens.v >= ne;
	uint64_t total = known ? r->output_tokens.v : ne;
	uint64_t t = r->first_token_ns;
	bool one_each;

	*moved = false;
	for (size_t i = 0; i < ne; i++) {
		size_t ls;

		if (i)
			t += r->gaps_ns[i - 1];
		ls = latest_seen(v, n, t);
		if (ls == n || ls < i)
			return false;
		q[i] = ls;
		if (ls - i < s0)
			s0 = ls - i;
	}
	one_each = known ? total == ne : ne < 3 || (q[ne - 1] - q[0]) * 2 < 3 * (ne - 1);
	if (one_each) {
		for (size_t i = 0; i < ne; i++) {
			if (i == 0 && v[s0].start < r->start_ns)
				return false;
			*moved |= s0 + i != q[i];
			q[i] = s0 + i;
		}
		return true;
	}
	if (known) {
		if (q[ne - 1] + 1 < total)
			return false;
		if (q[ne - 1] + 1 - total < s0)
			s0 = q[ne - 1] + 1 - total;
	}
	if (v[s0].start < r->start_ns)
		return false;
	/* how far behind its latest seen step the server wrote: known for the first event and,
	 * with a token count, the last; the smaller is taken (a delay at the start of a stream
	 * does not last) */
	lag = q[0] - s0;
	if (known && q[ne - 1] - (s0 + total - 1) < lag)
		lag = q[ne - 1] - (s0 + total - 1);
	grid = stream_grid(q, ne, lag, &phase);
	for (size_t i = 0; i < ne; i++) {
		size_t want = q[i] - (q[i] >= lag ? lag : q[i]);

		if (i == 0)
			want = s0;
		else if (i == ne - 1 && known)
			want = s0 + total - 1;
		else if (grid && i < ne - 1) {
			size_t above = (want % grid + grid - phase) % grid; /* steps past the grid */

			if (above <= want)
				want -= above;
		}
		if (want > q[i])
			want = q[i];
		if (i && want <= q[i - 1])
			want = q[i - 1] + 1;
		if (want > q[i])
			return false;
		*moved |= want != q[i];
		q[i] = want;
	}
	return true;
}

static int split(struct attrib *a, struct engine *e, struct request *r, const struct estep *v,
		 size_t n, struct attribution *at)
{
	size_t ne = r->token_events, sft, ps;
	size_t *q = calloc(ne, sizeof(*q));
	bool moved;

	if (!q) {
		snprintf(at->error, sizeof(at->error), "out of memory");
		return -1;
	}
	if (align_tokens(v, n, r, q, &moved)) {
		if (moved)
			at->estimated |= EST_TOKEN_STEPS;
	} else {
		uint64_t t = r->first_token_ns;

		for (size_t i = 0; i < ne; i++) {
			if (i)
				t += r->gaps_ns[i - 1];
			q[i] = latest_seen(v, n, t);
		}
	}
	sft = q[0];
	if (sft == n || v[sft].start < r->start_ns) {
		free(q);
		snprintf(at->error, sizeof(at->error),
			 "no engine step began between the request's arrival and its first token");
		return -1;
	}
	ps = prefill_start_step(a, e, v, sft, r, at);
	at->prefill_start_ns = v[ps].start;
	if (v[sft].bound)
		at->estimated |= EST_GPU_DONE;
	at->queue_ns = v[ps].start - r->start_ns;
	at->queue_busy_ns = busy_within(v, n, r->start_ns, v[ps].start);
	at->queue_idle_ns = at->queue_ns - at->queue_busy_ns;
	/* The first token cannot be written before its step ends: a bound later than the write
	 * is cut to it. */
	uint64_t done = v[sft].done < r->first_token_ns ? v[sft].done : r->first_token_ns;
	at->prefill_ns = done > v[ps].start ? done - v[ps].start : 0;
	at->emit_ns = r->first_token_ns - v[ps].start - at->prefill_ns;
	at->prefill_steps = (uint32_t)(sft - ps + 1);
	at->steps = at->prefill_steps;

	/* the gaps: the steps that produced the tokens of the event ending each */
	if (ne > 1) {
		at->gaps = calloc(ne - 1, sizeof(*at->gaps));
		if (!at->gaps) {
			free(q);
			snprintf(at->error, sizeof(at->error), "out of memory");
			return -1;
		}
		at->ngaps = ne - 1;
	}
	for (size_t g = 0; g < at->ngaps; g++) {
		struct attrib_gap *gp = &at->gaps[g];
		uint64_t dec = 0;

		gp->gap_ns = r->gaps_ns[g];
		for (size_t k = q[g] + 1; k <= q[g + 1] && k < n; k++) {
			gp->steps++;
			dec += busy(&v[k]);
			if (v[k].orphan || prefill_of_other(a, &v[k], r->id)) {
				gp->interfered = true;
				note_interference(a, v, n, k, at, r->id);
				if (v[k].baseline && busy(&v[k]) > v[k].baseline)
					gp->interference_ns += busy(&v[k]) - v[k].baseline;
			}
		}
		gp->producer_start_ns = q[g + 1] < n ? v[q[g + 1]].start : 0;
		gp->decode_ns = dec < gp->gap_ns ? dec : gp->gap_ns;
		if (gp->interference_ns > gp->decode_ns)
			gp->interference_ns = gp->decode_ns;
		gp->host_ns = gp->gap_ns - gp->decode_ns;
		at->decode_ns += gp->decode_ns;
		at->host_ns += gp->host_ns;
		at->interference_ns += gp->interference_ns;
		at->steps += gp->steps;
	}
	free(q);
	if (at->ninterfered_by)
		qsort(at->interfered_by, at->ninterfered_by, sizeof(uint64_t), by_u64);
	return 0;
}

void attrib__compute(struct attrib *a, struct request *r)
{
	struct attribution *at = calloc(1, sizeof(*at));
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	uint64_t to = end + ATTRIB_SETTLE_NS;
	uint64_t from = r->start_ns > LOOKBACK_NS ? r->start_ns - LOOKBACK_NS : 0;
	struct estep *v = NULL;
	struct engine *e;
	long n;

	if (!at)
		return;
	attribution__free(r->attr);
	r->attr = at;
	if (!r->first_token_ns) {
		snprintf(at->error, sizeof(at->error), "no token was written");
		return;
	}
	if (r->lossy) {
		snprintf(at->error, sizeof(at->error), "the request's capture lost bytes");
		return;
	}
	if (a->pruned_before && r->start_ns < a->pruned_before + LOOKBACK_NS) {
		snprintf(at->error, sizeof(at->error), "its steps are no longer kept (over 15 min)");
		return;
	}
	for (size_t i = 0; i < a->nlosses; i++) {
		/* counters are read once a second: a loss noticed at ts happened in the second
		 * before it */
		if (a->losses[i] >= r->start_ns && a->losses[i] <= to) {
			snprintf(at->error, sizeof(at->error),
				 "GPU marks were lost during this request (ring buffer full, or "
				 "streams over the limit): see the capture health");
			return;
		}
	}
	if (find_engine(a, r, to, at))
		return;
	e = engine_of(a, at->engine_pids, at->nengine_pids);
	if (!e) {
		snprintf(at->error, sizeof(at->error), "out of memory");
		return;
	}
	remember_http(a, r->pid, e);
	n = gather_steps(a, at, from, to, &v, at->error, sizeof(at->error));
	if (n < 0)
		return;
	classify_steps(a, e, r->pid, v, (size_t)n, to);
	if (!split(a, e, r, v, (size_t)n, at)) {
		at->ok = true;
		account_steps(e, v, (size_t)n, end);
	}
	free(v);
}

void attrib__finished(struct attrib *a, const struct request *r)
{
	struct attribution at = { 0 };
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	uint64_t from = r->start_ns > LOOKBACK_NS ? r->start_ns - LOOKBACK_NS : 0;
	size_t lo = 0, hi = a->nfts, *q;
	struct estep *v = NULL;
	bool moved;
	long n;

	if (!r->first_token_ns || r->lossy || find_engine(a, r, end, &at))
		return;
	while (lo < hi) { /* its entry: by first token time, then id */
		size_t mid = (lo + hi) / 2;

		if (a->fts[mid].ft < r->first_token_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo < a->nfts && a->fts[lo].ft == r->first_token_ns && a->fts[lo].id != r->id)
		lo++;
	if (lo == a->nfts || a->fts[lo].id != r->id)
		return;
	n = gather_steps(a, &at, from, end, &v, at.error, sizeof(at.error));
	q = n > 0 ? calloc(r->token_events, sizeof(*q)) : NULL;
	if (q && align_tokens(v, (size_t)n, r, q, &moved))
		a->fts[lo].step_start = v[q[0]].start;
	free(q);
	free(v);
}

void attrib__engines(const struct attrib *a,
		     void (*fn)(void *ctx, const struct attrib_engine_stats *), void *ctx)
{
	for (const struct engine *e = a->engines; e; e = e->next)
		fn(ctx, &e->st);
}
