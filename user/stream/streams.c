// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The stream table (stream/streams.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "stream/health.h"
#include "stream/streams.h"

/*
 * Streams whose end was never seen (no SSL_free, no close: a process that keeps a connection
 * in a pool forever, a close the probes missed) would hold memory for the whole run. One idle
 * for IDLE_NS with nothing in flight is let go; one with a request in flight waits
 * IDLE_INFLIGHT_NS, then that request is reported incomplete (idle_timeout). Record time,
 * so a replay ages them exactly as the live run did.
 */
#define IDLE_NS (600ull * 1000000000ull)
#define IDLE_INFLIGHT_NS (3600ull * 1000000000ull)

static size_t bucket_of(const struct stream_key *k)
{
	uint64_t x = k->id ^ ((uint64_t)k->pid * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)k->transport << 62);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return x % STREAMS_BUCKETS;
}

void streams__init(struct streams *t, const struct conn_sink *sink, struct health *h)
{
	t->sink = sink;
	t->h = h;
}

void streams__free(struct streams *t)
{
	for (size_t b = 0; b < STREAMS_BUCKETS; b++) {
		while (t->buckets[b]) {
			struct stream *s = t->buckets[b];

			t->buckets[b] = s->next;
			if (conn__unref(s->conn)) /* shared after a fork: freed once */
				conn__free(s->conn);
			free(s);
		}
	}
	t->all = NULL;
}

static bool same_key(const struct stream_key *a, const struct stream_key *b)
{
	return a->pid == b->pid && a->transport == b->transport && a->id == b->id;
}

struct stream **streams__find(struct streams *t, const struct stream_key *key)
{
	struct stream **link = &t->buckets[bucket_of(key)];

	while (*link && !same_key(&(*link)->key, key))
		link = &(*link)->next;
	return link;
}

struct stream *streams__get(struct streams *t, const struct stream_key *key, const char *comm)
{
	struct stream **link = streams__find(t, key), *s = *link;

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->key = *key;
	s->conn = conn__new(key, comm, t->sink);
	if (!s->conn) {
		free(s);
		return NULL;
	}
	*link = s;
	s->all_next = t->all;
	if (t->all)
		t->all->all_pprev = &s->all_next;
	t->all = s;
	s->all_pprev = &t->all;
	t->not_tcp += key->transport != TRANSPORT_TCP;
	return s;
}

static void count_kind(struct health *h, const struct conn *c)
{
	switch (conn__kind(c)) {
	case CONN_HTTP1: h->streams_http1++; break;
	case CONN_HTTP2: h->streams_http2++; break;
	case CONN_OTHER: h->streams_other++; break;
	case CONN_ZMTP: h->streams_zmtp++; break;
	default: break;
	}
}

static void unindex_sock(struct streams *t, struct stream *s)
{
	if (!s->sock)
		return;
	for (struct stream **l = &t->by_sock[s->sock % STREAMS_BUCKETS]; *l; l = &(*l)->sock_next) {
		if (*l == s) {
			*l = s->sock_next;
			break;
		}
	}
	s->sock = 0;
}

void streams__index_sock(struct streams *t, struct stream *s, uint64_t sock)
{
	struct stream **bucket = &t->by_sock[sock % STREAMS_BUCKETS];

	unindex_sock(t, s);
	s->sock = sock;
	s->sock_next = *bucket;
	*bucket = s;
}

struct stream *streams__on_sock(struct streams *t, uint64_t sock)
{
	return t->by_sock[sock % STREAMS_BUCKETS];
}

void streams__drop(struct streams *t, struct stream **link, uint64_t ts, const char *why)
{
	struct stream *s = *link;

	if (s->last_ns < t->lost_ns)
		why = "capture_loss"; /* its end may be among the records the ring dropped */
	unindex_sock(t, s);
	/* a connection another process still carries (fork) lives on */
	if (conn__unref(s->conn)) {
		conn__close(s->conn, ts, why);
		count_kind(t->h, s->conn);
		conn__free(s->conn);
	}
	*link = s->next;
	*s->all_pprev = s->all_next;
	if (s->all_next)
		s->all_next->all_pprev = s->all_pprev;
	t->not_tcp -= s->key.transport != TRANSPORT_TCP;
	free(s);
}

void streams__close(struct streams *t, const struct stream_key *key, uint64_t ts,
		    const char *why)
{
	struct stream **link = streams__find(t, key);

	if (*link)
		streams__drop(t, link, ts, why);
}

void streams__tell_peers(struct streams *t, const struct conn *const *dead, size_t n)
{
	for (size_t b = 0; n && b < STREAMS_BUCKETS; b++) {
		for (struct stream *o = t->buckets[b]; o; o = o->next) {
			if (!conn__inflight(o->conn))
				continue;
			for (size_t i = 0; i < n; i++) {
				if (o->conn != dead[i] && conn__is_peer(o->conn, dead[i]))
					conn__peer_exited(o->conn);
			}
		}
	}
}

/*
 * Where the kernel's closes of pid's sockets follow (sockets_follow), its plaintext streams
 * end with those closes, and so do its TLS streams on a socket: after a fork the other process
 * may carry on with the same SSL object and socket (stream/tls_link.c), and the socket then
 * stays open. Its other TLS streams end now. A recording made before those closes were
 * recorded ends all its streams now, as it did then.
 */
void streams__exit(struct streams *t, uint32_t pid, uint64_t ts, bool sockets_follow)
{
	const struct conn **dead = NULL;
	size_t n = 0, cap = 0;

	if (sockets_follow && !t->not_tcp)
		return; /* its TCP streams end with their sockets' closes */
	for (size_t b = 0; b < STREAMS_BUCKETS; b++) {
		for (struct stream *s = t->buckets[b]; s; s = s->next) {
			if (s->key.pid != pid || (sockets_follow && s->key.transport == TRANSPORT_TCP))
				continue;
			if (sockets_follow && s->sock)
				s->orphaned = true;
			else if (conn__has_addresses(s->conn) && !conn__shared(s->conn) &&
				 array__reserve((void **)&dead, &cap, n + 1, sizeof(*dead)))
				dead[n++] = s->conn;
		}
	}
	streams__tell_peers(t, dead, n);
	free(dead);
	for (size_t b = 0; b < STREAMS_BUCKETS; b++) {
		struct stream **link = &t->buckets[b];

		while (*link) {
			struct stream *s = *link;

			if (s->key.pid == pid && !s->orphaned &&
			    (!sockets_follow || s->key.transport != TRANSPORT_TCP))
				streams__drop(t, link, ts, "process_exited");
			else
				link = &s->next;
		}
	}
}

void streams__sweep_idle(struct streams *t, uint64_t now)
{
	for (size_t b = 0; b < STREAMS_BUCKETS; b++) {
		struct stream **link = &t->buckets[b];

		while (*link) {
			struct stream *s = *link;
			uint64_t idle = now - s->last_ns;

			if (s->last_ns && now > s->last_ns &&
			    idle > (conn__inflight(s->conn) ? IDLE_INFLIGHT_NS : IDLE_NS)) {
				t->h->streams_aged_out++;
				streams__drop(t, link, now, "idle_timeout");
				continue;
			}
			link = &s->next;
		}
	}
}

void streams__finish(struct streams *t, uint64_t ts)
{
	for (size_t b = 0; b < STREAMS_BUCKETS; b++) {
		while (t->buckets[b])
			streams__drop(t, &t->buckets[b], ts, "capture_ended");
	}
}

void streams__each_open(const struct streams *t, open_request_fn fn, void *ctx)
{
	for (struct stream *s = t->all; s; s = s->all_next) {
		const struct stream_key *k = conn__key(s->conn);

		/* a connection two processes share: once, by the stream it was made for */
		if (k->pid == s->key.pid && k->id == s->key.id && k->transport == s->key.transport)
			conn__each_open(s->conn, fn, ctx);
	}
}

/* "1.2.3.4:80" or "[::1]:8080"; a Unix socket by its inode alone, "unix:#INODE", until its
 * path is known (stream__set_unix) */
static void format_addr(int family, const uint8_t *ip, uint16_t port, char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN] = "?";
	uint64_t ino;

	if (family == AF_UNIX) {
		memcpy(&ino, ip, sizeof(ino));
		snprintf(out, n, "unix:#%llu", (unsigned long long)ino);
	} else if (family == AF_INET6 && inet_ntop(AF_INET6, ip, a, sizeof(a)))
		snprintf(out, n, "[%s]:%u", a, port);
	else if (family == AF_INET && inet_ntop(AF_INET, ip, a, sizeof(a)))
		snprintf(out, n, "%s:%u", a, port);
	else
		out[0] = 0;
}

void stream__set_addresses(struct stream *s, const struct ts_sock_addr *a)
{
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];

	format_addr(a->family, a->laddr, a->lport, local, sizeof(local));
	format_addr(a->family, a->raddr, a->rport, peer, sizeof(peer));
	conn__set_addresses(s->conn, local, peer);
}

void stream__set_nat(struct stream *s, const struct ts_sock_addr *after)
{
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];

	if (after->family == AF_UNIX)
		return;
	format_addr(after->family, after->laddr, after->lport, local, sizeof(local));
	format_addr(after->family, after->raddr, after->rport, peer, sizeof(peer));
	conn__set_nat(s->conn, local, peer);
}

/* A Unix socket's path as it reads: "@name" for an abstract one, bytes past the printable
 * as '?' (a path is the application's, not ours to trust). */
static void unix_path(const struct ts_unix_sock *e, char *out, size_t n)
{
	uint32_t len = e->path_len < TS_UNIX_PATH_MAX ? e->path_len : TS_UNIX_PATH_MAX;
	size_t o = 0;

	for (uint32_t i = 0; i < len && o + 1 < n; i++) {
		unsigned char ch = (unsigned char)e->path[i];

		if (!i && !ch)
			out[o++] = '@';
		else if (!ch) /* a filesystem path ends at its NUL */
			break;
		else
			out[o++] = ch >= 0x20 && ch < 0x7f && ch != '#' ? (char)ch : '?';
	}
	out[o] = 0;
}

void stream__set_unix(struct stream *s, const struct ts_unix_sock *e)
{
	char path[TS_UNIX_PATH_MAX + 2], local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];

	unix_path(e, path, sizeof(path));
	snprintf(local, sizeof(local), "unix:%s#%llu", path, (unsigned long long)e->sock);
	snprintf(peer, sizeof(peer), "unix:%s#%llu", path, (unsigned long long)e->peer_sock);
	conn__set_addresses(s->conn, local, peer);
	conn__set_peer_pid(s->conn, e->peer_pid);
}
