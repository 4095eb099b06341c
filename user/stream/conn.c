// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The connection's shell (stream/conn.h): identity, addresses, role, and which wire protocol
 * its first bytes are. Everything after that is the protocol's reader (stream/wire.h), which
 * gets what it needs from the host made here and never calls back into this file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/h2.h"
#include "proto/http1.h"
#include "proto/zmtp.h"
#include "engine/engine_wire.h"
#include "stream/conn.h"
#include "stream/wire.h"

#define SNIFF_MAX (64u << 10)	 /* bytes before a stream that never looks like HTTP is "other" */

struct conn {
	struct stream_key key;
	char comm[TS_COMM_LEN];
	struct conn_addr addr;
	uint32_t peer_pid; /* unix: the other end's process (0: unknown) */
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

	/* Once classified: the protocol's reader, and what it was lent. */
	const struct wire_ops *wire;
	void *reader;
	struct wire_host host;
};

/* ---- what the connection lends its reader ---- */

static struct request *begin_request(void *ctx, uint64_t start_ns)
{
	struct conn *c = ctx;
	struct request *r = request__new();

	if (!r) {
		c->sink->counts->no_memory++;
		return NULL;
	}
	r->id = ++*c->sink->next_id;
	r->on_first_token = c->sink->on_first_token;
	r->hook_ctx = c->sink->ctx;
	r->pid = c->key.pid;
	memcpy(r->comm, c->comm, sizeof(r->comm));
	r->transport = transport__name(c->key.transport);
	request__set_addr(r, &c->addr);
	r->peer_pid = c->peer_pid;
	r->role = c->role;
	r->start_ns = start_ns;
	return r;
}

static void end_request(void *ctx, struct request *r, const char *reason, uint64_t ts)
{
	struct conn *c = ctx;

	if (!r->peer_pid) /* a Unix socket's peer learnt after the request began */
		r->peer_pid = c->peer_pid;
	/* a dead peer says why a request ended, unless bytes were lost: that says its figures
	 * may be short, which matters more */
	if (reason)
		request__error(r, "%s", c->peer_exited && strcmp(reason, "capture_loss")
						? "peer_exited"
						: reason);
	if (!r->end_ns)
		r->end_ns = ts;
	c->sink->on_request(c->sink->ctx, r);
}

static int role_of(void *ctx)
{
	const struct conn *c = ctx;

	return c->role_known ? (int)c->role : -1;
}

static void set_role(void *ctx, enum role role)
{
	struct conn *c = ctx;

	c->role = role;
	c->role_known = true;
}

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
	c->host = (struct wire_host){ .sink = sink, .comm = c->comm, .pid = key->pid, .ctx = c,
				      .begin_request = begin_request, .end_request = end_request,
				      .role = role_of, .set_role = set_role };
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
	if (c->reader)
		c->wire->free(c->reader);
	free(c);
}

enum conn_kind conn__kind(const struct conn *c)
{
	return c->kind;
}

size_t conn__inflight(const struct conn *c)
{
	return c->reader ? c->wire->inflight(c->reader) : 0;
}

void conn__each_open(const struct conn *c, open_request_fn fn, void *ctx)
{
	if (c->reader)
		c->wire->each_open(c->reader, fn, ctx);
}

const struct stream_key *conn__key(const struct conn *c)
{
	return &c->key;
}

const char *transport__name(enum transport t)
{
	return t == TRANSPORT_TCP ? "tcp" : t == TRANSPORT_GO_TLS ? "go_tls" :
	       t == TRANSPORT_UNIX ? "unix" : "tls";
}

static void addresses_changed(struct conn *c)
{
	if (c->reader)
		c->wire->set_addresses(c->reader, &c->addr);
}

void conn__set_addresses(struct conn *c, const char *local, const char *peer)
{
	snprintf(c->addr.local, sizeof(c->addr.local), "%s", local);
	snprintf(c->addr.peer, sizeof(c->addr.peer), "%s", peer);
	addresses_changed(c);
}

void conn__set_netns(struct conn *c, uint32_t netns)
{
	if (c->addr.netns == netns)
		return;
	c->addr.netns = netns;
	addresses_changed(c);
}

void conn__set_nat(struct conn *c, const char *nat_local, const char *nat_peer)
{
	snprintf(c->addr.nat_local, sizeof(c->addr.nat_local), "%s", nat_local);
	snprintf(c->addr.nat_peer, sizeof(c->addr.nat_peer), "%s", nat_peer);
	addresses_changed(c);
}

void conn__set_peer_pid(struct conn *c, uint32_t pid)
{
	c->peer_pid = pid;
}

bool conn__is_peer(const struct conn *a, const struct conn *b)
{
	return a->addr.peer[0] && b->addr.peer[0] && !strcmp(a->addr.local, b->addr.peer) &&
	       !strcmp(a->addr.peer, b->addr.local) &&
	       conn_addr__may_meet(a->addr.netns, b->addr.netns, a->addr.local, a->addr.peer);
}

void conn__peer_exited(struct conn *c)
{
	if (conn__inflight(c))
		c->peer_exited = true;
}

bool conn__has_addresses(const struct conn *c)
{
	return c->addr.peer[0] != 0;
}

/* ---- which protocol ---- */

/* Could these bytes still grow into a request line or the HTTP/2 preface? */
static bool could_start(const uint8_t *d, size_t n)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

	return http__could_start_request(d, n) ||
	       (n < sizeof(preface) - 1 && !memcmp(d, preface, n));
}

/* The connection speaks wire from here. Returns false when there is no memory for its reader
 * (then "other", counted). */
static bool speak(struct conn *c, const struct wire_ops *wire, const struct wire_start *how)
{
	c->wire = wire;
	c->kind = wire->kind;
	c->reader = wire->open(&c->host, how);
	if (!c->reader) {
		c->sink->counts->no_memory++;
		c->kind = CONN_OTHER;
		return false;
	}
	return true;
}

/* The role, from the direction the first request travels in. */
static void role_from(struct conn *c, bool is_write)
{
	c->role = is_write ? ROLE_CLIENT : ROLE_SERVER;
	c->role_known = true;
}

/*
 * Decide what the connection carries, one row per protocol: the HTTP/2 client preface, an
 * HTTP/1.1 request line, HTTP/2 frames (joined after the preface). Bytes that could still
 * grow into one are held back (pending), and go to the reader first. Returns false while
 * undecided.
 */
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
		role_from(c, is_write);
		return speak(c, &h2_wire, &(struct wire_start){ .from_start = true,
								.client_is_write = is_write });
	}
	if (http__looks_like_request(head, n)) {
		role_from(c, is_write);
		return speak(c, &http1_wire, &(struct wire_start){ .from_start = true,
								   .client_is_write = is_write });
	}
	/* ZeroMQ: its greeting (a connection seen from its start), or, joined, an engine wire's
	 * frames (no greeting to start from: the reader finds message starts) */
	if (n >= 10 && zmtp__looks_like_greeting(head, n))
		return speak(c, &zmtp_wire, &(struct wire_start){ .from_start = true,
								  .client_is_write = is_write });
	if (!c->npending && engine_wires__look_like_frames(data, len))
		return speak(c, &zmtp_wire, &(struct wire_start){ .client_is_write = is_write });
	if (could_start(head, n) || (n < 10 && zmtp__looks_like_greeting(head, n))) {
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
		return speak(c, &h2_wire, &(struct wire_start){ .client_is_write = is_write });
	/* Joined mid-connection or not HTTP: wait for a request to start, but not forever. */
	c->npending = 0;
	c->sniffed += len;
	if (c->sniffed > SNIFF_MAX)
		c->kind = CONN_OTHER;
	return false;
}

/* After the reader read bytes: a 101 may have made the connection another protocol, from
 * the byte after it (rest: what followed it in the same piece). */
static void follow_switch(struct conn *c, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct wire_switch sw;

	if (!c->wire->switched || !c->wire->switched(c->reader, &sw))
		return;
	c->wire->free(c->reader);
	c->reader = NULL;
	c->kind = CONN_OTHER; /* a WebSocket, or anything else: not read */
	if (sw.to != CONN_HTTP2)
		return;
	/* h2c: the request that asked for it goes on as stream 1 */
	if (!speak(c, &h2_wire, &(struct wire_start){ .from_start = true,
						      .client_is_write = c->role == ROLE_CLIENT,
						      .carried = sw.carried })) {
		if (sw.carried)
			end_request(c, sw.carried, "no_memory", ts);
		return;
	}
	if (data && sw.used < len)
		c->wire->data(c->reader, is_write, data + sw.used, len - sw.used, ts);
}

void conn__data(struct conn *c, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	if (c->kind == CONN_UNKNOWN && !classify(c, is_write, data, len, ts))
		return;
	if (!c->reader)
		return;
	if (c->npending) {
		/* Bytes held back while classifying; they keep their own time. */
		size_t n = c->npending;

		c->npending = 0;
		c->wire->data(c->reader, is_write, c->pending, n, c->pending_ts);
		follow_switch(c, is_write, NULL, 0, ts);
		if (!c->reader)
			return;
	}
	c->wire->data(c->reader, is_write, data, len, ts);
	follow_switch(c, is_write, data, len, ts);
}

void conn__missing(struct conn *c, bool is_write, uint64_t n, uint64_t ts)
{
	if (!c->reader)
		return;
	c->wire->missing(c->reader, is_write, n, ts);
	follow_switch(c, is_write, NULL, 0, ts);
}

void conn__lost(struct conn *c, uint64_t ts, const char *reason)
{
	if (c->reader)
		c->wire->lost(c->reader, ts, reason);
}

void conn__close(struct conn *c, uint64_t ts, const char *reason)
{
	if (c->reader)
		c->wire->close(c->reader, ts, reason);
}
