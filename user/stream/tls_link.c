// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A TLS stream and the socket under it (stream/tls_link.h). */
#include "stream/tls_link.h"

/*
 * A process forked after its TLS setup: parent and child hold the same SSL object, at the same
 * address, on the same socket. Each has its stream (the probes see each process's calls), but
 * they are one connection: a request the parent writes is answered in what the child reads.
 * The child's stream, new and empty, carries the other's connection from its first link on.
 * The same socket with an SSL object at the same address is a fork's copy: nothing else makes
 * one (an unrelated process has other sockets).
 */
static void link_sock(struct streams *t, struct stream *s, uint64_t sock)
{
	if (s->sock == sock)
		return;
	if (!s->sock && !s->seen && conn__untouched(s->conn)) {
		for (struct stream *o = streams__on_sock(t, sock); o; o = o->sock_next) {
			if (o->sock == sock && o->key.id == s->key.id && o->key.pid != s->key.pid) {
				conn__free(s->conn);
				s->conn = o->conn;
				conn__ref(o->conn);
				break;
			}
		}
	}
	streams__index_sock(t, s, sock);
}

/* Exact links (a socket call inside an SSL call) win over inferred ones (the write that
 * followed an SSL_write on the same thread, with a memory BIO). */
bool tls_link__sock(struct streams *t, const struct ts_tls_sock *e)
{
	struct stream_key key = { e->hdr.pid, TRANSPORT_TLS, e->ssl };
	struct stream *s;

	if (e->flags & TS_F_GO_TLS)
		key.transport = TRANSPORT_GO_TLS;
	s = streams__get(t, &key, e->hdr.comm);
	if (!s)
		return false;
	s->last_ns = e->hdr.ts_ns;
	link_sock(t, s, e->sock);
	if (e->exact || !s->addr_exact || !conn__has_addresses(s->conn)) {
		stream__set_addresses(s, &e->addr);
		s->addr_exact = e->exact;
	}
	if (e->hdr.size >= sizeof(*e)) /* recordings made before 2026-12-05 have no netns */
		conn__set_netns(s->conn, e->netns);
	return true;
}

void tls_link__end_orphans(struct streams *t, uint64_t sock, uint64_t ts, bool by_exit)
{
	for (;;) {
		struct stream *o = streams__on_sock(t, sock), **link;

		while (o && !(o->sock == sock && o->orphaned))
			o = o->sock_next;
		if (!o)
			return;
		if (by_exit && conn__has_addresses(o->conn) && !conn__shared(o->conn))
			streams__tell_peers(t, (const struct conn *const *)&o->conn, 1);
		link = streams__find(t, &o->key);
		streams__drop(t, link, ts, by_exit ? "process_exited" : "connection_closed");
	}
}
