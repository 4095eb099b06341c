/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Everything above the probes: raw events (from the ring buffer or a recording, the same
 * bytes) in, finished requests, GPU steps and capture health out.
 *
 *   data record -> pipeline__feed -> stream (pid, transport, SSL* or socket) -> conn -> http
 *               -> decode -> sse -> dialect -> request -> report (line, JSON Lines, summary)
 *   GPU mark    -> pipeline__feed -> gpu (segments, steps) -> report
 *                                                          -> attrib (kept for correlation)
 *   ZeroMQ message -> pipeline__feed -> stream -> conn -> zmtp -> engine wires (kept)
 *                                                               -> scheduler stats -> report
 *   finished request -> (while GPU steps are seen) held ATTRIB_SETTLE_NS of record time
 *                    -> attrib__compute, an engine wire's attribute (server role) -> report
 * Requests leave in the order their responses ended, whatever their role.
 */
#ifndef TS_PIPELINE_H
#define TS_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "engine/attrib.h"
#include "engine/step.h"
#include "engine/engine_wire.h"
#include "stream/conn.h"
#include "stream/health.h"
#include "llm/session.h"
#include "tokenscope.h"

struct request;
struct request_metrics;
struct recording;

/* Called for each finished LLM request, with its metrics; the pipeline frees it afterwards. */
typedef void (*request_fn)(void *ctx, const struct request *r, const struct request_metrics *m);

struct pipeline;

/* A process exited, and none of its requests is waiting any more (same ctx). */
typedef void (*exit_fn)(void *ctx, uint32_t pid);

/* Record time moved on (about once a second of it): every request that ended before
 * handed_to has been handed on (same ctx). */
typedef void (*time_fn)(void *ctx, uint64_t handed_to);

/* One step's scheduler stats from an engine wire (same ctx). */
typedef void (*sched_fn)(void *ctx, const struct engine_sched *s);

/* on_step may be NULL. */
struct pipeline *pipeline__new(request_fn fn, step_fn on_step, void *ctx);
void pipeline__free(struct pipeline *p);
/*
 * Every record type, one row each (record_kinds in pipeline.c), read by capture and the
 * pipeline alike: its name, least size, handler, and what capture does with it before the
 * pipeline (the flags). tests/unit/test_pipeline.c fails for a type without its row.
 */
enum record_flag {
	/* a traced process's own activity: capture notes the process first (its process-tree
	 * record, its container and pod), and the identity filters (--pod, --container...) drop
	 * the records of the processes they leave out */
	REC_PROCESS = 1u << 0,
	/* a stream's bytes: most records, which no probe family's hook reads */
	REC_STREAM_BYTES = 1u << 1,
	/* the CUDA family's kernel names read it around the pipeline (capture/cuda_names.c) */
	REC_CUDA_NAMES = 1u << 2,
};

struct record_kind {
	uint32_t type; /* enum ts_event_type, or enum ts_rec_type (stream/recording.h) */
	const char *name;
	size_t min_size;
	uint32_t flags; /* enum record_flag */
	/* the pipeline's reading of it: -1 for a malformed record (may check more than
	 * min_size) */
	int (*handle)(struct pipeline *p, void *rec, size_t size);
};

/* The row of a record type (NULL: no such type). */
const struct record_kind *record_kind__of(uint32_t type);
/* The rows, for the checks that every type has one. */
const struct record_kind *record_kinds__all(size_t *n);

/* Copy every consumed record (credentials masked) to rec; NULL stops recording. */
void pipeline__set_recording(struct pipeline *p, struct recording *rec);
/* One record as it came from the ring buffer or a recording. The payload may be modified
 * (credential masking). Returns 0, or -1 for a malformed record (counted, skipped). */
int pipeline__feed(struct pipeline *p, void *rec, size_t size);
/* Kernel-side counters: live, read from the BPF map; replayed, from the recording. */
void pipeline__set_bpf_counters(struct pipeline *p, const __u64 c[TS_CNT__MAX]);
/* End of capture at ts (0: the newest record's time): connections still open report their
 * requests incomplete. */
void pipeline__finish(struct pipeline *p, uint64_t ts);
const struct health *pipeline__health(struct pipeline *p);
/* --otlp's counts, into capture health (the outputs say them with the rest). */
void pipeline__set_otlp_counts(struct pipeline *p, uint64_t sent, uint64_t dropped,
			       uint64_t retries, uint64_t failures);
void pipeline__set_exit_fn(struct pipeline *p, exit_fn fn);
void pipeline__set_sched_fn(struct pipeline *p, sched_fn fn);
void pipeline__set_time_fn(struct pipeline *p, time_fn fn);
/* A client's chained calls ended (llm/session.h; same ctx). */
void pipeline__set_session_fn(struct pipeline *p, session_fn fn);
/* The session tracker: the options set its idle time before the first record. */
struct sessions *pipeline__sessions(struct pipeline *p);
/* Calls fn for each LLM request in flight (its API known, its response not ended). */
void pipeline__each_open(struct pipeline *p, open_request_fn fn, void *ctx);
/* The time (record time, at most now) before which every request that finished has been
 * reported: just before the oldest finished request still held for its attribution, else now.
 * A window that ends there holds every request that ended in it. */
uint64_t pipeline__reported_through(const struct pipeline *p, uint64_t now);
/* How requests are judged (llm/judge.h): the options set it before the first record. */
struct judge *pipeline__judge(struct pipeline *p);
/* The correlation state: for --engine overrides and the summary's engine figures. */
struct attrib *pipeline__attrib(struct pipeline *p);

#endif
