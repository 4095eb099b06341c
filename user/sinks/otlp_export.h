/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * OTLP/HTTP's sending side (docs/otlp.md): a thread of its own that POSTs protobuf bodies of
 * ExportTraceServiceRequest to the collector's /v1/traces, over TCP or TLS (OpenSSL). Its
 * queue is bounded; what does not fit is dropped and counted, so a dead or slow collector
 * never blocks the pipeline, never grows memory past the bound, and never delays the other
 * outputs. 429 and 503 (and no answer) are retried with backoff, Retry-After honoured.
 *
 * A body is a concatenation of ResourceSpans fields (ExportTraceServiceRequest's field 1):
 * what the queue holds at a send goes out as one request, the concatenation of its parts.
 */
#ifndef TS_OTLP_EXPORT_H
#define TS_OTLP_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OTLP_QUEUE_MAX (16u << 20) /* bytes waiting to be sent, at most */
#define OTLP_BATCH_MAX (4u << 20)  /* bytes one POST carries, at most */
#define OTLP_HEADERS_MAX 8
#define OTLP_TIMEOUT_MS_DEFAULT 5000

/* Where spans go: from --otlp URL and the OpenTelemetry environment variables. */
struct otlp_endpoint {
	bool tls;
	char host[256];
	char port[8];
	char path[512];
	char headers[OTLP_HEADERS_MAX][2][256]; /* OTEL_EXPORTER_OTLP_HEADERS: name, value */
	size_t nheaders;
	/* OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT: connect, write and answer each wait at most this,
	 * and the end of a run this long for what is queued */
	unsigned timeout_ms;
};

/* What the exporter did (capture health, the summary, /metrics). */
struct otlp_counts {
	uint64_t spans_sent, spans_dropped; /* dropped: the queue full, or the collector refused */
	uint64_t posts, retries, failures;  /* failures: a batch given up on */
	char last_error[128];
};

/* The endpoint of --otlp URL: "env" (or "") takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
 * OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces, else http://localhost:4318/v1/traces; and
 * OTEL_EXPORTER_OTLP_HEADERS (name=value,... percent-encoded) and
 * OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT (milliseconds). Returns 0,
 * or -1 with the reason in err. */
int otlp_endpoint__parse(const char *url, struct otlp_endpoint *ep, char *err, size_t n);

struct otlp_export;

struct otlp_export *otlp_export__start(const struct otlp_endpoint *ep);
/* One part of a body (whole ResourceSpans fields) carrying nspans spans: queued, or dropped
 * and counted when the queue is full. Never blocks on the network. */
void otlp_export__send(struct otlp_export *x, const void *part, size_t len, uint64_t nspans);
/* Sends what is queued (waiting at most the endpoint's timeout for the collector), then stops
 * the thread. */
void otlp_export__stop(struct otlp_export *x);
void otlp_export__counts(struct otlp_export *x, struct otlp_counts *out);
void otlp_export__free(struct otlp_export *x);

#endif
