// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attribution where the engine's steps name their sequences (llama.cpp: each llama_decode
 * call's batch, per sequence id: tokens, first position, outputs). Then prefill and decode
 * need no inference; what does is which sequence served the request, for the engine never
 * sees HTTP. A request's sequence is the one whose run matches it:
 *   - a prompt: steps of that sequence that sampled nothing (earlier chunks), then the step
 *     that sampled its first token, all begun after the request arrived and before its first
 *     token was written;
 *   - then one output step of the sequence before each token event (one token per event when
 *     usage says so), the fit being how soon after its step each event was written.
 * A run whose sequence goes on decoding at its next positions in steps begun after the
 * request ended (another request's, longer, batched with it) is not its run: it is taken
 * only where no other fits. Among the rest the best fit wins.
 * The response's usage is evidence, not a gate: servers count a prompt differently (a chat
 * template's tokens or BOS in or out; Ollama's prompt_eval_count leaves the cached tokens
 * out, vLLM's and llama-server's count them in), and a count that is off can equal another
 * sequence's prompt. So the usage decides only between runs whose times fit about alike: a
 * run it disagrees with carries a penalty of USAGE_WORTH_STEPS times its sampling step.
 * Two prompts sampled in one batched step fit alike but for the jitter of the server's
 * writes, which on a loaded machine reaches a step: there the usage picks. Another request's
 * run, its prompt sampled some steps away, fits worse by far more, and a count that is off
 * does not hand it over. A run the usage disagrees with is also not taken where another
 * request that finished by then names it by its usage and could have been its
 * (usage_elsewhere()): two prompts sampled a step apart, batched in the same steps after, fit
 * the later run alike when the earlier one's writes come a step late, and its timing then
 * wins by more than the usage's worth, summed over its events.
 * A split made from a run the usage disagrees with says so (usage_mismatch: reported and
 * evaluated). The record says the match was inferred ("sequence" in estimated).
 * A process whose steps come from both sources (llama.cpp on CUDA) is split by llama.cpp's:
 * its CUDA steps run inside them and are not counted again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"
#include "engine/attrib_state.h"
#include "engine/llama_models.h"

/* Whether the server's own figures for the request (llama-server's timings: the prompt
 * tokens it evaluated and those it reused from the slot's cache; Ollama's evaluated count)
 * are run c's. They count exactly what its steps did, so a run they disagree with is not the
 * request's. */
static bool timings_agree(const struct request *r, const struct run *c)
{
	const struct server_timings *t = &r->timings;

	return (!t->evaluated.set || t->evaluated.v == c->prompt) &&
	       (!t->cached.set || t->cached.v == c->cached);
}

static bool timings_stated(const struct request *r)
{
	return r->timings.evaluated.set || r->timings.cached.set;
}

/* Whether the response's prompt length is run c's: none said, or with or without its cache. */
static bool usage_agrees(const struct request *r, const struct run *c)
{
	return !r->input_tokens.set || r->input_tokens.v == (uint64_t)c->cached + c->prompt ||
	       r->input_tokens.v == c->prompt;
}

/* Walk back from the step that sampled the first token over the sequence's steps that sampled
 * nothing and end where the prompt's next step begins: the prompt's chunks. A step of the
 * sequence whose positions do not join on (the previous request's last token evaluated
 * without logits, a prompt the sequence began before) is not one of them. False when that
 * is not the start of a prompt (a decode). */
static bool prompt_of(const struct step_proc *p, size_t lo, struct run *c, const struct request *r)
{
	const struct seen_seq *q = seq_in(&p->v[c->end], c->ctx, c->seq);
	int32_t first_pos = q->first_pos;

	c->first = c->end;
	/* tokens drafted after the prompt's last one, verified in its step, are not the prompt */
	c->prompt = q->outputs > 1 && q->outputs < q->tokens ? q->tokens - (q->outputs - 1)
							      : q->tokens;
	c->steps = 1;
	c->chunks = 0;
	for (size_t k = c->end; k-- > lo;) {
		const struct seen_seq *e = seq_in(&p->v[k], c->ctx, c->seq);

		if (!e)
			continue;
		if (e->outputs) {
			/* the sequence's step before: a decode this step continues (one token at the
			 * next position) is no prompt's start */
			if (c->chunks == 0 && q->tokens == 1 && e->first_pos + (int32_t)e->tokens == first_pos)
				return false;
			break;
		}
		if (e->first_pos >= 0 && first_pos >= 0 && e->first_pos + (int32_t)e->tokens != first_pos)
			break;
		c->first = k;
		c->prompt += e->tokens;
		first_pos = e->first_pos;
		c->chunks++;
		c->steps++;
	}
	/* a prompt's last chunk of one token, verified with the tokens drafted after it: every
	 * token of the step has an output, and only the first is the prompt's */
	if (c->chunks && q->outputs > 1 && q->outputs == q->tokens)
		c->prompt -= q->tokens - 1;
	c->cached = first_pos > 0 ? (uint32_t)first_pos : 0;
	return p->v[c->first].start >= r->start_ns;
}

/* The output steps of the run that produced the token events after the first, and the fit.
 * One token per event when usage says so: event i from the run's next output step with a
 * token left (a step that verified drafted tokens produced as many as it accepted, and one).
 * Else an event carries the tokens of the run's output steps seen since the event before, so
 * each event is from the latest output step seen before it that leaves one for every event
 * after it: taken from the last event back, a verifying step taking as many events as it
 * produced tokens. (From the first event on, a write that comes after the next step was over
 * would take that step and leave the next event none.) */
static bool tokens_of(const struct step_proc *p, size_t hi, struct run *c, const struct request *r,
		      bool one_each)
{
	size_t ne = r->token_events, k = c->end + 1, cur;
	uint64_t t = r->first_token_ns;
	uint32_t left, drafted;

	c->out[0] = c->end;
	c->fit = t - p->v[c->end].seen;
	if (!one_each && ne > 1) {
		/* from the last event back: the step each took, and how many more it may take */
		size_t end_left = attrib_seq_produced(p, hi, c, c->end, &drafted) - 1;

		for (size_t i = 1; i < ne; i++)
			t += r->gaps_ns[i - 1];
		k = hi;
		cur = hi;
		left = 0;
		for (size_t i = ne - 1; i >= 1; t -= r->gaps_ns[--i]) {
			const struct seen_seq *e = NULL;

			if (cur < hi && left && p->v[cur].seen <= t) {
				left--;
				c->out[i] = cur;
				c->fit += t - p->v[cur].seen;
				continue;
			}
			while (k-- > c->end + 1) {
				if (p->v[k].seen > t)
					continue;
				e = seq_in(&p->v[k], c->ctx, c->seq);
				if (e && e->outputs)
					break;
				e = NULL;
			}
			if (!e) {
				if (!end_left)
					return false;
				end_left--; /* the prompt's step verified drafted tokens too */
				k = c->end + 1;
				c->out[i] = c->end;
				c->fit += t - p->v[c->end].seen;
				continue;
			}
			cur = k;
			left = attrib_seq_produced(p, hi, c, k, &drafted) - 1;
			c->out[i] = k;
			c->fit += t - p->v[k].seen;
		}
		return true;
	}
	cur = c->end;
	left = attrib_seq_produced(p, hi, c, c->end, &drafted) - 1;
	for (size_t i = 1; i < ne; i++) {
		size_t found = hi;

		t += r->gaps_ns[i - 1];
		if (left) {
			left--;
			c->out[i] = cur;
			c->fit += t > p->v[cur].seen ? t - p->v[cur].seen : 0;
			continue;
		}
		for (; k < hi && p->v[k].seen <= t; k++) {
			const struct seen_seq *e = seq_in(&p->v[k], c->ctx, c->seq);

			if (!e || !e->outputs)
				continue;
			found = k;
			k++;
			break;
		}
		if (found == hi)
			return false;
		c->out[i] = found;
		cur = found;
		left = attrib_seq_produced(p, hi, c, found, &drafted) - 1;
		c->fit += t - p->v[found].seen;
	}
	return true;
}

/* What a usage agreeing with a run is worth, in steps of the run's sampling step's length.
 * Measured on the llama integration test's recordings (19 runs, 10 with a CPU hog, 72
 * requests each): every request split right from 1.5 to 10; at 1 a write's jitter (0.95 ms
 * over a 1.53 ms step) lost one, at 0.5 two; unbounded (usage as a gate among fitting
 * runs) lost 20 to counts with a template's tokens that equalled another request's run. */
#define USAGE_WORTH_STEPS 2

/* Whether run c's sequence goes on decoding after the request: a token at each next position
 * after the step of its last event, with logits, in LIVES_ON_STEPS steps begun after the
 * request's end. The step that samples an end of stream, or a token a stop string then holds
 * back, comes before the end, and so does a step the engine had under way as the server
 * ended the stream (scheduled ahead); a server does not begin another for a stream it ended.
 * One is enough: two requests of one prompt length batched in one step, 10 and 11 tokens
 * out, fit alike but for the jitter of their writes (seen under a CPU hog). */
#define LIVES_ON_STEPS 1
static bool lives_on(const struct step_proc *p, size_t hi, const struct run *c,
		     const struct request *r)
{
	size_t last = c->out[r->token_events - 1];
	const struct seen_seq *q = seq_in(&p->v[last], c->ctx, c->seq);
	int32_t next = q->first_pos + (int32_t)q->tokens;
	uint64_t end = r->end_ns ? r->end_ns : r->last_token_ns; /* no end seen: its last token */
	unsigned after = 0;

	if (q->first_pos < 0)
		return false; /* positions not read: nothing to follow */
	for (size_t k = last + 1; k < hi; k++) {
		const struct seen_seq *e = seq_in(&p->v[k], c->ctx, c->seq);

		if (!e)
			continue;
		if (e->tokens != 1 || e->first_pos != next || !e->outputs)
			return false; /* a new prompt, a shift, a last token without logits */
		next++;
		if (p->v[k].start > end && ++after >= LIVES_ON_STEPS)
			return true;
	}
	return false;
}

/* Whether another request, finished by the time this one is attributed (to), could have been
 * run c's and says so by its usage: it arrived before c's prompt began, its first token was
 * written after c sampled one and before the sequence's next output step, its engine is c's,
 * and its usage's prompt is c's (cached tokens in or out). Two requests batched into the
 * same steps but sampled a step apart fit the later run alike when the server writes the
 * earlier one's tokens a step late (a loaded host): the earlier one's timing picks the later
 * run over its own by more than the usage's worth, summed over its events. The run the
 * other's usage names is then the other's. */
static bool usage_elsewhere(const struct attrib *a, const struct engine_procs *e,
			    const struct step_proc *p, size_t hi, const struct run *c,
			    const struct request *r, uint64_t to)
{
	uint64_t sampled = p->v[c->end].seen, before = UINT64_MAX;

	for (size_t k = c->end + 1; k < hi; k++) {
		const struct seen_seq *q = seq_in(&p->v[k], c->ctx, c->seq);

		if (q && q->outputs) {
			before = p->v[k].seen;
			break;
		}
	}
	for (size_t i = attrib_first_tokens_from(a, sampled); i < a->nfts && a->fts[i].ft < before; i++) {
		const struct first_token *f = &a->fts[i];

		if (f->id == r->id || !f->has_usage || !f->end || f->end > to ||
		    f->arrival > p->v[c->first].start ||
		    (f->input_tokens != (uint64_t)c->cached + c->prompt &&
		     f->input_tokens != c->prompt) ||
		    !attrib_serves(a, f->http_pid, r->pid, e))
			continue;
		return true;
	}
	return false;
}

/* The model the request names, where a context of the window serves it (its key), else 0:
 * then any context may have served it. Servers name a model by its file (llama-server's
 * alias aside), the request by what it asked for, the response by what served it. */
static uint64_t model_named(const struct step_proc *p, size_t lo, size_t hi, const struct request *r)
{
	const char *names[] = { r->model, r->response_model };

	for (size_t i = 0; i < 2; i++) {
		uint64_t key = llama_model__key(names[i]);

		if (!key || !attrib_proc_may_name(p, key))
			continue;
		for (size_t k = lo; k < hi; k++) {
			if (p->v[k].model == key)
				return key;
		}
	}
	return 0;
}

/* Whether run c ranks below run b: a run whose sequence lives on after the request, then a
 * run another request's usage names, only where no other fits; then the better score. */
static bool ranks_below(const struct run *c, const struct run *b)
{
	if (c->lives_on != b->lives_on)
		return c->lives_on;
	if (c->usage_elsewhere != b->usage_elsewhere)
		return c->usage_elsewhere;
	return c->score >= b->score;
}

/* Whether runs x and y split the request alike: the same prompt steps, the same step for
 * each token event. Two sequences batched step for step (prompts of one length arriving
 * together) do: whichever served it, its figures are the same. */
static bool same_steps(const struct run *x, const struct run *y, size_t events)
{
	return x->first == y->first && x->end == y->end &&
	       !memcmp(x->out, y->out, events * sizeof(*x->out));
}

static void keep_run(struct run *dst, const struct run *c, size_t events)
{
	size_t *out = dst->out;

	memcpy(out, c->out, events * sizeof(*c->out));
	*dst = *c;
	dst->out = out;
}

/* The best-fitting run, into best (its out array must hold token_events entries), and the
 * best of the runs that split it otherwise into second (second->steps 0: none). Where the
 * server stated its figures for the request, only runs they agree with are candidates. */
static bool find_run(const struct attrib *a, const struct engine_procs *e, const struct step_proc *p,
		     size_t lo, size_t hi, const struct request *r, uint64_t to, struct run *best,
		     struct run *second, size_t *scratch)
{
	bool one_each = r->output_tokens.set && r->output_tokens.v == r->token_events;
	bool found = false;
	uint64_t model = model_named(p, lo, hi, r);

	second->steps = 0;
	/* from the first step seen after the request came: one seen before it began before */
	for (size_t k = lo + attrib_first_seen_at(p->v + lo, hi - lo, r->start_ns);
	     k < hi && p->v[k].seen <= r->first_token_ns; k++) {
		if (p->v[k].start < r->start_ns)
			continue; /* begun before the request came: no step of its prompt */
		if (model && p->v[k].model != model)
			continue; /* another model's context */
		if (p->v[k].embed)
			continue; /* an embeddings call's: it samples no token */
		for (uint32_t i = 0; i < p->v[k].nseqs; i++) {
			struct run c = { .ctx = p->v[k].context, .seq = p->v[k].seqs[i].seq, .end = k,
					 .out = scratch };

			if (!p->v[k].seqs[i].outputs || !prompt_of(p, lo, &c, r))
				continue;
			if (timings_stated(r) && !timings_agree(r, &c))
				continue;
			if (!tokens_of(p, hi, &c, r, one_each))
				continue;
			c.lives_on = lives_on(p, hi, &c, r);
			c.usage_agrees = usage_agrees(r, &c);
			c.usage_elsewhere = !c.usage_agrees &&
					    usage_elsewhere(a, e, p, hi, &c, r, to);
			c.score = c.fit + (c.usage_agrees ? 0 : USAGE_WORTH_STEPS * step_duration(&p->v[c.end]));
			if (found && ranks_below(&c, best)) {
				if (!same_steps(&c, best, r->token_events) &&
				    (!second->steps || !ranks_below(&c, second)))
					keep_run(second, &c, r->token_events);
				continue;
			}
			if (found && !same_steps(&c, best, r->token_events))
				keep_run(second, best, r->token_events);
			keep_run(best, &c, r->token_events);
			found = true;
		}
	}
	return found;
}

/* Whether the runner-up fits as well as the best, so that nothing tells them apart: their
 * standing is the same (both live on or neither, both named elsewhere or neither) and the
 * best's fit is ahead by less than AMBIGUOUS_STEPS of its sampling step, summed over every
 * event. A write's jitter on a loaded host reaches a step; another request's run, sampled a
 * step away, falls behind by a step at every event. */
#define AMBIGUOUS_STEPS 1
static bool fits_alike(const struct step_proc *p, const struct run *best, const struct run *second,
		       size_t events)
{
	/* the runner-up was kept against an earlier best: it may split it as this one does */
	return second->steps && !same_steps(best, second, events) &&
	       best->lives_on == second->lives_on &&
	       best->usage_elsewhere == second->usage_elsewhere &&
	       second->score < best->score + AMBIGUOUS_STEPS * step_duration(&p->v[best->end]);
}

/* The typical step without prompt tokens: the gaps' interference is measured above it. */
static uint64_t decode_baseline(const struct step_proc *p, size_t lo, size_t hi)
{
	uint64_t v[256];
	size_t n = 0;

	for (size_t k = lo; k < hi && n < 256; k++) {
		if (p->v[k].nseqs && !carries_prompt(&p->v[k], -1))
			v[n++] = step_duration(&p->v[k]);
	}
	if (n < 4)
		return 0;
	return select_u64(v, n, n / 10);
}

/* The engine's figures for the summary: each step once, up to the request's end. */
static void account(struct engine_procs *e, const struct step_proc *p, size_t lo, size_t hi, uint64_t upto)
{
	/* from the first step seen after those counted */
	if (e->counted_to)
		lo += attrib_first_seen_at(p->v + lo, hi - lo, e->counted_to + 1);
	for (size_t k = lo; k < hi; k++) {
		const struct seen_step *s = &p->v[k];

		if (!s->nseqs || s->seen <= e->counted_to || s->seen > upto)
			continue; /* a CUDA step of the same process is not the engine's step again */
		e->st.steps++;
		/* an embeddings call's step is neither a prompt's nor a decode */
		e->st.prefill_steps += !s->embed && carries_prompt(s, -1);
		e->st.decode_steps += !s->embed && !carries_prompt(s, -1);
		e->st.busy_ns += step_duration(s);
		if (!e->st.first_ns || s->start < e->st.first_ns)
			e->st.first_ns = s->start;
		if (s->done > e->st.last_ns)
			e->st.last_ns = s->done;
	}
	if (upto > e->counted_to)
		e->counted_to = upto;
}

/* The tokens run c's output steps produced, from its first token's step to its last
 * event's: an event that carried several tokens (the server merged them) counts them all. */
static uint32_t output_tokens(const struct step_proc *p, size_t hi, const struct run *c,
			      const struct request *r)
{
	size_t last = c->out[r->token_events - 1];
	uint32_t n = 0, drafted;

	for (size_t k = c->end; k <= last; k++) {
		const struct seen_seq *q = seq_in(&p->v[k], c->ctx, c->seq);

		if (q && q->outputs)
			n += attrib_seq_produced(p, hi, c, k, &drafted);
	}
	return n;
}

/* Speculative decoding: after the step that sampled the first token, the draft model's
 * context evaluates the same prompt for the same sequence (the prompt ends at the same
 * position) before the server writes that token (llama-server). That is the prompt's work
 * too: the prefill ends with the last such step begun before the first token was written. */
static uint64_t draft_prefill_done(const struct step_proc *p, size_t hi, const struct run *c,
				   const struct request *r, uint64_t done)
{
	int32_t end = (int32_t)(c->cached + c->prompt);

	for (size_t k = c->end + 1; k < hi && p->v[k].start < r->first_token_ns; k++) {
		const struct seen_step *s = &p->v[k];
		const struct seen_seq *q = s->context != c->ctx ? seq_in(s, s->context, c->seq) : NULL;

		if (q && q->tokens > 1 && q->first_pos >= 0 && q->first_pos + (int32_t)q->tokens == end &&
		    s->done > done)
			done = s->done;
	}
	return done;
}

static void split(const struct attrib *a, const struct engine_procs *e, const struct step_proc *p,
		  size_t lo, size_t hi, const struct run *c, const struct request *r,
		  struct attribution *at)
{
	uint64_t start = p->v[c->first].start, done = p->v[c->end].done;
	uint64_t baseline = decode_baseline(p, lo, hi);
	struct embed_steps embeds;

	at->prefill_start_ns = start;
	at->queue_ns = start - r->start_ns;
	/* a step seen before the request came ended before it: no time of its queue */
	for (size_t k = lo + attrib_first_seen_at(p->v + lo, hi - lo, r->start_ns);
	     k < hi && p->v[k].start < start; k++) {
		uint64_t s = p->v[k].start > r->start_ns ? p->v[k].start : r->start_ns;
		uint64_t d = p->v[k].done < start ? p->v[k].done : start;

		/* the same process's CUDA steps run inside its llama.cpp steps: not again */
		if (p->v[k].nseqs && d > s)
			at->queue_busy_ns += d - s;
	}
	if (at->queue_busy_ns > at->queue_ns)
		at->queue_busy_ns = at->queue_ns;
	at->queue_idle_ns = at->queue_ns - at->queue_busy_ns;
	done = draft_prefill_done(p, hi, c, r, done);
	if (done > r->first_token_ns)
		done = r->first_token_ns;
	at->prefill_ns = done - start;
	at->emit_ns = r->first_token_ns - done;
	at->prefill_steps = c->steps;
	at->steps = c->steps;
	at->by_sequence = true;
	at->context = c->ctx;
	at->seq = c->seq;
	at->cached_tokens = c->cached;
	at->prompt_tokens = c->prompt;
	at->prefill_chunks = c->chunks;
	if (!c->usage_agrees) {
		at->usage_mismatch = true;
		at->usage_reported = r->input_tokens.v;
		at->usage_evaluated = c->cached + c->prompt;
	}
	/* the server's own figures name the run where they stated some: known, not inferred */
	at->by_timings = timings_stated(r);
	if (!at->by_timings)
		at->estimated |= EST_SEQUENCE;
	at->output_tokens = output_tokens(p, hi, c, r);
	attrib_embed_steps(p, lo, hi, &embeds);
	for (size_t g = 0; g < at->ngaps; g++)
		attrib_seq_gap(a, e, p, lo, hi, &embeds, c, r, g, baseline, at);
	attrib_seq_speculation(p, lo, hi, c, r, at);
	if (at->ninterfered_by)
		qsort(at->interfered_by, at->ninterfered_by, sizeof(uint64_t), attrib_cmp_u64);
}

int attrib_by_sequence(struct attrib *a, struct engine_procs *e, const struct request *r,
		       struct attribution *at, uint64_t from, uint64_t to)
{
	struct step_proc *p = at->nengine_pids == 1 ? attrib_proc_of(a, at->engine_pids[0], false)
						   : NULL;
	size_t lo, hi, *out, *scratch, *second_out;
	struct run best = { 0 }, second = { 0 };
	bool named = false;

	if (!p)
		return 1;
	lo = attrib_first_seen_at(p->v, p->n, from);
	hi = to == UINT64_MAX ? p->n : lo + attrib_first_seen_at(p->v + lo, p->n - lo, to + 1);
	for (size_t k = lo; k < hi && !named; k++)
		named = p->v[k].nseqs > 0;
	if (!named)
		return 1;
	out = calloc(r->token_events, sizeof(*out));
	second_out = calloc(r->token_events, sizeof(*second_out));
	scratch = calloc(r->token_events, sizeof(*scratch));
	if (!out || !second_out || !scratch ||
	    (r->token_events > 1 && !(at->gaps = calloc(r->token_events - 1, sizeof(*at->gaps))))) {
		free(out);
		free(second_out);
		free(scratch);
		snprintf(at->error, sizeof(at->error), "out of memory");
		return -1;
	}
	at->ngaps = r->token_events - 1;
	best.out = out;
	second.out = second_out;
	if (!find_run(a, e, p, lo, hi, r, to, &best, &second, scratch)) {
		free(out);
		free(second_out);
		free(scratch);
		if (timings_stated(r))
			snprintf(at->error, sizeof(at->error),
				 "no sequence of its engine's steps evaluated the prompt its server's "
				 "timings state (%lld computed, %lld cached) and a token before each of "
				 "its %llu token events",
				 r->timings.evaluated.set ? (long long)r->timings.evaluated.v : -1ll,
				 r->timings.cached.set ? (long long)r->timings.cached.v : -1ll,
				 (unsigned long long)r->token_events);
		else
			snprintf(at->error, sizeof(at->error),
				 "no sequence of its engine's steps matches it (a prompt begun after "
				 "its arrival, a sampled step before each of its %llu token events)",
				 (unsigned long long)r->token_events);
		return -1;
	}
	if (fits_alike(p, &best, &second, r->token_events)) {
		/* two runs that would split it otherwise fit it alike: say so, split nothing */
		at->ambiguous = true;
		at->candidates[0].context = best.ctx;
		at->candidates[0].seq = best.seq;
		at->candidates[1].context = second.ctx;
		at->candidates[1].seq = second.seq;
		snprintf(at->error, sizeof(at->error),
			 "ambiguous: sequences %d and %d of its engine fit it alike and split it "
			 "otherwise",
			 best.seq, second.seq);
		free(out);
		free(second_out);
		free(scratch);
		return -1;
	}
	split(a, e, p, lo, hi, &best, r, at);
	account(e, p, lo, hi, r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns);
	free(out);
	free(second_out);
	free(scratch);
	return 0;
}
