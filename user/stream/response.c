// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "proto/decode.h"
#include "proto/grpc.h"
#include "proto/sse.h"
#include "llm/dialect.h"
#include "llm/grpc_dialect.h"
#include "stream/conn.h"
#include "stream/response.h"

#define RESP_BODY_MAX (4u << 20) /* non-streamed JSON response kept to read usage */

static void on_stream_event(void *ctx, const char *event, const char *data, size_t len,
			    uint64_t ts)
{
	struct response_reader *rr = ctx;

	if (rr->req)
		dialect__stream_event(rr->sink->json, rr->req, event, data, len, ts);
}

static void on_grpc_message(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct response_reader *rr = ctx;

	if (rr->req)
		grpc_dialect__response_message(rr->req, data, len, ts);
}

static void on_decoded(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct response_reader *rr = ctx;

	if (rr->grpc) {
		/* a message it cannot read is handed on unread: the dialect marks the request */
		grpc_reader__feed(rr->grpc, data, len, ts);
	} else if (rr->sse) {
		if (sse_parser__feed(rr->sse, data, len, ts) && rr->req) {
			request__error(rr->req, "event_too_large");
			rr->req->lossy = true;
		}
	} else if (rr->buffered) {
		buf__add(&rr->body, data, len, RESP_BODY_MAX);
	}
}

void response__reset(struct response_reader *rr)
{
	decoder__free(rr->dec);
	sse_parser__free(rr->sse);
	grpc_reader__free(rr->grpc);
	buf__free(&rr->body);
	*rr = (struct response_reader){ 0 };
}

bool response__begin(struct response_reader *rr, struct request *r, const struct http_head *h,
		     bool grpc, bool grpc_gzip, const struct conn_sink *sink, uint64_t ts)
{
	response__reset(rr);
	rr->req = r;
	rr->sink = sink;
	r->status = h->status;
	r->response_ns = ts;
	rr->no_body = !strcmp(r->method, "HEAD") || h->status == 204 || h->status == 304;
	if (h->status >= 400)
		request__error(r, "http_%d", h->status);
	if (r->stream < 0 && !grpc)
		r->stream = h->ctype == HTTP_CT_SSE || h->ctype == HTTP_CT_NDJSON;
	if (h->encoding == HTTP_ENC_UNSUPPORTED) {
		sink->counts->unsupported_encodings++;
		request__error(r, "unsupported_content_encoding");
		r->lossy = true; /* its events cannot be read: no figures rather than wrong ones */
		rr->req = NULL;
		return strcmp(r->method, "HEAD") != 0;
	}
	/* identity (most streams) needs no decoder: one allocation fewer per open stream */
	rr->identity = h->encoding == HTTP_ENC_IDENTITY;
	if (!rr->identity)
		rr->dec = decoder__new(h->encoding, on_decoded, rr);
	if (grpc)
		rr->grpc = grpc_reader__new(grpc_gzip, on_grpc_message, rr);
	else if (h->ctype == HTTP_CT_SSE || h->ctype == HTTP_CT_NDJSON)
		rr->sse = sse_parser__new(h->ctype == HTTP_CT_NDJSON, on_stream_event, rr);
	else
		rr->buffered = true;
	if ((!rr->identity && !rr->dec) || (!rr->buffered && !rr->sse && !rr->grpc)) {
		/* its body cannot be read: counted, and the request says so */
		sink->counts->no_memory++;
		request__error(r, "no_memory");
		r->lossy = true;
		rr->req = NULL;
	}
	return strcmp(r->method, "HEAD") != 0;
}

void response__body(struct response_reader *rr, const uint8_t *data, size_t len, uint64_t ts)
{
	if (!rr->req || !len)
		return;
	if (rr->identity) {
		on_decoded(rr, data, len, ts);
		return;
	}
	switch (decoder__feed(rr->dec, data, len, ts)) {
	case DECODE_OK:
		break;
	case DECODE_BUDGET:
		/* a decompression bomb, or as good as one: the rest of the body is skipped */
		if (!rr->req->lossy)
			rr->sink->counts->decode_budget_exceeded++;
		request__error(rr->req, "decode_budget_exceeded");
		rr->req->lossy = true;
		break;
	default:
		request__error(rr->req, "malformed_content_encoding");
		rr->req->lossy = true;
	}
}

void response__end(struct response_reader *rr, uint64_t ts)
{
	struct request *r = rr->req;

	if (!r)
		return;
	if (rr->sse)
		sse_parser__finish(rr->sse, ts);
	if (rr->grpc && grpc_reader__pending(rr->grpc))
		request__error(r, "grpc_message_cut");
	if (rr->grpc && r->stream < 0)
		r->stream = r->token_events > 1;
	if (rr->buffered && !rr->body.overflow && !rr->no_body)
		dialect__response_body(rr->sink->json, r, rr->body.p ? rr->body.p : "", rr->body.len, ts);
}
