// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* ZMTP 3.x, one direction (proto/zmtp.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "proto/zmtp.h"

#define F_MORE 0x01
#define F_LONG 0x02
#define F_COMMAND 0x04
#define F_RESERVED 0xf8

struct zmtp {
	struct zmtp_callbacks cb;
	void *ctx;
	enum zmtp_state err;
	bool greeting_done;
	uint8_t greeting[ZMTP_GREETING_LEN];
	size_t ngreeting;
	bool synced; /* at a frame boundary: from the start, or a message start found */
	uint64_t skipped;
	/* the frame being read: its header, then its body */
	uint8_t hdr[9];
	size_t nhdr;
	bool in_body;
	uint8_t flags;
	uint64_t body_len, body_left;
	/* the message being read */
	struct buf bodies[ZMTP_FRAMES_MAX];
	struct zmtp_frame frames[ZMTP_FRAMES_MAX];
	size_t nframes, dropped;
	uint64_t start_ns;
	struct buf command;
};

struct zmtp *zmtp__new(const struct zmtp_callbacks *cb, void *ctx, bool from_start)
{
	struct zmtp *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->cb = *cb;
	z->ctx = ctx;
	z->greeting_done = !from_start;
	z->synced = from_start;
	return z;
}

void zmtp__free(struct zmtp *z)
{
	if (!z)
		return;
	for (size_t i = 0; i < ZMTP_FRAMES_MAX; i++)
		buf__free(&z->bodies[i]);
	buf__free(&z->command);
	free(z);
}

uint64_t zmtp__skipped(const struct zmtp *z)
{
	return z->skipped;
}

bool zmtp__looks_like_greeting(const uint8_t *d, size_t n)
{
	return n >= 1 && d[0] == 0xff && (n < 10 || d[9] == 0x7f) && (n < 11 || d[10] >= 3);
}

/* ---- the greeting ---- */

static enum zmtp_state greeting(struct zmtp *z, const uint8_t **data, size_t *len)
{
	size_t n = ZMTP_GREETING_LEN - z->ngreeting;
	struct zmtp_greeting g = { 0 };

	if (n > *len)
		n = *len;
	memcpy(z->greeting + z->ngreeting, *data, n);
	z->ngreeting += n;
	*data += n;
	*len -= n;
	if (!zmtp__looks_like_greeting(z->greeting, z->ngreeting))
		return ZMTP_ERR_GREETING;
	if (z->ngreeting < ZMTP_GREETING_LEN)
		return ZMTP_OK;
	z->greeting_done = true;
	g.major = z->greeting[10];
	g.minor = z->greeting[11];
	memcpy(g.mechanism, z->greeting + 12, 20); /* NUL-padded */
	g.as_server = z->greeting[32] != 0;
	if (z->cb.greeting)
		z->cb.greeting(z->ctx, &g);
	return ZMTP_OK;
}

/* ---- frames ---- */

static size_t header_len(uint8_t flags)
{
	return flags & F_LONG ? 9 : 2;
}

static uint64_t header_size(const uint8_t *hdr)
{
	uint64_t n = 0;

	if (!(hdr[0] & F_LONG))
		return hdr[1];
	for (int i = 1; i < 9; i++)
		n = n << 8 | hdr[i];
	return n;
}

/* A frame's whole body is in: a command, or a part of the message. */
static enum zmtp_state frame_done(struct zmtp *z, uint64_t ts)
{
	struct zmtp_message m;

	if (z->flags & F_COMMAND) {
		const uint8_t *b = (const uint8_t *)z->command.p;
		char name[256];
		size_t nlen;

		if (z->command.overflow || z->command.len < 1 || !(nlen = b[0]) ||
		    1 + nlen > z->command.len)
			return ZMTP_ERR_FRAME;
		memcpy(name, b + 1, nlen);
		name[nlen] = 0;
		if (z->cb.command)
			z->cb.command(z->ctx, name, b + 1 + nlen, z->command.len - 1 - nlen, ts);
		buf__reset(&z->command);
		return ZMTP_OK;
	}
	if (z->nframes < ZMTP_FRAMES_MAX) {
		struct buf *b = &z->bodies[z->nframes];

		if (b->overflow) /* no memory: the cap itself is never passed */
			return ZMTP_ERR_NO_MEMORY;
		z->frames[z->nframes++] = (struct zmtp_frame){
			.data = (const uint8_t *)(b->p ? b->p : ""), .len = z->body_len,
			.cut = z->body_len > ZMTP_FRAME_KEEP };
	} else {
		z->dropped++;
	}
	if (z->flags & F_MORE)
		return ZMTP_OK;
	m = (struct zmtp_message){ z->frames, z->nframes, z->dropped, z->start_ns, ts };
	z->cb.message(z->ctx, &m);
	for (size_t i = 0; i < z->nframes; i++)
		buf__reset(&z->bodies[i]);
	z->nframes = z->dropped = 0;
	return ZMTP_OK;
}

/* The header's bytes from *data; once whole, the body starts. */
static enum zmtp_state header(struct zmtp *z, const uint8_t **data, size_t *len, uint64_t ts)
{
	size_t need;

	if (!z->nhdr) {
		if (**data & F_RESERVED)
			return ZMTP_ERR_FRAME;
		if (!(**data & F_COMMAND) && !z->nframes)
			z->start_ns = ts; /* a message's first frame */
	}
	need = header_len(z->nhdr ? z->hdr[0] : **data) - z->nhdr;
	if (need > *len)
		need = *len;
	memcpy(z->hdr + z->nhdr, *data, need);
	z->nhdr += need;
	*data += need;
	*len -= need;
	if (z->nhdr < header_len(z->hdr[0]))
		return ZMTP_OK;
	z->flags = z->hdr[0];
	z->body_len = z->body_left = header_size(z->hdr);
	z->nhdr = 0;
	/* a command is one frame; sizes past 2^63 are no real frame */
	if (((z->flags & F_COMMAND) && (z->flags & F_MORE)) || z->body_len >> 63)
		return ZMTP_ERR_FRAME;
	if (!(z->flags & F_COMMAND) && z->nframes < ZMTP_FRAMES_MAX)
		buf__reset(&z->bodies[z->nframes]);
	z->in_body = true;
	if (!z->body_left) {
		z->in_body = false;
		return frame_done(z, ts);
	}
	return ZMTP_OK;
}

static enum zmtp_state body(struct zmtp *z, const uint8_t **data, size_t *len, uint64_t ts)
{
	size_t n = *len < z->body_left ? *len : (size_t)z->body_left;
	struct buf *b = z->flags & F_COMMAND ? &z->command
			: z->nframes < ZMTP_FRAMES_MAX ? &z->bodies[z->nframes] : NULL;

	if (b && b->len < ZMTP_FRAME_KEEP && !b->overflow) {
		size_t keep = ZMTP_FRAME_KEEP - b->len < n ? ZMTP_FRAME_KEEP - b->len : n;

		buf__add(b, *data, keep, ZMTP_FRAME_KEEP);
	}
	*data += n;
	*len -= n;
	z->body_left -= n;
	if (z->body_left)
		return ZMTP_OK;
	z->in_body = false;
	return frame_done(z, ts);
}

/* Joined mid-stream: do this piece's bytes begin a message, and end one at their end, frame by
 * frame? */
static bool starts_message(const uint8_t *d, size_t len)
{
	size_t at = 0;
	bool more = false;

	if (!len)
		return false;
	while (at < len) {
		uint8_t flags = d[at];
		uint64_t size;

		if ((flags & F_RESERVED) || at + header_len(flags) > len)
			return false;
		size = header_size(d + at);
		if (((flags & F_COMMAND) && (flags & F_MORE)) || size > len - at - header_len(flags))
			return false;
		if ((flags & F_COMMAND) && (!size || !d[at + header_len(flags)] ||
					    1u + d[at + header_len(flags)] > size))
			return false;
		at += header_len(flags) + size;
		more = flags & F_MORE;
	}
	return !more;
}

enum zmtp_state zmtp__feed(struct zmtp *z, const uint8_t *data, size_t len, uint64_t ts)
{
	if (z->err)
		return z->err;
	if (!z->synced) {
		if (!starts_message(data, len)) {
			z->skipped += len;
			if (z->skipped > ZMTP_RESYNC_MAX)
				z->err = ZMTP_ERR_RESYNC;
			return z->err;
		}
		z->synced = true;
	}
	while (len && !z->err) {
		if (!z->greeting_done)
			z->err = greeting(z, &data, &len);
		else if (z->in_body)
			z->err = body(z, &data, &len, ts);
		else
			z->err = header(z, &data, &len, ts);
	}
	return z->err;
}

int zmtp__property(const uint8_t *data, size_t len, const char *name, const uint8_t **value,
		   uint32_t *vlen)
{
	size_t at = 0, want = strlen(name);

	while (at < len) {
		size_t nlen = data[at];
		uint32_t v;

		if (at + 1 + nlen + 4 > len)
			return -1;
		v = (uint32_t)data[at + 1 + nlen] << 24 | (uint32_t)data[at + 2 + nlen] << 16 |
		    (uint32_t)data[at + 3 + nlen] << 8 | data[at + 4 + nlen];
		if (v > len - (at + 5 + nlen))
			return -1;
		/* property names are case-insensitive (ZMTP 3.0, 3.1) */
		if (nlen == want && !strncasecmp((const char *)data + at + 1, name, nlen)) {
			*value = data + at + 5 + nlen;
			*vlen = v;
			return 1;
		}
		at += 5 + nlen + v;
	}
	return 0;
}
