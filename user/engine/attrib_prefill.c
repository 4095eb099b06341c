// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which steps carried prefill (attrib_state.h): those that produced some request's first
 * token (exact), and, with chunked prefill, the steps well above the decode baseline that
 * produced no first token (the earlier chunks of a long prompt).
 */
#include <stdlib.h>

#include "engine/attrib_state.h"

/*
 * First tokens per step, GPU window_step_busy starts, the decode baseline, earlier prefill chunks.
 * The baseline is a low percentile of the GPU time of the window's steps that produced no
 * first token: an engine window_step_busy with long prompts has few steps of decodes alone, and a median
 * of recent ones would be a prefill chunk's.
 */
void attrib_classify_steps(struct attrib *a, struct engine_procs *e, uint32_t own_pid, struct window_step *v,
			   size_t n, uint64_t to)
{
	uint64_t prev_done = 0, baseline = 0, excess[64], *plain = malloc(n * sizeof(*plain));
	size_t nplain = 0, nexcess = 0, runs = 0;

	attrib_place_first_tokens(a, e, own_pid, v, n, to);
	for (size_t k = 0; k < n; k++) {
		/* The GPU runs one step after the other: a step launched early starts when the
		 * previous one ends. Steps are in seen order, the GPU order. */
		v[k].busy_start = v[k].start > prev_done ? v[k].start : prev_done;
		prev_done = v[k].done > prev_done ? v[k].done : prev_done;
		if (plain && v[k].mk_hi == v[k].mk_lo)
			plain[nplain++] = window_step_busy(&v[k]);
	}
	if (nplain >= BASELINE_STEPS) {
		qsort(plain, nplain, sizeof(*plain), attrib_cmp_u64);
		baseline = plain[nplain / 10];
	}
	free(plain);
	for (size_t k = 0; k < n; k++) {
		v[k].baseline = baseline;
		if (!baseline || v[k].mk_hi > v[k].mk_lo || v[k].maybe_first ||
		    window_step_busy(&v[k]) <= 3 * baseline + 500000)
			continue;
		v[k].orphan = true;
		if (nexcess < 64)
			excess[nexcess++] = window_step_busy(&v[k]) - baseline;
	}
	/* Earlier chunks of a long prompt show as runs of steps that carried prefill without
	 * producing a first token, the last of them followed by the step of the prompt's last
	 * chunk, which produced its first token. A lone one can be a first token placed on the
	 * wrong step (a request still streaming, not aligned yet), and a run that leads into no
	 * first token is steps that were slow for another reason (a GPU shared, or, for the
	 * stand-in's virtual GPU, a loaded host); two runs of two or more that lead into first
	 * tokens may be chunked prefill */
	for (size_t k = 1; k + 1 < n; k++)
		runs += v[k].orphan && v[k - 1].orphan &&
			(v[k + 1].mk_hi > v[k + 1].mk_lo || v[k + 1].maybe_first);
	/* and the middle chunks of long prompts fill the step's token budget: most of them take
	 * about the same time (prompts computed whole, placed on the wrong step, would not) */
	e->chunked = false;
	if (runs >= 2 && nexcess >= 4) {
		size_t near = 0;

		qsort(excess, nexcess, sizeof(*excess), attrib_cmp_u64);
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
bool attrib_prefill_of_other(const struct attrib *a, const struct window_step *s, uint64_t id)
{
	for (size_t i = s->mk_lo; i < s->mk_hi; i++) {
		if (a->fts[a->marks[i].ft].id != id)
			return true;
	}
	return false;
}

/* Whether every request of the window that arrived before `arrival` had its first token by
 * step `by` (-1: before the window's steps): then a request arriving at `arrival` was first
 * in line for the steps after. */
static bool first_in_line(const struct attrib *a, long by, uint64_t arrival, uint64_t self)
{
	for (size_t i = 0; i < a->nmarks; i++) {
		const struct first_token *f = &a->fts[a->marks[i].ft];

		if (f->id != self && f->arrival < arrival && (long)a->marks[i].step > by)
			return false;
	}
	return true;
}

/*
 * The step that began this request's prefill, given the one that produced its first token.
 * The scheduler attrib_serves prompts first come, first served, a step's token budget at a time. So
 * with chunked prefill, going back from that step: a step that carried prefill and produced
 * no first token was an earlier chunk of this prompt if every request that arrived before it
 * was done with its prefill by then; and the step before those, which produced some first
 * tokens, also carried this prompt's first chunk if it was full (the last chunk of the prompt
 * before left room) and every request that arrived before it was done there.
 */
size_t attrib_prefill_start_step(const struct attrib *a, const struct engine_procs *e,
				 const struct window_step *v, size_t sft, const struct request *r,
				 struct attribution *at)
{
	size_t k = sft;

	if (!e->chunked)
		return sft;
	at->estimated |= EST_PREFILL_START;
	while (k > 0 && v[k - 1].start >= r->start_ns) {
		const struct window_step *s = &v[k - 1];

		if (s->orphan && first_in_line(a, (long)k - 2, r->start_ns, r->id)) {
			k--;
			continue;
		}
		if (s->mk_hi > s->mk_lo && s->baseline && window_step_busy(s) > s->baseline &&
		    (window_step_busy(s) - s->baseline) * 10 >= e->chunk_excess_ns * 8 &&
		    first_in_line(a, (long)k - 1, r->start_ns, r->id))
			k--;
		break;
	}
	return k;
}
