/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An engine step, whatever saw it: the record every step source gives attribution, the
 * outputs and the metrics, as transports give the streams `struct piece`s. Sources today: the
 * CUDA step builder (engine/cuda_steps.c: work launched between completion markers on one
 * stream), and llama.cpp's own step function (engine/llama_steps.c: one llama_decode call).
 *
 *   marks of a source -> its builder -> struct engine_step -> step_fn (the pipeline)
 *                                                          -> attribution, outputs, metrics
 */
#ifndef TS_STEP_H
#define TS_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "tokenscope.h"

enum step_source {
	STEP_SOURCE_CUDA = 1,  /* CUDA runtime and driver calls (bpf/cuda.bpf.c) */
	STEP_SOURCE_LLAMA = 2, /* llama.cpp's llama_decode / llama_encode (bpf/llama.bpf.c) */
};

/* The sequences of a step, where its source knows them: at most this many are listed. */
#define STEP_MAX_SEQS TS_LLAMA_SEQS

struct step_seq {
	int32_t seq;	   /* the engine's sequence id */
	uint32_t tokens;   /* its tokens in the step: a prompt or a chunk of one, or one (decode) */
	int32_t first_pos; /* the position of its first token: the KV cells it had (-1: unknown) */
	int32_t last_pos;  /* of its last */
	uint32_t outputs;  /* tokens sampled from this step (a decode's, or a prompt's last) */
	int32_t rewound_from; /* > 0: the position the sequence had reached, which this step
			       * begins below (cells removed); 0: it did not */
};

/* What a step did, from its sequences. */
enum step_kind {
	STEP_KIND_UNKNOWN = 0, /* the source does not know the sequences */
	STEP_KIND_DECODE,      /* one token per sequence, each sampled */
	STEP_KIND_PREFILL,     /* prompts only, each ending in a sampled token */
	STEP_KIND_CHUNK,       /* a part of a prompt that samples nothing yet (chunked prefill) */
	STEP_KIND_MIXED,       /* prompts and decodes together */
	STEP_KIND_EMBED,       /* embeddings computed, not tokens sampled (an embedding request's) */
	STEP_KIND__N,
};

struct cuda_step;
struct cuda_steps;
struct ts_llama_step;

struct engine_step {
	enum step_source source;
	uint32_t pid, tid;
	char comm[TS_COMM_LEN];
	uint64_t start_ns;     /* the step's work began: its first launch (CUDA) */
	uint64_t end_ns;       /* its work ended on the device (GPU done, or compute returned) */
	bool end_bound;	       /* end_ns is an upper bound, not the end itself */
	uint64_t host_seen_ns; /* the host knew the step had ended */
	uint64_t context;      /* the step stream within the process: llama_context * (CUDA: 0) */
	const char *model;     /* the context's model (llama.cpp: its file's name), NULL: unknown */
	uint64_t model_key;    /* llama_model__key(model): what a request's model is matched by */
	bool failed;	       /* the step did no work (llama_decode returned an error) */
	bool embeddings;       /* its context computed embeddings (llama.cpp's flag, where read) */
	/* Tokens per sequence, where the source knows them (0 sequences: it does not). */
	uint32_t tokens;       /* over all sequences, as many as the source counted */
	uint32_t nseqs;	       /* sequences listed, at most STEP_MAX_SEQS */
	struct step_seq seqs[STEP_MAX_SEQS];
	/* The CUDA source's details (launches, kernels) and the builder that names its kernels;
	 * NULL for other sources. */
	const struct cuda_step *cuda;
	const struct cuda_steps *cuda_names;
	/* The llama.cpp source's record (NULL for other sources). */
	const struct ts_llama_step *llama;
};

/* The kind of step s, from its sequences. */
enum step_kind step__kind(const struct engine_step *s);
const char *step_kind__name(enum step_kind k);

typedef void (*step_fn)(void *ctx, const struct engine_step *s);

#endif
