// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/decode.h"
#include "proto/grpc.h"

#define PREFIX_LEN 5

struct grpc_reader {
	grpc_message_fn fn;
	void *ctx;
	bool gzip;
	uint8_t prefix[PREFIX_LEN];
	size_t nprefix;
	uint32_t left;	/* bytes of the current message still to come */
	bool compressed;
	bool skipping;	/* the current message is too large to keep */
	struct buf msg;
	struct buf plain; /* a compressed message, inflated */
	bool plain_bad;
};

struct grpc_reader *grpc_reader__new(bool gzip, grpc_message_fn fn, void *ctx)
{
	struct grpc_reader *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->fn = fn;
	g->ctx = ctx;
	g->gzip = gzip;
	return g;
}

void grpc_reader__free(struct grpc_reader *g)
{
	if (!g)
		return;
	buf__free(&g->msg);
	buf__free(&g->plain);
	free(g);
}

bool grpc_reader__pending(const struct grpc_reader *g)
{
	return g->nprefix || g->left;
}

static void on_inflated(void *ctx, const uint8_t *data, size_t len, uint64_t ts)
{
	struct grpc_reader *g = ctx;

	if (buf__add(&g->plain, data, len, GRPC_MESSAGE_MAX))
		g->plain_bad = true;
}

/* A whole message arrived at ts. */
static enum grpc_error deliver(struct grpc_reader *g, size_t wire_len, uint64_t ts)
{
	enum grpc_error e = GRPC_OK;
	struct decoder *d;

	if (g->skipping || g->msg.overflow) {
		g->fn(g->ctx, NULL, wire_len, ts);
		e = g->skipping ? GRPC_OK : GRPC_ERR_NO_MEMORY;
	} else if (!g->compressed) {
		g->fn(g->ctx, (const uint8_t *)(g->msg.p ? g->msg.p : ""), g->msg.len, ts);
	} else {
		/* compressed per message (gRPC's compressed flag): inflated on its own, bounded */
		buf__reset(&g->plain);
		g->plain_bad = false;
		d = g->gzip ? decoder__new(HTTP_ENC_GZIP, on_inflated, g) : NULL;
		if (!d || decoder__feed(d, (const uint8_t *)g->msg.p, g->msg.len, ts) || g->plain_bad) {
			g->fn(g->ctx, NULL, wire_len, ts);
			e = GRPC_ERR_COMPRESSION;
		} else {
			g->fn(g->ctx, (const uint8_t *)(g->plain.p ? g->plain.p : ""), g->plain.len, ts);
		}
		decoder__free(d);
		buf__free(&g->plain);
	}
	/* a large message's memory is not kept for a call that may stream for minutes */
	if (g->msg.cap > 64 * 1024)
		buf__free(&g->msg);
	buf__reset(&g->msg);
	return e;
}

enum grpc_error grpc_reader__feed(struct grpc_reader *g, const uint8_t *data, size_t len,
				  uint64_t ts)
{
	enum grpc_error first = GRPC_OK, e;
	size_t i = 0;

	while (i < len) {
		if (!g->left && g->nprefix < PREFIX_LEN) {
			size_t k = PREFIX_LEN - g->nprefix;

			if (k > len - i)
				k = len - i;
			memcpy(g->prefix + g->nprefix, data + i, k);
			g->nprefix += k;
			i += k;
			if (g->nprefix < PREFIX_LEN)
				break;
			g->compressed = g->prefix[0] & 1;
			g->left = (uint32_t)g->prefix[1] << 24 | (uint32_t)g->prefix[2] << 16 |
				  (uint32_t)g->prefix[3] << 8 | g->prefix[4];
			g->skipping = g->left > GRPC_MESSAGE_MAX;
			if (!g->left) {
				g->nprefix = 0;
				e = deliver(g, 0, ts);
				if (!first)
					first = e;
			}
			continue;
		}
		{
			size_t k = len - i < g->left ? len - i : g->left;

			if (!g->skipping)
				buf__add(&g->msg, data + i, k, GRPC_MESSAGE_MAX);
			i += k;
			g->left -= (uint32_t)k;
			if (!g->left) {
				size_t wire = (size_t)g->prefix[1] << 24 | (size_t)g->prefix[2] << 16 |
					      (size_t)g->prefix[3] << 8 | g->prefix[4];

				g->nprefix = 0;
				e = deliver(g, wire, ts);
				if (!first)
					first = e;
			}
		}
	}
	return first;
}

/* ---- protobuf wire format ---- */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

int pb__next(const uint8_t **p, const uint8_t *end, struct pb_field *f)
{
	uint64_t key, n;

	if (*p >= end)
		return 0;
	if (!varint(p, end, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
		return -1;
	f->num = (uint32_t)(key >> 3);
	f->wire = (enum pb_wire)(key & 7);
	f->p = NULL;
	f->len = 0;
	switch (f->wire) {
	case PB_VARINT:
		return varint(p, end, &f->v) ? 1 : -1;
	case PB_I64:
	case PB_I32:
		n = f->wire == PB_I64 ? 8 : 4;
		if ((uint64_t)(end - *p) < n)
			return -1;
		f->v = 0;
		memcpy(&f->v, *p, n); /* little-endian, as the host */
		*p += n;
		return 1;
	case PB_LEN:
		if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
			return -1;
		f->p = *p;
		f->len = (size_t)n;
		*p += n;
		return 1;
	default:
		return -1; /* groups (3, 4) are not used by proto3 messages */
	}
}

const uint8_t *pb__bytes(const uint8_t *msg, size_t n, uint32_t num, size_t *len)
{
	const uint8_t *p = msg, *end = msg + n;
	struct pb_field f;

	while (pb__next(&p, end, &f) == 1) {
		if (f.num == num && f.wire == PB_LEN) {
			*len = f.len;
			return f.p;
		}
	}
	*len = 0;
	return NULL;
}
