// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The SSE and NDJSON framers, fed piece by piece. */
#include "proto/sse.h"
#include "fuzz.h"

static void on_event(void *ctx, const char *event, const char *data, size_t len, uint64_t ts)
{
	volatile char sink = 0;

	for (size_t i = 0; i < len; i++)
		sink ^= data[i];
	if (event)
		sink ^= event[0];
}

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	sse_parser__feed(ctx, p, n, i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	struct sse_parser *p = sse_parser__new(data[0] & 1, on_event, NULL);

	fuzz_pieces(data + 1, size - 1, piece, p);
	sse_parser__finish(p, size);
	sse_parser__free(p);
	return 0;
}
