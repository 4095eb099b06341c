// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "proto/grpc.h"
#include "proto/h2.h"
#include "proto/hpack.h"
#include "proto/http1.h"
#include "llm/dialect.h"
#include "llm/grpc_dialect.h"
#include "stream/h2_head.h"
#include "stream/h2conn.h"
#include "stream/response.h"

#define REQ_BODY_MAX (1u << 20) /* request JSON kept to read model and stream */

struct h2_stream {
	uint32_t id;
	struct request *req; /* NULL: opened before capture joined (counted, not measured) */
	struct response_reader rr;
	bool response_begun;
	bool sniff_body;	/* joined: the content type was unknown, the body's bytes decide */
	struct http_head head;	/* the response head, kept until the body decides */
	bool grpc, grpc_gzip;
	struct buf req_body;
	bool req_body_encoded;
	struct grpc_reader *req_grpc;
};

struct h2conn {
	struct wire_host host; /* what the connection lends */
	const struct conn_sink *sink;
	struct h2_counts *counts;
	struct h2_framer *fr[2]; /* [is_write] */
	struct hpack *hp[2];
	uint8_t preface_left[2]; /* client preface bytes still to skip in that direction */
	int client_dir;		 /* the direction requests travel in: 0 read, 1 write, -1 unknown */
	const char *comm;	 /* the process's command name (the owner's) */
	bool joined;		 /* capture began after the preface */
	bool join_undecided;	 /* classified by frames, not counted yet (decide_joined) */
	bool join_counted;	 /* counted in counts->joined */
	bool dead;		 /* a framing error: nothing more is read */
	struct h2_stream **streams;
	size_t nstreams, cap;
	uint64_t streams_seen;
	int cur_dir;	      /* the direction being fed, for the framer callbacks */
	bool spoke[2];	      /* bytes were seen in that direction */
	bool blocks_seen;     /* a header block was decoded */
};

/* ---- streams ---- */

static struct h2_stream *find_stream(struct h2conn *h, uint32_t id)
{
	for (size_t i = 0; i < h->nstreams; i++) {
		if (h->streams[i]->id == id)
			return h->streams[i];
	}
	return NULL;
}

/* A stream past H2_STREAMS_MAX: counted, and by its process's command and role. */
static void untracked(struct h2conn *h)
{
	struct h2_counts *c = h->counts;
	const size_t max = sizeof(c->untracked_by) / sizeof(c->untracked_by[0]);
	int role = h->host.role(h->host.ctx);
	size_t i;

	c->streams_untracked++;
	for (i = 0; i < c->nuntracked_by; i++) {
		if (c->untracked_by[i].role == role && !strcmp(c->untracked_by[i].comm, h->comm))
			break;
	}
	if (i == c->nuntracked_by) {
		if (i == max)
			return; /* a ninth pair: in streams_untracked only (the http/2 line) */
		snprintf(c->untracked_by[i].comm, sizeof(c->untracked_by[i].comm), "%s", h->comm);
		c->untracked_by[i].role = role;
		c->nuntracked_by++;
	}
	c->untracked_by[i].n++;
}

static struct h2_stream *add_stream(struct h2conn *h, uint32_t id, struct request *r)
{
	struct h2_stream *s;

	if (h->nstreams >= H2_STREAMS_MAX) {
		untracked(h);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !array__reserve((void **)&h->streams, &h->cap, h->nstreams + 1,
				  sizeof(*h->streams))) {
		free(s);
		h->sink->counts->no_memory++;
		return NULL;
	}
	s->id = id;
	s->req = r;
	h->streams[h->nstreams++] = s;
	if (h->nstreams > h->counts->max_concurrent)
		h->counts->max_concurrent = h->nstreams;
	return s;
}

static void free_stream(struct h2conn *h, struct h2_stream *s)
{
	for (size_t i = 0; i < h->nstreams; i++) {
		if (h->streams[i] == s) {
			h->streams[i] = h->streams[--h->nstreams];
			break;
		}
	}
	response__reset(&s->rr);
	buf__free(&s->req_body);
	grpc_reader__free(s->req_grpc);
	free(s);
}

/* The stream is over: its request (reason NULL: it ended whole) goes to the sink. */
static void end_stream(struct h2conn *h, struct h2_stream *s, const char *reason, uint64_t ts)
{
	struct request *r = s->req;

	if (r) {
		if (r->headers_partial)
			h->counts->headers_partial++;
		if (!reason) {
			response__end(&s->rr, ts);
			r->end_ns = ts;
			r->response_done = true;
		}
		s->req = NULL;
		h->host.end_request(h->host.ctx, r, reason, ts);
	}
	free_stream(h, s);
}

/* Every stream ends with reason; lossy: bytes of them were lost (no figures, not wrong ones). */
static void end_all(struct h2conn *h, const char *reason, bool lossy, uint64_t ts)
{
	while (h->nstreams) {
		struct h2_stream *s = h->streams[0];

		if (s->req && lossy)
			s->req->lossy = true;
		end_stream(h, s, reason, ts);
	}
}

/* A frame of a stream whose start capture did not see (it opened before the join, or its
 * start was lost): counted once, its frames skipped until it ends. */
static struct h2_stream *unseen(struct h2conn *h, const struct h2_frame *f)
{
	struct h2_stream *s;

	if (!f->stream || !(h->joined || h->client_dir < 0))
		return NULL;
	s = add_stream(h, f->stream, NULL);
	if (s)
		h->counts->streams_unseen_start++;
	return s;
}

/* ---- header blocks ---- */

static void on_request_message(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct h2_stream *s = ctx;

	if (s->req)
		grpc_dialect__request_message(s->req, data, len);
}

/* A request's HEADERS on a new stream. */
static void request_head(struct h2conn *h, const struct h2_frame *f, const struct h2_head *hd)
{
	struct request *r;
	struct h2_stream *s;

	r = h->host.begin_request(h->host.ctx, f->start_ns);
	if (!r)
		return;
	s = add_stream(h, f->stream, r);
	if (!s) {
		request__free(r);
		return;
	}
	h->streams_seen++;
	h->counts->streams++;
	r->http_version = 2;
	r->stream_id = f->stream;
	r->headers_partial = hd->partial || !hd->has_path;
	snprintf(r->method, sizeof(r->method), "%s", hd->has_method ? hd->method : "");
	request__set_traceparent(r, hd->traceparent);
	if (!request__set_tracestate(r, hd->tracestate))
		h->sink->counts->no_memory++;
	request__set_user_agent(r, hd->user_agent);
	if (hd->has_path && !request__set_path(r, hd->path))
		h->sink->counts->no_memory++;
	s->grpc = h2_head__is_grpc(hd->ctype);
	s->grpc_gzip = !strcasecmp(hd->grpc_encoding, "gzip");
	if (s->grpc) {
		r->api = grpc_dialect__from_path(r->path);
		r->stream = r->api == API_TRITON && strstr(r->path, "Stream") ? 1 : -1;
		s->req_grpc = grpc_reader__new(s->grpc_gzip, on_request_message, s);
	} else {
		dialect__request_head(r);
	}
	s->req_body_encoded = hd->encoding[0] && http__encoding_of(hd->encoding) != HTTP_ENC_IDENTITY;
}

/* The response's HEADERS (the head, or trailers after it). */
static void response_head(struct h2conn *h, struct h2_stream *s, const struct h2_head *hd,
			  uint64_t ts)
{
	struct http_head head = { .content_length = -1 };

	if (!s->req)
		return;
	if (hd->partial)
		s->req->headers_partial = true;
	if (!s->response_begun && hd->has_status && hd->status < 200)
		return; /* interim (100 Continue, 103): the real head follows */
	if (!s->response_begun) {
		bool grpc = s->grpc || h2_head__is_grpc(hd->ctype);

		s->response_begun = true;
		head.status = hd->has_status ? hd->status : 0;
		head.encoding = http__encoding_of(hd->encoding);
		head.ctype = http__ctype_of(hd->ctype);
		if (grpc && !strcasecmp(hd->grpc_encoding, "gzip"))
			s->grpc_gzip = true;
		if (hd->partial && !hd->ctype[0] && !grpc) {
			/* its content-type was a table entry from before the join */
			s->sniff_body = true;
			s->head = head;
			s->req->status = head.status;
			s->req->response_ns = ts;
			return;
		}
		response__begin(&s->rr, s->req, &head, grpc, s->grpc_gzip, h->sink, ts);
		if (grpc && !s->grpc) { /* the path did not say; the response does */
			s->grpc = true;
			s->req->api = grpc_dialect__from_path(s->req->path);
		}
	}
	if (hd->grpc_status[0]) /* trailers, or a trailers-only response */
		grpc_dialect__status(s->req, hd->grpc_status, strlen(hd->grpc_status),
				     hd->grpc_message, strlen(hd->grpc_message));
}

/* Who is the client, if this block says it. */
static void learn_role(struct h2conn *h, const struct h2_head *hd)
{
	if (h->client_dir >= 0)
		return;
	if (hd->has_method)
		h->client_dir = h->cur_dir;
	else if (hd->has_status)
		h->client_dir = !h->cur_dir;
	else
		return;
	h->host.set_role(h->host.ctx, h->client_dir ? ROLE_CLIENT : ROLE_SERVER);
}

static void on_headers(void *ctx, const struct h2_frame *f, uint8_t *block, size_t len,
		       bool truncated, uint64_t ts)
{
	struct h2conn *h = ctx;
	struct hpack *hp = h->hp[h->cur_dir];
	struct h2_head hd = { 0 };
	struct h2_stream *s;

	h->blocks_seen = true;
	if (truncated)
		hpack__lose(hp); /* the table followed bytes we did not keep */
	if (truncated || hpack__decode(hp, block, len, h2_head__field, &hd) < 0) {
		h->counts->hpack_errors++;
		hd.partial = true;
	}
	if (f->type == H2_PUSH_PROMISE)
		return; /* decoded for the table; pushed streams are not requests */
	learn_role(h, &hd);
	s = find_stream(h, f->stream);
	if (h->client_dir == h->cur_dir) {
		/* a new stream's request (trailers of a request end nothing we measure) */
		if (!s && (!h->joined || hd.has_method || hd.has_path || hd.partial))
			request_head(h, f, &hd);
		return;
	}
	if (!s)
		s = unseen(h, f);
	if (!s || !s->req) {
		if (s && (f->flags & H2_F_END_STREAM))
			free_stream(h, s);
		return;
	}
	response_head(h, s, &hd, ts);
	if (f->flags & H2_F_END_STREAM)
		end_stream(h, s, NULL, ts);
}

/* ---- DATA ---- */

/* A response body whose content type was not known: SSE by its first field name, NDJSON when
 * a JSON object's line ends before the piece does, else one JSON body (gzip, known by its
 * magic, is read as JSON: its text cannot be looked at before it is decoded). */
static void sniff_type(struct http_head *head, const uint8_t *d, size_t n)
{
	static const char *const sse[] = { "data:", "event:", "id:", ":", "retry:" };
	const uint8_t *nl;

	if (n >= 2 && d[0] == 0x1f && d[1] == 0x8b) {
		head->encoding = HTTP_ENC_GZIP;
		head->ctype = HTTP_CT_JSON;
		return;
	}
	for (size_t i = 0; i < sizeof(sse) / sizeof(sse[0]); i++) {
		if (n >= strlen(sse[i]) && !memcmp(d, sse[i], strlen(sse[i]))) {
			head->ctype = HTTP_CT_SSE;
			head->encoding = HTTP_ENC_IDENTITY;
			return;
		}
	}
	nl = memchr(d, '\n', n);
	head->ctype = d[0] == '{' && nl && nl + 1 < d + n ? HTTP_CT_NDJSON : HTTP_CT_JSON;
}

static void request_data(struct h2conn *h, struct h2_stream *s, const uint8_t *data, size_t len,
			 bool end)
{
	struct request *r = s->req;

	if (s->grpc) {
		if (s->req_grpc && len)
			grpc_reader__feed(s->req_grpc, data, len, 0);
	} else if (!s->req_body_encoded && len) {
		buf__add(&s->req_body, data, len, REQ_BODY_MAX);
	}
	if (!end)
		return;
	if (!s->grpc && !s->req_body_encoded && !s->req_body.overflow && s->req_body.len)
		dialect__request_body(h->sink->json, r, s->req_body.p, s->req_body.len);
	/* freed, not kept: a prompt can be megabytes, and a stream may run for minutes */
	buf__free(&s->req_body);
}

static void on_data(void *ctx, const struct h2_frame *f, const uint8_t *data, size_t len,
		    bool last, uint64_t ts)
{
	struct h2conn *h = ctx;
	struct h2_stream *s = find_stream(h, f->stream);
	bool end = last && (f->flags & H2_F_END_STREAM);

	if (!s)
		s = unseen(h, f);
	if (!s || !s->req) {
		if (s && end)
			free_stream(h, s);
		return;
	}
	if (h->cur_dir == h->client_dir) {
		request_data(h, s, data, len, end);
		return;
	}
	if (!s->response_begun) {
		request__error(s->req, "h2_data_before_headers");
		return;
	}
	if (s->sniff_body && len) {
		s->sniff_body = false;
		sniff_type(&s->head, data, len);
		response__begin(&s->rr, s->req, &s->head, false, false, h->sink, s->req->response_ns);
	}
	response__body(&s->rr, data, len, ts);
	if (end)
		end_stream(h, s, NULL, ts);
}

/* ---- control frames ---- */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *h2_error_name(uint32_t code)
{
	static const char *const names[] = {
		"no_error",	  "protocol_error", "internal_error",	   "flow_control_error",
		"settings_timeout", "stream_closed",  "frame_size_error",	   "refused_stream",
		"cancel",	  "compression_error", "connect_error",	   "enhance_your_calm",
		"inadequate_security", "http_1_1_required",
	};

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "unknown";
}

static void settings(struct h2conn *h, const uint8_t *p, size_t n)
{
	/* what this side announces holds for what it receives: the other direction */
	int other = !h->cur_dir;

	for (size_t i = 0; i + 6 <= n; i += 6) {
		uint16_t id = (uint16_t)(p[i] << 8 | p[i + 1]);
		uint32_t v = be32(p + i + 2);

		if (id == H2_SETTINGS_HEADER_TABLE_SIZE)
			hpack__set_max_table(h->hp[other], v);
		else if (id == H2_SETTINGS_MAX_FRAME_SIZE)
			h2_framer__set_max_frame(h->fr[other], v);
	}
}

static void on_frame(void *ctx, const struct h2_frame *f, const uint8_t *p, size_t n,
		     uint64_t ts)
{
	struct h2conn *h = ctx;
	struct h2_stream *s;
	char why[40];

	switch (f->type) {
	case H2_SETTINGS:
		if (!(f->flags & H2_F_ACK) && !f->stream)
			settings(h, p, n);
		break;
	case H2_RST_STREAM:
		s = find_stream(h, f->stream);
		if (!s || n < 4)
			break;
		h->counts->reset_streams++;
		snprintf(why, sizeof(why), "rst_stream_%s", h2_error_name(be32(p)));
		end_stream(h, s, why, ts);
		break;
	case H2_GOAWAY:
		if (n < 8)
			break;
		h->counts->goaway++;
		/* The last stream id speaks of the streams the GOAWAY's receiver opened (RFC 9113
		 * 6.8): the requests are the client's streams, so only the server's GOAWAY ends
		 * any. A client's tells the server it will open no more, and its own streams go on
		 * to their ends. The client's direction is known once a request has been seen. */
		if (h->client_dir < 0 || h->cur_dir == h->client_dir)
			break;
		snprintf(why, sizeof(why), "goaway_%s", h2_error_name(be32(p + 4)));
		for (size_t i = 0; i < h->nstreams;) {
			s = h->streams[i];
			if (s->id > (be32(p) & 0x7fffffffu))
				end_stream(h, s, why, ts);
			else
				i++;
		}
		break;
	default: /* PING, WINDOW_UPDATE, PRIORITY: nothing a request needs */
		break;
	}
}

static void on_headers_part(void *ctx, const struct h2_frame *f, uint8_t *block, size_t len)
{
	struct h2conn *h = ctx;

	hpack__mask_part(h->hp[h->cur_dir], block, len);
}

static const struct h2_callbacks h2_callbacks = {
	.on_data = on_data,
	.on_headers = on_headers,
	.on_headers_part = on_headers_part,
	.on_frame = on_frame,
};

/* ---- the connection ---- */

static void h2_free(void *w);
static void expect_preface(struct h2conn *h, bool is_write);
static void adopt(struct h2conn *h, struct request *r);

/* Seen from its start (the client preface, or an h2c upgrade: how->carried goes on as stream
 * 1), or joined mid-way, recognised by its frames. */
static void *h2_open(const struct wire_host *host, const struct wire_start *how)
{
	struct h2conn *h = calloc(1, sizeof(*h));
	bool from_preface = how->from_start;

	if (!h)
		return NULL;
	h->host = *host;
	h->comm = host->comm;
	h->sink = host->sink;
	h->counts = h->sink->h2;
	h->joined = !from_preface;
	h->client_dir = -1;
	for (int d = 0; d < 2; d++) {
		h->fr[d] = h2_framer__new(&h2_callbacks, h);
		h->hp[d] = hpack__new(from_preface);
		if (!h->fr[d] || !h->hp[d]) {
			h2_free(h);
			return NULL;
		}
		/* joined: the peer may have raised the limit before we looked */
		if (!from_preface)
			h2_framer__set_max_frame(h->fr[d], H2_LARGEST_MAX_FRAME);
	}
	h->counts->connections++;
	h->join_undecided = h->joined;
	if (from_preface)
		expect_preface(h, how->client_is_write);
	if (how->carried)
		adopt(h, how->carried);
	return h;
}

static void h2_free(void *w)
{
	struct h2conn *h = w;

	if (!h)
		return;
	while (h->nstreams) {
		struct h2_stream *s = h->streams[0];

		request__free(s->req);
		s->req = NULL;
		free_stream(h, s);
	}
	free(h->streams);
	for (int d = 0; d < 2; d++) {
		h2_framer__free(h->fr[d]);
		hpack__free(h->hp[d]);
	}
	if (h->streams_seen > h->counts->max_streams_per_conn)
		h->counts->max_streams_per_conn = h->streams_seen;
	free(h);
}

/* The client writes the preface in the direction is_write: skipped there. */
static void expect_preface(struct h2conn *h, bool is_write)
{
	h->preface_left[is_write] = H2_PREFACE_LEN;
	h->client_dir = is_write;
}

/* An h2c upgrade's request, which goes on as stream 1. */
static void adopt(struct h2conn *h, struct request *r)
{
	struct h2_stream *s = add_stream(h, 1, r);

	if (!s) {
		h->host.end_request(h->host.ctx, r, "no_memory", r->start_ns);
		return;
	}
	h->streams_seen++;
	h->counts->streams++;
	r->http_version = 2;
	r->stream_id = 1;
}

static void framer_failed(struct h2conn *h, enum h2_error e, uint64_t ts)
{
	if (e == H2_ERR_LOST_SYNC) {
		hpack__lose(h->hp[h->cur_dir]);
		end_all(h, "capture_loss", true, ts);
		return;
	}
	h->dead = true;
	h->counts->frame_errors++;
	h->sink->counts->malformed++;
	end_all(h, h2_error__str(e), true, ts);
}

/* A server may send its SETTINGS before it reads the client's preface: a connection taken
 * for joined by its first frames turns out to be seen from its start when the preface is the
 * first thing the other direction says, before any header block. Decoded exactly from here. */
static void seen_from_start(struct h2conn *h, bool client_is_write)
{
	for (int d = 0; d < 2; d++) {
		struct hpack *exact = hpack__new(true);

		if (!exact)
			return; /* stays partial: honest, if less */
		hpack__free(h->hp[d]);
		h->hp[d] = exact;
	}
	h->joined = h->join_undecided = false;
	if (h->join_counted)
		h->counts->joined--;
	h->join_counted = false;
	expect_preface(h, client_is_write);
	h->host.set_role(h->host.ctx, client_is_write ? ROLE_CLIENT : ROLE_SERVER);
}

static bool is_preface(const uint8_t *data, size_t len)
{
	return !memcmp(data, H2_PREFACE, len < H2_PREFACE_LEN ? len : H2_PREFACE_LEN);
}

/* Whether a connection first seen as frames was joined, from the first bytes of each of its
 * directions. A server's first frame is a SETTINGS (RFC 9113 3.4): a connection whose first
 * frame is one (not an ACK) was seen from its start, unless its other direction then begins
 * with anything but the client's preface. A client that never speaks (openssl s_client
 * before anything is typed) leaves a connection seen from its start, as it was. */
static void decide_joined(struct h2conn *h, bool is_write, const uint8_t *data, size_t len)
{
	if (!h->join_undecided || h->spoke[is_write])
		return;
	if (!h->spoke[!is_write] && len >= 9 && data[3] == H2_SETTINGS && !(data[4] & H2_F_ACK) &&
	    !data[5] && !data[6] && !data[7] && !data[8])
		return; /* the server's preface, it seems: the other direction will tell */
	if (h->spoke[!is_write] && is_preface(data, len))
		return; /* the client's preface after the server's: seen_from_start */
	h->join_undecided = false;
	h->join_counted = true;
	h->counts->joined++;
}

static void h2_data(void *w, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct h2conn *h = w;
	size_t skip;
	enum h2_error e;

	if (h->dead) {
		memset(data, 0, len); /* not read: may hold header blocks no one masks */
		return;
	}
	decide_joined(h, is_write, data, len);
	if (h->joined && !h->spoke[is_write] && !h->blocks_seen && is_preface(data, len))
		seen_from_start(h, is_write);
	h->spoke[is_write] = true;
	skip = h->preface_left[is_write] < len ? h->preface_left[is_write] : len;
	if (skip) {
		const char *want = &H2_PREFACE[H2_PREFACE_LEN - h->preface_left[is_write]];

		if (memcmp(data, want, skip)) { /* not HTTP/2 after all (an h2c upgrade gone wrong) */
			memset(data, 0, len);
			h->dead = true;
			h->counts->frame_errors++;
			h->sink->counts->malformed++;
			end_all(h, "h2_bad_preface", true, ts);
			return;
		}
		h->preface_left[is_write] -= (uint8_t)skip;
		if (skip == len)
			return;
	}
	h->cur_dir = is_write;
	e = h2_framer__feed(h->fr[is_write], data + skip, len - skip, ts);
	if (e)
		framer_failed(h, e, ts);
}

static void h2_missing(void *w, bool is_write, uint64_t n, uint64_t ts)
{
	struct h2conn *h = w;
	uint32_t id = h2_framer__data_stream(h->fr[is_write]);
	struct h2_stream *s = id ? find_stream(h, id) : NULL;
	enum h2_error e;

	if (h->dead)
		return;
	if (s && s->req && (int)is_write != h->client_dir) {
		s->req->lossy = true; /* lost response bytes may have held token events */
		request__error(s->req, "capture_loss");
	}
	h->cur_dir = is_write;
	e = h2_framer__gap(h->fr[is_write], n, ts);
	if (e)
		framer_failed(h, e, ts);
}

static void h2_lost(void *w, uint64_t ts, const char *reason)
{
	struct h2conn *h = w;

	for (int d = 0; d < 2; d++) {
		h2_framer__gap(h->fr[d], UINT64_MAX, ts);
		hpack__lose(h->hp[d]);
	}
	end_all(h, reason, true, ts);
}

static void h2_close(void *w, uint64_t ts, const char *reason)
{
	end_all(w, reason, false, ts);
}

static size_t h2_inflight(const void *w)
{
	const struct h2conn *h = w;

	return h->nstreams;
}

static void h2_set_addresses(void *w, const struct conn_addr *a)
{
	struct h2conn *h = w;

	for (size_t i = 0; i < h->nstreams; i++) {
		if (h->streams[i]->req)
			request__set_addr(h->streams[i]->req, a);
	}
}

static void h2_each_open(const void *w, open_request_fn fn, void *ctx)
{
	const struct h2conn *h = w;

	for (size_t i = 0; i < h->nstreams; i++) {
		if (h->streams[i]->req)
			fn(ctx, h->streams[i]->req);
	}
}

const struct wire_ops h2_wire = {
	.name = "http/2",
	.kind = CONN_HTTP2,
	.open = h2_open,
	.free = h2_free,
	.data = h2_data,
	.missing = h2_missing,
	.lost = h2_lost,
	.close = h2_close,
	.inflight = h2_inflight,
	.each_open = h2_each_open,
	.set_addresses = h2_set_addresses,
};
