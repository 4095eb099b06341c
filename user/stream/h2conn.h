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

#include "stream/wire.h"

/* Streams one connection tracks at once; past them a stream is counted (by process and role,
 * said under the summary's groups), not measured. Each tracked stream costs its request and
 * parser state (about 5 KiB, docs/performance.md), so the cap bounds what one connection
 * can make tokenscope hold: 256 covers what servers allow by default (nginx's
 * http2_max_concurrent_streams 128, Go's net/http 250, hypercorn and h2o 100), not gRPC
 * servers that allow 1 000 and more (grpc-go sets no limit): their streams past it go
 * untracked. */
#define H2_STREAMS_MAX 256

/* The reader: h2_wire (stream/wire.h). */

#endif
