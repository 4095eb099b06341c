/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What otlp.c (a request's spans, the trace each joins, the sink), otlp_sessions.c (an agent
 * session as its calls' parent span), otlp_steps.c (engine steps as spans, linked from the
 * requests they served) and otlp_spans.c (what they build spans with) share: no other file
 * includes it.
 */
#ifndef TS_OTLP_STATE_H
#define TS_OTLP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/pbwrite.h"
#include "llm/request.h"
#include "llm/session.h"
#include "engine/step.h"
#include "sinks/otlp.h"

/* Span (opentelemetry/proto/trace/v1/trace.proto) and the KeyValue fields spans use */
#define F_SPAN_TRACE_ID 1
#define F_SPAN_SPAN_ID 2
#define F_SPAN_TRACE_STATE 3
#define F_SPAN_PARENT_SPAN_ID 4
#define F_SPAN_NAME 5
#define F_SPAN_KIND 6
#define F_SPAN_START 7
#define F_SPAN_END 8
#define F_SPAN_ATTRIBUTES 9
#define F_SPAN_LINKS 13
#define F_SPAN_DROPPED_LINKS 14
#define F_SPAN_STATUS 15
#define F_LINK_TRACE_ID 1
#define F_LINK_SPAN_ID 2
#define F_RESOURCE_ATTRIBUTES 1
enum { KIND_INTERNAL = 1, KIND_SERVER = 2, KIND_CLIENT = 3 };

#define SPANS_MAX 6	 /* a request and its phases */
#define HELD_MAX 4096	 /* servers waiting for their clients, clients for their groups */
#define GROUP_MAX 8	 /* clients joined to one server: a client and its proxies' calls */
#define LINKS_MAX 128	 /* a request's links to steps (the SDKs' default limit) */

/* What id_of's n says: a request's spans are 0 to SPANS_MAX - 1 */
#define ID_TRACE 0xff	      /* the trace a request starts */
#define ID_SESSION 0x80	      /* a session's span (what: its key) */
#define ID_SESSION_TRACE 0x81 /* the trace a session starts */
#define ID_STEP 0x90	      /* a step's span (what: otlp__step_key) */
#define ID_STEP_TRACE 0x91

/* One span, but for its trace id (the request's, known at the end). */
struct draft {
	uint8_t id[8], parent[8];
	bool has_parent;
	struct buf rest; /* the Span's other fields, encoded */
};

/* A request's spans (or a session's, or a step's: one), ready but for their trace. */
struct spans {
	uint64_t request_id, start_ns, end_ns;
	uint64_t server_id;    /* a client's joined server record (0: none) */
	uint32_t pid;
	enum role role;
	uint64_t session;      /* request_metrics.session, session_call */
	uint32_t session_call;
	bool agent;	       /* an agent's call */
	uint8_t trace[16];
	bool sampled;	       /* its trace's: the header's flag, or --otlp-sample's draw */
	char *tracestate;      /* the header's (NULL: none) */
	struct buf resource;   /* its Resource, encoded */
	struct draft d[SPANS_MAX];
	size_t n;
};

/* An agent session of untraced calls (otlp_sessions.c): its span, their parent. */
struct otlp_session {
	uint64_t key; /* session.key */
	uint8_t trace[16], span[8];
	bool sampled;
	bool formed;	     /* a second call came: the span is its calls' parent */
	uint32_t children;   /* calls sent as its children */
	struct spans *first; /* an agent's first call, held until the session forms or ends */
	uint32_t pid;
	struct buf resource; /* its first call's */
};

#define OTLP_SESSIONS_MAX SESSIONS_OPEN_MAX

struct otlp {
	otlp_send_fn send;
	void *send_ctx;
	int64_t offset; /* realtime - monotonic */
	uint64_t offset_err;
	uint64_t seed;
	double sample;		/* --otlp-sample: root traces kept (1: all) */
	bool steps;		/* --otlp-steps */
	bool tokens;		/* --otlp-tokens */
	uint64_t session_idle_ns;
	uint64_t unsampled;	/* spans not sent: their trace not sampled */
	const char *service;	/* OTEL_SERVICE_NAME (NULL: the process's command) */
	const char *res_attrs;	/* OTEL_RESOURCE_ATTRIBUTES */
	char host[256];
	struct spans *held[HELD_MAX]; /* servers without a trace of their own, oldest first */
	size_t nheld;
	struct otlp_session *sessions[OTLP_SESSIONS_MAX]; /* oldest first */
	size_t nsessions;
	struct pbw w;
};

/* otlp_spans.c */
void otlp__id(const struct otlp *o, uint64_t what, uint64_t n, uint8_t *out, size_t len);
uint64_t otlp__unix_ns(const struct otlp *o, uint64_t mono);
bool otlp__sampled_root(const struct otlp *o, const uint8_t trace[16]);
/* A root trace of its own for s (a request untraced, not joined to anything) */
void otlp__root(struct otlp *o, struct spans *s);
/* s's spans out (or counted, its trace not sampled), s freed. */
void otlp__emit(struct otlp *o, struct spans *s);
struct spans *otlp__spans_new(void);
struct draft *otlp__draft(struct spans *s);
void otlp__keep(struct otlp *o, struct draft *d);
/* The Resource of a process: service, host, pid, command (the container and pod where r is
 * given) into out. */
void otlp__resource(struct otlp *o, uint32_t pid, const char *comm, const struct request *r,
		    struct buf *out);
void otlp__attr_str(struct pbw *w, uint32_t field, const char *k, const char *v);
void otlp__attr_int(struct pbw *w, uint32_t field, const char *k, int64_t v);
void otlp__attr_double(struct pbw *w, uint32_t field, const char *k, double v);
void otlp__attr_bool(struct pbw *w, uint32_t field, const char *k, bool v);
void otlp__attr_strings(struct pbw *w, uint32_t field, const char *k, const char *v); /* [v] */
void otlp__attr_u64(struct pbw *w, const char *k, const struct opt_u64 *v);	/* where set */

/* otlp_sessions.c: an untraced request's place, its session's or a root trace of its own;
 * true when it is held (an agent's first call, until its session forms or ends). */
bool otlp__place(struct otlp *o, struct spans *s);
void otlp__session_end(struct otlp *o, const struct session *sess);
/* Held first calls out as roots: idle past the session idle time by handed_to, of process
 * pid (0: any) that exited, or all. */
void otlp__sessions_release(struct otlp *o, uint64_t handed_to, uint32_t pid, bool all);
void otlp__sessions_free(struct otlp *o);

/* otlp_steps.c */
void otlp__step(struct otlp *o, const struct engine_step *st);
/* The request span's links to the steps that served r (its prefill's first and each token's
 * producing step), into the span being written. */
void otlp__step_links(struct otlp *o, const struct request *r);

#endif
