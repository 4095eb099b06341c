// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/sse.h"

#define SSE_MAX_BYTES (4u << 20) /* one line or one event's data */

struct sse_parser {
	bool ndjson;
	sse_event_fn fn;
	void *ctx;
	bool after_cr; /* last byte was CR: a following LF belongs to the same line end */
	bool bom_checked;
	bool failed;
	struct buf line;
	struct buf data;
	char event[64];
	bool has_data;
};

/* The line and data buffers: SSE_MAX_BYTES each, their NUL included. */
static int buf_add(struct buf *b, const void *src, size_t n)
{
	return buf__add(b, src, n, SSE_MAX_BYTES - 1);
}

struct sse_parser *sse_parser__new(bool ndjson, sse_event_fn fn, void *ctx)
{
	struct sse_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->ndjson = ndjson;
	p->fn = fn;
	p->ctx = ctx;
	return p;
}

void sse_parser__free(struct sse_parser *p)
{
	if (!p)
		return;
	buf__free(&p->line);
	buf__free(&p->data);
	free(p);
}

static void dispatch(struct sse_parser *p, uint64_t ts)
{
	if (p->has_data) {
		/* The data buffer ends with the '\n' added after each data line: drop the last. */
		if (p->data.len && p->data.p[p->data.len - 1] == '\n')
			p->data.p[--p->data.len] = 0;
		p->fn(p->ctx, p->event, p->data.p ? p->data.p : "", p->data.len, ts);
	}
	p->data.len = 0;
	if (p->data.p)
		p->data.p[0] = 0;
	p->has_data = false;
	p->event[0] = 0;
}

static int sse_line(struct sse_parser *p, const char *l, size_t n, uint64_t ts)
{
	const char *colon, *val;
	size_t flen, vlen;

	if (p->ndjson) {
		while (n && (l[n - 1] == ' ' || l[n - 1] == '\t'))
			n--;
		if (n)
			p->fn(p->ctx, "", l, n, ts);
		return 0;
	}
	if (n == 0) {
		dispatch(p, ts);
		return 0;
	}
	if (l[0] == ':')
		return 0; /* comment (keep-alive ping) */
	colon = memchr(l, ':', n);
	if (colon) {
		flen = colon - l;
		val = colon + 1;
		vlen = n - flen - 1;
		if (vlen && *val == ' ') {
			val++;
			vlen--;
		}
	} else {
		flen = n;
		val = l + n;
		vlen = 0;
	}
	if (flen == 4 && !memcmp(l, "data", 4)) {
		if (buf_add(&p->data, val, vlen) || buf_add(&p->data, "\n", 1))
			return -1;
		p->has_data = true;
	} else if (flen == 5 && !memcmp(l, "event", 5)) {
		if (vlen >= sizeof(p->event))
			vlen = sizeof(p->event) - 1;
		memcpy(p->event, val, vlen);
		p->event[vlen] = 0;
	}
	/* id and retry change nothing we measure; unknown fields are ignored by the grammar. */
	return 0;
}

int sse_parser__feed(struct sse_parser *p, const uint8_t *data, size_t len, uint64_t ts)
{
	size_t i = 0;

	if (p->failed)
		return -1;
	if (!p->bom_checked && len) {
		/* A UTF-8 BOM may open the stream; it can arrive split, so wait for 3 bytes. */
		static const uint8_t bom[3] = { 0xef, 0xbb, 0xbf };
		size_t have = p->line.len;

		if (have + len < 3 && !memcmp(data, bom + have, len) &&
		    (!have || !memcmp(p->line.p, bom, have))) {
			if (buf_add(&p->line, data, len))
				goto fail;
			return 0;
		}
		p->bom_checked = true;
		if (have) {
			size_t need = 3 - have;

			if (!memcmp(p->line.p, bom, have) && len >= need && !memcmp(data, bom + have, need)) {
				p->line.len = 0;
				i = need;
			}
		} else if (len >= 3 && !memcmp(data, bom, 3)) {
			i = 3;
		}
	}
	while (i < len) {
		const uint8_t *start = data + i;
		size_t n = 0;

		if (p->after_cr) {
			p->after_cr = false;
			if (data[i] == '\n') {
				i++;
				continue;
			}
		}
		const uint8_t *lf = memchr(start, '\n', len - i), *cr;

		n = lf ? (size_t)(lf - start) : len - i;
		cr = memchr(start, '\r', n);
		if (cr)
			n = (size_t)(cr - start);
		if (i + n == len) { /* the line continues in the next feed */
			if (buf_add(&p->line, start, n))
				goto fail;
			break;
		}
		i += n;
		p->after_cr = data[i] == '\r';
		i++;
		if (!p->line.len && !p->ndjson) {
			/* the whole line is here: read in place (its data is copied to the event's;
			 * an NDJSON line is the event, NUL-terminated in its buffer) */
			if (sse_line(p, (const char *)start, n, ts))
				goto fail;
			continue;
		}
		if (buf_add(&p->line, start, n) || sse_line(p, p->line.p, p->line.len, ts))
			goto fail;
		p->line.len = 0;
	}
	return 0;
fail:
	p->failed = true;
	return -1;
}

void sse_parser__finish(struct sse_parser *p, uint64_t ts)
{
	if (p->failed)
		return;
	if (p->ndjson && p->line.len)
		sse_line(p, p->line.p, p->line.len, ts);
	/* SSE: an event not followed by a blank line is discarded at end of stream (WHATWG). */
	p->line.len = 0;
}
