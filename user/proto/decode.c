// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "proto/decode.h"

struct decoder {
	enum http_encoding enc;
	decode_sink sink;
	void *ctx;
	z_stream zs;
	bool started; /* inflateInit done */
	int failed;   /* enum decode_status: why it stopped */
	uint64_t in, out; /* compressed bytes fed, bytes produced */
	bool ended;   /* Z_STREAM_END: only another gzip member may follow */
	uint8_t first; /* deflate: the first byte, held until the second tells the wrapping */
	bool have_first;
};

struct decoder *decoder__new(enum http_encoding enc, decode_sink sink, void *ctx)
{
	struct decoder *d;

	if (enc != HTTP_ENC_IDENTITY && enc != HTTP_ENC_GZIP && enc != HTTP_ENC_DEFLATE)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->enc = enc;
	d->sink = sink;
	d->ctx = ctx;
	return d;
}

void decoder__free(struct decoder *d)
{
	if (!d)
		return;
	if (d->started)
		inflateEnd(&d->zs);
	free(d);
}

/* HTTP "deflate" should be zlib-wrapped (RFC 9110 8.4.1.2) but raw deflate is common: a zlib
 * header is a CMF byte with method 8 and a check value that makes the first 16 bits divisible
 * by 31. */
static int window_bits(struct decoder *d, uint8_t b0, uint8_t b1)
{
	if (d->enc == HTTP_ENC_GZIP)
		return 15 + 16;
	if ((b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0)
		return 15;
	return -15;
}

static int inflate_feed(struct decoder *d, const uint8_t *data, size_t len, uint64_t ts);

int decoder__feed(struct decoder *d, const uint8_t *data, size_t len, uint64_t ts)
{
	if (d->failed)
		return d->failed;
	if (d->enc == HTTP_ENC_IDENTITY) {
		if (len)
			d->sink(d->ctx, data, len, ts);
		return 0;
	}
	if (!len)
		return 0;
	if (!d->started) {
		uint8_t b0, b1;

		if (d->enc == HTTP_ENC_DEFLATE && !d->have_first && len == 1) {
			d->first = data[0];
			d->have_first = true;
			return 0;
		}
		b0 = d->have_first ? d->first : data[0];
		b1 = d->have_first ? data[0] : len > 1 ? data[1] : 0;
		memset(&d->zs, 0, sizeof(d->zs));
		if (inflateInit2(&d->zs, window_bits(d, b0, b1)) != Z_OK) {
			d->failed = DECODE_INVALID;
			return d->failed;
		}
		d->started = true;
		if (d->have_first && inflate_feed(d, &d->first, 1, ts))
			return d->failed;
	}
	return inflate_feed(d, data, len, ts);
}

/* Hand on n decoded bytes, if the budget allows them. */
static bool emit(struct decoder *d, const uint8_t *out, size_t n, uint64_t ts)
{
	d->out += n;
	if (d->out > DECODE_MAX_BYTES ||
	    (d->out > DECODE_FREE_BYTES && d->out > d->in * DECODE_MAX_RATIO)) {
		d->failed = DECODE_BUDGET;
		return false;
	}
	d->sink(d->ctx, out, n, ts);
	return true;
}

static int inflate_feed(struct decoder *d, const uint8_t *data, size_t len, uint64_t ts)
{
	uint8_t out[16384];

	d->in += len;
	d->zs.next_in = (Bytef *)data;
	d->zs.avail_in = (uInt)len;
	while (d->zs.avail_in) {
		int rc;

		if (d->ended) {
			/* Concatenated gzip members are legal; anything else after the end is not. */
			if (d->enc != HTTP_ENC_GZIP || inflateReset(&d->zs) != Z_OK)
				goto fail;
			d->ended = false;
		}
		d->zs.next_out = out;
		d->zs.avail_out = sizeof(out);
		rc = inflate(&d->zs, Z_SYNC_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
			goto fail;
		if (d->zs.avail_out < sizeof(out) &&
		    !emit(d, out, sizeof(out) - d->zs.avail_out, ts))
			return d->failed;
		if (rc == Z_STREAM_END)
			d->ended = true;
		else if (rc == Z_BUF_ERROR && d->zs.avail_out)
			break; /* needs more input */
	}
	/* Drain output held back for lack of room. */
	while (!d->ended) {
		int rc;

		d->zs.next_out = out;
		d->zs.avail_out = sizeof(out);
		rc = inflate(&d->zs, Z_SYNC_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
			goto fail;
		if (d->zs.avail_out == sizeof(out))
			break;
		if (!emit(d, out, sizeof(out) - d->zs.avail_out, ts))
			return d->failed;
		if (rc == Z_STREAM_END)
			d->ended = true;
	}
	return 0;
fail:
	d->failed = DECODE_INVALID;
	return d->failed;
}
