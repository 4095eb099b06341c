// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where the engine's steps name their sequences (llama.cpp), what the request's matched run
 * (attrib_seqs.c) says after its first token: the tokens each of its steps produced (one, or
 * the drafted tokens a verifying step accepted and its own), each token gap's steps (decode,
 * other requests' prompts beside it, embeddings, a context shift) and the speculation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attrib_state.h"

/*
 * The tokens step k produced for run c's sequence: one; or, where it verified drafted tokens
 * (speculative decoding: outputs for the sequence's last token and each drafted one after
 * it), the drafted ones it accepted and its own. The sequence's next step begins right after
 * them: the rejected ones were removed from its cache. Without a next step, as many as
 * left (the caller caps it by the tokens left to place); *exact says which. *drafted: the
 * tokens it verified. A prompt's step verifies drafted tokens where outputs follow tokens
 * that asked for none, or where its earlier chunks asked for none (its own one token, then
 * the drafted ones); a prompt of one step whose every token asked for logits verified
 * nothing.
 */
uint32_t attrib_seq_produced_of(const struct step_proc *p, size_t hi, const struct run *c, size_t k,
			    uint32_t *drafted, bool *exact)
{
	const struct seen_seq *q = seq_in(&p->v[k], c->ctx, c->seq);
	int32_t last;

	*drafted = 0;
	*exact = true;
	if (!q || q->outputs <= 1 || q->first_pos < 0 || q->outputs > q->tokens ||
	    (k == c->end && q->outputs == q->tokens && !c->chunks))
		return 1;
	*drafted = q->outputs - 1;
	last = q->first_pos + (int32_t)q->tokens - (int32_t)q->outputs; /* the sequence's own */
	for (size_t n = k + 1; n < hi; n++) {
		const struct seen_seq *e = seq_in(&p->v[n], c->ctx, c->seq);
		int32_t accepted;

		if (!e || e->first_pos < 0)
			continue;
		accepted = e->first_pos - last - 1;
		if (accepted < 0 || accepted > (int32_t)*drafted)
			break; /* not a continuation: a shift, or the next prompt */
		return (uint32_t)accepted + 1;
	}
	*exact = false;
	return q->outputs;
}

uint32_t attrib_seq_produced(const struct step_proc *p, size_t hi, const struct run *c, size_t k,
			 uint32_t *drafted)
{
	bool exact;

	return attrib_seq_produced_of(p, hi, c, k, drafted, &exact);
}

/* The request whose prompt step k carried for sequence seq: the first token written first
 * after that prompt's sampling step. */
static uint64_t request_of_prompt(const struct attrib *a, const struct engine_procs *e, uint32_t own_pid,
				  const struct step_proc *p, size_t k, size_t hi, uint64_t ctx,
				  int32_t seq, uint64_t self)
{
	for (; k < hi; k++) {
		const struct seen_seq *q = seq_in(&p->v[k], ctx, seq);

		if (q && q->outputs)
			break;
	}
	for (size_t i = k < hi ? attrib_first_tokens_from(a, p->v[k].seen) : a->nfts; i < a->nfts; i++) {
		const struct first_token *f = &a->fts[i];

		if (f->id != self && attrib_serves(a, f->http_pid, own_pid, e))
			return f->id;
	}
	return 0;
}

/* The embeddings call of a process own_pid serves whose time holds step s: the one that
 * ended first after it. */
static uint64_t request_of_embedding(const struct attrib *a, const struct engine_procs *e,
				     uint32_t own_pid, const struct seen_step *s)
{
	const struct embed_call *best = NULL;

	for (size_t i = 0; i < a->nembeds; i++) {
		const struct embed_call *c = &a->embeds[i];

		if (c->arrival <= s->start && c->end >= s->done && (!best || c->end < best->end) &&
		    attrib_serves(a, c->http_pid, own_pid, e))
			best = c;
	}
	return best ? best->id : 0;
}

/* Whether step s overlaps one of the steps p->v[idx[0..n)]. */
static bool overlaps_any(const struct step_proc *p, const size_t *idx, size_t n,
			 const struct seen_step *s)
{
	for (size_t i = 0; i < n; i++) {
		if (p->v[idx[i]].start < s->done && p->v[idx[i]].done > s->start)
			return true;
	}
	return false;
}

void attrib_embed_steps(const struct step_proc *p, size_t lo, size_t hi, struct embed_steps *out)
{
	out->n = 0;
	for (size_t k = lo; k < hi; k++) {
		if (!p->v[k].embed)
			continue;
		if (out->n == sizeof(out->k) / sizeof(out->k[0])) {
			out->n = SIZE_MAX;
			return;
		}
		out->k[out->n++] = k;
	}
}

/* Gap g: the steps after the one that produced event g, up to the one that produced g + 1.
 * A step of the request's own sequence at a position below the one it had reached is a
 * context shift (llama-server moves the cache back in place and decodes on at the lower
 * position; node-llama-cpp clears it and evaluates the kept tokens again, in chunks that
 * sample nothing, then the step that samples the next token): not a new prompt, for the
 * request is still streaming. The time of the steps that evaluate its kept tokens again is
 * the gap's shift_ns. */
void attrib_seq_gap(const struct attrib *a, const struct engine_procs *e, const struct step_proc *p,
		    size_t lo, size_t hi, const struct embed_steps *es, const struct run *c,
		    const struct request *r, size_t g, uint64_t baseline, struct attribution *at)
{
	struct attrib_gap *gp = &at->gaps[g];
	const struct seen_seq *from = seq_in(&p->v[c->out[g]], c->ctx, c->seq);
	int32_t next = from && from->first_pos >= 0 ? from->first_pos + (int32_t)from->tokens : -1;
	uint64_t dec = 0, w0 = p->v[c->out[g]].done, w1 = p->v[c->out[g + 1]].done;
	size_t embeds[8], nembeds = 0;

	gp->gap_ns = r->gaps_ns[g];
	/* embedding steps of the process in the gap, of any context: what it waited behind (a
	 * CPU engine runs its contexts' steps on the same cores) */
	for (size_t i = 0, n = es->n == SIZE_MAX ? hi - lo : es->n; i < n; i++) {
		size_t k = es->n == SIZE_MAX ? lo + i : es->k[i];
		const struct seen_step *s = &p->v[k];
		uint64_t id;

		if (!s->embed || s->done <= w0 || s->start >= w1)
			continue;
		gp->interfered = true;
		if (nembeds < sizeof(embeds) / sizeof(embeds[0]))
			embeds[nembeds++] = k;
		id = request_of_embedding(a, e, r->pid, s);
		if (id)
			attrib_add_interferer(at, id);
	}
	for (size_t k = c->out[g] + 1; k <= c->out[g + 1]; k++) {
		const struct seen_step *s = &p->v[k];
		const struct seen_seq *own = seq_in(s, c->ctx, c->seq);

		if (s->context != c->ctx)
			continue;
		gp->steps++;
		dec += step_duration(s);
		if (own && own->first_pos >= 0 && next >= 0) {
			if (own->first_pos < next)
				gp->context_shift = true;
			if (gp->context_shift && (own->tokens > 1 || !own->outputs))
				gp->shift_ns += step_duration(s); /* kept tokens evaluated again */
			next = own->first_pos + (int32_t)own->tokens;
		}
		if (s->embed || overlaps_any(p, embeds, nembeds, s)) {
			/* an embedding step on this context (named above), or one beside this
			 * step: its time above the typical decode step */
			if (baseline && step_duration(s) > baseline)
				gp->interference_ns += step_duration(s) - baseline;
			continue;
		}
		if (!carries_prompt(s, c->seq))
			continue;
		gp->interfered = true;
		if (baseline && step_duration(s) > baseline)
			gp->interference_ns += step_duration(s) - baseline;
		for (uint32_t i = 0; i < s->nseqs; i++) {
			const struct seen_seq *q = &s->seqs[i];
			uint64_t id;

			if (q->seq == c->seq || (q->tokens == 1 && q->outputs))
				continue;
			id = request_of_prompt(a, e, r->pid, p, k, hi, c->ctx, q->seq, r->id);
			if (id)
				attrib_add_interferer(at, id);
		}
	}
	gp->producer_start_ns = p->v[c->out[g + 1]].start;
	attrib_close_gap(at, gp, dec);
	if (gp->shift_ns > gp->decode_ns)
		gp->shift_ns = gp->decode_ns;
	at->context_shifts += gp->context_shift;
	at->shift_ns += gp->shift_ns;
}

/*
 * Speculative decoding: each step of the run that verified drafted tokens, the tokens it
 * verified and those the stream carried from it but its own: where the sequence's next step
 * says (it begins after them), else the token events it produced but one (the run's last
 * step: a lower bound where an event carried several tokens). Counted on the gap its first
 * token ends (the first token's: the request's only). Then the steps of the process's other
 * contexts from the prompt's start to the last token: its draft model's.
 */
void attrib_seq_speculation(const struct step_proc *p, size_t lo, size_t hi, const struct run *c,
			const struct request *r, struct attribution *at)
{
	for (size_t i = 0; i < r->token_events; i++) {
		uint32_t drafted, made, accepted, events = 1;
		bool exact;

		if (i && c->out[i] == c->out[i - 1])
			continue;
		made = attrib_seq_produced_of(p, hi, c, c->out[i], &drafted, &exact);
		if (!drafted)
			continue;
		while (i + events < r->token_events && c->out[i + events] == c->out[i])
			events++;
		accepted = exact ? made - 1 : events - 1;
		if (accepted > drafted)
			accepted = drafted;
		at->verify_steps++;
		at->drafted += drafted;
		at->accepted += accepted;
		if (i) {
			at->gaps[i - 1].verify = true;
			at->gaps[i - 1].drafted = drafted;
			at->gaps[i - 1].accepted = accepted;
		}
	}
	struct {
		uint64_t ctx;
		uint32_t n;
	} ctxs[4] = { 0 };

	if (!at->drafted)
		return;
	for (size_t k = lo; k < hi; k++) {
		const struct seen_step *s = &p->v[k];

		if (s->context == c->ctx || s->embed || !s->nseqs ||
		    s->start >= r->last_token_ns || s->done <= p->v[c->first].start)
			continue;
		at->draft_steps++;
		at->draft_ns += step_duration(s);
		for (size_t i = 0; i < 4; i++) {
			if (!ctxs[i].n || ctxs[i].ctx == s->context) {
				ctxs[i].ctx = s->context;
				ctxs[i].n++;
				break;
			}
		}
	}
	for (size_t i = 0, best = 0; i < 4; i++) {
		if (ctxs[i].n > best) {
			best = ctxs[i].n;
			at->draft_context = ctxs[i].ctx;
		}
	}
}
