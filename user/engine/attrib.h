/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Attribution: each server-side TTFT split into queueing, prefill and emit, and each later
 * token gap into the engine steps completed inside it and host time, by correlating a
 * server's HTTP stream (arrival, token writes) with the steps of the engine serving it (CUDA
 * steps, llama.cpp's own).
 * Definitions, signals and limits: docs/attribution.md.
 *
 *   request (server role) -> first token registered at once -> finished request waits
 *   ATTRIB_SETTLE_NS of record time (later steps, other requests' first tokens, drop counters)
 *   -> attrib__compute -> request.attr -> report
 */
#ifndef TS_ATTRIB_H
#define TS_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/attribution.h"
#include "engine/step.h"

struct request;

/* A finished request is attributed once the records have moved this far past its end: GPU
 * drop counters are read once a second, and the first tokens of requests that shared its
 * steps are written just after them. */
#define ATTRIB_SETTLE_NS 1500000000ull

struct attrib;

struct attrib *attrib__new(void);
void attrib__free(struct attrib *a);
/* --engine HTTP_PID=ENGINE_PID[,ENGINE_PID...]: "1234=5678,5679". Returns 0, or -1 (bad text). */
int attrib__override(struct attrib *a, const char *spec);
/* The process exited and none of its requests is waiting: what is kept of a client or a
 * process that ran no GPU steps is let go (an engine's steps and tree stay). */
void attrib__exit(struct attrib *a, uint32_t pid);
/* pid's ancestors, nearest first (its parent, ...), as read from /proc when it was first seen. */
void attrib__proc_tree(struct attrib *a, uint32_t pid, const uint32_t *ancestors, size_t n);
void attrib__step(struct attrib *a, const struct engine_step *s);
/* Whether any GPU step was seen (else requests need not wait for attribution). */
bool attrib__has_steps(const struct attrib *a);
/* A request saw its first token (r->id, r->pid, r->start_ns, r->first_token_ns). A client's
 * marks its process as a client: its server requests (a proxy's) are not the engine's. */
void attrib__first_token(struct attrib *a, const struct request *r);
/* A server request finished: its token events are aligned to the steps now, so that the
 * requests attributed before it see its first token on the right step. */
void attrib__finished(struct attrib *a, const struct request *r);
/* Engine step records were lost (CUDA marks or llama.cpp steps: ring buffer full, streams
 * over the limit), noticed at ts. */
void attrib__step_loss(struct attrib *a, uint64_t ts);
/* Fill r->attr for a finished server request. Uses only what happened before
 * r->end_ns + ATTRIB_SETTLE_NS, so the result does not depend on when it is called. */
void attrib__compute(struct attrib *a, struct request *r);
/* Forget steps and first tokens older than ts minus the longest request kept for. */
void attrib__prune(struct attrib *a, uint64_t ts);

/* Per engine (the process set that steps it) figures for the summary. */
struct attrib_engine_stats {
	uint32_t pids[ATTRIB_MAX_PIDS];
	uint32_t npids;
	uint64_t steps, prefill_steps, decode_steps;
	uint64_t first_ns, last_ns, busy_ns;
	bool chunked; /* chunked prefill was recognised */
};
/* Calls fn for each engine requests were attributed to. */
void attrib__engines(const struct attrib *a, void (*fn)(void *ctx, const struct attrib_engine_stats *),
		     void *ctx);

#endif
