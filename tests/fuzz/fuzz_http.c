// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTTP/1.1 parser, request and response directions, fed piece by piece; a piece whose
 * first byte is 0xff stands for a capture gap of its length. */
#include <stdbool.h>

#include "proto/http1.h"
#include "fuzz.h"

static bool on_head(void *ctx, const struct http_head *h, uint64_t ts)
{
	return h->status != 204;
}

static void on_body(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	volatile uint8_t sink = 0;

	for (size_t i = 0; i < len; i++)
		sink ^= data[i];
}

static void on_end(void *ctx, uint64_t ts)
{
}

static const struct http_callbacks cbs = { on_head, on_body, on_end };

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	struct http_parser *parser = ctx;

	if (n && p[0] == 0xff)
		http_parser__gap(parser, n, i);
	else
		http_parser__feed(parser, p, n, i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	struct http_parser *p = http_parser__new(data[0] & 1, &cbs, NULL);

	fuzz_pieces(data + 1, size - 1, piece, p);
	http_parser__eof(p, size);
	http_parser__free(p);
	return 0;
}
