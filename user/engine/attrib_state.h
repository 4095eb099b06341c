/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The attribution's kept state and the engine steps of one request's window, shared by its
 * files (engine/attrib.h is the interface; nothing outside engine/attrib*.c includes this),
 * one per question:
 *   attrib_serving.c  which processes serve which HTTP server: --engine, the process tree,
 *                     tensor-parallel ranks in lockstep, merged into one engine's steps;
 *   attrib_align.c    which step produced each token event: the alignment and the
 *                     stream-interval grid;
 *   attrib_prefill.c  which steps carried prefill: first tokens, the decode baseline,
 *                     earlier chunks of a long prompt;
 *   attrib_seqs.c     where steps name their sequences (llama.cpp): the request's own run,
 *                     and its split; attrib_seq_gaps.c: that run's steps after its first
 *                     token (tokens produced, each gap's steps, speculation);
 *   attrib.c          what is kept, and the split itself (docs/attribution.md);
 *   attrib_state.c    the helpers all of them use (below them all: calls run one way).
 */
#ifndef TS_ATTRIB_STATE_H
#define TS_ATTRIB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/attrib.h"
#include "llm/request.h"

#define KEEP_NS (900ull * 1000000000ull)    /* steps and first tokens kept: 15 min */
#define LOOKBACK_NS (2000000000ull)	     /* steps before arrival read for baselines */
#define BASELINE_STEPS 8		     /* decode baseline: from at least this many steps */
#define MAX_ANCESTORS 16
#define ANCESTRY_BUCKETS 1024
#define MAX_LOSSES 256

/* A step of one GPU process, as much as attribution needs. */
/* A sequence's part of a step, where the source names them (llama.cpp). */
struct seen_seq {
	int32_t seq;
	uint32_t tokens;
	int32_t first_pos;
	uint32_t outputs;
};

struct seen_step {
	uint64_t start; /* first launch (CUDA), the call (llama.cpp) */
	uint64_t done;	/* completion (or its upper bound) */
	uint64_t seen;	/* host observed completion */
	bool bound;
	uint32_t nseqs;	  /* 0: the source does not name sequences */
	uint64_t context; /* the step stream within the process */
	uint64_t model;	  /* its model's key (llama_model__key), 0: unknown */
	bool embed;	  /* it computed embeddings (an embedding request's), not tokens */
	struct seen_seq *seqs;
};

struct step_proc {
	uint32_t pid;
	struct seen_step *v; /* by seen, oldest first */
	size_t n, cap;
	/* the model keys its steps ever named (more than fit: models_many), so that a request
	 * naming none of them is not looked for in its window */
	uint64_t models[8];
	uint32_t nmodels;
	bool models_many;
};

/* Whether p's steps may have named model key (0: none): false only where none ever did. */
bool attrib_proc_may_name(const struct step_proc *p, uint64_t key);

struct ancestry {
	uint32_t pid;
	uint32_t anc[MAX_ANCESTORS];
	uint32_t n;
	struct ancestry *next;
};

/* An embeddings call a server finished: which embedding steps were whose. */
struct embed_call {
	uint64_t arrival, end, id;
	uint32_t http_pid;
};

struct first_token {
	uint64_t ft, arrival, id;
	uint64_t step_start; /* first launch of the step that produced it, once the request
				finished and its events were aligned (0: the latest seen before ft) */
	uint64_t end;	     /* its end, once it finished (0: not yet) */
	uint64_t engine_output; /* the engine's own output of it (request.h), 0: not seen */
	uint64_t input_tokens; /* its usage's prompt, once it finished, where it said one */
	bool has_usage;
	uint32_t http_pid;
};

/* A first token placed on a step of the window being attributed. */
struct token_mark {
	size_t step;	    /* the window step it is placed on */
	size_t ft;	    /* the first token: fts[ft] */
	size_t latest_seen; /* the latest step the host had seen before it */
	bool aligned;
};

struct engine_procs {
	uint32_t pids[ATTRIB_MAX_PIDS];
	uint32_t npids;
	bool chunked;		  /* in the window being attributed */
	uint64_t chunk_excess_ns; /* typical excess of a full prefill chunk over decode */
	uint64_t counted_to;	  /* steps seen up to here are in the stats */
	struct attrib_engine_stats st;
	struct engine_procs *next;
};

struct http_engine {
	uint32_t http_pid;
	struct engine_procs *e;
};

/* How an HTTP server streams, from its requests whose usage gave a token count: events
 * of one token each, or of several (a stream interval, outputs merged). */
struct http_style {
	uint32_t http_pid;
	uint32_t every_token, several;
};

struct override {
	uint32_t http_pid;
	uint32_t pids[ATTRIB_MAX_PIDS];
	uint32_t npids;
};

struct attrib {
	struct step_proc *procs;
	size_t nprocs, capprocs;
	struct ancestry *ancestries[ANCESTRY_BUCKETS];
	struct first_token *fts; /* by ft */
	size_t nfts, capfts;
	struct embed_call *embeds; /* as they finished */
	size_t nembeds, capembeds;
	uint64_t losses[MAX_LOSSES];
	size_t nlosses;
	uint64_t pruned_before; /* nothing older than this is kept */
	struct engine_procs *engines;
	struct http_engine *http;
	size_t nhttp, caphttp;
	struct http_style *styles;
	size_t nstyles, capstyles;
	struct override *overrides;
	size_t noverrides;
	uint32_t *clients; /* processes that made LLM API calls themselves: proxies, gateways */
	size_t nclients, capclients;
	struct token_mark *marks; /* of the window being attributed, by step */
	size_t nmarks, capmarks;
};

/* A step of the engine (merged across tensor-parallel ranks) in the window of one request. */
struct window_step {
	uint64_t start, done, seen, busy_start;
	bool bound;
	uint32_t ranks;		/* bit per engine pid */
	size_t mk_lo, mk_hi;	/* the first tokens it produced: marks[mk_lo..mk_hi) */
	uint64_t baseline;	/* the window's decode baseline (0: not known) */
	bool orphan;		/* carried prefill that produced no first token: an earlier chunk */
	bool maybe_first;	/* a first token not aligned yet may have come from it */
};

/* GPU time of a window step: from when the GPU got to it (busy_start) to its end. */
static inline uint64_t window_step_busy(const struct window_step *s)
{
	return s->done > s->busy_start ? s->done - s->busy_start : 0;
}

static inline int attrib_cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* attrib_state.c: what is kept, and what every split does */
/* The gap's decode time (its steps' busy time, at most the gap), host time, and the request's
 * sums. */
void attrib_close_gap(struct attribution *at, struct attrib_gap *gp, uint64_t busy_ns);
/* id among the requests whose prefill shared the request's steps (once). -1: no memory. */
int attrib_add_interferer(struct attribution *at, uint64_t id);
struct step_proc *attrib_proc_of(struct attrib *a, uint32_t pid, bool create);
bool attrib_is_client(const struct attrib *a, uint32_t pid);
/* The first of the first tokens written at or after t (a->fts is by time). */
size_t attrib_first_tokens_from(const struct attrib *a, uint64_t t);

/* attrib_serving.c: the engine of an HTTP process, and its steps around one request */
int attrib_find_engine(struct attrib *a, const struct request *r, uint64_t to,
		       struct attribution *out);
struct engine_procs *attrib_engine_of(struct attrib *a, const uint32_t *pids, uint32_t n);
void attrib_remember_http(struct attrib *a, uint32_t http_pid, struct engine_procs *e);
bool attrib_serves(const struct attrib *a, uint32_t http_pid, uint32_t own_pid,
		   const struct engine_procs *e);
long attrib_gather_steps(struct attrib *a, const struct attribution *at, uint64_t from,
			 uint64_t to, struct window_step **out, char *err, size_t errn);
/* The index of the first of v[0..n) (by seen) seen at or after t: a search, for v holds up
 * to 15 minutes of a process's steps. */
size_t attrib_first_seen_at(const struct seen_step *v, size_t n, uint64_t t);

/* attrib_align.c: which step produced each token event */
size_t attrib_latest_seen(const struct window_step *v, size_t n, uint64_t t);
size_t attrib_engine_output_bound(const struct window_step *v, size_t n, const struct request *r,
				  size_t s0);
void attrib_place_first_tokens(struct attrib *a, const struct engine_procs *e, uint32_t own_pid,
			       struct window_step *v, size_t n, uint64_t to);
bool attrib_align_tokens(const struct window_step *v, size_t n, const struct request *r,
			 bool server_every_token, size_t *q, bool *inferred);
void attrib_bound_by_outputs(const struct window_step *v, size_t n, const struct request *r,
			     size_t *q, bool *inferred);
bool attrib_server_every_token(const struct attrib *a, uint32_t http_pid);

/* attrib_seqs.c: where the steps name their sequences, the request's own, and the split */
/* 0: attributed; -1: not (at->error says why); 1: the steps do not name sequences. */
int attrib_by_sequence(struct attrib *a, struct engine_procs *e, const struct request *r,
		       struct attribution *at, uint64_t from, uint64_t to);

/* attrib_seqs.c and attrib_seq_gaps.c: where steps name their sequences (llama.cpp) */
/* The entry of sequence seq in step s, or NULL. */
static inline const struct seen_seq *seq_in(const struct seen_step *s, uint64_t ctx, int32_t seq)
{
	if (s->context != ctx)
		return NULL;
	for (uint32_t i = 0; i < s->nseqs; i++) {
		if (s->seqs[i].seq == seq)
			return &s->seqs[i];
	}
	return NULL;
}

/* A step that computed prompt tokens of some sequence other than seq. */
static inline bool carries_prompt(const struct seen_step *s, int32_t except)
{
	for (uint32_t i = 0; i < s->nseqs; i++) {
		const struct seen_seq *q = &s->seqs[i];

		if (q->seq != except && (q->tokens > 1 || !q->outputs))
			return true;
	}
	return false;
}

static inline uint64_t step_duration(const struct seen_step *s)
{
	return s->done > s->start ? s->done - s->start : 0;
}

/* One candidate: a sequence's run that may have served the request. */
struct run {
	uint64_t ctx;
	int32_t seq;
	size_t first, end;	/* the prompt's first step, the step that sampled its first token */
	uint32_t chunks, steps; /* prefill steps that sampled nothing; all prefill steps */
	uint32_t prompt, cached;
	size_t *out;		/* out[i]: the step that produced token event i (out[0] == end) */
	uint64_t fit;		/* sum of event time minus its step's end: smaller is better */
	bool usage_agrees;	/* the usage's prompt is this run's, cached tokens in or out */
	bool lives_on;		/* its sequence decodes on after the request ended */
	bool usage_elsewhere;	/* the usage disagrees, and another request's names it */
	uint64_t score;		/* fit, plus USAGE_WORTH_STEPS sampling steps where the usage
				 * disagrees */
};

/* attrib_seq_gaps.c: what a matched run's steps say after its first token */
uint32_t attrib_seq_produced_of(const struct step_proc *p, size_t hi, const struct run *c, size_t k,
				uint32_t *drafted, bool *exact);
uint32_t attrib_seq_produced(const struct step_proc *p, size_t hi, const struct run *c, size_t k,
			     uint32_t *drafted);
/* The embedding steps of p->v[lo, hi), found once for all of a request's gaps: their
 * indices; n is SIZE_MAX where there are more than fit, and every step is looked at. */
struct embed_steps {
	size_t k[32];
	size_t n;
};
void attrib_embed_steps(const struct step_proc *p, size_t lo, size_t hi, struct embed_steps *out);
void attrib_seq_gap(const struct attrib *a, const struct engine_procs *e, const struct step_proc *p,
		    size_t lo, size_t hi, const struct embed_steps *es, const struct run *c,
		    const struct request *r, size_t g, uint64_t baseline, struct attribution *at);
void attrib_seq_speculation(const struct step_proc *p, size_t lo, size_t hi, const struct run *c,
			    const struct request *r, struct attribution *at);

/* attrib_prefill.c: which steps carried prefill */
void attrib_classify_steps(struct attrib *a, struct engine_procs *e, uint32_t own_pid,
			   struct window_step *v, size_t n, uint64_t to);
bool attrib_prefill_of_other(const struct attrib *a, const struct window_step *s, uint64_t id);
size_t attrib_prefill_start_step(const struct attrib *a, const struct engine_procs *e,
				 const struct window_step *v, size_t sft, const struct request *r,
				 struct attribution *at);

#endif
