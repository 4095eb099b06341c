// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp-steps: each engine step a span, linked from the requests it served (otlp_state.h;
 * docs/otlp.md#engine-steps).
 *
 * A step serves many requests at once, of many traces, so it belongs to none of them: each
 * step is the root of a trace of its own, and a request's span links to its steps. Both ids
 * come from the step's process and its start (a step's start is its first launch, or its
 * llama_decode call, unique in its process), so a request finds its steps' spans without
 * keeping them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/attribution.h"
#include "sinks/otlp_state.h"

static uint64_t step_key(uint32_t pid, uint64_t start_ns)
{
	return start_ns ^ ((uint64_t)pid << 40 | (uint64_t)pid >> 24);
}

static const char *const source_names[] = { [STEP_SOURCE_CUDA] = "cuda",
					    [STEP_SOURCE_LLAMA] = "llama" };

void otlp__step(struct otlp *o, const struct engine_step *st)
{
	struct spans *s;
	struct draft *d;
	struct pbw *w = &o->w;
	uint64_t key = step_key(st->pid, st->start_ns);
	uint64_t outputs = 0;
	char name[64];

	if (!o->steps || !(s = otlp__spans_new()))
		return;
	otlp__id(o, key, ID_STEP_TRACE, s->trace, 16);
	s->sampled = otlp__sampled_root(o, s->trace);
	if (!s->sampled) {
		o->unsampled++;
		free(s);
		return;
	}
	otlp__resource(o, st->pid, st->comm, NULL, &s->resource);
	d = otlp__draft(s);
	otlp__id(o, key, ID_STEP, d->id, 8);
	for (uint32_t i = 0; i < st->nseqs; i++)
		outputs += st->seqs[i].outputs;
	pbw__reset(w);
	snprintf(name, sizeof(name), "tokenscope.step %s", step_kind__name(step__kind(st)));
	pbw__string(w, F_SPAN_NAME, name);
	pbw__uint(w, F_SPAN_KIND, KIND_INTERNAL);
	pbw__fixed64(w, F_SPAN_START, otlp__unix_ns(o, st->start_ns));
	pbw__fixed64(w, F_SPAN_END, otlp__unix_ns(o, st->end_ns > st->start_ns ? st->end_ns :
									  st->start_ns));
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.step.source",
		       st->source <= STEP_SOURCE_LLAMA ? source_names[st->source] : NULL);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.step.kind",
		       step_kind__name(step__kind(st)));
	if (st->nseqs) {
		otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.step.sequences", st->nseqs);
		otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.step.tokens", st->tokens);
		otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.step.outputs", (int64_t)outputs);
	}
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.request.model", st->model);
	otlp__keep(o, d);
	otlp__emit(o, s);
}

static void link(struct otlp *o, uint32_t pid, uint64_t start_ns)
{
	struct pbw *w = &o->w;
	uint64_t key = step_key(pid, start_ns);
	uint8_t trace[16], span[8];

	otlp__id(o, key, ID_STEP_TRACE, trace, 16);
	otlp__id(o, key, ID_STEP, span, 8);
	pbw__begin(w, F_SPAN_LINKS);
	pbw__bytes(w, F_LINK_TRACE_ID, trace, 16);
	pbw__bytes(w, F_LINK_SPAN_ID, span, 8);
	pbw__end(w);
}

/* The steps' split only (an engine wire's has no steps), of one engine process: a step's
 * process is its key, and a request served by several is not told which ran which step. */
void otlp__step_links(struct otlp *o, const struct request *r)
{
	const struct attribution *a = r->attr;
	uint32_t n = 0, dropped = 0;
	uint64_t last = 0;

	if (r->role != ROLE_SERVER || !a || !a->ok || a->wire.split || a->nengine_pids != 1)
		return;
	if (!(a->estimated & EST_PREFILL_START) && a->prefill_start_ns) {
		link(o, a->engine_pids[0], a->prefill_start_ns);
		last = a->prefill_start_ns;
		n++;
	}
	for (size_t g = 0; g < a->ngaps; g++) {
		uint64_t at = a->gaps[g].producer_start_ns;

		if (!at || at == last)
			continue;
		last = at;
		if (n == LINKS_MAX) {
			dropped++;
			continue;
		}
		link(o, a->engine_pids[0], at);
		n++;
	}
	if (dropped)
		pbw__uint(&o->w, F_SPAN_DROPPED_LINKS, dropped);
}
