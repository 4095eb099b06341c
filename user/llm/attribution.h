/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A server request's attribution record: its TTFT split and each token gap's steps, as
 * engine/attrib.c found them (definitions: docs/attribution.md). It is part of the request
 * record (request.attr), so the record's layer owns and frees it; the engine layer fills it.
 */
#ifndef TS_ATTRIBUTION_H
#define TS_ATTRIBUTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ATTRIB_MAX_PIDS 8
#define ATTRIB_ERROR_MAX 160

/* What was inferred rather than observed (the record's "estimated" list). */
enum attrib_estimate {
	EST_PREFILL_START = 1u << 0, /* chunked prefill: the first chunk's step was inferred */
	EST_GPU_DONE = 1u << 1,	     /* the first token's step completion is an upper bound */
	EST_ENGINE = 1u << 2,	     /* the engine was found through the process tree */
	EST_TOKEN_STEPS = 1u << 3,   /* token events were aligned to steps one token per step,
					not to the latest step seen before them */
	EST_SEQUENCE = 1u << 4,	     /* the engine's sequence that served the request was
					matched to it by prompt length and token times */
};

struct attrib_gap {
	uint64_t gap_ns;       /* since the previous token event */
	uint32_t steps;	       /* engine steps the host saw completed inside the gap */
	uint64_t decode_ns;    /* their GPU time (capped at the gap) */
	uint64_t host_ns;      /* gap - decode */
	uint64_t interference_ns; /* their time above the decode baseline, where they carried
				     another request's prefill */
	bool interfered;       /* one of them carried another request's prefill */
	uint64_t producer_start_ns; /* first launch of the step that produced the token event
				       ending the gap (the latest seen complete before it) */
	bool step_inferred; /* that step is inferred: neither the engine's outputs nor the
			       stream's counts say which it was (attrib_align.c) */
	/* llama.cpp: the sequence's positions went back inside the gap (a context shift, or
	 * tokens removed): shift_ns is its steps' time re-evaluating what was kept (0 where the
	 * engine shifted the cache in place), part of decode_ns */
	bool context_shift;
	uint64_t shift_ns;
	/* llama.cpp, speculative decoding: the step that produced the gap's token verified
	 * `drafted` tokens a draft model proposed, of which the stream carried `accepted`
	 * (counted at the first token it produced; the tokens after it, from the same step,
	 * have gaps with no step of their own) */
	bool verify;
	uint32_t drafted, accepted;
};

/* An engine wire (engine/engine_wire.h): the engine's own account of the request. */
#define ATTRIB_ENGINE_ID_MAX 96
struct attrib_wire {
	const char *name; /* the wire's (engine_wire_ops.name) */
	bool joined; /* engine requests of the wire named it (engine_request_id) */
	bool split;  /* and their times split it (they fell inside the request): the outputs
		      * read the figures below only then */
	bool events; /* the engine sent its events (stats logging on); else the messages' times */
	char engine_request_id[ATTRIB_ENGINE_ID_MAX]; /* the first (n>1: child 0's) */
	uint32_t engine_requests;		      /* n>1: its children */
	const char *layout;			      /* the release whose layout was read */
	uint64_t queued_ns, scheduled_ns, first_output_ns; /* the engine's clock (monotonic) */
	uint64_t frontend_ns;	  /* arrival to QUEUED (to the ADD sent, without events) */
	uint64_t engine_queue_ns; /* QUEUED to SCHEDULED */
	uint64_t engine_ns;	  /* without events: the ADD sent to the first output */
	uint32_t preemptions;
	uint64_t preempted_ns;	  /* PREEMPTED to SCHEDULED again, summed */
	int64_t prompt_tokens;	  /* -1: unknown */
	int64_t cached_tokens;	  /* -1: unknown */
	uint32_t output_steps;	  /* engine outputs that carried its tokens */
	uint64_t output_tokens;
	char finish_reason[16];
	/* CUDA steps attributed it too: their split, kept beside the engine's (queue_ns and
	 * prefill_ns here: the engine's, with its events) */
	bool cuda;
	uint64_t cuda_queue_ns, cuda_prefill_ns;
	uint64_t queue_ns, prefill_ns;
};

struct attribution {
	bool ok;			 /* false: error says why nothing is attributed */
	char error[ATTRIB_ERROR_MAX];
	uint32_t engine_pids[ATTRIB_MAX_PIDS];
	uint32_t nengine_pids;
	uint64_t prefill_start_ns;
	uint64_t queue_ns, queue_busy_ns, queue_idle_ns, prefill_ns, emit_ns;
	uint32_t prefill_steps;
	uint64_t decode_ns, host_ns, interference_ns; /* summed over the gaps */
	uint32_t steps;				     /* prefill steps + steps inside the gaps */
	uint64_t *interfered_by;		     /* request ids, ascending, no repeats */
	size_t ninterfered_by;
	uint32_t estimated; /* enum attrib_estimate bits */
	struct attrib_gap *gaps; /* token_events - 1 of them */
	size_t ngaps;
	/* Where the engine's steps name their sequences (llama.cpp): the request's own. */
	bool by_sequence;
	uint64_t context;	 /* the engine's context (llama_context *) */
	int32_t seq;		 /* its sequence id there */
	uint32_t cached_tokens;	 /* prompt tokens the sequence held already: its KV cache hit */
	uint32_t prompt_tokens;	 /* prompt tokens the prefill steps computed */
	uint32_t prefill_chunks; /* prefill steps that sampled nothing: earlier prompt chunks */
	uint32_t output_tokens;	 /* tokens its output steps produced up to its last event */
	uint32_t context_shifts; /* gaps whose sequence's positions went back (context_shift) */
	uint64_t shift_ns;	 /* the gaps' shift_ns */
	/* Speculative decoding: the steps that verified drafted tokens (the prompt's sampling step
	 * among them where it did), the tokens drafted and accepted over them, and the steps of
	 * the process's other contexts in the request's time: its draft model's (shared where
	 * requests speculated at once) */
	uint32_t verify_steps, drafted, accepted, draft_steps;
	uint64_t draft_ns;
	uint64_t draft_context; /* the other context most of those steps were (0: none) */
	/* The server's own figures for the request (its timings) chose the sequence: known */
	bool by_timings;
	/* Two sequences fit it alike and split it otherwise: nothing is attributed (ok false) */
	bool ambiguous;
	struct {
		uint64_t context;
		int32_t seq;
	} candidates[2]; /* the best fit first */
	/* The response's usage said another prompt length than the matched run evaluated (cached
	 * tokens in and out): the split stands, from the run. */
	bool usage_mismatch;
	uint64_t usage_reported, usage_evaluated;
	struct attrib_wire wire; /* wire.joined: the split above is the engine's own */
};

/*
 * A request's TTFT split as one source tells it: the one answer every output reads.
 *   steps        the engine's steps (CUDA, llama.cpp): queue (behind engine work or idle),
 *                prefill, emit. An engine wire's front-end time may stand beside it.
 *   engine_wire  an engine wire with the engine's events: front end, engine queue, prefill,
 *                emit (the queue not split into busy and idle: the events do not say);
 *                without its events and no steps: front end, engine (queue and prefill as
 *                one span), emit.
 */
enum ttft_source {
	TTFT_NOT_ATTRIBUTED, /* no attribution, or it failed (attribution.error says why) */
	TTFT_STEPS,
	TTFT_WIRE_EVENTS,
	TTFT_WIRE_SPAN,
};

#define TTFT_PARTS_MAX 4

struct ttft_split {
	enum ttft_source source;
	const char *source_name; /* "steps" or "engine_wire"; NULL when not attributed */
	/* The parts, in time order, named as the metrics' gen_ai component label says them */
	struct {
		const char *name;
		uint64_t ns;
	} parts[TTFT_PARTS_MAX];
	size_t nparts;
	/* The figures beside the parts, each told only where the source knows it */
	bool queue_apart;     /* queue_ns, prefill_ns: not one engine span */
	bool busy_idle;	      /* queue_busy_ns, queue_idle_ns */
	bool wire;	      /* frontend_ns; then engine_queue_ns with the engine's events, or
			       * engine_ns (the engine's queue and prefill) without them */
	bool engine_events;
	uint64_t queue_ns, queue_busy_ns, queue_idle_ns, prefill_ns, emit_ns;
	uint64_t frontend_ns, engine_queue_ns, engine_ns;
	uint32_t prefill_steps;
	uint32_t estimated; /* enum attrib_estimate bits */
};

/* The split of a request's attribution (a NULL a: not attributed). */
void attribution__ttft_split(const struct attribution *a, struct ttft_split *s);

void attribution__free(struct attribution *a);
/* The names of the estimate bits, in order, for outputs. */
const char *attribution__estimate_name(uint32_t bit);

#endif
