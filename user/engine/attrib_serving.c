// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which processes serve which HTTP server (attrib_state.h): --engine, else the HTTP process
 * itself if it stepped a GPU, else the GPU processes stepping during the request whose nearest
 * common ancestor with it (other than init) is nearest. Several such processes must step in
 * lockstep (tensor parallel); their steps are merged by time into the engine's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/attrib_state.h"

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

static const struct ancestry *ancestry_of(const struct attrib *a, uint32_t pid)
{
	const struct ancestry *t = a->ancestries[pid % ANCESTRY_BUCKETS];

	while (t && t->pid != pid)
		t = t->next;
	return t;
}

void attrib__exit(struct attrib *a, uint32_t pid)
{
	struct ancestry **link = &a->ancestries[pid % ANCESTRY_BUCKETS];

	for (size_t i = 0; i < a->nclients; i++) {
		if (a->clients[i] == pid) {
			a->clients[i] = a->clients[--a->nclients];
			break;
		}
	}
	/* an engine's tree stays: its steps are still matched to its server's requests */
	if (attrib_proc_of(a, pid, false))
		return;
	while (*link && (*link)->pid != pid)
		link = &(*link)->next;
	if (*link) {
		struct ancestry *t = *link;

		*link = t->next;
		free(t);
	}
}

size_t attrib_first_seen_at(const struct seen_step *v, size_t n, uint64_t t)
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

static bool stepped_between(const struct step_proc *p, uint64_t from, uint64_t to)
{
	size_t i = attrib_first_seen_at(p->v, p->n, from);

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
static int shared_depth(const struct attrib *a, uint32_t pid, const struct ancestry *pt, uint32_t gpu_pid)
{
	const struct ancestry *gt = ancestry_of(a, gpu_pid);
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

int attrib_find_engine(struct attrib *a, const struct request *r, uint64_t to,
		       struct attribution *out)
{
	int best = -1, depth[64];
	const struct ancestry *pt;
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
			 "no engine steps were seen during this request (engine on another host, or "
			 "its CUDA or llama.cpp library not probed)");
		return -1;
	}
	if (in_list(cand, ncand, r->pid)) {
		out->engine_pids[0] = r->pid;
		out->nengine_pids = 1;
		return 0;
	}
	if (attrib_is_client(a, r->pid)) {
		snprintf(out->error, sizeof(out->error),
			 "pid %u forwards LLM requests to an upstream server (a proxy): the upstream's "
			 "records are attributed",
			 r->pid);
		return -1;
	}
	pt = ancestry_of(a, r->pid);
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
			 "no engine process shares an ancestor other than init with pid %u; name its "
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

struct engine_procs *attrib_engine_of(struct attrib *a, const uint32_t *pids, uint32_t n)
{
	struct engine_procs *e;

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

void attrib_remember_http(struct attrib *a, uint32_t http_pid, struct engine_procs *e)
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
bool attrib_serves(const struct attrib *a, uint32_t http_pid, uint32_t own_pid, const struct engine_procs *e)
{
	if (http_pid == own_pid)
		return true;
	for (size_t i = 0; i < a->nhttp; i++) {
		if (a->http[i].http_pid == http_pid)
			return a->http[i].e == e;
	}
	return false;
}

static int by_start(const void *x, const void *y)
{
	const struct window_step *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

static int by_seen(const void *x, const void *y)
{
	const struct window_step *a = x, *b = y;

	return a->seen < b->seen ? -1 : a->seen > b->seen;
}

/*
 * The engine's steps seen in [from, to], tensor-parallel ranks merged: a rank's step joins a
 * recent merged step it overlaps that lacks that rank. Returns the count (*out malloc'd), or
 * -1 with out->error set.
 */
long attrib_gather_steps(struct attrib *a, const struct attribution *at, uint64_t from,
			 uint64_t to, struct window_step **out, char *err, size_t errn)
{
	struct window_step *v = NULL;
	size_t n = 0, cap = 0, m = 0, partial = 0;

	for (uint32_t r = 0; r < at->nengine_pids; r++) {
		struct step_proc *p = attrib_proc_of(a, at->engine_pids[r], false);

		if (!p)
			continue;
		for (size_t i = attrib_first_seen_at(p->v, p->n, from); i < p->n && p->v[i].seen <= to; i++) {
			if (!array__reserve((void **)&v, &cap, n + 1, sizeof(*v))) {
				free(v);
				snprintf(err, errn, "out of memory");
				return -1;
			}
			v[n++] = (struct window_step){ .start = p->v[i].start, .done = p->v[i].done,
						 .seen = p->v[i].seen, .bound = p->v[i].bound,
						 .ranks = 1u << r };
		}
	}
	if (at->nengine_pids == 1) { /* one process's steps: in seen order, nothing to merge */
		*out = v;
		return (long)n;
	}
	qsort(v, n, sizeof(*v), by_start);
	for (size_t i = 0; i < n; i++) {
		size_t j = m;
		bool joined = false;

		while (j > 0 && m - j < at->nengine_pids) {
			struct window_step *c = &v[--j];

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
