// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/stats.h"
#include "base/text.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "engine/attrib.h"
#include "stream/h2conn.h"
#include "llm/compare.h"
#include "sinks/sessions.h"
#include "sinks/steps.h"
#include "sinks/summary.h"

#define SAFE_MAX TEXT_SAFE_MAX(256)

/* One summary line: requests of one group (llm/group.h). */
struct group {
	struct request_group key; /* first: llm/group.h keeps the table */
	uint64_t n, incomplete;
	struct sample ttft, ttft_cache[CACHE__COUNT], tpot, itl, e2e, out_tokens;
	/* per consumer: SLO attainment, and the streams' rate against reading */
	struct consumer_part {
		uint64_t n, judged, met;
		struct sample headroom;
		uint64_t behind; /* streams slower than reading */
		double least;	 /* the slowest stream's headroom (exact past the sample) */
	} by[CONSUMER__COUNT];
	/* server role, attributed requests */
	struct sample queue, queue_busy, queue_idle, prefill, emit, prefill_steps;
	/* from an engine wire: its events' split of the queue; without them, one span */
	struct sample frontend, engine_queue, engine, preempted;
	struct sample gap_decode, gap_host, gap_interference;
	uint64_t not_attributed;
	uint64_t usage_mismatch; /* split from a run its usage did not agree with */
	uint64_t context_shifts, shifted; /* gaps with a context shift, requests with one */
	/* speculative decoding: each speculating request's acceptance, and the tokens over all */
	struct sample acceptance;
	uint64_t drafted, accepted, draft_ns;
	struct tail_split *splits; /* the first TAIL_MAX attributed requests, for the tail */
	size_t nsplits, capsplits;
	struct gap_split *gsplits; /* the first TAIL_MAX gaps of attributed requests */
	size_t ngsplits, capgsplits;
};

#define TAIL_MAX 262144

struct tail_split {
	uint64_t ttft, busy, idle, prefill, emit;
};

struct gap_split {
	uint64_t gap, interference, shift, decode, host;
};

struct summary {
	FILE *out;
	const struct attrib *attr;
	const struct judge *judge;
	struct judge defaults; /* what judge points to when none was given */
	uint64_t first_ns, last_ns; /* the requests' span: goodput's time */
	struct request_groups groups; /* struct group */
	struct step_summary *steps;
	struct session_summary *sessions;
	/* what changed: the first window of the run (from the first reported request's start)
	 * against the last (llm/compare.h), said once the run is two windows long */
	struct compare *cmp;
	uint64_t window_ns, anchor_ns, newest_end_ns, fed;
};

struct summary *summary__new(FILE *out, const struct attrib *a, const struct judge *j)
{
	struct summary *sm = calloc(1, sizeof(*sm));

	if (!sm)
		return NULL;
	sm->out = out;
	sm->attr = a;
	judge__init(&sm->defaults);
	sm->judge = j ? j : &sm->defaults;
	sm->window_ns = SUMMARY_WINDOW_NS;
	request_groups__init(&sm->groups, sizeof(struct group));
	sm->steps = step_summary__new();
	sm->sessions = session_summary__new();
	if (!sm->steps || !sm->sessions) {
		step_summary__free(sm->steps);
		session_summary__free(sm->sessions);
		free(sm);
		return NULL;
	}
	return sm;
}

static void group_free(void *group)
{
	struct group *g = group;

	sample__free(&g->queue);
	sample__free(&g->frontend);
	sample__free(&g->engine_queue);
	sample__free(&g->engine);
	sample__free(&g->preempted);
	sample__free(&g->queue_busy);
	sample__free(&g->queue_idle);
	sample__free(&g->prefill);
	sample__free(&g->emit);
	sample__free(&g->prefill_steps);
	sample__free(&g->gap_decode);
	sample__free(&g->gap_host);
	sample__free(&g->gap_interference);
	sample__free(&g->acceptance);
	free(g->splits);
	free(g->gsplits);
	struct sample *all[] = { &g->ttft, &g->tpot, &g->itl, &g->e2e, &g->out_tokens };

	for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
		sample__free(all[i]);
	for (size_t c = 0; c < CACHE__COUNT; c++)
		sample__free(&g->ttft_cache[c]);
	for (size_t c = 0; c < CONSUMER__COUNT; c++)
		sample__free(&g->by[c].headroom);
}

void summary__free(struct summary *sm)
{
	if (!sm)
		return;
	step_summary__free(sm->steps);
	session_summary__free(sm->sessions);
	compare__free(sm->cmp);
	request_groups__free(&sm->groups, group_free);
	free(sm);
}

static void add_attribution(struct group *g, const struct request *r)
{
	const struct attribution *a = r->attr;
	struct ttft_split sp;

	if (!a || !a->ok) {
		g->not_attributed++;
		return;
	}
	g->usage_mismatch += a->usage_mismatch;
	g->context_shifts += a->context_shifts;
	g->shifted += a->context_shifts > 0;
	if (a->drafted) {
		sample__add(&g->acceptance, (double)a->accepted / (double)a->drafted);
		g->drafted += a->drafted;
		g->accepted += a->accepted;
		g->draft_ns += a->draft_ns;
	}
	attribution__ttft_split(a, &sp);
	if (sp.wire) {
		sample__add(&g->frontend, sp.frontend_ns / 1e6);
		if (sp.engine_events)
			sample__add(&g->engine_queue, sp.engine_queue_ns / 1e6);
		else
			sample__add(&g->engine, sp.engine_ns / 1e6);
		if (a->wire.preemptions)
			sample__add(&g->preempted, a->wire.preempted_ns / 1e6);
	}
	if (sp.queue_apart) {
		sample__add(&g->queue, sp.queue_ns / 1e6);
		sample__add(&g->prefill, sp.prefill_ns / 1e6);
	}
	if (sp.busy_idle) {
		sample__add(&g->queue_busy, sp.queue_busy_ns / 1e6);
		sample__add(&g->queue_idle, sp.queue_idle_ns / 1e6);
	}
	sample__add(&g->emit, sp.emit_ns / 1e6);
	sample__add(&g->prefill_steps, sp.prefill_steps);
	/* the tail's split is behind-work or idle, prefill, emit: the steps' split alone */
	if (sp.source == TTFT_STEPS && g->nsplits < TAIL_MAX &&
	    array__reserve((void **)&g->splits, &g->capsplits, g->nsplits + 1, sizeof(*g->splits)))
		g->splits[g->nsplits++] = (struct tail_split){
			sp.queue_ns + sp.prefill_ns + sp.emit_ns, sp.queue_busy_ns, sp.queue_idle_ns,
			sp.prefill_ns, sp.emit_ns,
		};
	for (size_t i = 0; i < a->ngaps; i++) {
		const struct attrib_gap *gp = &a->gaps[i];

		sample__add(&g->gap_decode, gp->decode_ns / 1e6);
		sample__add(&g->gap_host, gp->host_ns / 1e6);
		sample__add(&g->gap_interference, gp->interference_ns / 1e6);
		if (g->ngsplits < TAIL_MAX &&
		    array__reserve((void **)&g->gsplits, &g->capgsplits, g->ngsplits + 1,
				   sizeof(*g->gsplits)))
			g->gsplits[g->ngsplits++] = (struct gap_split){
				gp->gap_ns, gp->interference_ns, gp->shift_ns,
				gp->decode_ns - gp->interference_ns -
					(gp->shift_ns < gp->decode_ns - gp->interference_ns
						 ? gp->shift_ns
						 : gp->decode_ns - gp->interference_ns),
				gp->host_ns,
			};
	}
}

/* Its consumer's part: SLOs met, the stream against reading; the span goodput is over. */
static void judged(struct summary *sm, struct group *g, const struct request *r,
		   const struct request_metrics *m)
{
	struct consumer_part *c = &g->by[m->consumer];

	c->n++;
	if (m->slo_met >= 0) {
		c->judged++;
		c->met += m->slo_met;
	}
	if (!isnan(m->reading_headroom)) {
		if (!sample__count(&c->headroom) || m->reading_headroom < c->least)
			c->least = m->reading_headroom;
		sample__add(&c->headroom, m->reading_headroom);
		c->behind += m->reading_headroom < 1;
	}
	if (r->start_ns && (!sm->first_ns || r->start_ns < sm->first_ns))
		sm->first_ns = r->start_ns;
	if (r->end_ns > sm->last_ns)
		sm->last_ns = r->end_ns;
}

void summary__set_window(struct summary *sm, uint64_t window_ns)
{
	sm->window_ns = window_ns;
}

/* Each request into the run's first window (once) and its sliding last one. */
static void windows(struct summary *sm, const struct request *r, const struct request_metrics *m)
{
	if (!r->start_ns || !sm->window_ns || (!sm->cmp && !(sm->cmp = compare__new())))
		return;
	if (!sm->anchor_ns)
		sm->anchor_ns = r->start_ns;
	if (r->start_ns >= sm->anchor_ns && r->start_ns - sm->anchor_ns < sm->window_ns)
		compare__request(sm->cmp, CMP_BEFORE, r, m);
	compare__request(sm->cmp, CMP_AFTER, r, m);
	if (r->end_ns > sm->newest_end_ns)
		sm->newest_end_ns = r->end_ns;
	if (++sm->fed % 4096 == 0 && sm->newest_end_ns > sm->window_ns)
		compare__expire(sm->cmp, CMP_AFTER, sm->newest_end_ns - sm->window_ns);
}

/* The last window against the first, in compare's words: what changed, and why, a line per
 * group that changed. */
static void print_change(struct summary *sm, FILE *out)
{
	char prefix[96];
	enum cmp_cause cause;

	if (!sm->cmp || sm->newest_end_ns < sm->anchor_ns + 2 * sm->window_ns)
		return; /* the windows would overlap: nothing to compare yet */
	compare__expire(sm->cmp, CMP_AFTER, sm->newest_end_ns - sm->window_ns);
	snprintf(prefix, sizeof(prefix), "change: the last %gs against the first %gs: ",
		 (double)sm->window_ns / 1e9, (double)sm->window_ns / 1e9);
	compare__verdicts(sm->cmp, out, prefix, &cause);
}

static void on_request(void *self, const struct request *r, const struct request_metrics *mp)
{
	const struct request_metrics m = *mp;
	struct summary *sm = self;
	struct group *g = request_groups__of(&sm->groups, r);

	if (!g)
		return;
	request_group__add_process(&g->key, r->pid);
	g->n++;
	if (!m.complete)
		g->incomplete++;
	if (!isnan(m.ttft_ms)) {
		sample__add(&g->ttft, m.ttft_ms);
		sample__add(&g->ttft_cache[m.cache], m.ttft_ms);
	}
	judged(sm, g, r, &m);
	windows(sm, r, &m);
	if (!isnan(m.tpot_ms))
		sample__add(&g->tpot, m.tpot_ms);
	if (!isnan(m.e2e_ms))
		sample__add(&g->e2e, m.e2e_ms);
	if (!r->lossy) {
		for (uint64_t i = 0; i + 1 < r->token_events; i++)
			sample__add(&g->itl, (double)r->gaps_ns[i] / 1e6);
	}
	if (m.output_tokens.set)
		sample__add(&g->out_tokens, (double)m.output_tokens.v);
	if (r->role == ROLE_SERVER) {
		add_attribution(g, r);
		if (r->attr && r->attr->ok && r->attr->draft_context && r->attr->nengine_pids)
			step_summary__draft(sm->steps, r->attr->engine_pids[0],
					    r->attr->draft_context);
	}
}

static void on_step(void *self, const struct engine_step *s)
{
	struct summary *sm = self;

	step_summary__add(sm->steps, s);
}

static void on_exit_(void *self, uint32_t pid)
{
	struct summary *sm = self;

	request_groups__process_exit(&sm->groups, pid);
}

static int by_ttft(const void *x, const void *y)
{
	const struct tail_split *a = x, *b = y;

	return a->ttft < b->ttft ? -1 : a->ttft > b->ttft;
}

static int by_gap(const void *x, const void *y)
{
	const struct gap_split *a = x, *b = y;

	return a->gap < b->gap ? -1 : a->gap > b->gap;
}

static double pct_of(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Where the time of the slowest tenth went: the requests (and gaps) above the p90. */
static void print_tail(FILE *out, struct group *g)
{
	if (g->nsplits) {
		size_t n = g->nsplits, from = (size_t)(n * 0.9);
		struct tail_split sum = { 0 };

		qsort(g->splits, n, sizeof(*g->splits), by_ttft);
		for (size_t i = from; i < n; i++) {
			sum.ttft += g->splits[i].ttft;
			sum.busy += g->splits[i].busy;
			sum.idle += g->splits[i].idle;
			sum.prefill += g->splits[i].prefill;
			sum.emit += g->splits[i].emit;
		}
		fprintf(out, "    TTFT p99 %.2f ms: %.0f%% queued behind engine work, %.0f%% queued idle, "
			     "%.0f%% prefill, %.0f%% emit (the %zu requests above p90)\n",
			g->splits[(size_t)((n - 1) * 0.99)].ttft / 1e6, pct_of(sum.busy, sum.ttft),
			pct_of(sum.idle, sum.ttft), pct_of(sum.prefill, sum.ttft),
			pct_of(sum.emit, sum.ttft), n - from);
	}
	if (g->ngsplits) {
		size_t n = g->ngsplits, from = (size_t)(n * 0.9);
		struct gap_split sum = { 0 };

		qsort(g->gsplits, n, sizeof(*g->gsplits), by_gap);
		for (size_t i = from; i < n; i++) {
			sum.gap += g->gsplits[i].gap;
			sum.interference += g->gsplits[i].interference;
			sum.shift += g->gsplits[i].shift;
			sum.decode += g->gsplits[i].decode;
			sum.host += g->gsplits[i].host;
		}
		if (sum.shift) /* a share only where there was one: most engines never shift */
			fprintf(out, "    token gaps above p90: %.0f%% prefill interference, %.0f%% "
				     "context shift, %.0f%% decode, %.0f%% host (%zu gaps)\n",
				pct_of(sum.interference, sum.gap), pct_of(sum.shift, sum.gap),
				pct_of(sum.decode, sum.gap), pct_of(sum.host, sum.gap), n - from);
		else
			fprintf(out, "    token gaps above p90: %.0f%% prefill interference, %.0f%% "
				     "decode, %.0f%% host (%zu gaps)\n",
				pct_of(sum.interference, sum.gap), pct_of(sum.decode, sum.gap),
				pct_of(sum.host, sum.gap), n - from);
	}
}

/* A server group's TTFT and gap components, and the tail in words. */
/* Under a group: the HTTP/2 streams its processes opened past the per-connection cap, which
 * no group's figures hold (their requests were not read). */
static void print_untracked(FILE *out, const struct group *g, const struct health *h)
{
	for (size_t i = 0; i < h->h2.nuntracked_by; i++) {
		const struct h2_untracked *u = &h->h2.untracked_by[i];

		if (u->role == (int)g->key.role && !strcmp(u->comm, g->key.comm))
			fprintf(out, "    untracked      %llu HTTP/2 streams of this command's %s "
				     "connections, not in these figures (past %d open on one "
				     "connection)\n",
				(unsigned long long)u->n, role__name(g->key.role), H2_STREAMS_MAX);
	}
}

static void print_attribution(FILE *out, struct group *g)
{
	if (g->queue.seen)
		sample__print(out, "queue_ms", &g->queue);
	if (g->frontend.seen) /* an engine wire's */
		sample__print(out, "frontend_ms", &g->frontend);
	if (g->engine_queue.seen)
		sample__print(out, "engine_queue_ms", &g->engine_queue);
	if (g->engine.seen)
		sample__print(out, "engine_ms", &g->engine);
	if (g->preempted.seen)
		sample__print(out, "preempted_ms", &g->preempted);
	if (g->queue_busy.seen) {
		sample__print(out, "queue_busy_ms", &g->queue_busy);
		sample__print(out, "queue_idle_ms", &g->queue_idle);
	}
	if (g->prefill.seen)
		sample__print(out, "prefill_ms", &g->prefill);
	sample__print(out, "prefill_steps", &g->prefill_steps);
	sample__print(out, "emit_ms", &g->emit);
	sample__print(out, "gap_decode_ms", &g->gap_decode);
	sample__print(out, "gap_host_ms", &g->gap_host);
	sample__print(out, "gap_interf_ms", &g->gap_interference);
	print_tail(out, g);
	if (g->not_attributed)
		fprintf(out, "    not attributed: %llu (their records say why)\n",
			(unsigned long long)g->not_attributed);
	if (g->usage_mismatch)
		fprintf(out, "    usage mismatch: %llu (split from the engine's own prompt; the "
			     "server's usage counted another length: usage_mismatch in the records)\n",
			(unsigned long long)g->usage_mismatch);
	if (g->context_shifts)
		fprintf(out, "    context shifts: %llu in %llu requests (the sequence's positions went "
			     "back mid-stream: context_shift in the records' gaps)\n",
			(unsigned long long)g->context_shifts, (unsigned long long)g->shifted);
	if (sample__count(&g->acceptance)) {
		fprintf(out, "    speculative decoding: %llu requests verified drafted tokens: %llu "
			     "drafted, %llu accepted; their draft model's steps %.1f ms\n",
			(unsigned long long)sample__count(&g->acceptance), (unsigned long long)g->drafted,
			(unsigned long long)g->accepted, (double)g->draft_ns / 1e6);
		sample__print(out, "acceptance", &g->acceptance);
	}
}

/* Each engine wire: what was read of it, and what could not be. The ZeroMQ connections are
 * said with the first wire (all ride ZeroMQ), also where none of its messages was read. */
static void summary_engine_wires(FILE *out, const struct health *h)
{
	for (size_t i = 0; i < engine_nwires; i++) {
		const struct engine_wire_counts *w = &h->engine_wires[i];

		if (!w->messages && !(i == 0 && h->streams_zmtp))
			continue;
		fprintf(out, "engine wire (%s): zmq_connections=%llu messages=%llu",
			engine_wires[i]->title, (unsigned long long)h->streams_zmtp,
			(unsigned long long)w->messages);
		for (size_t d = 0; d < w->ndetail; d++)
			fprintf(out, " %s=%llu", w->detail[d].name, (unsigned long long)w->detail[d].n);
		fprintf(out, " joined=%llu unjoined=%llu duplicates=%llu other_zmq=%llu "
			     "malformed=%llu\n",
			(unsigned long long)w->requests_joined, (unsigned long long)w->requests_unjoined,
			(unsigned long long)w->duplicates, (unsigned long long)w->not_engine,
			(unsigned long long)w->malformed);
		if (w->evicted || w->no_memory)
			fprintf(out, "    %llu engine requests let go past the table's limit, %llu not "
				     "kept for lack of memory: their server requests are not joined\n",
				(unsigned long long)w->evicted, (unsigned long long)w->no_memory);
		if (w->note[0])
			fprintf(out, "    %s\n", w->note);
	}
}

static void print_engine(void *ctx, const struct attrib_engine_stats *e)
{
	FILE *out = ctx;
	double span = (double)(e->last_ns - e->first_ns) / 1e9;

	fprintf(out, "engine pid%s", e->npids > 1 ? "s" : "");
	for (uint32_t i = 0; i < e->npids; i++)
		fprintf(out, "%c%u", i ? ',' : ' ', e->pids[i]);
	fprintf(out, ": steps=%llu (prefill %llu, decode %llu) steps/s=%.1f busy=%.0f%%%s\n",
		(unsigned long long)e->steps, (unsigned long long)e->prefill_steps,
		(unsigned long long)e->decode_steps, span > 0 ? (double)e->steps / span : 0.0,
		span > 0 ? 100.0 * (double)e->busy_ns / 1e9 / span : 0.0,
		e->chunked ? " chunked_prefill" : "");
}

/* The summary's http/2: line, when any HTTP/2 connection was seen. */
static void summary_http2(FILE *out, const struct health *h)
{
	if (!h->h2.connections)
		return;
	fprintf(out, "http/2: connections=%llu joined=%llu streams=%llu max_per_connection=%llu "
		     "max_concurrent=%llu headers_partial=%llu unseen_start=%llu untracked=%llu "
		     "reset=%llu goaway=%llu frame_errors=%llu hpack_errors=%llu\n",
		(unsigned long long)h->h2.connections, (unsigned long long)h->h2.joined,
		(unsigned long long)h->h2.streams,
		(unsigned long long)h->h2.max_streams_per_conn,
		(unsigned long long)h->h2.max_concurrent,
		(unsigned long long)h->h2.headers_partial,
		(unsigned long long)h->h2.streams_unseen_start,
		(unsigned long long)h->h2.streams_untracked,
		(unsigned long long)h->h2.reset_streams, (unsigned long long)h->h2.goaway,
		(unsigned long long)h->h2.frame_errors, (unsigned long long)h->h2.hpack_errors);
}

/* What the capture could not see or keep, said as warnings after the counters. */
static void print_capture_warnings(FILE *out, const struct health *h)
{
	if (h->bpf[TS_CNT_SEQ_UNLOCKED]) /* the legacy build's lock, waited for too long */
		fprintf(out, "WARNING: %llu call%s numbered %s pieces without the stream's lock "
			     "(Linux before 5.12): they may share numbers, and their streams read "
			     "out of order\n",
			(unsigned long long)h->bpf[TS_CNT_SEQ_UNLOCKED],
			h->bpf[TS_CNT_SEQ_UNLOCKED] == 1 ? "" : "s",
			h->bpf[TS_CNT_SEQ_UNLOCKED] == 1 ? "its" : "their");
	if (h->bpf[TS_CNT_PROBES_OFF])
		fprintf(out, "WARNING: %llu probe%s could not be attached: calls through %s were not "
			     "seen (tracing was partial)\n",
			(unsigned long long)h->bpf[TS_CNT_PROBES_OFF],
			h->bpf[TS_CNT_PROBES_OFF] == 1 ? "" : "s",
			h->bpf[TS_CNT_PROBES_OFF] == 1 ? "it" : "them");
	if (h->sock_table_full)
		fprintf(out, "WARNING: the plaintext socket table was full at %llu counter read%s "
			     "(%d sockets): the kernel may have pushed captured sockets out; requests "
			     "whose streams went quiet then are marked capture_loss\n",
			(unsigned long long)h->sock_table_full, h->sock_table_full == 1 ? "" : "s",
			TS_SOCK_STATES_MAX);
	if (h->sessions_evicted)
		fprintf(out, "WARNING: %llu agent sessions ended early: more than %d were open at once "
			     "(their records say \"ended\": \"full\")\n",
			(unsigned long long)h->sessions_evicted, SESSIONS_OPEN_MAX);
	if (h->recording_errors)
		fprintf(out, "WARNING: %llu records could not be written to the recording\n",
			(unsigned long long)h->recording_errors);
	if (h->otlp.spans_dropped)
		fprintf(out, "WARNING: %llu spans were not delivered to the OTLP collector (its "
			     "queue full, or the collector refused or did not answer)\n",
			(unsigned long long)h->otlp.spans_dropped);
	if (h->bpf[TS_CNT_DROPS] || h->lost_pieces || h->bpf[TS_CNT_TRUNCATED] || h->conn.no_memory)
		fprintf(out, "WARNING: capture lost data; affected requests are marked incomplete "
			     "(raise -b to enlarge the ring buffer)\n");
}

static void print_capture(FILE *out, const struct health *h);

/* Each consumer of the group: its requests, its SLOs met and goodput (those met a second of
 * the run's requests' span), its streams' reading headroom. Unknown ones are said only where
 * an SLO judged them. */
static void print_consumers(struct summary *sm, FILE *out, struct group *g)
{
	double span_s = (double)(sm->last_ns - sm->first_ns) / 1e9;

	for (int c = 0; c < CONSUMER__COUNT; c++) {
		struct consumer_part *p = &g->by[c];
		char slos[160];

		if (!p->n)
			continue;
		judge__slos_text(sm->judge, (enum consumer)c, slos, sizeof(slos));
		if (c == CONSUMER_UNKNOWN && !slos[0])
			continue; /* nothing decided, nothing judged: nothing to say */
		fprintf(out, "    consumer %s: requests=%llu", consumer__name((enum consumer)c),
			(unsigned long long)p->n);
		if (!slos[0])
			fprintf(out, " slo=none");
		else if (!p->judged)
			fprintf(out, " slo=\"%s\" judged=0", slos);
		else
			fprintf(out, " slo=\"%s\" met=%llu/%llu (%.1f %%)", slos,
				(unsigned long long)p->met, (unsigned long long)p->judged,
				100.0 * (double)p->met / (double)p->judged);
		if (p->judged && span_s > 0)
			fprintf(out, " goodput=%.3g/s", (double)p->met / span_s);
		fputc('\n', out);
		if (sample__count(&p->headroom))
			fprintf(out, "      reading_headroom n=%llu p10=%.2fx p50=%.2fx min=%.2fx "
				     "(the stream's tokens/s over %.3g)\n",
				(unsigned long long)sample__count(&p->headroom),
				sample__pct(&p->headroom, 10), sample__pct(&p->headroom, 50),
				p->least, sm->judge->reading_tps);
	}
}

/* Whether people read faster than their streams come: every interactive stream ahead of
 * reading means TPOT work would not be seen; else the groups whose streams fell behind. */
static void print_reading(struct summary *sm, FILE *out)
{
	uint64_t n = 0, behind = 0, slow = 0;
	double least = INFINITY;

	for (size_t i = 0; i < sm->groups.n; i++) {
		struct consumer_part *p = &((struct group *)sm->groups.v[i])->by[CONSUMER_INTERACTIVE];

		if (!sample__count(&p->headroom))
			continue;
		n += sample__count(&p->headroom);
		behind += p->behind;
		if (p->least < least)
			least = p->least;
	}
	if (!n)
		return;
	if (!behind) {
		fprintf(out, "reading: all %llu interactive streams ran ahead of reading (%.3g "
			     "tokens/s; the slowest %.2fx): faster streaming would not be seen\n",
			(unsigned long long)n, sm->judge->reading_tps, least);
		return;
	}
	fprintf(out, "reading: interactive streams slower than reading (%.3g tokens/s), their "
		     "readers waiting:", sm->judge->reading_tps);
	for (size_t i = 0; i < sm->groups.n; i++) {
		struct group *g = sm->groups.v[i];
		struct consumer_part *p = &g->by[CONSUMER_INTERACTIVE];
		char comm[TS_COMM_LEN * 8], who[32], model[SAFE_MAX];

		if (!p->behind)
			continue;
		request_group__who(&g->key, who, sizeof(who));
		fprintf(out, "%s %s[%s] model=%s %llu of %llu", slow++ ? "," : "",
			text__safe(comm, sizeof(comm), g->key.comm), who,
			g->key.model[0] ? text__safe(model, sizeof(model), g->key.model) : "-",
			(unsigned long long)p->behind, (unsigned long long)sample__count(&p->headroom));
	}
	fputc('\n', out);
}

void summary__print(struct summary *sm, FILE *out, const struct health *h)
{
	fprintf(out, "\n=== tokenscope summary ===\n");
	if (!sm->groups.n && !step_summary__any(sm->steps))
		fprintf(out, "no LLM API requests or engine steps seen\n");
	for (size_t i = 0; i < sm->groups.n; i++) {
		struct group *g = sm->groups.v[i];
		const struct request_group *k = &g->key;
		char comm[TS_COMM_LEN * 8], model[SAFE_MAX], who[32], pod[SAFE_MAX];

		request_group__who(k, who, sizeof(who));
		fprintf(out, "%s[%s] %s %s model=%s%s%s requests=%llu incomplete=%llu\n",
			text__safe(comm, sizeof(comm), k->comm), who, role__name(k->role),
			api__name(k->api), k->model[0] ? text__safe(model, sizeof(model), k->model) : "-",
			k->pod[0] ? " pod=" : "", k->pod[0] ? text__safe(pod, sizeof(pod), k->pod) : "",
			(unsigned long long)g->n, (unsigned long long)g->incomplete);
		sample__print(out, "ttft_ms", &g->ttft);
		sample__print(out, "ttft_ms hit", &g->ttft_cache[CACHE_HIT]);
		sample__print(out, "ttft_ms partial", &g->ttft_cache[CACHE_PARTIAL]);
		sample__print(out, "ttft_ms miss", &g->ttft_cache[CACHE_MISS]);
		sample__print(out, "ttft_ms cache?", &g->ttft_cache[CACHE_UNKNOWN]);
		sample__print(out, "tpot_ms", &g->tpot);
		sample__print(out, "itl_ms", &g->itl);
		sample__print(out, "e2e_ms", &g->e2e);
		sample__print(out, "output_tokens", &g->out_tokens);
		print_consumers(sm, out, g);
		print_untracked(out, g, h);
		if (k->role == ROLE_SERVER)
			print_attribution(out, g);
	}
	print_reading(sm, out);
	print_change(sm, out);
	session_summary__print(sm->sessions, out);
	if (sm->groups.folded)
		fprintf(out, "%llu requests of keys past the first %d groups are in groups of "
			     "model=other (docs/output.md)\n",
			(unsigned long long)sm->groups.folded, REQUEST_GROUPS_MAX);
	if (sm->attr)
		attrib__engines(sm->attr, print_engine, out);
	step_summary__print(sm->steps, out);
	print_capture(out, h);
	fflush(out);
}

/* The capture's counters: GPU marks, llama.cpp steps, events, streams, HTTP/2, TCP, and what
 * was lost, said as warnings. */
static void print_capture(FILE *out, const struct health *h)
{
	if (h->gpu_marks)
		fprintf(out, "gpu: marks=%llu launches=%llu nested_deduped=%llu captured=%llu "
			     "steps=%llu unobserved=%llu drops=%llu streams_over_limit=%llu\n",
			(unsigned long long)h->gpu_marks, (unsigned long long)h->bpf[TS_CNT_GPU_LAUNCHES],
			(unsigned long long)h->bpf[TS_CNT_GPU_NESTED],
			(unsigned long long)h->bpf[TS_CNT_GPU_CAPTURED], (unsigned long long)h->gpu_steps,
			(unsigned long long)h->gpu_unobserved, (unsigned long long)h->bpf[TS_CNT_GPU_DROPS],
			(unsigned long long)h->bpf[TS_CNT_GPU_NO_SLOT]);
	if (h->bpf[TS_CNT_GPU_RUNTIME_UNKNOWN]) /* rare: said only when it happened */
		fprintf(out, "gpu: runtime_unknown=%llu (runtime calls whose code could not be "
			     "located: their driver calls may have counted twice)\n",
			(unsigned long long)h->bpf[TS_CNT_GPU_RUNTIME_UNKNOWN]);
	if (h->llama_steps || h->bpf[TS_CNT_LLAMA_DROPS])
		fprintf(out, "llama.cpp: steps=%llu failed=%llu nested_deduped=%llu drops=%llu\n",
			(unsigned long long)h->llama_steps, (unsigned long long)h->failed_steps,
			(unsigned long long)h->bpf[TS_CNT_LLAMA_NESTED],
			(unsigned long long)h->bpf[TS_CNT_LLAMA_DROPS]);
	fprintf(out,
		"capture: events=%llu bytes=%llu drops=%llu (%llu bytes) lost_pieces=%llu "
		"truncated_calls=%llu (%llu bytes) read_faults=%llu other_drops=%llu stale_calls=%llu "
		"bad_records=%llu no_memory=%llu aged_out=%llu\n",
		(unsigned long long)h->events, (unsigned long long)h->bytes,
		(unsigned long long)h->bpf[TS_CNT_DROPS], (unsigned long long)h->bpf[TS_CNT_DROP_BYTES],
		(unsigned long long)h->lost_pieces, (unsigned long long)h->bpf[TS_CNT_TRUNCATED],
		(unsigned long long)h->bpf[TS_CNT_TRUNCATED_BYTES],
		(unsigned long long)h->bpf[TS_CNT_READ_FAULTS],
		(unsigned long long)h->bpf[TS_CNT_OTHER_DROPS],
		(unsigned long long)h->bpf[TS_CNT_STALE_CALLS], (unsigned long long)h->bad_events,
		(unsigned long long)h->conn.no_memory, (unsigned long long)h->streams_aged_out);
	fprintf(out,
		"streams: %llu (http/1.1 %llu, http/2 %llu, unsupported: non-http %llu; malformed %llu, "
		"unsupported encodings %llu, decode budget exceeded %llu) requests: %llu llm (%llu "
		"incomplete), %llu other http, %llu unpaired responses\n",
		(unsigned long long)h->streams, (unsigned long long)h->streams_http1,
		(unsigned long long)h->streams_http2, (unsigned long long)h->streams_other,
		(unsigned long long)h->conn.malformed, (unsigned long long)h->conn.unsupported_encodings,
		(unsigned long long)h->conn.decode_budget_exceeded, (unsigned long long)h->requests, (unsigned long long)h->requests_incomplete,
		(unsigned long long)h->other_http, (unsigned long long)h->conn.unpaired_responses);
	summary_http2(out, h);
	summary_engine_wires(out, h);
	if (h->streams_nat)
		fprintf(out, "network: connections through NAT=%llu (joined to their servers by "
			     "their conntrack entries)\n",
			(unsigned long long)h->streams_nat);
	if (h->bpf[TS_CNT_SOCK_TLS] || h->bpf[TS_CNT_SOCK_IGNORED] || h->sock_not_captured ||
	    h->bpf[TS_CNT_SOCK_PEEKS] || h->bpf[TS_CNT_SOCK_IO_URING])
		fprintf(out, "tcp: tls_sockets=%llu ignored_sockets=%llu peeks=%llu sendfile=%llu "
			     "splice=%llu mmsg=%llu io_uring=%llu not_captured=%llu\n",
			(unsigned long long)h->bpf[TS_CNT_SOCK_TLS],
			(unsigned long long)h->bpf[TS_CNT_SOCK_IGNORED],
			(unsigned long long)h->bpf[TS_CNT_SOCK_PEEKS],
			(unsigned long long)h->bpf[TS_CNT_SOCK_SENDFILE],
			(unsigned long long)h->bpf[TS_CNT_SOCK_SPLICE],
			(unsigned long long)h->bpf[TS_CNT_SOCK_MMSG],
			(unsigned long long)h->bpf[TS_CNT_SOCK_IO_URING],
			(unsigned long long)h->sock_not_captured);
	print_capture_warnings(out, h);
}

static int finish(void *self, const struct health *h)
{
	struct summary *sm = self;

	summary__print(sm, sm->out, h);
	return 0;
}

static void on_session(void *self, const struct session *s)
{
	struct summary *sm = self;

	session_summary__add(sm->sessions, s);
}

const struct sink_ops summary_sink = { .name = "summary", .on_request = on_request,
				       .on_step = on_step, .on_exit = on_exit_,
				       .on_session = on_session, .finish = finish };
