// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/h2.h"

/* Where a header block's bytes lie in the piece being read, to write its mask back: as many
 * frames of it as this in one piece, then it is masked and written back so far. */
#define BLOCK_SEGS 8

enum state {
	S_HEADER,  /* the 9-byte frame header */
	S_PAYLOAD, /* the current frame's payload */
	S_RESYNC,  /* lost bytes: wait for a piece that begins with frames */
	S_DEAD,
};

struct h2_framer {
	const struct h2_callbacks *cb;
	void *ctx;
	enum state st;
	enum h2_error err;
	uint32_t max_frame;

	uint8_t hdr[H2_FRAME_HEADER_LEN];
	size_t nhdr;
	struct h2_frame cur;
	uint32_t off;	 /* payload bytes of cur consumed */
	uint32_t prefix; /* payload bytes before the content: pad length, priority, promised id */
	uint32_t pad;	 /* padding after the content (known once the pad length byte is read) */
	bool data_ended; /* on_data was told this DATA frame's content ended */

	/* a header block until END_HEADERS: its HEADERS (or PUSH_PROMISE) frame and bytes */
	bool in_block;
	struct h2_frame block_frame;
	struct buf block;
	bool block_truncated;
	struct {
		uint8_t *at;
		size_t off, len; /* in block */
	} segs[BLOCK_SEGS];
	size_t nsegs;

	uint8_t ctl[H2_CONTROL_MAX];
	size_t nctl;
};

struct h2_framer *h2_framer__new(const struct h2_callbacks *cb, void *ctx)
{
	struct h2_framer *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->cb = cb;
	f->ctx = ctx;
	f->max_frame = H2_DEFAULT_MAX_FRAME;
	return f;
}

void h2_framer__free(struct h2_framer *f)
{
	if (f)
		buf__free(&f->block);
	free(f);
}

void h2_framer__set_max_frame(struct h2_framer *f, uint32_t max)
{
	if (max >= H2_DEFAULT_MAX_FRAME && max <= H2_LARGEST_MAX_FRAME)
		f->max_frame = max;
}

enum h2_error h2_framer__error(const struct h2_framer *f)
{
	return f->err;
}

uint32_t h2_framer__data_stream(const struct h2_framer *f)
{
	return f->st == S_PAYLOAD && f->cur.type == H2_DATA ? f->cur.stream : 0;
}

const char *h2_error__str(enum h2_error e)
{
	switch (e) {
	case H2_OK: return "ok";
	case H2_ERR_FRAME_SIZE: return "h2_frame_too_large";
	case H2_ERR_PROTOCOL: return "h2_protocol_error";
	case H2_ERR_LOST_SYNC: return "capture_loss";
	case H2_ERR_NO_MEMORY: return "no_memory";
	}
	return "unknown";
}

/* The block's bytes in the piece being read, as masked in the block. */
static void write_back(struct h2_framer *f)
{
	for (size_t i = 0; i < f->nsegs; i++)
		memcpy(f->segs[i].at, f->block.p + f->segs[i].off, f->segs[i].len);
	f->nsegs = 0;
}

/* A block not yet ended: masked so far, and written back. */
static void block_part(struct h2_framer *f)
{
	if (!f->nsegs)
		return;
	f->cb->on_headers_part(f->ctx, &f->block_frame, (uint8_t *)f->block.p, f->block.len);
	write_back(f);
}

static enum h2_error fail(struct h2_framer *f, enum h2_error e)
{
	/* a block that will never be decoded is never masked: its bytes here are zeroed */
	for (size_t i = 0; i < f->nsegs; i++)
		memset(f->segs[i].at, 0, f->segs[i].len);
	f->nsegs = 0;
	f->st = S_DEAD;
	f->err = e;
	buf__free(&f->block);
	return e;
}

static uint32_t be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t be31(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]) &
	       0x7fffffffu;
}

/* ---- recognising frames without the preface ---- */

static bool plausible(const uint8_t *h)
{
	static const uint8_t flags_of[10] = { 0x09, 0x2d, 0, 0, 0x01, 0x0c, 0x01, 0, 0, 0x04 };
	uint32_t len = be24(h), stream = be31(h + 5);
	uint8_t type = h[3];

	if (len > H2_DEFAULT_MAX_FRAME || type > H2_CONTINUATION || (h[5] & 0x80) ||
	    (h[4] & ~flags_of[type]))
		return false;
	switch (type) {
	case H2_SETTINGS: return !stream && len % 6 == 0 && (!(h[4] & H2_F_ACK) || !len);
	case H2_PING: return !stream && len == 8;
	case H2_GOAWAY: return !stream && len >= 8;
	case H2_WINDOW_UPDATE: return len == 4;
	case H2_PRIORITY: return stream && len == 5;
	case H2_RST_STREAM: return stream && len == 4;
	default: return stream != 0;
	}
}

bool h2__looks_like_frames(const uint8_t *data, size_t len)
{
	size_t off = 0, n = 0;

	while (off + H2_FRAME_HEADER_LEN <= len) {
		const uint8_t *h = data + off;

		if (!plausible(h))
			return false;
		if (!n && be31(h + 5) == 0 &&
		    (h[3] == H2_SETTINGS || h[3] == H2_PING || h[3] == H2_WINDOW_UPDATE))
			return true;
		n++;
		off += H2_FRAME_HEADER_LEN + be24(h);
	}
	return off == len ? n >= 1 : n >= 2;
}

/* ---- one frame ---- */

static enum h2_error begin_frame(struct h2_framer *f, uint64_t ts)
{
	struct h2_frame *c = &f->cur;

	c->len = be24(f->hdr);
	c->type = f->hdr[3];
	c->flags = f->hdr[4];
	c->stream = be31(f->hdr + 5);
	c->start_ns = ts;
	f->off = 0;
	f->pad = 0;
	f->prefix = 0;
	f->nctl = 0;
	f->data_ended = false;
	if (c->len > f->max_frame)
		return fail(f, H2_ERR_FRAME_SIZE);
	/* a header block admits nothing but its CONTINUATIONs until it ends */
	if (f->in_block != (c->type == H2_CONTINUATION) ||
	    (f->in_block && c->stream != f->block_frame.stream))
		return fail(f, H2_ERR_PROTOCOL);
	if (c->type == H2_DATA || c->type == H2_HEADERS || c->type == H2_PUSH_PROMISE) {
		if (c->flags & H2_F_PADDED)
			f->prefix = 1;
		if (c->type == H2_HEADERS && (c->flags & H2_F_PRIORITY))
			f->prefix += 5;
		if (c->type == H2_PUSH_PROMISE)
			f->prefix += 4;
		if (f->prefix > c->len)
			return fail(f, H2_ERR_PROTOCOL);
	}
	if (c->type == H2_HEADERS || c->type == H2_PUSH_PROMISE) {
		f->in_block = true;
		f->block_frame = *c;
		f->block_truncated = false;
		buf__reset(&f->block);
	}
	f->st = S_PAYLOAD;
	return H2_OK;
}

static void block_add(struct h2_framer *f, uint8_t *p, size_t n)
{
	size_t off = f->block.len;

	if (!n)
		return;
	if (f->block_truncated || buf__add(&f->block, p, n, H2_HEADER_BLOCK_MAX)) {
		f->block_truncated = true;
		memset(p, 0, n); /* past what is kept: never decoded, so never masked */
		return;
	}
	if (f->nsegs == BLOCK_SEGS)
		block_part(f);
	f->segs[f->nsegs].at = p;
	f->segs[f->nsegs].off = off;
	f->segs[f->nsegs].len = n;
	f->nsegs++;
}

/* The frame's payload is all read. */
static void end_frame(struct h2_framer *f, uint64_t ts)
{
	struct h2_frame *c = &f->cur;

	f->st = S_HEADER;
	f->nhdr = 0;
	switch (c->type) {
	case H2_DATA:
		if (!f->data_ended) /* no content, or its end was lost in a gap */
			f->cb->on_data(f->ctx, c, NULL, 0, true, ts);
		break;
	case H2_HEADERS:
	case H2_PUSH_PROMISE:
	case H2_CONTINUATION:
		if (c->flags & H2_F_END_HEADERS) {
			f->in_block = false;
			if (f->block_truncated) /* not decoded: what is kept is masked as a part */
				block_part(f);
			f->cb->on_headers(f->ctx, &f->block_frame, (uint8_t *)f->block.p, f->block.len,
					  f->block_truncated, ts);
			write_back(f);
			/* a large block's memory is not kept for a connection that may idle */
			if (f->block.cap > 4096)
				buf__free(&f->block);
			buf__reset(&f->block);
		}
		break;
	default:
		f->cb->on_frame(f->ctx, c, f->ctl, f->nctl, ts);
	}
}

/* Payload bytes: the prefix (pad length first), the content, the padding. Returns bytes used. */
static size_t payload(struct h2_framer *f, uint8_t *d, size_t n, uint64_t ts,
		      enum h2_error *e)
{
	struct h2_frame *c = &f->cur;
	size_t used = 0;

	while (used < n && f->off < f->prefix) {
		if (f->off == 0 && (c->flags & H2_F_PADDED)) {
			f->pad = d[used];
			if (f->prefix + f->pad > c->len) {
				*e = fail(f, H2_ERR_PROTOCOL);
				return used;
			}
		}
		used++;
		f->off++;
	}
	if (used < n && f->off < c->len - f->pad) {
		size_t k = c->len - f->pad - f->off;

		if (k > n - used)
			k = n - used;
		f->off += k;
		if (c->type == H2_DATA) {
			f->data_ended = f->off == c->len - f->pad;
			f->cb->on_data(f->ctx, c, d + used, k, f->data_ended, ts);
		} else if (c->type == H2_HEADERS || c->type == H2_CONTINUATION ||
			   c->type == H2_PUSH_PROMISE) {
			block_add(f, d + used, k);
		} else if (f->nctl < sizeof(f->ctl)) {
			size_t room = sizeof(f->ctl) - f->nctl;

			memcpy(f->ctl + f->nctl, d + used, k < room ? k : room);
			f->nctl += k < room ? k : room;
		}
		used += k;
	}
	if (used < n && f->off < c->len) { /* padding */
		size_t k = c->len - f->off;

		if (k > n - used)
			k = n - used;
		f->off += k;
		used += k;
	}
	if (f->off == c->len && f->st == S_PAYLOAD)
		end_frame(f, ts);
	return used;
}

enum h2_error h2_framer__feed(struct h2_framer *f, uint8_t *data, size_t len, uint64_t ts)
{
	size_t i = 0;
	enum h2_error e = H2_OK;

	f->nsegs = 0;
	if (f->st == S_RESYNC) {
		if (!h2__looks_like_frames(data, len)) {
			memset(data, 0, len); /* not read: may hold header blocks no one masks */
			return H2_OK;
		}
		f->st = S_HEADER;
		f->nhdr = 0;
		f->in_block = false;
	}
	while (i < len && !e) {
		switch (f->st) {
		case S_DEAD:
		case S_RESYNC:
			memset(data + i, 0, len - i);
			return f->err;
		case S_HEADER: {
			size_t k = H2_FRAME_HEADER_LEN - f->nhdr;

			if (k > len - i)
				k = len - i;
			memcpy(f->hdr + f->nhdr, data + i, k);
			f->nhdr += k;
			i += k;
			if (f->nhdr == H2_FRAME_HEADER_LEN) {
				e = begin_frame(f, ts);
				if (!e && f->cur.len == 0)
					end_frame(f, ts);
			}
			break;
		}
		case S_PAYLOAD:
			i += payload(f, data + i, len - i, ts, &e);
			break;
		}
	}
	if (e || f->st == S_DEAD) {
		memset(data + i, 0, len - i);
		return e ? e : f->err;
	}
	if (f->in_block)
		block_part(f);
	return H2_OK;
}

enum h2_error h2_framer__gap(struct h2_framer *f, uint64_t n, uint64_t ts)
{
	struct h2_frame *c = &f->cur;

	if (f->st == S_DEAD)
		return f->err;
	if (f->st == S_RESYNC)
		return H2_OK;
	/* inside a DATA frame's content and padding: skipped, the framing holds */
	if (f->st == S_PAYLOAD && c->type == H2_DATA && f->off >= f->prefix &&
	    n <= (uint64_t)(c->len - f->off)) {
		f->off += (uint32_t)n;
		if (f->off == c->len)
			end_frame(f, ts);
		return H2_OK;
	}
	f->st = S_RESYNC;
	f->in_block = false;
	buf__reset(&f->block);
	return H2_ERR_LOST_SYNC;
}
