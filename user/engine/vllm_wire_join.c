// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* vLLM's engine wire joined to server requests (engine/vllm_wire.h): which engine requests a
 * response's id names, and the TTFT split from the engine's own times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/attribution.h"
#include "llm/request.h"
#include "engine/vllm_wire.h"
#include "engine/vllm_wire_state.h"

static const char *finish_name(int f)
{
	static const char *const names_[] = { "stop", "length", "abort", "error", "repetition" };

	return f >= 0 && f < 5 ? names_[f] : f >= 0 ? "other" : "";
}

/* The earlier of two times, 0 being none. */
static uint64_t earliest(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

/* The engine requests whose API id the response carried: those whose id, less an n>1 child's
 * "{i}_", is it (vLLM until 2025-12), else those whose external_req_id is (since), or whose id
 * is it and a "-" and 8 characters (since, where the ADD was not seen). The id itself first:
 * where it names any, the suffix form's are another request's (a 2025 X-Request-Id that
 * ended so). Only the front end's own records are joined (not a proxy's before it, which
 * carries the same id), where its ADD's writer was seen. Each is handed to fn; returns how
 * many were. */
static size_t each_engine_request(const struct vllm_wire *w, const struct request *r,
				  void (*fn)(struct vw_req *q, void *ctx), void *ctx)
{
	size_t n = strlen(r->response_id), found = 0;

	for (int k = 0; k < 2 && !found; k++) {
		struct vw_req *q = k ? w->by_key2[vllm_wire_hash(r->response_id, n)]
				     : w->by_key1[vllm_wire_hash(r->response_id, n)];

		for (; q; q = k ? q->next2 : q->next1) {
			if (strcmp(k ? q->key2 : q->key1, r->response_id) ||
			    (q->frontend_pid && q->frontend_pid != r->pid))
				continue;
			found++;
			fn(q, ctx);
		}
	}
	return found;
}

static void earliest_output(struct vw_req *q, void *ctx)
{
	uint64_t *t = ctx;

	*t = earliest(*t, q->first_output_ns);
}

uint64_t vllm_wire__first_output(const struct vllm_wire *w, const struct request *r)
{
	uint64_t t = 0;

	if (w && r->response_id[0] && vllm_wire__seen(w))
		each_engine_request(w, r, earliest_output, &t);
	return t;
}

static void only_request(struct vw_req *q, void *ctx)
{
	struct vw_req **one = ctx;

	*one = *one ? NULL : q; /* a second: n>1's children, none used */
}

size_t vllm_wire__outputs(const struct vllm_wire *w, const struct request *r, uint64_t **ts,
			  uint32_t **tokens)
{
	struct vw_req *q = NULL;

	*ts = NULL;
	*tokens = NULL;
	if (!w || !r->response_id[0] || !vllm_wire__seen(w) ||
	    each_engine_request(w, r, only_request, &q) != 1 || !q || q->out_cut || !q->steps)
		return 0;
	*ts = malloc(q->steps * sizeof(**ts));
	*tokens = malloc(q->steps * sizeof(**tokens));
	if (!*ts || !*tokens) {
		free(*ts);
		free(*tokens);
		*ts = NULL;
		*tokens = NULL;
		return 0;
	}
	memcpy(*ts, q->out_ts, q->steps * sizeof(**ts));
	memcpy(*tokens, q->out_tokens, q->steps * sizeof(**tokens));
	return q->steps;
}

struct gathered {
	struct attrib_wire *aw;
	uint64_t *t;
	struct vw_req *first;
};

/* One engine request of the response's: its facts summed into aw, the children's earliest
 * times into t; the first (child 0 of n>1) kept. */
static void gather_one(struct vw_req *q, void *ctx)
{
	struct gathered *g = ctx;
	struct attrib_wire *aw = g->aw;
	uint64_t *t = g->t;

	q->joined = true;
	if (!g->first || strcmp(q->id, g->first->id) < 0)
		g->first = q; /* "0_..." sorts first */
	/* n>1: the first prefill that began, the first token that came */
	t[0] = earliest(t[0], q->queued_ns);
	t[1] = earliest(t[1], q->scheduled_ns);
	t[2] = earliest(t[2], q->first_output_ns);
	t[3] = earliest(t[3], q->add_ns);
	aw->engine_requests++;
	aw->preemptions += q->preemptions;
	aw->preempted_ns += q->preempted_ns;
	aw->output_steps += q->steps;
	aw->output_tokens += q->tokens;
	aw->events |= q->events;
}

/* The response's engine requests (each_engine_request) gathered: NULL for none. */
static struct vw_req *gather(struct vllm_wire *w, const struct request *r,
			     struct attrib_wire *aw, uint64_t t[4])
{
	struct gathered g = { aw, t, NULL };

	each_engine_request(w, r, gather_one, &g);
	return g.first;
}

/* The TTFT split from the engine's times (t: queued, scheduled, first output, ADD sent), where
 * they fall inside the request, as the same clock's must; else they are another clock's (a
 * container's time namespace) and split nothing. */
static void split(struct attribution *a, const struct request *r, const uint64_t t[4])
{
	uint64_t queued = t[0], scheduled = t[1], out = t[2], add = t[3];

	if (!out || out < r->start_ns || (r->first_token_ns && out > r->first_token_ns) ||
	    (a->wire.events && (!queued || !scheduled || queued < r->start_ns ||
				scheduled < queued || out < scheduled))) {
		if (!a->ok)
			snprintf(a->error, sizeof(a->error), "%s",
				 !out ? "engine_wire: no output of its engine request was seen"
				      : "engine_wire: the engine's times fall outside the request");
		return;
	}
	a->wire.split = true;
	if (a->wire.events) {
		a->wire.frontend_ns = queued - r->start_ns;
		a->wire.engine_queue_ns = scheduled - queued;
		a->queue_ns = a->wire.queue_ns = scheduled - r->start_ns;
		a->prefill_ns = a->wire.prefill_ns = out - scheduled;
		a->prefill_start_ns = scheduled;
		a->estimated &= ~(uint32_t)(EST_PREFILL_START | EST_ENGINE);
	} else {
		/* --disable-log-stats: the ADD's send stands for the arrival in the engine; queue
		 * and prefill are one span */
		a->wire.frontend_ns = add > r->start_ns ? add - r->start_ns : 0;
		a->wire.engine_ns = out > add && add ? out - add : 0;
		if (!a->ok)
			a->queue_ns = a->prefill_ns = 0;
	}
	if (r->first_token_ns && (a->wire.events || !a->ok))
		a->emit_ns = r->first_token_ns - out;
	if (!a->ok) {
		a->ok = true;
		a->error[0] = 0;
		a->queue_busy_ns = a->queue_idle_ns = 0;
	}
}

bool vllm_wire__attribute(struct vllm_wire *w, struct request *r)
{
	struct attrib_wire aw = { .prompt_tokens = -1, .cached_tokens = -1 };
	uint64_t t[4] = { 0 };
	struct vw_req *first;
	struct attribution *a;

	if (!r->response_id[0] || !vllm_wire__seen(w))
		return false;
	first = gather(w, r, &aw, t);
	if (!first) {
		w->n.requests_unjoined++;
		return false;
	}
	w->n.requests_joined++;
	if (!r->attr && !(r->attr = calloc(1, sizeof(*r->attr)))) {
		w->n.no_memory++;
		return false;
	}
	a = r->attr;
	aw.name = VLLM_WIRE_NAME;
	aw.joined = true;
	snprintf(aw.engine_request_id, sizeof(aw.engine_request_id), "%s", first->id);
	aw.layout = first->layout;
	aw.prompt_tokens = first->prompt_tokens;
	aw.cached_tokens = first->cached_tokens;
	snprintf(aw.finish_reason, sizeof(aw.finish_reason), "%s",
		 first->finish_reason < 0 && first->aborted ? "abort"
							    : finish_name(first->finish_reason));
	aw.queued_ns = t[0];
	aw.scheduled_ns = t[1];
	aw.first_output_ns = t[2];
	if (a->ok) { /* CUDA steps split it too: kept beside */
		aw.cuda = true;
		aw.cuda_queue_ns = a->queue_ns;
		aw.cuda_prefill_ns = a->prefill_ns;
	}
	a->wire = aw;
	if (!a->nengine_pids && first->engine_pid)
		a->engine_pids[a->nengine_pids++] = first->engine_pid;
	split(a, r, t);
	return true;
}
