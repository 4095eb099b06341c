// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/h2.h"
#include "proto/http1.h"
#include "llm/dialect.h"
#include "stream/conn.h"
#include "stream/h2conn.h"
#include "stream/response.h"

#define REQ_BODY_MAX (1u << 20)	 /* request JSON kept to read model and stream */
#define SNIFF_MAX (64u << 10)	 /* bytes before a stream that never looks like HTTP is "other" */

struct conn {
	struct stream_key key;
	char comm[TS_COMM_LEN];
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];
	const struct conn_sink *sink;
	enum conn_kind kind;
	enum role role;
	bool role_known;
	bool peer_exited; /* the process at the other end died (it was traced on this host) */
	unsigned refs;	  /* streams that carry it: more than one after a fork shared it */
	uint64_t sniffed;
	/* The start of a message cut short by the SSL call that carried it: kept until there are
	 * enough bytes to tell a request line from anything else. */
	uint8_t pending[24];
	size_t npending;
	bool pending_write;
	uint64_t pending_ts;

	struct h2conn *h2; /* CONN_HTTP2 */
	struct http_parser *req_parser;	 /* the direction requests travel in */
	struct http_parser *resp_parser; /* the direction responses travel in */

	/* Requests in order; a response pairs with the oldest one that has none yet. */
	struct request **queue;
	size_t qlen, qcap;
	struct request *parsing_req;  /* request message being read */
	struct buf req_body;
	bool req_body_encoded;	      /* compressed request bodies are not read */

	struct request *resp_req;     /* request whose response is being read (NULL: unpaired) */
	struct response_reader rr;
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

/* ---- responses, paired in order ---- */

static void response_reset(struct conn *c)
{
	response__reset(&c->rr);
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
	return response__begin(&c->rr, r, h, false, false, c->sink, ts);
}

static void resp_on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct conn *c = ctx;

	response__body(&c->rr, data, len, ts);
}

static void resp_on_end(void *ctx, uint64_t ts)
{
	struct conn *c = ctx;
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

struct request *conn__begin_request(struct conn *c, uint64_t start_ns)
{
	struct request *r = request__new();

	if (!r) {
		(*c->sink->no_memory)++;
		return NULL;
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
	r->start_ns = start_ns;
	return r;
}

void conn__end_request(struct conn *c, struct request *r, const char *reason, uint64_t ts)
{
	if (reason)
		request__error(r, "%s", c->peer_exited ? "peer_exited" : reason);
	if (!r->end_ns)
		r->end_ns = ts;
	c->sink->on_request(c->sink->ctx, r);
}

const struct conn_sink *conn__sink(const struct conn *c)
{
	return c->sink;
}

int conn__role(const struct conn *c)
{
	return c->role_known ? (int)c->role : -1;
}

void conn__set_role(struct conn *c, enum role role)
{
	c->role = role;
	c->role_known = true;
}

static bool req_on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	struct conn *c = ctx;
	struct request *r = conn__begin_request(c, h->start_ns);

	buf__reset(&c->req_body);
	c->parsing_req = NULL;
	if (!r)
		return true;
	if (queue_push(c, r)) {
		(*c->sink->no_memory)++;
		request__free(r);
		return true;
	}
	snprintf(r->method, sizeof(r->method), "%s", h->method);
	if (!request__set_path(r, h->path))
		(*c->sink->no_memory)++; /* reported without its path */
	dialect__request_head(r);
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
	h2conn__free(c->h2);
	free(c);
}

enum conn_kind conn__kind(const struct conn *c)
{
	return c->kind;
}

size_t conn__inflight(const struct conn *c)
{
	return c->h2 ? h2conn__inflight(c->h2) : c->qlen;
}

void conn__each_open(const struct conn *c, open_request_fn fn, void *ctx)
{
	if (c->h2) {
		h2conn__each_open(c->h2, fn, ctx);
		return;
	}
	for (size_t i = 0; i < c->qlen; i++)
		fn(ctx, c->queue[i]);
}

const struct stream_key *conn__key(const struct conn *c)
{
	return &c->key;
}

const char *transport__name(enum transport t)
{
	return t == TRANSPORT_TCP ? "tcp" : t == TRANSPORT_GO_TLS ? "go_tls" : "tls";
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
	if (c->parsing_req) {
		memcpy(c->parsing_req->local, c->local, sizeof(c->local));
		memcpy(c->parsing_req->peer, c->peer, sizeof(c->peer));
	}
	if (c->h2) /* HTTP/2: its open streams' requests too */
		h2conn__set_addresses(c->h2, c->local, c->peer);
}

bool conn__is_peer(const struct conn *a, const struct conn *b)
{
	return a->peer[0] && b->peer[0] && !strcmp(a->local, b->peer) && !strcmp(a->peer, b->local);
}

void conn__peer_exited(struct conn *c)
{
	if (conn__inflight(c))
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

/* The connection is HTTP/2 from here (from_preface: its start was seen, the client writes
 * when client_is_write). Returns false when there is no memory for it (then "other"). */
static bool become_h2(struct conn *c, bool from_preface, bool client_is_write)
{
	c->kind = CONN_HTTP2;
	c->h2 = h2conn__new(c, c->comm, from_preface);
	if (!c->h2) {
		(*c->sink->no_memory)++;
		c->kind = CONN_OTHER;
		return false;
	}
	if (from_preface)
		h2conn__expect_preface(c->h2, client_is_write);
	return true;
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
		c->role = is_write ? ROLE_CLIENT : ROLE_SERVER;
		c->role_known = true;
		if (!become_h2(c, true, is_write))
			return false;
		/* the preface's first bytes were held back here: the rest is in data */
		h2conn__preface_seen(c->h2, is_write, c->npending);
		c->npending = 0;
		return true;
	}
	if (http__looks_like_request(head, n)) {
		c->kind = CONN_HTTP1;
		c->role = is_write ? ROLE_CLIENT : ROLE_SERVER;
		c->role_known = true;
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
	/* HTTP/2 joined after its preface: its frames say so (a piece begins with them) */
	if (!c->npending && h2__looks_like_frames(data, len))
		return become_h2(c, false, is_write);
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
 * (h2c: the request that asked for it goes on as stream 1), a WebSocket or something else
 * (counted as other; the request answered by the 101 ends there, saying what it became).
 */
static void switched(struct conn *c, const char *proto, uint64_t ts)
{
	const char *why = "switched_protocols";

	if (!strcmp(proto, "h2c") || !strcmp(proto, "h2")) {
		struct request *r = c->qlen ? c->queue[0] : NULL;

		if (r)
			queue_remove(c, r);
		abandon_inflight(c, ts, "switched_to_http2"); /* pipelined behind it: none */
		response_reset(c);
		if (!become_h2(c, true, c->role == ROLE_CLIENT)) {
			if (r)
				conn__end_request(c, r, "no_memory", ts);
			return;
		}
		h2conn__upgraded(c->h2, r, c->role == ROLE_CLIENT);
		return;
	}
	c->kind = CONN_OTHER;
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
static bool too_large_request(struct conn *c, struct http_parser *p, uint64_t ts)
{
	const struct http_head *h = http_parser__failed_head(p);
	struct request *r;

	if (!h)
		return false;
	r = conn__begin_request(c, h->start_ns);
	if (!r || queue_push(c, r)) {
		(*c->sink->no_memory)++;
		request__free(r);
		return false;
	}
	snprintf(r->method, sizeof(r->method), "%s", h->method);
	if (!request__set_path(r, h->path))
		(*c->sink->no_memory)++;
	dialect__request_head(r);
	r->headers_partial = true;
	request__error(r, "%s", http_error__str(HTTP_ERR_TOO_LARGE));
	return true;
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
	if (e == HTTP_ERR_TOO_LARGE && p == c->req_parser && too_large_request(c, p, ts))
		return;
	abandon_inflight(c, ts, http_error__str(e));
}

void conn__data(struct conn *c, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct http_parser *p;
	enum http_error e;

	if (c->kind == CONN_UNKNOWN && !classify(c, is_write, data, len, ts))
		return;
	if (c->kind == CONN_HTTP2) {
		h2conn__data(c->h2, is_write, data, len, ts);
		return;
	}
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
	if (!e) {
		e = http_parser__feed(p, data, len, ts);
		if (e == HTTP_ERR_UPGRADE) {
			size_t used = http_parser__upgrade_used(p);

			parser_failed(c, p, e, ts);
			/* what followed the 101 in the same piece is already HTTP/2 */
			if (c->kind == CONN_HTTP2 && used < len)
				h2conn__data(c->h2, is_write, data + used, len - used, ts);
			return;
		}
	}
	if (e)
		parser_failed(c, p, e, ts);
}

void conn__missing(struct conn *c, bool is_write, uint64_t n, uint64_t ts)
{
	struct http_parser *p;
	enum http_error e;

	if (c->kind == CONN_HTTP2) {
		h2conn__missing(c->h2, is_write, n, ts);
		return;
	}
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
	if (c->kind == CONN_HTTP2) {
		h2conn__lost(c->h2, ts, reason);
		return;
	}
	if (c->kind != CONN_HTTP1)
		return;
	abandon_inflight(c, ts, reason);
	http_parser__gap(c->req_parser, UINT64_MAX, ts);
	http_parser__gap(c->resp_parser, UINT64_MAX, ts);
}

void conn__close(struct conn *c, uint64_t ts, const char *reason)
{
	if (c->kind == CONN_HTTP2) {
		h2conn__close(c->h2, ts, reason);
		return;
	}
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
