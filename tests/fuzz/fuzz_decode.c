// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* gzip and deflate (zlib-wrapped or raw), fed piece by piece, under the decode budget. */
#include "proto/decode.h"
#include "fuzz.h"

static void on_out(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	volatile uint8_t sink = 0;

	for (size_t i = 0; i < len; i++)
		sink ^= data[i];
}

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	decoder__feed(ctx, p, n, i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	struct decoder *d = decoder__new(data[0] & 1 ? HTTP_ENC_GZIP : HTTP_ENC_DEFLATE, on_out,
					 NULL);

	fuzz_pieces(data + 1, size - 1, piece, d);
	decoder__free(d);
	return 0;
}
