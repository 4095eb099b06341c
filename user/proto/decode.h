/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Incremental Content-Encoding decoding (gzip, deflate) with zlib. Output is handed on as soon
 * as the decoder produces it, so an SSE event decoded from a sync-flushed gzip stream keeps the
 * time of the bytes that completed it. */
#ifndef TS_DECODE_H
#define TS_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/http1.h"

typedef void (*decode_sink)(void *ctx, const uint8_t *data, size_t len, uint64_t ts);

struct decoder;

/* enc must be IDENTITY, GZIP or DEFLATE. */
struct decoder *decoder__new(enum http_encoding enc, decode_sink sink, void *ctx);
void decoder__free(struct decoder *d);
/*
 * What one response may inflate to: at most DECODE_MAX_RATIO times its compressed size once
 * past DECODE_FREE_BYTES, and DECODE_MAX_BYTES in all. Real SSE compresses 5-50 times; a gzip
 * bomb (1 MB of zeros or newlines inflating to 1 GB) would hold the capture loop for seconds
 * while the ring buffer overflows. Past the budget the decoder stops.
 */
#define DECODE_MAX_RATIO 200
#define DECODE_FREE_BYTES (1u << 20)
#define DECODE_MAX_BYTES (256ull << 20)

enum decode_status {
	DECODE_OK = 0,
	DECODE_INVALID = -1, /* not valid for the encoding */
	DECODE_BUDGET = -2,  /* past the budget above */
};

/* Returns DECODE_OK, or why the decoder stopped (it then stays stopped, and returns the same). */
int decoder__feed(struct decoder *d, const uint8_t *data, size_t len, uint64_t ts);

#endif
