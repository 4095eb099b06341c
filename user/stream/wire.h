/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The wire protocol a connection speaks, behind one table of operations: HTTP/1.1
 * (stream/http1conn.c), HTTP/2 (stream/h2conn.c) and ZeroMQ (stream/zmtpconn.c). The connection (stream/conn.c) is the
 * shell: its identity, addresses and role, and which protocol its first bytes are. It makes
 * the protocol's reader and hands it every byte; the reader makes and finishes requests
 * through the host it was given, and never calls the connection. A new protocol is a reader
 * and a row where conn.c classifies (as ZeroMQ was), not a branch in each of conn.c's
 * functions. Pixie's protocols/common/interface.h is the model.
 */
#ifndef TS_WIRE_H
#define TS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"
#include "stream/conn.h"

/* What a connection lends the reader of its protocol. */
struct wire_host {
	const struct conn_sink *sink; /* counts; finished requests go through end_request */
	const char *comm;	      /* the process's command name, for as long as the reader */
	uint32_t pid;		      /* the process whose connection this is */
	void *ctx;		      /* the connection's, for the calls below */
	/* A new request of this connection: id, process, transport, addresses and role filled
	 * in. NULL without memory (counted). */
	struct request *(*begin_request)(void *ctx, uint64_t start_ns);
	/* A request is finished (reason NULL: it ended whole, else why not): to the sink, which
	 * takes it. A reason becomes peer_exited where the other end's process died. */
	void (*end_request)(void *ctx, struct request *r, const char *reason, uint64_t ts);
	/* The role: -1 until known. A reader that learns it from a header block sets it. */
	int (*role)(void *ctx);
	void (*set_role)(void *ctx, enum role role);
};

/* How a reader starts. */
struct wire_start {
	bool from_start;      /* the connection's start was seen (else joined mid-way) */
	bool client_is_write; /* the client writes (the role, when known) */
	struct request *carried; /* HTTP/2 after an h2c upgrade: the request that asked for it,
				    which goes on as stream 1 (NULL: none) */
};

/* A reader that found its connection is no longer its protocol (101 Switching Protocols). */
struct wire_switch {
	enum conn_kind to;	 /* CONN_HTTP2 (h2c) or CONN_OTHER (a WebSocket, anything else) */
	struct request *carried; /* to CONN_HTTP2: the request that goes on as stream 1 */
	size_t used;		 /* bytes of the last data call that were the old protocol's */
};

struct wire_ops {
	const char *name;
	enum conn_kind kind;
	/* NULL without memory. */
	void *(*open)(const struct wire_host *host, const struct wire_start *how);
	void (*free)(void *w);
	/* Bytes moved by one call (or piece of one); data may be modified (credential masking). */
	void (*data)(void *w, bool is_write, uint8_t *data, size_t len, uint64_t ts);
	/* n bytes of one direction are known to be missing. */
	void (*missing)(void *w, bool is_write, uint64_t n, uint64_t ts);
	/* Pieces were lost, direction and size unknown. */
	void (*lost)(void *w, uint64_t ts, const char *reason);
	/* The connection ended: unfinished requests end with reason. */
	void (*close)(void *w, uint64_t ts, const char *reason);
	size_t (*inflight)(const void *w);
	void (*each_open)(const void *w, open_request_fn fn, void *ctx);
	/* The connection learnt its socket's addresses (or namespace, or NAT): requests in
	 * flight get them too (request__set_addr). */
	void (*set_addresses)(void *w, const struct conn_addr *a);
	/* After data or missing: whether the connection switched protocols (sw filled; the
	 * reader is then freed by the connection). NULL: never. */
	bool (*switched)(void *w, struct wire_switch *sw);
};

extern const struct wire_ops http1_wire; /* stream/http1conn.c */
extern const struct wire_ops h2_wire;	 /* stream/h2conn.c */
extern const struct wire_ops zmtp_wire;	 /* stream/zmtpconn.c */

#endif
