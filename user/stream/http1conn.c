// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * HTTP/1.1 on one connection (stream/wire.h): a parser per direction, requests queued in
 * order, each response paired with the oldest request that has none yet (keep-alive,
 * pipelining), its body driven through stream/response.h into the request record. A 101
 * Switching Protocols ends it: the connection says what follows (h2c, a WebSocket).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/http1.h"
#include "llm/dialect.h"
#include "stream/response.h"
#include "stream/wire.h"

#define REQ_BODY_MAX (1u << 20) /* request JSON kept to read model and stream */

struct http1conn {
	struct wire_host host;
	bool client_writes;		 /* requests travel in the write direction */
	struct http_parser *req_parser;	 /* the direction requests travel in */
	struct http_parser *resp_parser; /* the direction responses travel in */

	/* Requests in order; a response pairs with the oldest one that has none yet. */
	struct request **queue;
	size_t qlen, qcap;
	struct request *parsing_req; /* request message being read */
	struct buf req_body;
	bool req_body_encoded; /* compressed request bodies are not read */

	struct request *resp_req; /* request whose response is being read (NULL: unpaired) */
	struct response_reader rr;

	bool switching; /* a 101 named what follows: sw */
	struct wire_switch sw;
};

/* ---- request queue ---- */

static int queue_push(struct http1conn *c, struct request *r)
{
	if (!array__reserve((void **)&c->queue, &c->qcap, c->qlen + 1, sizeof(*c->queue)))
		return -1;
	c->queue[c->qlen++] = r;
	return 0;
}

static void queue_remove(struct http1conn *c, struct request *r)
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
static struct request *queue_next_unanswered(struct http1conn *c)
{
	for (size_t i = 0; i < c->qlen; i++) {
		if (!c->queue[i]->status)
			return c->queue[i];
	}
	return NULL;
}

/* r is done (its end and errors set): out of the queue, to the sink. */
static void finish_request(struct http1conn *c, struct request *r)
{
	queue_remove(c, r);
	if (c->parsing_req == r)
		c->parsing_req = NULL;
	if (c->resp_req == r)
		c->resp_req = NULL;
	c->host.end_request(c->host.ctx, r, NULL, r->end_ns);
}

/* ---- responses, paired in order ---- */

static void response_reset(struct http1conn *c)
{
	response__reset(&c->rr);
	c->resp_req = NULL;
}

static bool resp_on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct http1conn *c = ctx;
	struct request *r = queue_next_unanswered(c);

	response_reset(c);
	if (!r) {
		c->host.sink->counts->unpaired_responses++;
		return true;
	}
	c->resp_req = r;
	return response__begin(&c->rr, r, h, false, false, c->host.sink, ts);
}

static void resp_on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct http1conn *c = ctx;

	response__body(&c->rr, data, len, ts);
}

static void resp_on_end(void *ctx, uint64_t ts)
{
	struct http1conn *c = ctx;
	struct request *r = c->resp_req;

	if (r) {
		response__end(&c->rr, ts);
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

/* A request of the method and path h gives, queued; NULL without memory (counted). */
static struct request *queue_request(struct http1conn *c, const struct http_head *h)
{
	struct request *r = c->host.begin_request(c->host.ctx, h->start_ns);

	if (!r)
		return NULL;
	if (queue_push(c, r)) {
		c->host.sink->counts->no_memory++;
		request__free(r);
		return NULL;
	}
	snprintf(r->method, sizeof(r->method), "%s", h->method);
	request__set_traceparent(r, h->traceparent);
	if (!request__set_tracestate(r, h->tracestate))
		c->host.sink->counts->no_memory++;
	request__set_user_agent(r, h->user_agent);
	if (!request__set_path(r, h->path))
		c->host.sink->counts->no_memory++; /* reported without its path */
	dialect__request_head(r);
	return r;
}

static bool req_on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct http1conn *c = ctx;
	struct request *r;

	buf__reset(&c->req_body);
	c->parsing_req = NULL;
	r = queue_request(c, h);
	if (!r)
		return true;
	c->parsing_req = r;
	c->req_body_encoded = h->encoding != HTTP_ENC_IDENTITY;
	return true;
}

static void req_on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct http1conn *c = ctx;

	if (c->parsing_req && !c->req_body_encoded)
		buf__add(&c->req_body, data, len, REQ_BODY_MAX);
}

static void req_on_end(void *ctx, uint64_t ts)
{
	struct http1conn *c = ctx;
	struct request *r = c->parsing_req;

	if (r && !c->req_body_encoded && !c->req_body.overflow && c->req_body.len)
		dialect__request_body(c->host.sink->json, r, c->req_body.p, c->req_body.len);
	c->parsing_req = NULL;
	/* freed, not kept: a prompt can be megabytes, and a connection may idle for hours */
	buf__free(&c->req_body);
}

static const struct http_callbacks req_callbacks = {
	.on_head = req_on_head,
	.on_body = req_on_body,
	.on_end = req_on_end,
};

/* ---- the reader ---- */

static void http1_free(void *w)
{
	struct http1conn *c = w;

	if (!c)
		return;
	for (size_t i = 0; i < c->qlen; i++)
		request__free(c->queue[i]);
	free(c->queue);
	http_parser__free(c->req_parser);
	http_parser__free(c->resp_parser);
	response_reset(c);
	buf__free(&c->req_body);
	free(c);
}

static void *http1_open(const struct wire_host *host, const struct wire_start *how)
{
	struct http1conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->host = *host;
	c->client_writes = how->client_is_write;
	c->req_parser = http_parser__new(true, &req_callbacks, c);
	c->resp_parser = http_parser__new(false, &resp_callbacks, c);
	if (!c->req_parser || !c->resp_parser) {
		http1_free(c);
		return NULL;
	}
	return c;
}

/* Every in-flight request becomes incomplete; both directions resync on the next message. */
static void abandon_inflight(struct http1conn *c, uint64_t ts, const char *reason)
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
 * (h2c: the request that asked for it goes on as stream 1), a WebSocket or something else
 * (counted as other; the request answered by the 101 ends there, saying what it became).
 */
static void switched(struct http1conn *c, const char *proto, uint64_t ts)
{
	const char *why = "switched_protocols";

	c->switching = true;
	if (!strcmp(proto, "h2c") || !strcmp(proto, "h2")) {
		struct request *r = c->qlen ? c->queue[0] : NULL;

		if (r)
			queue_remove(c, r);
		abandon_inflight(c, ts, "switched_to_http2"); /* pipelined behind it: none */
		response_reset(c);
		c->sw = (struct wire_switch){ .to = CONN_HTTP2, .carried = r };
		return;
	}
	c->sw = (struct wire_switch){ .to = CONN_OTHER };
	if (!strcmp(proto, "websocket"))
		why = "switched_to_websocket";
	if (c->qlen)
		c->queue[0]->status = 101;
	abandon_inflight(c, ts, why);
}

/* A request whose head passed HEAD_MAX_BYTES: it is still a request, of the method and path
 * its start line gave, and its response is read and measured as any other; its record says
 * what was not read (the rest of the head and the body: no model from it). The requests
 * after it on the connection are not read (their responses are counted unpaired). */
static bool too_large_request(struct http1conn *c, struct http_parser *p)
{
	const struct http_head *h = http_parser__failed_head(p);
	struct request *r;

	if (!h)
		return false;
	r = queue_request(c, h);
	if (!r)
		return false;
	r->headers_partial = true;
	request__error(r, "%s", http_error__str(HTTP_ERR_TOO_LARGE));
	return true;
}

static void parser_failed(struct http1conn *c, struct http_parser *p, enum http_error e,
			  uint64_t ts)
{
	if (e == HTTP_ERR_UPGRADE) {
		switched(c, http_parser__upgrade(p), ts);
		return;
	}
	if (e == HTTP_ERR_LOST_SYNC) {
		abandon_inflight(c, ts, "capture_loss");
		return;
	}
	c->host.sink->counts->malformed++;
	if (e == HTTP_ERR_TOO_LARGE && p == c->req_parser && too_large_request(c, p))
		return;
	abandon_inflight(c, ts, http_error__str(e));
}

/* A client writes requests; a server reads them. */
static struct http_parser *parser_of(struct http1conn *c, bool is_write)
{
	return is_write == c->client_writes ? c->req_parser : c->resp_parser;
}

static void http1_data(void *w, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct http1conn *c = w;
	struct http_parser *p = parser_of(c, is_write);
	enum http_error e;

	if (c->switching || http_parser__error(p))
		return;
	e = http_parser__feed(p, data, len, ts);
	if (e)
		parser_failed(c, p, e, ts);
	if (c->switching && e == HTTP_ERR_UPGRADE) /* what follows the 101 is the new protocol's */
		c->sw.used = http_parser__upgrade_used(p);
}

static void http1_missing(void *w, bool is_write, uint64_t n, uint64_t ts)
{
	struct http1conn *c = w;
	struct http_parser *p = parser_of(c, is_write);
	enum http_error e;

	if (c->switching)
		return;
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

static void http1_lost(void *w, uint64_t ts, const char *reason)
{
	struct http1conn *c = w;

	abandon_inflight(c, ts, reason);
	http_parser__gap(c->req_parser, UINT64_MAX, ts);
	http_parser__gap(c->resp_parser, UINT64_MAX, ts);
}

static void http1_close(void *w, uint64_t ts, const char *reason)
{
	struct http1conn *c = w;

	/* A body that runs to the close is complete now, if the connection did close: not when
	 * the capture ended, lost bytes, or let the connection go idle before it did. */
	if (!http_parser__error(c->resp_parser) &&
	    (!strcmp(reason, "connection_closed") || !strcmp(reason, "process_exited")))
		http_parser__eof(c->resp_parser, ts);
	while (c->qlen) {
		struct request *r = c->queue[0];

		queue_remove(c, r);
		if (c->parsing_req == r)
			c->parsing_req = NULL;
		if (c->resp_req == r)
			c->resp_req = NULL;
		c->host.end_request(c->host.ctx, r, reason, ts);
	}
	response_reset(c);
}

static size_t http1_inflight(const void *w)
{
	const struct http1conn *c = w;

	return c->qlen;
}

static void http1_each_open(const void *w, open_request_fn fn, void *ctx)
{
	const struct http1conn *c = w;

	for (size_t i = 0; i < c->qlen; i++)
		fn(ctx, c->queue[i]);
}

/* A TLS stream can learn its socket after its request began (a memory BIO writes the request
 * to the socket after SSL_write returned): the requests in flight get it too. */
static void http1_set_addresses(void *w, const struct conn_addr *a)
{
	struct http1conn *c = w;

	for (size_t i = 0; i < c->qlen; i++)
		request__set_addr(c->queue[i], a);
	if (c->parsing_req)
		request__set_addr(c->parsing_req, a);
}

static bool http1_switched(void *w, struct wire_switch *sw)
{
	struct http1conn *c = w;

	if (c->switching)
		*sw = c->sw;
	return c->switching;
}

const struct wire_ops http1_wire = {
	.name = "http/1.1",
	.kind = CONN_HTTP1,
	.open = http1_open,
	.free = http1_free,
	.data = http1_data,
	.missing = http1_missing,
	.lost = http1_lost,
	.close = http1_close,
	.inflight = http1_inflight,
	.each_open = http1_each_open,
	.set_addresses = http1_set_addresses,
	.switched = http1_switched,
};
