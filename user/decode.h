/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Incremental Content-Encoding decoding (gzip, deflate) with zlib. Output is handed on as soon
 * as the decoder produces it, so an SSE event decoded from a sync-flushed gzip stream keeps the
 * time of the bytes that completed it. */
#ifndef TS_DECODE_H
#define TS_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"

typedef void (*decode_sink)(void *ctx, const uint8_t *data, size_t len, uint64_t ts);

struct decoder;

/* enc must be IDENTITY, GZIP or DEFLATE. */
struct decoder *decoder__new(enum http_encoding enc, decode_sink sink, void *ctx);
void decoder__free(struct decoder *d);
/* Returns 0, or -1 when the input is not valid for the encoding (the decoder then stops). */
int decoder__feed(struct decoder *d, const uint8_t *data, size_t len, uint64_t ts);

#endif
