/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One response body on its way to the API dialect, whatever carried it (an HTTP/1.1 message
 * or an HTTP/2 stream): content decoding, then SSE/NDJSON events, a whole JSON body, or gRPC
 * messages, then the dialect, which fills in the request record.
 */
#ifndef TS_RESPONSE_H
#define TS_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "proto/http1.h"

struct request;
struct conn_sink;
struct decoder;
struct sse_parser;
struct grpc_reader;

struct response_reader {
	struct request *req; /* NULL: nothing is read */
	const struct conn_sink *sink;
	struct decoder *dec;
	struct sse_parser *sse;
	struct grpc_reader *grpc;
	struct buf body;
	bool buffered; /* non-streamed body kept whole */
	bool identity; /* no content coding: the body goes straight on, no decoder */
	bool no_body;  /* none by definition (a HEAD's, 204, 304): nothing to parse at its end */
};

/* The response head of r: status, stream flag, and the readers its body needs (grpc: the
 * body is length-prefixed gRPC messages, grpc_gzip their compression). Returns false when
 * the response has no body to read (a reply to HEAD). */
bool response__begin(struct response_reader *rr, struct request *r, const struct http_head *h,
		     bool grpc, bool grpc_gzip, const struct conn_sink *sink, uint64_t ts);
void response__body(struct response_reader *rr, const uint8_t *data, size_t len, uint64_t ts);
/* The body ended at ts: the last events and a whole body go to the dialect. */
void response__end(struct response_reader *rr, uint64_t ts);
/* Readers freed; rr reads nothing until the next begin. */
void response__reset(struct response_reader *rr);

#endif
