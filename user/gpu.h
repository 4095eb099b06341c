/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU steps rebuilt from CUDA marks (bpf/cuda.bpf.c).
 *
 * A step is the work launched on one stream between completion markers (an event record, a
 * sync), closed where the host observes its completion: a stream, event or device sync
 * returning, a query that reports done, a blocking copy. record -> wait-event -> sync chains
 * are followed across streams, so the step launched before an asynchronous copy on a side
 * stream (vLLM, SGLang) is closed when the host waits for that copy. Definitions:
 * docs/gpu.md.
 */
#ifndef TS_GPU_H
#define TS_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "tokenscope.h"

/* A sync that kept the host waiting at least this long saw the GPU finish: its return is the
 * completion time. A shorter one only bounds completion from above. */
#define GPU_BLOCKED_NS 100000ull

struct gpu_step {
	uint32_t pid, tid;
	char comm[TS_COMM_LEN];
	uint64_t stream;
	uint32_t launches, graph_launches, copies, other_launches;
	uint64_t first_launch_ns, last_launch_ns;
	uint64_t gpu_done_ns;  /* the sync's return when the host was blocked; else an upper bound */
	uint64_t host_seen_ns; /* when the host observed completion */
	bool done_bound;       /* gpu_done_ns is an upper bound */
	uint32_t nkernels;
	struct ts_kernel_sample k[TS_KSAMPLES]; /* heaviest first */
};

struct gpu;

typedef void (*gpu_step_fn)(void *ctx, const struct gpu *g, const struct gpu_step *s);

struct gpu *gpu__new(gpu_step_fn fn, void *ctx);
void gpu__free(struct gpu *g);
void gpu__mark(struct gpu *g, const struct ts_gpu_mark *m);
void gpu__kname(struct gpu *g, const struct ts_gpu_kname *k);
/* The process exited: its open work is dropped (counted as unobserved). */
void gpu__exit(struct gpu *g, uint32_t pid);
/* End of capture: open work is counted as unobserved. */
void gpu__finish(struct gpu *g);
/* Name of a sampled kernel, for outputs ("0x..." when none is known). */
const char *gpu__kernel_name(const struct gpu *g, uint32_t pid, const struct ts_kernel_sample *k,
			     char *buf, size_t n);
uint64_t gpu__marks(const struct gpu *g);
uint64_t gpu__unobserved(const struct gpu *g);

#endif
