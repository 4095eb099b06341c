/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The engine wire's state, shared by its reader (vllm_wire.c: the messages), its table of
 * engine requests (vllm_wire_table.c) and its join (vllm_wire_join.c: server requests to engine requests, and
 * the TTFT split from the engine's times). Not for other rooms: they use vllm_wire.h.
 */
#ifndef TS_VLLM_WIRE_STATE_H
#define TS_VLLM_WIRE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/attribution.h"
#include "engine/vllm_wire.h"

#define ID_MAX ATTRIB_ENGINE_ID_MAX
#define BUCKETS 1024
#define SEEN_OUTPUTS 512	       /* outputs messages remembered to skip the other end's copy */
#define VW_OUTPUTS_KEPT 8192	       /* output times kept per engine request */

struct vw_req {
	char id[ID_MAX];       /* the engine's request_id (NUL-terminated: idlen bytes of it) */
	size_t idlen;	       /* its bytes, a NUL among them included (the table's key) */
	char external[ID_MAX]; /* external_req_id (since 2025-12): the API's id */
	/* The API ids it may belong to, for the join: key1 its id without an n>1 child's "{i}_";
	 * key2 its external_req_id, else key1 without a "-" and 8 characters at its end (vLLM's
	 * ids since 2025-12), else none. */
	char key1[ID_MAX], key2[ID_MAX];
	struct vw_req *next;   /* in its bucket */
	struct vw_req *next1, *next2; /* in its keys' buckets */
	struct vw_req *older, *newer; /* in the age list */
	const char *layout;
	uint32_t engine_pid; /* the process that wrote its outputs (0: only their reader seen) */
	uint32_t frontend_pid; /* the process that wrote its ADD: the API server (0: unseen) */
	bool added, events, finished, aborted;
	bool joined; /* a server request was joined to it */
	uint64_t touched_ns;
	uint64_t add_ns;       /* the ADD message's capture time */
	uint64_t queued_ns, scheduled_ns, first_output_ns;
	uint64_t preempted_at;
	uint32_t preemptions;
	uint64_t preempted_ns;
	int64_t prompt_tokens, cached_tokens;
	uint32_t steps;
	uint64_t tokens;
	/* each output that carried its tokens: the outputs message's engine time and how many
	 * (steps of them, at most VW_OUTPUTS_KEPT; out_cut: more came, and none is used) */
	uint64_t *out_ts;
	uint32_t *out_tokens;
	uint32_t out_cap;
	bool out_cut;
	int finish_reason;
};

struct vllm_wire {
	engine_sched_fn on_sched;
	void *ctx;
	struct vw_req *buckets[BUCKETS];
	struct vw_req *by_key1[BUCKETS], *by_key2[BUCKETS];
	struct vw_req *oldest, *newest;
	size_t nreqs;
	struct { uint32_t engine, pid; uint64_t ts; char comm[16]; } seen[SEEN_OUTPUTS];
	size_t nseen, seen_next;
	/* Both ends traced: the end whose copy of a message came second is reported as the one
	 * whose copy came first, so that one engine's stats stay one series whichever copy wins
	 * (ring buffer order between two CPUs). */
	struct { uint32_t from, to; char comm[16]; } alias[16];
	size_t nalias;
	struct vllm_wire_counts n;
};

/* A bucket of the request table and of the join keys' tables. */
static inline uint32_t vllm_wire_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h % BUCKETS;
}

/* The request table (vllm_wire_table.c): a request by its engine id (NULL: none); made when
 * new, at time ts (NULL without memory, counted); its join keys indexed (again: after they
 * changed). */
struct vw_req *vw_table__find(struct vllm_wire *w, const uint8_t *id, size_t n);
struct vw_req *vw_table__get(struct vllm_wire *w, const uint8_t *id, size_t n, uint64_t ts);
void vw_table__index_keys(struct vllm_wire *w, struct vw_req *q, bool again);

#endif
