/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --otlp: every request record as an OpenTelemetry span (docs/otlp.md), its TTFT split's
 * phases as child spans, in the trace its traceparent header names; encoded as OTLP/HTTP
 * protobuf (base/pbwrite.h) and handed to the sending side (otlp_export.h).
 *
 * A server request without a traceparent of its own waits (OTLP_HOLD_NS of record time) for
 * the client records joined to it, and a joined client for its server's group: they share one
 * trace, the first client its root, a proxy's server record between its clients, the server
 * the last one's child. An agent session's untraced calls hang under the session's span (otlp_sessions.c);
 * engine steps are spans of their own, linked from the requests they served (otlp_steps.c). Span times are Unix epoch nanoseconds: the records' CLOCK_MONOTONIC plus an offset
 * read once (live: bracketed by two monotonic reads, half their distance its error; a replay:
 * the recording's header).
 */
#ifndef TS_OTLP_H
#define TS_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"
#include "sinks/sink.h"

#define OTLP_HOLD_NS (2ull * 1000000000ull)

struct otlp;

/* Where a request's spans go: whole ResourceSpans fields of an ExportTraceServiceRequest
 * (the live binary's otlp_export__send). */
typedef void (*otlp_send_fn)(void *ctx, const void *part, size_t len, uint64_t nspans);

/* service.name: OTEL_SERVICE_NAME, else each process's command; OTEL_RESOURCE_ATTRIBUTES
 * (name=value,...) join every resource. */
struct otlp *otlp__new(otlp_send_fn send, void *ctx);
/* CLOCK_REALTIME minus CLOCK_MONOTONIC, and how far off that may be (ns). */
void otlp__set_clock(struct otlp *o, int64_t real_minus_mono, uint64_t err_ns);
/* --otlp-sample: the share of the traces tokenscope starts that are sent (1: all; a request
 * that carries its trace is sent as its header's sampled flag says). */
void otlp__set_sample(struct otlp *o, double ratio);
/* --otlp-steps: engine steps as spans, linked from the requests they served. */
void otlp__set_steps(struct otlp *o, bool on);
/* --otlp-tokens: each token event a span event of its request's span. */
void otlp__set_tokens(struct otlp *o, bool on);
/* --session-idle: how long an agent's first call waits for its session (otlp_sessions.c). */
void otlp__set_session_idle(struct otlp *o, uint64_t idle_ns);
void otlp__request(struct otlp *o, const struct request *r, const struct request_metrics *m);
/* Every held span out. */
void otlp__flush(struct otlp *o);
uint64_t otlp__clock_error_ns(const struct otlp *o);
/* Spans not sent because their trace was not sampled. */
uint64_t otlp__unsampled(const struct otlp *o);
void otlp__free(struct otlp *o);

extern const struct sink_ops otlp_sink;

#endif
