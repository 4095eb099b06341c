/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU steps rebuilt from CUDA marks (bpf/cuda.bpf.c): the CUDA step source (engine/step.h).
 *
 * A step is the work launched on one stream between completion markers (an event record, a
 * sync), closed where the host observes its completion: a stream, event or device sync
 * returning, a query that reports done, a blocking copy. record -> wait-event -> sync chains
 * are followed across streams, so the step launched before an asynchronous copy on a side
 * stream (vLLM, SGLang) is closed when the host waits for that copy. Definitions:
 * docs/gpu.md.
 */
#ifndef TS_CUDA_STEPS_H
#define TS_CUDA_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "engine/step.h"
#include "tokenscope.h"

/* A sync that kept the host waiting at least this long saw the GPU finish: its return is the
 * completion time. A shorter one only bounds completion from above. */
#define GPU_BLOCKED_NS 100000ull

struct cuda_step {
	uint32_t pid, tid;
	char comm[TS_COMM_LEN];
	uint64_t stream;
	uint32_t launches, graph_launches, copies, other_launches;
	uint64_t first_launch_ns;
	uint64_t gpu_done_ns;  /* the sync's return when the host was blocked; else an upper bound */
	uint64_t host_seen_ns; /* when the host observed completion */
	bool done_bound;       /* gpu_done_ns is an upper bound */
	uint32_t nkernels;
	struct ts_kernel_sample k[TS_KSAMPLES]; /* heaviest first */
};

struct cuda_steps;

/* Each step is given to fn as a struct engine_step whose cuda and cuda_names point at its
 * CUDA details and at g, for the duration of the call. */
struct cuda_steps *cuda_steps__new(step_fn fn, void *ctx);
void cuda_steps__free(struct cuda_steps *g);
void cuda_steps__mark(struct cuda_steps *g, const struct ts_gpu_mark *m);
void cuda_steps__kname(struct cuda_steps *g, const struct ts_gpu_kname *k);
/* The process exited: its open work is dropped (counted as unobserved). */
void cuda_steps__exit(struct cuda_steps *g, uint32_t pid);
/* End of capture: open work is counted as unobserved. */
void cuda_steps__finish(struct cuda_steps *g);
/* Name of a sampled kernel, for outputs ("0x..." when none is known). */
const char *cuda_steps__kernel_name(const struct cuda_steps *g, uint32_t pid, const struct ts_kernel_sample *k,
			     char *buf, size_t n);
uint64_t cuda_steps__marks(const struct cuda_steps *g);
uint64_t cuda_steps__unobserved(const struct cuda_steps *g);

#endif
