/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An engine step, whatever saw it: the record every step source gives attribution, the
 * outputs and the metrics, as transports give the streams `struct piece`s. Sources today: the
 * CUDA step builder (engine/cuda_steps.c: work launched between completion markers on one
 * stream). An engine's own step function (llama.cpp's llama_decode) is the next.
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
	STEP_SOURCE_CUDA = 1, /* CUDA runtime and driver calls (bpf/cuda.bpf.c) */
};

/* The sequences of a step, where its source knows them: at most this many are listed. */
#define STEP_MAX_SEQS 16

struct step_seq {
	int32_t seq;	 /* the engine's sequence id */
	uint32_t tokens; /* its tokens in the step: the prompt's (prefill) or one (decode) */
};

struct cuda_step;
struct cuda_steps;

struct engine_step {
	enum step_source source;
	uint32_t pid, tid;
	char comm[TS_COMM_LEN];
	uint64_t start_ns;     /* the step's work began: its first launch (CUDA) */
	uint64_t end_ns;       /* its work ended on the device (GPU done, or compute returned) */
	bool end_bound;	       /* end_ns is an upper bound, not the end itself */
	uint64_t host_seen_ns; /* the host knew the step had ended */
	/* Tokens per sequence, where the source knows them (0 sequences: it does not). */
	uint32_t tokens;       /* over all sequences, as many as the source counted */
	uint32_t nseqs;	       /* sequences listed, at most STEP_MAX_SEQS */
	struct step_seq seqs[STEP_MAX_SEQS];
	/* The CUDA source's details (launches, kernels) and the builder that names its kernels;
	 * NULL for other sources. */
	const struct cuda_step *cuda;
	const struct cuda_steps *cuda_names;
};

typedef void (*step_fn)(void *ctx, const struct engine_step *s);

#endif
