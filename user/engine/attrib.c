// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attribution (engine/attrib.h; definitions in docs/attribution.md).
 *
 * Kept: the steps of every engine process (compact, for KEEP_NS), every server request's
 * first token (same), each process's ancestors, and the times step marks were lost. A
 * finished request is attributed against the steps of its engine in a window around it, one
 * question at a time (engine/attrib_state.h is what they share):
 *   1. which processes serve its HTTP server, and their steps merged (attrib_serving.c);
 *   2. which step produced each token event (attrib_align.c);
 *   3. which steps carried prefill (attrib_prefill.c);
 *   4. the TTFT split and the gaps' steps, which follow from the definitions (here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/attrib_state.h"

struct attrib *attrib__new(void)
{
	return calloc(1, sizeof(struct attrib));
}

void attrib__free(struct attrib *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nprocs; i++) {
		for (size_t k = 0; k < a->procs[i].n; k++)
			free(a->procs[i].v[k].seqs);
		free(a->procs[i].v);
	}
	free(a->procs);
	free(a->embeds);
	for (size_t b = 0; b < ANCESTRY_BUCKETS; b++) {
		while (a->ancestries[b]) {
			struct ancestry *t = a->ancestries[b];

			a->ancestries[b] = t->next;
			free(t);
		}
	}
	while (a->engines) {
		struct engine_procs *e = a->engines;

		a->engines = e->next;
		free(e);
	}
	free(a->fts);
	free(a->marks);
	free(a->clients);
	free(a->http);
	free(a->styles);
	free(a->overrides);
	free(a);
}

/* ---- what is kept ---- */

void attrib__proc_tree(struct attrib *a, uint32_t pid, const uint32_t *anc, size_t n)
{
	struct ancestry **link = &a->ancestries[pid % ANCESTRY_BUCKETS], *t;

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

void attrib__step(struct attrib *a, const struct engine_step *s)
{
	struct step_proc *p = attrib_proc_of(a, s->pid, true);
	struct seen_step st = { s->start_ns, s->end_ns, s->host_seen_ns, s->end_bound, 0, s->context,
			    s->model_key, s->embeddings, NULL };
	size_t i;

	if (!p || !array__reserve((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return; /* a lost step is a loss: requests in its time are not attributed */
	if (s->nseqs) {
		st.seqs = malloc(s->nseqs * sizeof(*st.seqs));
		if (!st.seqs)
			return; /* the same */
		st.nseqs = s->nseqs;
		for (uint32_t q = 0; q < s->nseqs; q++)
			st.seqs[q] = (struct seen_seq){ s->seqs[q].seq, s->seqs[q].tokens,
						    s->seqs[q].first_pos, s->seqs[q].outputs };
	}
	if (st.model && !attrib_proc_may_name(p, st.model)) {
		if (p->nmodels < sizeof(p->models) / sizeof(p->models[0]))
			p->models[p->nmodels++] = st.model;
		else
			p->models_many = true;
	}
	/* Steps come in the order the host saw them, nearly: keep the array sorted by seen, then
	 * by start (the order attrib_gather_steps() gives a merged window). */
	for (i = p->n; i > 0 && (p->v[i - 1].seen > st.seen ||
				 (p->v[i - 1].seen == st.seen && p->v[i - 1].start > st.start));
	     i--)
		;
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(st));
	p->v[i] = st;
	p->n++;
}

bool attrib__has_steps(const struct attrib *a)
{
	return a->nprocs > 0;
}

void attrib__first_token(struct attrib *a, const struct request *r)
{
	struct first_token f = { .ft = r->first_token_ns, .arrival = r->start_ns, .id = r->id,
				  .engine_output = r->engine_output_ns, .http_pid = r->pid };
	size_t i;

	if (r->role == ROLE_CLIENT) {
		/* a server that is also a client forwards what it attrib_serves: its first tokens are
		 * its upstream's, already counted there */
		if (!attrib_is_client(a, r->pid) &&
		    array__reserve((void **)&a->clients, &a->capclients, a->nclients + 1,
				   sizeof(*a->clients)))
			a->clients[a->nclients++] = r->pid;
		return;
	}
	if (attrib_is_client(a, r->pid))
		return;
	if (!array__reserve((void **)&a->fts, &a->capfts, a->nfts + 1, sizeof(*a->fts)))
		return;
	for (i = a->nfts; i > 0 && a->fts[i - 1].ft > f.ft; i--)
		;
	memmove(&a->fts[i + 1], &a->fts[i], (a->nfts - i) * sizeof(f));
	a->fts[i] = f;
	a->nfts++;
}

void attrib__step_loss(struct attrib *a, uint64_t ts)
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
		struct step_proc *p = &a->procs[i];

		for (k = 0; k < p->n && p->v[k].seen < before; k++)
			free(p->v[k].seqs);
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
	k = 0;
	for (size_t i = 0; i < a->nembeds; i++) {
		if (a->embeds[i].end >= before)
			a->embeds[k++] = a->embeds[i];
	}
	a->nembeds = k;
}

/* ---- the split ---- */

/* The requests whose prefill step k carried: those whose first token it produced, or for an
 * earlier chunk, the ones of the next step that produced first tokens. */
static void note_interference(const struct attrib *a, const struct window_step *v, size_t n, size_t k,
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
		const struct first_token *f = &a->fts[a->marks[i].ft];

		if (f->id != self && (!v[k].orphan || f->arrival <= v[k].start))
			attrib_add_interferer(at, f->id);
	}
}

/* Time in [from, to) the GPU was running steps. */
static uint64_t busy_within(const struct window_step *v, size_t n, uint64_t from, uint64_t to)
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

static void account_steps(struct engine_procs *e, const struct window_step *v, size_t n, uint64_t upto)
{
	for (size_t k = 0; k < n; k++) {
		if (v[k].seen <= e->counted_to || v[k].seen > upto)
			continue;
		e->st.steps++;
		if (v[k].mk_hi > v[k].mk_lo || v[k].orphan)
			e->st.prefill_steps++;
		else
			e->st.decode_steps++;
		e->st.busy_ns += window_step_busy(&v[k]);
		if (!e->st.first_ns || v[k].busy_start < e->st.first_ns)
			e->st.first_ns = v[k].busy_start;
		if (v[k].done > e->st.last_ns)
			e->st.last_ns = v[k].done;
	}
	if (upto > e->counted_to)
		e->counted_to = upto;
}

static int split(struct attrib *a, struct engine_procs *e, struct request *r, const struct window_step *v,
		 size_t n, struct attribution *at)
{
	size_t ne = r->token_events, sft, ps;
	size_t *q = calloc(ne, sizeof(*q));
	bool *inferred = calloc(ne ? ne : 1, sizeof(*inferred));

	if (!q || !inferred) {
		free(q);
		free(inferred);
		snprintf(at->error, sizeof(at->error), "out of memory");
		return -1;
	}
	if (!attrib_align_tokens(v, n, r, attrib_server_every_token(a, r->pid), q, inferred)) {
		uint64_t t = r->first_token_ns;

		for (size_t i = 0; i < ne; i++) {
			if (i)
				t += r->gaps_ns[i - 1];
			q[i] = attrib_latest_seen(v, n, t);
		}
		attrib_bound_by_outputs(v, n, r, q, inferred);
	}
	for (size_t i = 0; i < ne; i++) {
		if (inferred[i])
			at->estimated |= EST_TOKEN_STEPS;
	}
	/* the first token's step: the first output's, where the first event carried several */
	sft = ne ? attrib_engine_output_bound(v, n, r, q[0]) : n;
	if (sft == n || v[sft].start < r->start_ns) {
		free(q);
		free(inferred);
		snprintf(at->error, sizeof(at->error),
			 "no engine step began between the request's arrival and its first token");
		return -1;
	}
	ps = attrib_prefill_start_step(a, e, v, sft, r, at);
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
			free(inferred);
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
			dec += window_step_busy(&v[k]);
			if (v[k].orphan || attrib_prefill_of_other(a, &v[k], r->id)) {
				gp->interfered = true;
				note_interference(a, v, n, k, at, r->id);
				if (v[k].baseline && window_step_busy(&v[k]) > v[k].baseline)
					gp->interference_ns += window_step_busy(&v[k]) - v[k].baseline;
			}
		}
		gp->producer_start_ns = q[g + 1] < n ? v[q[g + 1]].start : 0;
		gp->step_inferred = inferred[g + 1];
		attrib_close_gap(at, gp, dec);
	}
	free(q);
	free(inferred);
	if (at->ninterfered_by)
		qsort(at->interfered_by, at->ninterfered_by, sizeof(uint64_t), attrib_cmp_u64);
	return 0;
}

void attrib__compute(struct attrib *a, struct request *r)
{
	struct attribution *at = calloc(1, sizeof(*at));
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	uint64_t to = end + ATTRIB_SETTLE_NS;
	uint64_t from = r->start_ns > LOOKBACK_NS ? r->start_ns - LOOKBACK_NS : 0;
	struct window_step *v = NULL;
	struct engine_procs *e;
	long n;

	if (!at)
		return;
	attribution__free(r->attr);
	r->attr = at;
	if (r->api == API_OPENAI_EMBEDDINGS) {
		/* its steps are named by the chat requests that waited behind them */
		snprintf(at->error, sizeof(at->error), "an embeddings call: no token to split");
		return;
	}
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
				 "engine steps were lost during this request (CUDA marks or llama.cpp "
				 "steps: ring buffer full, or streams over the limit): see the capture "
				 "health");
			return;
		}
	}
	if (attrib_find_engine(a, r, to, at))
		return;
	e = attrib_engine_of(a, at->engine_pids, at->nengine_pids);
	if (!e) {
		snprintf(at->error, sizeof(at->error), "out of memory");
		return;
	}
	attrib_remember_http(a, r->pid, e);
	switch (attrib_by_sequence(a, e, r, at, from, to)) {
	case 0:
		at->ok = true;
		return;
	case -1:
		return;
	}
	n = attrib_gather_steps(a, at, from, to, &v, at->error, sizeof(at->error));
	if (n < 0)
		return;
	attrib_classify_steps(a, e, r->pid, v, (size_t)n, to);
	if (!split(a, e, r, v, (size_t)n, at)) {
		at->ok = true;
		account_steps(e, v, (size_t)n, end);
	}
	free(v);
}

void attrib__engines(const struct attrib *a,
		     void (*fn)(void *ctx, const struct attrib_engine_stats *), void *ctx)
{
	for (const struct engine_procs *e = a->engines; e; e = e->next)
		fn(ctx, &e->st);
}
