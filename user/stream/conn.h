/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One connection (a TLS object or a socket of one process) and its two byte streams. Finds
 * the role (a process that writes a request is a client, one that reads one is a server) and
 * the wire protocol from the first bytes, and hands every byte to that protocol's reader
 * (stream/wire.h: HTTP/1.1 in http1conn.c, HTTP/2 in h2conn.c, ZeroMQ in zmtpconn.c), which drives each response
 * body through decoding, SSE/NDJSON framing and the API dialect into a request record.
 */
#ifndef TS_CONN_H
#define TS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/json.h"
#include "llm/request.h"

struct pipeline;
struct zmtp_message;

/* What carries a connection's bytes: a TLS object's plaintext, or a plain socket's. */
enum transport {
	TRANSPORT_TLS = 0, /* SSL_read/SSL_write on an SSL* */
	TRANSPORT_TCP = 1, /* read/write family syscalls on a TCP socket */
	TRANSPORT_GO_TLS = 2, /* a Go program's crypto/tls (*Conn).Read/Write on a *tls.Conn */
	TRANSPORT_UNIX = 3, /* read/write family syscalls on a Unix stream socket */
};

/* Which byte stream a connection is. */
struct stream_key {
	uint32_t pid;
	enum transport transport;
	uint64_t id; /* TLS: the SSL* in the process; TCP: the socket */
};

enum conn_kind {
	CONN_UNKNOWN = 0, /* no request start seen yet */
	CONN_HTTP1,
	CONN_HTTP2,	  /* the client preface, an h2c upgrade, or frames (joined): stream/h2conn.h */
	CONN_OTHER,	  /* bytes that never looked like HTTP */
	CONN_ZMTP,	  /* ZeroMQ: a ZMTP 3 greeting, or an engine wire's frames (joined) */
};

/* HTTP/2 in capture health. */
struct h2_counts {
	uint64_t connections;	       /* HTTP/2 connections */
	uint64_t joined;	       /* of them, joined after their preface: headers partial */
	uint64_t streams;	       /* streams with a request record */
	uint64_t max_streams_per_conn; /* most streams one connection carried */
	uint64_t max_concurrent;       /* most streams open at once on one connection */
	uint64_t headers_partial;      /* requests whose header fields were not all known */
	uint64_t streams_unseen_start; /* open before capture joined: not measured */
	uint64_t streams_untracked;    /* past H2_STREAMS_MAX open at once: not measured */
	uint64_t reset_streams;	       /* ended by RST_STREAM before their end */
	uint64_t goaway;	       /* GOAWAY frames */
	uint64_t frame_errors;	       /* framing errors: the connection is no longer read */
	uint64_t hpack_errors;	       /* blocks that did not decode: that direction goes partial */
	/* streams_untracked by command and role, so that the summary says it under the groups
	 * whose figures leave them out (eight pairs; others' only in streams_untracked) */
	struct h2_untracked {
		char comm[TS_COMM_LEN];
		int role; /* enum role; -1 unknown */
		uint64_t n;
	} untracked_by[8];
	size_t nuntracked_by;
};

/* What the connections count for capture health (stream/health.h holds them). */
struct conn_counts {
	uint64_t unpaired_responses; /* responses with no request to pair with */
	uint64_t malformed;	     /* HTTP framing errors */
	uint64_t unsupported_encodings;
	uint64_t decode_budget_exceeded; /* responses that inflated past the budget (decode.h) */
	uint64_t no_memory; /* streams or requests not tracked for lack of memory (the pipeline
			     * counts its own streams here too) */
};

/* Where finished requests and health counts go. */
struct conn_sink {
	void (*on_request)(void *ctx, struct request *r); /* takes ownership */
	void (*on_first_token)(void *ctx, struct request *r); /* NULL: not wanted */
	void *ctx;
	uint64_t *next_id; /* request ids, counted up */
	struct conn_counts *counts;
	struct jdoc *json; /* what the dialects read JSON into, one call at a time */
	struct h2_counts *h2;
	/* a ZeroMQ connection's messages, for the engine wires (NULL: not read); ctx above */
	void (*zmtp_message)(void *ctx, uint32_t pid, const char *comm, bool is_write,
			     const struct zmtp_message *m);
};

struct conn;

struct conn *conn__new(const struct stream_key *key, const char *comm,
		       const struct conn_sink *sink);
void conn__free(struct conn *c);
/* One more stream carries c (an SSL object both processes use after a fork). */
void conn__ref(struct conn *c);
/* A stream that carried c is gone: true when it was the last (then close and free c). */
bool conn__unref(struct conn *c);
bool conn__shared(const struct conn *c);
/* No byte has reached it yet. */
bool conn__untouched(const struct conn *c);
/* Bytes moved by one call (or piece of one); data may be modified (credential masking). */
void conn__data(struct conn *c, bool is_write, uint8_t *data, size_t len, uint64_t ts);
/* n bytes of one direction are known to be missing (truncated call, unreadable memory). */
void conn__missing(struct conn *c, bool is_write, uint64_t n, uint64_t ts);
/* Pieces were lost, direction and size unknown: in-flight requests become incomplete. */
void conn__lost(struct conn *c, uint64_t ts, const char *reason);
/* The connection ended (SSL_free, close, process exit, end of capture). Unfinished requests are
 * reported incomplete with reason. */
void conn__close(struct conn *c, uint64_t ts, const char *reason);
enum conn_kind conn__kind(const struct conn *c);
/* Requests of this connection still waiting for the end of their response. */
size_t conn__inflight(const struct conn *c);
/* Calls fn for each of them (the live view counts them); c's own stream is key. */
typedef void (*open_request_fn)(void *ctx, const struct request *r);
void conn__each_open(const struct conn *c, open_request_fn fn, void *ctx);
/* The stream c was made for (a connection two processes share is counted once, by it). */
const struct stream_key *conn__key(const struct conn *c);
/* The socket's addresses ("ip:port", "unix:PATH#INODE"), for the requests of this
 * connection. */
void conn__set_addresses(struct conn *c, const char *local, const char *peer);
/* A Unix socket's peer process, for the requests that begin from now. */
/* Its socket's network namespace (struct ts_sock_net), and its ends after NAT (nat.h). */
void conn__set_netns(struct conn *c, uint32_t netns);
void conn__set_nat(struct conn *c, const char *nat_local, const char *nat_peer);
void conn__set_peer_pid(struct conn *c, uint32_t pid);
bool conn__has_addresses(const struct conn *c);
/* Are a and b the two ends of one socket (each one's local address the other's peer)? */
bool conn__is_peer(const struct conn *a, const struct conn *b);
/* The process at the other end died with requests of c in flight: those that do not end
 * whole say peer_exited, whatever ends them, but for a loss (capture_loss: their bytes may be
 * short, which matters more). */
void conn__peer_exited(struct conn *c);
const char *transport__name(enum transport t);

#endif
