/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Agent sessions: a client's chained calls, so that an agent's wall time can be read as the
 * model's (inside the calls: TTFT, then streaming) and its own (between a reply's end and the
 * next call: the tools, the program). A call joins an open session of the same client when
 * it names the session's last response (Responses' previous_response_id), feeds back the
 * result of the tool the last call asked for, or carries the last call's whole conversation
 * and more. A session ends when its client has been idle past the idle time, when its process
 * exits, or at the end of the trace; one of two calls or more is handed on
 * (docs/judgements.md#agent-sessions).
 */
#ifndef TS_SESSION_H
#define TS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"

#define SESSION_IDLE_NS_DEFAULT (60ull * 1000000000ull)
#define SESSIONS_OPEN_MAX 4096 /* open at once; past it the least recently called ends
				* (said: "full") */
#define SESSION_CALLS_MAX 4096 /* a session's calls; past it, it ends and a new one begins */
#define SESSION_CLIENT_MAX (REQ_ADDR_MAX + 16)

enum session_chain { CHAIN_PREVIOUS_RESPONSE = 0, CHAIN_TOOL_RESULT, CHAIN_CONVERSATION,
		     CHAIN__COUNT };
const char *session_chain__name(enum session_chain c);

enum session_end { SESSION_IDLE = 0, SESSION_EXIT, SESSION_TRACE_END, SESSION_FULL };
const char *session_end__name(enum session_end e);

struct session_call {
	uint64_t id; /* the request's */
	uint64_t start_ns, first_ns, end_ns; /* first_ns 0: no token */
};

struct session {
	uint64_t id;  /* in the run, in the order sessions ended */
	uint64_t key; /* in the run, in the order sessions opened: request_metrics.session */
	uint32_t pid;
	char comm[TS_COMM_LEN];
	enum role role;
	char client[SESSION_CLIENT_MAX]; /* the key: "pid N" (a client's own records), or a
					  * server's peer host and pid ("HOST>PID") */
	char model[REQ_MODEL_MAX]; /* the first call's */
	enum consumer consumer;	   /* agent when any call was an agent's, else the first's */
	enum session_end end;
	struct session_call *calls;
	size_t ncalls, cap;
	uint64_t chained[CHAIN__COUNT]; /* the calls joined by each kind of evidence */
	/* what the next call chains to: the last call's conversation, response and tool call */
	uint64_t *conv;
	uint32_t nconv;
	char response_id[REQ_RESPONSE_ID_MAX];
	bool tool_called;
	uint64_t last_ns; /* the last call's end: idle from then */
	/* the tracker's: open sessions, least recently called first; the index keys it holds */
	struct session *prev, *next;
	uint64_t client_hash, conv_key, resp_key;
};

/* What a session's calls add up to (ns): from its first call's start to its last one's end;
 * inside calls (their union: parallel calls count once), split into waiting for the first
 * token and streaming; between calls (the rest); the slowest call. */
struct session_times {
	uint64_t total_ns, model_ns, ttft_ns, streaming_ns, between_ns;
	const struct session_call *slowest;
};
void session__times(const struct session *s, struct session_times *t);

typedef void (*session_fn)(void *ctx, const struct session *s);

struct sessions;

struct sessions *sessions__new(session_fn fn, void *ctx);
void sessions__free(struct sessions *t);
void sessions__set_idle(struct sessions *t, uint64_t idle_ns);
/* A finished request, judged (m: its consumer), in the order requests finished; m gains the
 * session it opened or continued (session, session_call; 0, 0 for none). */
void sessions__request(struct sessions *t, const struct request *r, struct request_metrics *m);
/* Record time now: sessions idle past the idle time end. */
void sessions__tick(struct sessions *t, uint64_t now);
/* A process exited: the sessions it was the client of end. */
void sessions__exit(struct sessions *t, uint32_t pid);
/* The end of the trace: every open session ends. */
void sessions__finish(struct sessions *t);
/* Sessions of two calls or more ended early because SESSIONS_OPEN_MAX were open (their end
 * said "full"). */
uint64_t sessions__evicted(const struct sessions *t);

#endif
