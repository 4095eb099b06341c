// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Client <-> server matching (match.h). The last MATCH_KEEP finished requests are kept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "llm/request.h"
#include "stream/match.h"

/* kept in a ring that grows by doubling up to this (array__reserve, from 16): a pipeline for
 * a few requests (a unit test's, a fuzz input's, a short replay's) does not clear 2.8 MB */
#define MATCH_KEEP 8192
#define MATCH_HOPS 4			 /* proxies followed, at most */
#define MATCH_EARLY_NS (1000000ull)	 /* a server may read the request before the client's
					    write returned (timestamped at its return) */
/* Added to an upstream call's fit when its model is not its proxy request's: a call for the
 * same model always fits better, and a gateway that renames models is still followed. */
#define MATCH_OTHER_MODEL_NS (1ull << 50)
/* Added where the call's token events are not as many as its proxy request's: a proxy passes
 * each event on (however it cuts them into writes), so the call with the request's count
 * always fits better; a gateway that re-chunks the stream is still followed. Times alone
 * crossed two of nginx's requests under a CPU hog: its upstream calls began 2 ms late, and
 * a neighbour's call, begun 0.1 ms after the other request, fitted that one better. */
#define MATCH_OTHER_EVENTS_NS (1ull << 49)

struct seen {
	uint64_t id;
	uint32_t pid;
	enum role role;
	/* its ends; a client's as its server sees them where NAT changed the connection */
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];
	uint32_t netns;	    /* 0: unknown */
	uint32_t stream_id; /* HTTP/2: both ends of a connection see one id a request; else 0 */
	uint64_t model;	    /* the requested model's hash (0: none) */
	uint64_t events;    /* token events */
	uint64_t start, first, end;
	bool used; /* a proxy's request and its upstream call, once matched to each other */
};

struct match {
	struct seen *v; /* a ring of cap, in the order requests finished */
	size_t n, next, cap;
};

/* The j-th newest kept request. */
static struct seen *newest(struct match *m, size_t j)
{
	return &m->v[(m->next + m->cap - 1 - j) % m->cap];
}

struct match *match__new(void)
{
	return calloc(1, sizeof(struct match));
}

void match__free(struct match *m)
{
	if (!m)
		return;
	free(m->v);
	free(m);
}

/* FNV-1a; 0 stands for no model. */
static uint64_t model_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	if (!s || !*s)
		return 0;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h ? h : 1;
}

/* The server record of client record c's connection, seen from the other end, on the same
 * HTTP/2 stream, begun within [c's start, to], in c's network namespace or one the connection
 * crossed. The stream tells a connection's concurrent requests apart, which time alone
 * cannot; the namespace two pods' connections between the same addresses. */
static struct seen *server_of(struct match *m, const struct seen *c, uint64_t to)
{
	const char *local = c->local, *peer = c->peer;
	uint64_t from = c->start;

	if (!local[0] || !peer[0])
		return NULL;
	for (size_t j = 0; j < m->n; j++) {
		struct seen *s = newest(m, j);

		if (s->end + MATCH_EARLY_NS < from)
			break; /* it, and all before it, ended before the client began */
		if (s->role == ROLE_SERVER && s->stream_id == c->stream_id &&
		    !strcmp(s->local, peer) && !strcmp(s->peer, local) &&
		    s->start + MATCH_EARLY_NS >= from && s->start <= to &&
		    conn_addr__may_meet(c->netns, s->netns, local, peer))
			return s;
	}
	return NULL;
}

/* How well upstream call c fits proxy server record s: a proxy passes the request on, and the
 * first token back, at once, and the same model and token events. UINT64_MAX: it cannot be
 * s's (begun outside s, or its first token after s wrote its own). The ends are no help: a
 * slow client holds the proxy's last write back. */
static uint64_t fit(const struct seen *s, const struct seen *c)
{
	if (c->pid != s->pid || c->start < s->start || c->start > s->end || !c->first ||
	    (s->first && c->first > s->first))
		return UINT64_MAX;
	return (c->start - s->start) + (s->first ? s->first - c->first : 0) +
	       (c->model != s->model ? MATCH_OTHER_MODEL_NS : 0) +
	       (c->events != s->events ? MATCH_OTHER_EVENTS_NS : 0);
}

/* Whether no other open request of the proxy fits c better than s does. */
static bool best_for(struct match *m, const struct seen *s, const struct seen *c, uint64_t cost)
{
	for (size_t j = 0; j < m->n; j++) {
		const struct seen *o = newest(m, j);

		if (o->end < c->start)
			break;
		if (o != s && o->role == ROLE_SERVER && !o->used && fit(o, c) < cost)
			return false;
	}
	return true;
}

/* The upstream call proxy server record s made for its request: of the calls that fit it and
 * are not matched yet, the best fitting one that fits no other of the proxy's requests better
 * (else the best fitting one). */
static struct seen *upstream_of(struct match *m, const struct seen *s)
{
	struct seen *best = NULL, *mutual = NULL;
	uint64_t best_cost = UINT64_MAX, mutual_cost = UINT64_MAX;

	for (size_t j = 0; j < m->n; j++) {
		struct seen *c = newest(m, j);
		uint64_t cost;

		if (c->end < s->start)
			break;
		if (c->role != ROLE_CLIENT || c->used || (cost = fit(s, c)) == UINT64_MAX)
			continue;
		if (cost < best_cost) {
			best = c;
			best_cost = cost;
		}
		if (cost < mutual_cost && best_for(m, s, c, cost)) {
			mutual = c;
			mutual_cost = cost;
		}
	}
	return mutual ? mutual : best;
}

/* Doubles the ring where it is full and its oldest is first (next 0): in order, so the new
 * half follows the newest. Without memory it stays as it is and keeps fewer. */
static void grow(struct match *m)
{
	if (m->n == m->cap && !m->next && m->cap < MATCH_KEEP &&
	    array__reserve((void **)&m->v, &m->cap, m->cap + 1, sizeof(*m->v)))
		m->next = m->n;
}

void match__request(struct match *m, struct request *r)
{
	struct seen *s, *srv;

	grow(m);
	s = &m->v[m->next];

	*s = (struct seen){ .id = r->id, .pid = r->pid, .role = r->role,
			    .stream_id = r->http_version == 2 ? r->stream_id : 0,
			    .netns = r->netns,
			    .model = model_hash(r->model), .events = r->token_events,
			    .start = r->start_ns,
			    .first = r->first_token_ns, .end = r->end_ns ? r->end_ns : r->last_token_ns };
	if (r->nat_peer[0]) {
		snprintf(s->local, sizeof(s->local), "%s", r->nat_local);
		snprintf(s->peer, sizeof(s->peer), "%s", r->nat_peer);
	} else {
		memcpy(s->local, r->local, sizeof(s->local));
		memcpy(s->peer, r->peer, sizeof(s->peer));
	}
	m->next = (m->next + 1) % m->cap;
	if (m->n < m->cap)
		m->n++;
	if (r->role != ROLE_CLIENT)
		return;
	srv = server_of(m, s, s->end);
	/* A server whose own process made a call that fits its request is a proxy: followed to
	 * the call's server. From the records alone, not from which processes live: a proxy may
	 * have exited (and been let go) before the records of its clients, which end later, are
	 * matched. */
	for (int hop = 0; srv && hop < MATCH_HOPS; hop++) {
		struct seen *up = upstream_of(m, srv), *next;

		if (!up)
			break;
		next = server_of(m, up, up->end);
		if (!next)
			break;
		up->used = srv->used = true;
		srv = next;
	}
	if (!srv)
		return;
	r->server_id = srv->id;
	if (r->first_token_ns && srv->first) {
		r->upstream_set = true;
		r->upstream_ns = (int64_t)(r->first_token_ns - r->start_ns) -
				 (int64_t)(srv->first - srv->start);
	}
}
