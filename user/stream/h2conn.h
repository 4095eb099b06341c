/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An HTTP/2 connection: a framer and an HPACK decoder per direction, and one request record
 * per stream, many at once. Each stream's response body goes through the same reader as an
 * HTTP/1.1 body (stream/response.h); gRPC calls through the gRPC message reader.
 *
 * A connection seen from its preface (or its h2c upgrade) decodes every header exactly. One
 * joined later (recognised by its frames, proto/h2.h) decodes what the static table, the
 * literals and the insertions since the join give; its requests say headers_partial, and
 * their TTFT and TPOT are measured all the same. Streams already open at the join are
 * counted and not measured (their start was not seen).
 */
#ifndef TS_H2CONN_H
#define TS_H2CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"

struct conn;
struct conn_sink;

/* Streams one connection tracks at once; past them a stream is counted (by process and role,
 * said under the summary's groups), not measured. Each tracked stream costs its request and
 * parser state (about 5 KiB, docs/performance.md), so the cap bounds what one connection
 * can make tokenscope hold: 256 covers what servers allow by default (nginx's
 * http2_max_concurrent_streams 128, Go's net/http 250, hypercorn and h2o 100), not gRPC
 * servers that allow 1 000 and more (grpc-go sets no limit): their streams past it go
 * untracked. */
#define H2_STREAMS_MAX 256

struct h2conn;

/* from_preface: the connection's start was seen (the client preface, or an h2c upgrade). */
/* comm: the process's command name, kept by the owner for as long as the connection lives. */
struct h2conn *h2conn__new(struct conn *owner, const char *comm, bool from_preface);
void h2conn__free(struct h2conn *h);
/* An h2c upgrade: the client sends the preface next, and r (the request that asked for
 * the upgrade, NULL if none was kept) continues as stream 1. The client writes when
 * client_is_write. */
void h2conn__upgraded(struct h2conn *h, struct request *r, bool client_is_write);
/* The client wrote the preface (seen in the direction is_write): skip it there. */
void h2conn__expect_preface(struct h2conn *h, bool is_write);
/* n bytes of that preface were already taken (while the connection was classified). */
void h2conn__preface_seen(struct h2conn *h, bool is_write, size_t n);
void h2conn__data(struct h2conn *h, bool is_write, uint8_t *data, size_t len, uint64_t ts);
void h2conn__missing(struct h2conn *h, bool is_write, uint64_t n, uint64_t ts);
void h2conn__lost(struct h2conn *h, uint64_t ts, const char *reason);
void h2conn__close(struct h2conn *h, uint64_t ts, const char *reason);
size_t h2conn__inflight(const struct h2conn *h);
/* The connection learnt its socket's addresses: its open streams' requests get them. */
void h2conn__set_addresses(struct h2conn *h, const char *local, const char *peer);
/* Calls fn for each open stream's request (those opened before capture joined have none). */
void h2conn__each_open(const struct h2conn *h, void (*fn)(void *ctx, const struct request *r),
		       void *ctx);

/* What the connection lends its HTTP/2 streams (stream/conn.c). */
struct request *conn__begin_request(struct conn *c, uint64_t start_ns);
void conn__end_request(struct conn *c, struct request *r, const char *reason, uint64_t ts);
const struct conn_sink *conn__sink(const struct conn *c);
/* The role, once a header block tells it (-1: not yet). */
int conn__role(const struct conn *c);
void conn__set_role(struct conn *c, enum role role);

#endif
