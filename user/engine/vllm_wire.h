/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * vLLM V1's engine-core wire, read: the msgpack messages its API server and EngineCore
 * processes exchange over ZMQ (stream/zmtpconn.c hands over each ZMTP message). Facts and
 * sources: docs/vllm.md.
 *
 *   front end -> engine: [type byte][EngineCoreRequest or ids][aux frames]   ADD, ABORT, UTILITY
 *   engine -> front end: [EngineCoreOutputs][aux frames]   every step: tokens, events, stats
 *
 * Per engine request it keeps the engine's own QUEUED, SCHEDULED and PREEMPTED times (the
 * engine's time.monotonic(): the CLOCK_MONOTONIC the probes read), the prompt length, the
 * cached tokens, each output step and the finish reason; per engine the scheduler's stats.
 * A server request whose response carried an id is joined to its engine requests
 * (vllm_wire__attribute), which splits its TTFT from the engine's times, not inferred ones.
 *
 * Both ends of one connection may be traced: a message is read once (requests by id,
 * outputs by engine and timestamp), whichever end's copy comes first.
 */
#ifndef TS_VLLM_WIRE_H
#define TS_VLLM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine_wire.h"
#include "proto/zmtp.h"

struct request;

/* The wire's name in outputs (vllm_step, tokenscope_vllm_*, the attribution's wire.name). */
#define VLLM_WIRE_NAME "vllm"

/* The wire's row in engine_wires[] (engine_wire.c): the functions below, as the generic
 * layers call them (vllm_wire_ops.c). */
extern const struct engine_wire_ops vllm_wire_ops;

struct vllm_wire_counts {
	uint64_t messages;	 /* ZMTP messages read as the engine wire */
	uint64_t duplicates;	 /* the same message read at the other end too: skipped */
	uint64_t adds, aborts, utility;
	uint64_t output_messages; /* EngineCoreOutputs */
	uint64_t outputs;	 /* EngineCoreOutput entries */
	uint64_t events;	 /* QUEUED, SCHEDULED, PREEMPTED events */
	uint64_t sched_stats;	 /* messages with scheduler stats */
	uint64_t unknown_layout; /* outputs whose field count is in no release's layout: only
				    their id, tokens and events were read */
	uint64_t malformed;	 /* messages that did not decode: skipped */
	uint64_t not_engine;	 /* ZMTP messages of other applications */
	uint64_t requests_joined; /* server requests joined to engine requests */
	uint64_t requests_unjoined; /* server requests with a response id that named no engine
				       request of theirs, while the wire was read (a proxy's in
				       front of vLLM among them: only the ADD's writer is joined) */
	uint64_t no_memory;
	uint64_t evicted;	 /* engine requests let go past the table's limit, unjoined */
	uint32_t unknown_fields[4]; /* the first unknown field counts seen */
};

struct vllm_wire;

struct vllm_wire *vllm_wire__new(engine_sched_fn on_sched, void *ctx);
void vllm_wire__free(struct vllm_wire *w);
/* One ZMTP message that pid wrote (is_write) or read on a connection. */
void vllm_wire__message(struct vllm_wire *w, uint32_t pid, const char *comm, bool is_write,
			const struct zmtp_message *m);
/* Do a joined connection's first bytes look like the start of a vLLM engine message (an
 * outputs array, or a request type frame and its body)? The greeting is the usual start;
 * this is for connections opened before capture (vLLM opens them once, at its start). */
bool vllm_wire__looks_like_frames(const uint8_t *d, size_t n);
/* Was any engine-wire message read (then server requests wait for their engine's facts)? */
bool vllm_wire__seen(const struct vllm_wire *w);
/* A finished server request: where its response id names engine requests, its attribution
 * (r->attr, made if NULL) gets the engine's times. Returns whether it was joined. */
bool vllm_wire__attribute(struct vllm_wire *w, struct request *r);
/* The engine's time of a server request's first output (the earliest of its engine
 * requests': the outputs message's timestamp, sent once the engine had that step's tokens),
 * without joining anything; 0 when none was seen or w is NULL. */
uint64_t vllm_wire__first_output(const struct vllm_wire *w, const struct request *r);
/* The outputs of a server request's one engine request (not n>1's several), in order: the
 * engine's time of each outputs message that carried its tokens and how many, copied into
 * *ts and *tokens (the caller frees them). Returns their count; 0 when there is no such
 * request, its outputs were cut, or w is NULL. */
size_t vllm_wire__outputs(const struct vllm_wire *w, const struct request *r, uint64_t **ts,
			  uint32_t **tokens);
/* Forget engine requests finished (or silent) long before ts. */
void vllm_wire__prune(struct vllm_wire *w, uint64_t ts);
const struct vllm_wire_counts *vllm_wire__counts(const struct vllm_wire *w);

/* The layouts of EngineCoreOutput this reader knows, for docs and the summary. */
struct vllm_layout {
	const char *releases; /* which vLLM releases wrote it */
	uint8_t fields;	      /* the array's length: its field count */
	int8_t finish;	      /* index of finish_reason */
	int8_t events;	      /* of events */
	int8_t cached;	      /* of num_cached_tokens or prefill_stats (-1: none) */
};
extern const struct vllm_layout vllm_layouts[];
extern const size_t vllm_nlayouts;

#endif
