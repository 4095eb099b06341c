/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * LLM API dialects: which API a request speaks (from its path, else its payload), and what
 * each streamed event means: a token event (non-empty generated text), usage, finish reason,
 * errors, the end of the stream. One table of dialects in dialect.c; wire formats and what
 * counts as a token for each: docs/apis.md.
 */
#ifndef TS_DIALECT_H
#define TS_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "llm/json.h"
#include "llm/request.h"

/* "openai.chat", ...; "unknown" for API_UNKNOWN. */
const char *api__name(enum api a);
/* OpenTelemetry GenAI's gen_ai.operation.name ("chat", "text_completion",
 * "generate_content") and gen_ai.provider.name ("openai", "gcp.gemini", "llama.cpp", ...);
 * "" for an unknown API and a gRPC method that is no LLM API. */
const char *api__otel_operation(enum api a);
const char *api__otel_provider(enum api a);
enum api dialect__from_path(const char *path);
/* From the request head (method, path set): the API, and the model where the path names it
 * (Gemini's /models/NAME:streamGenerateContent). */
void dialect__request_head(struct request *r);
/*
 * The calls that read JSON read it into doc (llm/json.h), the caller's, reused from one call
 * to the next: what they keep of it is copied into the request.
 */
/* The request body (JSON): model and stream flag. Nothing else is kept. */
void dialect__request_body(struct jdoc *doc, struct request *r, const char *body, size_t len);
/* One SSE event (event may be "") or NDJSON line of the response stream. */
void dialect__stream_event(struct jdoc *doc, struct request *r, const char *event,
			   const char *data, size_t len, uint64_t ts);
/* A whole non-streamed JSON response body, complete at ts. */
void dialect__response_body(struct jdoc *doc, struct request *r, const char *body, size_t len,
			    uint64_t ts);

#endif
