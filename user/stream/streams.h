/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stream table: every byte stream the capture carries (a process's SSL object, Go
 * *tls.Conn or socket), found by its key, with the connection it feeds. It ends streams (a
 * close, a process's exit, a long idle time, the capture's end) and tells the other end,
 * where it is traced here too, that its peer died. TLS streams are also indexed by the socket
 * they were linked to (stream/tls_link.c decides the links; the index is kept here, so that
 * a stream leaves it whenever it ends).
 */
#ifndef TS_STREAMS_H
#define TS_STREAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "stream/conn.h"
#include "tokenscope.h"

#define STREAMS_BUCKETS 4096

struct health;

struct stream {
	struct stream_key key;
	/* The piece sequence number expected next, by direction (TS_F_SEQ_PER_DIR; [0] alone
	 * in recordings with one counter a stream), and whether that counter has begun. */
	uint64_t next_seq[2];
	bool seq_begun[2];
	bool seen;	   /* a piece has come (a TLS stream can be made by its socket link) */
	uint64_t last_ns;  /* its newest record */
	bool addr_exact;   /* its addresses came from a socket call inside an SSL call */
	uint64_t sock;	   /* TLS: the socket it was last linked to (0: none yet) */
	struct stream *sock_next; /* TLS streams by socket (by_sock) */
	bool orphaned;	   /* TLS: its process exited; it ends when its socket does */
	struct conn *conn;
	struct stream *next;
	/* every stream, in one list (streams__each_open walks it, not the buckets) */
	struct stream *all_next, **all_pprev;
};

struct streams {
	struct stream *buckets[STREAMS_BUCKETS];
	struct stream *by_sock[STREAMS_BUCKETS]; /* TLS streams by their socket's inode */
	struct stream *all;			 /* every stream (stream.all_next) */
	const struct conn_sink *sink;		 /* for the connections made here */
	struct health *h;			 /* ended streams by kind, aged out */
	/* streams of other transports than plaintext TCP: a process's exit, when its sockets'
	 * closes follow, has only these to end, and with none it looks at no stream (a
	 * fork-per-request client exits hundreds of times a second) */
	size_t not_tcp;
	/* The record time by which the ring had dropped records (0: none yet). A stream last seen
	 * before it may have lost what followed, its end and close too, with no later record of
	 * its own to show the gap: whatever ends it, its requests in flight end as capture_loss. */
	uint64_t lost_ns;
};

void streams__init(struct streams *t, const struct conn_sink *sink, struct health *h);
/* Frees every stream without ending its requests (they are not reported). */
void streams__free(struct streams *t);

/* Where the stream of key is, or would go (*link NULL). */
struct stream **streams__find(struct streams *t, const struct stream_key *key);
/* The stream of key, made (with its connection, for a process named comm) where there is
 * none. NULL without memory. */
struct stream *streams__get(struct streams *t, const struct stream_key *key, const char *comm);
/* Ends the stream at *link: its connection's unfinished requests end with why, unless another
 * process still carries the connection (fork). */
void streams__drop(struct streams *t, struct stream **link, uint64_t ts, const char *why);
/* Ends the stream of key, if there is one. */
void streams__close(struct streams *t, const struct stream_key *key, uint64_t ts,
		    const char *why);

/* The socket index of TLS streams: s is on sock from now (one socket at a time). */
void streams__index_sock(struct streams *t, struct stream *s, uint64_t sock);
/* The TLS streams on sock, newest link first (follow sock_next; others share the bucket). */
struct stream *streams__on_sock(struct streams *t, uint64_t sock);

/* The other ends, where they are traced here too, of connections that died with their
 * process: their requests in flight say peer_exited. */
void streams__tell_peers(struct streams *t, const struct conn *const *dead, size_t n);
/* pid exited: its streams end (process_exited), except, where the kernel's closes of its
 * sockets follow (sockets_follow), its sockets' streams and the TLS streams linked to one,
 * which are left to those closes (orphaned). */
void streams__exit(struct streams *t, uint32_t pid, uint64_t ts, bool sockets_follow);
/* Streams idle past their limit (record time now) are let go; one with a request in flight
 * reports it incomplete (idle_timeout). */
void streams__sweep_idle(struct streams *t, uint64_t now);
/* The capture ended at ts: every stream ends (capture_ended). */
void streams__finish(struct streams *t, uint64_t ts);
/* Calls fn for each request in flight, once per connection. */
void streams__each_open(const struct streams *t, open_request_fn fn, void *ctx);

/* The socket's addresses, as the probes read them, become the stream's connection's. */
void stream__set_addresses(struct stream *s, const struct ts_sock_addr *a);
/* Its ends after NAT (struct ts_rec_sock_nat's). */
void stream__set_nat(struct stream *s, const struct ts_sock_addr *after);
/* A Unix socket's path and peer: its addresses ("unix:PATH#INODE", each end by its own inode,
 * so that a client's and its server's records join) and its peer's process. */
void stream__set_unix(struct stream *s, const struct ts_unix_sock *e);

#endif
