// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/decode.h"
#include "proto/http1.h"
#include "proto/sse.h"
#include "llm/dialect.h"
#include "stream/conn.h"

#define REQ_BODY_MAX (1u << 20)	 /* request JSON kept to read model and stream */
#define RESP_BODY_MAX (4u << 20) /* non-streamed JSON response kept to read usage */
#define SNIFF_MAX (64u << 10)	 /* bytes before a stream that never looks like HTTP is "other" */

struct conn {
	struct stream_key key;
	char comm[TS_COMM_LEN];
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];
	const struct conn_sink *sink;
	enum conn_kind kind;
	enum role role;
	bool peer_exited; /* the process at the other end died (it was traced on this host) */
	unsigned refs;	  /* streams that carry it: more than one after a fork shared it */
	uint64_t sniffed;
	/* The start of a message cut short by the SSL call that carried it: kept until there are
	 * enough bytes to tell a request line from anything else. */
	uint8_t pending[24];
	size_t npending;
	bool pending_write;
	uint64_t pending_ts;

	struct http_parser *req_parser;	 /* the direction requests travel in */
	struct http_parser *resp_parser; /* the direction responses travel in */

	/* Requests in order; a response pairs with the oldest one that has none yet. */
	struct request **queue;
	size_t qlen, qcap;
	struct request *parsing_req;  /* request message being read */
	struct buf req_body;
	bool req_body_encoded;	      /* compressed request bodies are not read */

	struct request *resp_req;     /* request whose response is being read (NULL: unpaired) */
	struct decoder *dec;
	struct sse_parser *sse;
	struct buf resp_body;
	bool resp_buffered;	      /* non-streamed body kept whole */
	bool resp_identity;	      /* no content coding: the body goes straight on, no decoder */
};

/* ---- request queue ---- */

static int queue_push(struct conn *c, struct request *r)
{
	if (!array__reserve((void **)&c->queue, &c->qcap, c->qlen + 1, sizeof(*c->queue)))
		return -1;
	c->queue[c->qlen++] = r;
	return 0;
}

static void queue_remove(struct conn *c, struct request *r)
{
	for (size_t i = 0; i < c->qlen; i++) {
		if (c->queue[i] == r) {
			memmove(&c->queue[i], &c->queue[i + 1], (c->qlen - i - 1) * sizeof(*c->queue));
			c->qlen--;
			return;
		}
	}
}

/* The first queued request still waiting for its response head. */
static struct request *queue_next_unanswered(struct conn *c)
{
	for (size_t i = 0; i < c->qlen; i++) {
		if (!c->queue[i]->status)
			return c->queue[i];
	}
	return NULL;
}

static void finish_request(struct conn *c, struct request *r)
{
	queue_remove(c, r);
	if (c->parsing_req == r)
		c->parsing_req = NULL;
	if (c->resp_req == r)
		c->resp_req = NULL;
	c->sink->on_request(c->sink->ctx, r);
}

/* ---- response body: decode -> SSE/NDJSON or whole JSON -> dialect ---- */

static void on_stream_event(void *ctx, const char *event, const char *data, size_t len,
			    uint64_t ts)
{
	struct conn *c = ctx;

	if (c->resp_req)
		dialect__stream_event(c->resp_req, event, data, len, ts);
}

static void on_decoded(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct conn *c = ctx;

	if (c->sse) {
		if (sse_parser__feed(c->sse, data, len, ts) && c->resp_req) {
			request__error(c->resp_req, "event_too_large");
			c->resp_req->lossy = true;
		}
	} else if (c->resp_buffered) {
		buf__add(&c->resp_body, data, len, RESP_BODY_MAX);
	}
}

static void response_reset(struct conn *c)
{
	decoder__free(c->dec);
	c->dec = NULL;
	sse_parser__free(c->sse);
	c->sse = NULL;
	buf__free(&c->resp_body);
	c->resp_buffered = false;
	c->resp_identity = false;
	c->resp_req = NULL;
}

static bool resp_on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct conn *c = ctx;
	struct request *r = queue_next_unanswered(c);

	response_reset(c);
	if (!r) {
		(*c->sink->unpaired_responses)++;
		return true;
	}
	c->resp_req = r;
	r->status = h->status;
	r->response_ns = ts;
	if (h->status >= 400)
		request__error(r, "http_%d", h->status);
	if (r->stream < 0)
		r->stream = h->ctype == HTTP_CT_SSE || h->ctype == HTTP_CT_NDJSON;
	if (h->encoding == HTTP_ENC_UNSUPPORTED) {
		(*c->sink->unsupported_encodings)++;
		request__error(r, "unsupported_content_encoding");
		r->lossy = true; /* its events cannot be read: no figures rather than wrong ones */
		return strcmp(r->method, "HEAD") != 0;
	}
	/* identity (most streams) needs no decoder: one allocation fewer per open stream */
	c->resp_identity = h->encoding == HTTP_ENC_IDENTITY;
	if (!c->resp_identity)
		c->dec = decoder__new(h->encoding, on_decoded, c);
	if (h->ctype == HTTP_CT_SSE || h->ctype == HTTP_CT_NDJSON)
		c->sse = sse_parser__new(h->ctype == HTTP_CT_NDJSON, on_stream_event, c);
	else
		c->resp_buffered = true;
	if ((!c->resp_identity && !c->dec) || (!c->resp_buffered && !c->sse)) {
		/* its body cannot be read: counted, and the request says so */
		(*c->sink->no_memory)++;
		request__error(r, "no_memory");
		r->lossy = true;
	}
	return strcmp(r->method, "HEAD") != 0;
}

static void resp_on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct conn *c = ctx;

	if (!c->resp_req)
		return;
	if (c->resp_identity) {
		if (len)
			on_decoded(c, data, len, ts);
		return;
	}
	if (!c->dec)
		return;
	switch (decoder__feed(c->dec, data, len, ts)) {
	case DECODE_OK:
		break;
	case DECODE_BUDGET:
		/* a decompression bomb, or as good as one: the rest of the body is skipped */
		if (!c->resp_req->lossy)
			(*c->sink->decode_budget_exceeded)++;
		request__error(c->resp_req, "decode_budget_exceeded");
		c->resp_req->lossy = true;
		break;
	default:
		request__error(c->resp_req, "malformed_content_encoding");
		c->resp_req->lossy = true;
	}
}

static void resp_on_end(void *ctx, uint64_t ts)
{
	struct conn *c = ctx;
	struct request *r = c->resp_req;

	if (r) {
		if (c->sse)
			sse_parser__finish(c->sse, ts);
		if (c->resp_buffered && !c->resp_body.overflow)
			dialect__response_body(r, c->resp_body.p ? c->resp_body.p : "",
					       c->resp_body.len, ts);
		r->end_ns = ts;
		r->response_done = true;
		finish_request(c, r);
	}
	response_reset(c);
}

static const struct http_callbacks resp_callbacks = {
	.on_head = resp_on_head,
	.on_body = resp_on_body,
	.on_end = resp_on_end,
};

/* ---- request messages ---- */

static bool req_on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct conn *c = ctx;
	struct request *r = request__new();

	buf__reset(&c->req_body);
	c->parsing_req = NULL;
	if (!r || queue_push(c, r)) {
		(*c->sink->no_memory)++;
		request__free(r);
		return true;
	}
	r->id = ++*c->sink->next_id;
	r->on_first_token = c->sink->on_first_token;
	r->hook_ctx = c->sink->ctx;
	r->pid = c->key.pid;
	memcpy(r->comm, c->comm, sizeof(r->comm));
	r->transport = transport__name(c->key.transport);
	memcpy(r->local, c->local, sizeof(r->local));
	memcpy(r->peer, c->peer, sizeof(r->peer));
	r->role = c->role;
	snprintf(r->method, sizeof(r->method), "%s", h->method);
	if (!request__set_path(r, h->path))
		(*c->sink->no_memory)++; /* reported without its path */
	dialect__request_head(r);
	r->start_ns = h->start_ns;
	c->parsing_req = r;
	c->req_body_encoded = h->encoding != HTTP_ENC_IDENTITY;
	return true;
}

static void req_on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct conn *c = ctx;

	if (c->parsing_req && !c->req_body_encoded)
		buf__add(&c->req_body, data, len, REQ_BODY_MAX);
}

static void req_on_end(void *ctx, uint64_t ts)
{
	struct conn *c = ctx;
	struct request *r = c->parsing_req;

	if (r && !c->req_body_encoded && !c->req_body.overflow && c->req_body.len)
		dialect__request_body(r, c->req_body.p, c->req_body.len);
	c->parsing_req = NULL;
	/* freed, not kept: a prompt can be megabytes, and a connection may idle for hours */
	buf__free(&c->req_body);
}

static const struct http_callbacks req_callbacks = {
	.on_head = req_on_head,
	.on_body = req_on_body,
	.on_end = req_on_end,
};

/* ---- connection ---- */

struct conn *conn__new(const struct stream_key *key, const char *comm,
		       const struct conn_sink *sink)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->key = *key;
	snprintf(c->comm, sizeof(c->comm), "%s", comm);
	c->sink = sink;
	c->refs = 1;
	return c;
}

void conn__ref(struct conn *c)
{
	c->refs++;
}

bool conn__unref(struct conn *c)
{
	return !--c->refs;
}

bool conn__shared(const struct conn *c)
{
	return c->refs > 1;
}

bool conn__untouched(const struct conn *c)
{
	return c->kind == CONN_UNKNOWN && !c->npending && !c->sniffed;
}

void conn__free(struct conn *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->qlen; i++)
		request__free(c->queue[i]);
	free(c->queue);
	http_parser__free(c->req_parser);
	http_parser__free(c->resp_parser);
	response_reset(c);
	buf__free(&c->req_body);
	buf__free(&c->resp_body);
	free(c);
}

enum conn_kind conn__kind(const struct conn *c)
{
	return c->kind;
}

size_t conn__inflight(const struct conn *c)
{
	return c->qlen;
}

const char *transport__name(enum transport t)
{
	return t == TRANSPORT_TCP ? "tcp" : "tls";
}

void conn__set_addresses(struct conn *c, const char *local, const char *peer)
{
	snprintf(c->local, sizeof(c->local), "%s", local);
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	/* A TLS stream can learn its socket after its request began (a memory BIO writes the
	 * request to the socket after SSL_write returned): the requests in flight get it too. */
	for (size_t i = 0; i < c->qlen; i++) {
		memcpy(c->queue[i]->local, c->local, sizeof(c->local));
		memcpy(c->queue[i]->peer, c->peer, sizeof(c->peer));
	}
}

bool conn__is_peer(const struct conn *a, const struct conn *b)
{
	return a->peer[0] && b->peer[0] && !strcmp(a->local, b->peer) && !strcmp(a->peer, b->local);
}

void conn__peer_exited(struct conn *c)
{
	if (c->qlen)
		c->peer_exited = true;
}

bool conn__has_addresses(const struct conn *c)
{
	return c->peer[0] != 0;
}

/* Could these bytes still grow into a request line or the HTTP/2 preface? */
static bool could_start(const uint8_t *d, size_t n)
{
	static const char *const starts[] = { "GET ", "POST ", "PUT ", "DELETE ", "PATCH ",
					      "HEAD ", "OPTIONS ", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" };

	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		if (n < strlen(starts[i]) && !memcmp(d, starts[i], n))
			return true;
	}
	return false;
}

/* Decide what the connection carries. Returns false while undecided. */
static bool classify(struct conn *c, bool is_write, const uint8_t *data, size_t len, uint64_t ts)
{
	uint8_t head[sizeof(c->pending)];
	size_t n;

	if (c->npending && c->pending_write != is_write)
		c->npending = 0; /* the other direction spoke first: that start was no request */
	n = c->npending;
	memcpy(head, c->pending, n);
	memcpy(head + n, data, len < sizeof(head) - n ? len : sizeof(head) - n);
	n += len < sizeof(head) - n ? len : sizeof(head) - n;

	if (http__looks_like_h2_preface(head, n) && n >= 24) {
		c->kind = CONN_HTTP2;
		c->role = is_write ? ROLE_CLIENT : ROLE_SERVER;
		return true;
	}
	if (http__looks_like_request(head, n)) {
		c->kind = CONN_HTTP1;
		c->role = is_write ? ROLE_CLIENT : ROLE_SERVER;
		c->req_parser = http_parser__new(true, &req_callbacks, c);
		c->resp_parser = http_parser__new(false, &resp_callbacks, c);
		if (!c->req_parser || !c->resp_parser)
			c->kind = CONN_OTHER;
		return true;
	}
	if (could_start(head, n)) {
		if (!c->npending) {
			c->pending_write = is_write;
			c->pending_ts = ts;
		}
		memcpy(c->pending + c->npending, data, len); /* n < 24 so this fits */
		c->npending += len;
		return false;
	}
	/* Joined mid-connection or not HTTP: wait for a request to start, but not forever. */
	c->npending = 0;
	c->sniffed += len;
	if (c->sniffed > SNIFF_MAX)
		c->kind = CONN_OTHER;
	return false;
}

/* Every in-flight request becomes incomplete; both directions resync on the next message. */
static void abandon_inflight(struct conn *c, uint64_t ts, const char *reason)
{
	while (c->qlen) {
		struct request *r = c->queue[0];

		r->lossy = true;
		request__error(r, "%s", reason);
		if (!r->end_ns)
			r->end_ns = ts;
		finish_request(c, r);
	}
	response_reset(c);
	c->parsing_req = NULL;
	buf__reset(&c->req_body);
}

/*
 * 101 Switching Protocols: from the byte after it the connection is no longer HTTP/1.1, in
 * either direction, and is never parsed as such again. It becomes what the 101 named: HTTP/2
 * (h2c; counted with the HTTP/2 connections, unsupported), a WebSocket or something else
 * (counted as other). The request answered by the 101 ends there, saying what it became.
 */
static void switched(struct conn *c, const char *proto, uint64_t ts)
{
	const char *why = "switched_protocols";

	if (!strcmp(proto, "h2c") || !strcmp(proto, "h2")) {
		c->kind = CONN_HTTP2;
		why = "switched_to_http2";
	} else {
		c->kind = CONN_OTHER;
		if (!strcmp(proto, "websocket"))
			why = "switched_to_websocket";
	}
	if (c->qlen)
		c->queue[0]->status = 101;
	abandon_inflight(c, ts, why);
}

static void parser_failed(struct conn *c, struct http_parser *p, enum http_error e, uint64_t ts)
{
	if (e == HTTP_ERR_UPGRADE) {
		switched(c, http_parser__upgrade(p), ts);
		return;
	}
	if (e == HTTP_ERR_LOST_SYNC) {
		abandon_inflight(c, ts, "capture_loss");
		return;
	}
	(*c->sink->malformed_streams)++;
	abandon_inflight(c, ts, http_error__str(e));
}

void conn__data(struct conn *c, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct http_parser *p;
	enum http_error e;

	if (c->kind == CONN_UNKNOWN && !classify(c, is_write, data, len, ts))
		return;
	if (c->kind != CONN_HTTP1)
		return;
	/* A client writes requests; a server reads them. */
	p = (is_write == (c->role == ROLE_CLIENT)) ? c->req_parser : c->resp_parser;
	if (http_parser__error(p))
		return;
	e = HTTP_OK;
	if (c->npending) {
		/* Bytes held back while classifying; they keep their own time. */
		e = http_parser__feed(p, c->pending, c->npending, c->pending_ts);
		c->npending = 0;
	}
	if (!e)
		e = http_parser__feed(p, data, len, ts);
	if (e)
		parser_failed(c, p, e, ts);
}

void conn__missing(struct conn *c, bool is_write, uint64_t n, uint64_t ts)
{
	struct http_parser *p;
	enum http_error e;

	if (c->kind != CONN_HTTP1)
		return;
	p = (is_write == (c->role == ROLE_CLIENT)) ? c->req_parser : c->resp_parser;
	if (p == c->resp_parser && c->resp_req) {
		/* Lost response bytes may have held token events. */
		c->resp_req->lossy = true;
		request__error(c->resp_req, "capture_loss");
	}
	if (p == c->req_parser && c->parsing_req)
		c->req_body.overflow = true; /* the body JSON is cut: do not read it */
	e = http_parser__gap(p, n, ts);
	if (e)
		parser_failed(c, p, e, ts);
}

void conn__lost(struct conn *c, uint64_t ts, const char *reason)
{
	if (c->kind != CONN_HTTP1)
		return;
	abandon_inflight(c, ts, reason);
	http_parser__gap(c->req_parser, UINT64_MAX, ts);
	http_parser__gap(c->resp_parser, UINT64_MAX, ts);
}

void conn__close(struct conn *c, uint64_t ts, const char *reason)
{
	if (c->kind != CONN_HTTP1)
		return;
	/* A body that runs to the close is complete now. */
	if (!http_parser__error(c->resp_parser))
		http_parser__eof(c->resp_parser, ts);
	while (c->qlen) {
		struct request *r = c->queue[0];

		request__error(r, "%s", c->peer_exited ? "peer_exited" : reason);
		if (!r->end_ns)
			r->end_ns = ts;
		finish_request(c, r);
	}
	response_reset(c);
}
