/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Engine wires: what an inference server's front end and its engine say to each other, read
 * off the connection between them, where it gives the engine's own facts (its queue, its
 * steps, each request's outputs). The layers above know "an engine wire", never which: each
 * is one row of engine_wires[] (engine_wire.c) and one file group under engine/ (vLLM's:
 * vllm_wire*.c). docs/architecture.md, "An engine wire", says what a new one takes.
 */
#ifndef TS_ENGINE_WIRE_H
#define TS_ENGINE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/zmtp.h"

struct request;

#define ENGINE_SCHED_MAX 8 /* engines per wire whose scheduler stats are kept (data parallel) */

/* One step's scheduler stats, as an engine sent them. */
struct engine_sched {
	const char *wire;	/* the wire's name (engine_wire_ops.name) */
	uint32_t pid;		/* the process whose socket carried it */
	const char *comm;	/* its command name */
	uint32_t engine_index;
	uint64_t ts;		/* the engine's timestamp of the message (CLOCK_MONOTONIC ns) */
	uint64_t running, waiting;
	double kv_cache_usage;	/* 0..1 (NAN: not sent) */
	uint64_t prefix_queries, prefix_hits; /* this step's (the engine resets them each step) */
	uint64_t step_counter;
};

typedef void (*engine_sched_fn)(void *ctx, const struct engine_sched *s);

/* What a wire read and could not read, for capture health. The counts every wire keeps,
 * then its own, by name, in the order the summary says them. */
#define ENGINE_WIRE_DETAIL_MAX 8
struct engine_wire_counts {
	uint64_t messages;	  /* messages read as the wire */
	uint64_t duplicates;	  /* the same message read at the other end too: skipped */
	uint64_t malformed;	  /* messages that did not decode: skipped */
	uint64_t not_engine;	  /* messages of other applications on the connections it reads */
	uint64_t requests_joined; /* server requests joined to engine requests */
	uint64_t requests_unjoined; /* server requests whose response id named none of theirs */
	uint64_t no_memory;
	uint64_t evicted;	  /* engine requests let go past the table's limit, unjoined */
	struct {
		const char *name;
		uint64_t n;
	} detail[ENGINE_WIRE_DETAIL_MAX];
	size_t ndetail;
	char note[192]; /* what else the summary must say ("": nothing) */
};

/*
 * One engine wire. It reads the messages of the transport it rides (ZeroMQ: each whole ZMTP
 * message of a connection stream/conn.c found speaking ZMTP), keeps what the engine said per
 * engine request, and joins a finished server request to its engine requests.
 */
struct engine_wire_ops {
	const char *name;  /* in outputs' names: "vllm" (vllm_step, tokenscope_vllm_...) */
	const char *title; /* in sentences: "vLLM" */
	void *(*new)(engine_sched_fn on_sched, void *ctx);
	void (*free)(void *w);
	/* A joined connection's first bytes (no greeting to start from): do they look like the
	 * start of this wire's message? */
	bool (*looks_like_frames)(const uint8_t *d, size_t n);
	/* One ZMTP message that pid wrote (is_write) or read. */
	void (*zmtp_message)(void *w, uint32_t pid, const char *comm, bool is_write,
			     const struct zmtp_message *m);
	/* A finished server request: its attribution gets the engine's facts where its response
	 * names engine requests of this wire. Returns whether it was joined. */
	bool (*attribute)(void *w, struct request *r);
	/* The engine's time of the request's first output (0: none seen). */
	uint64_t (*first_output)(const void *w, const struct request *r);
	/* The engine's time of each output that carried its tokens, in order, into *ts, and
	 * how many tokens each carried, into *tokens (the caller frees both): their count (0:
	 * none, or not known one by one). */
	size_t (*outputs)(const void *w, const struct request *r, uint64_t **ts, uint32_t **tokens);
	/* Forget engine requests finished long before ts. */
	void (*prune)(void *w, uint64_t ts);
	void (*counts)(const void *w, struct engine_wire_counts *out);
};

/* Every engine wire tokenscope reads, in the order a message is offered to them (at most
 * ENGINE_WIRES_MAX). */
#define ENGINE_WIRES_MAX 4
extern const struct engine_wire_ops *const engine_wires[];
extern const size_t engine_nwires;

/* Whether these bytes look like the start of any wire's message (see looks_like_frames). */
bool engine_wires__look_like_frames(const uint8_t *d, size_t n);

/* A reader of every wire (the pipeline's), and each call made of all of them. */
struct engine_wire_set {
	void *r[ENGINE_WIRES_MAX];
};

/* Returns 0, or -1 without memory (then free it). */
int engine_wire_set__init(struct engine_wire_set *s, engine_sched_fn on_sched, void *ctx);
void engine_wire_set__free(struct engine_wire_set *s);
/* A ZMTP message, to every wire riding ZeroMQ (a wire counts another's as not_engine). */
void engine_wire_set__zmtp_message(struct engine_wire_set *s, uint32_t pid, const char *comm,
				   bool is_write, const struct zmtp_message *m);
/* The first wire that joins the request; whether one did. */
bool engine_wire_set__attribute(struct engine_wire_set *s, struct request *r);
/* The first wire's that saw the request's first output (0: none). */
uint64_t engine_wire_set__first_output(const struct engine_wire_set *s, const struct request *r);
/* The first wire's outputs of the request (see outputs). */
size_t engine_wire_set__outputs(const struct engine_wire_set *s, const struct request *r,
				uint64_t **ts, uint32_t **tokens);
void engine_wire_set__prune(struct engine_wire_set *s, uint64_t ts);
/* Each wire's counts, in the order of engine_wires[]. */
void engine_wire_set__counts(const struct engine_wire_set *s,
			     struct engine_wire_counts out[ENGINE_WIRES_MAX]);

#endif
