// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The protobuf writer (pbwrite.h). Wire format: protobuf.dev/programming-guides/encoding. */
#include <string.h>

#include "base/pbwrite.h"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2 };

#define LEN_ROOM 4		     /* bytes kept for a nested message's length */
#define LEN_MAX ((size_t)1 << 28)   /* what LEN_ROOM varint bytes hold */

static void raw(struct pbw *w, const void *p, size_t n)
{
	if (buf__add(&w->b, p, n, SIZE_MAX >> 1))
		w->failed = true;
}

static void varint(struct pbw *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	raw(w, b, n);
}

static void key(struct pbw *w, uint32_t field, uint32_t wire)
{
	varint(w, (uint64_t)field << 3 | wire);
}

void pbw__reset(struct pbw *w)
{
	buf__reset(&w->b);
	w->depth = 0;
	w->failed = false;
}

void pbw__free(struct pbw *w)
{
	buf__free(&w->b);
}

void pbw__raw(struct pbw *w, const void *p, size_t n)
{
	raw(w, p, n);
}

void pbw__uint(struct pbw *w, uint32_t field, uint64_t v)
{
	key(w, field, WIRE_VARINT);
	varint(w, v);
}

void pbw__fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	key(w, field, WIRE_I64);
	raw(w, b, 8);
}

void pbw__double(struct pbw *w, uint32_t field, double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	pbw__fixed64(w, field, v); /* a double is a 64-bit little-endian field */
}

void pbw__bytes(struct pbw *w, uint32_t field, const void *p, size_t n)
{
	key(w, field, WIRE_LEN);
	varint(w, n);
	raw(w, p, n);
}

void pbw__string(struct pbw *w, uint32_t field, const char *s)
{
	pbw__bytes(w, field, s, strlen(s));
}

void pbw__begin(struct pbw *w, uint32_t field)
{
	static const uint8_t room[LEN_ROOM] = { 0x80, 0x80, 0x80, 0x00 };

	key(w, field, WIRE_LEN);
	if (w->depth < PBW_MAX_DEPTH)
		w->open[w->depth] = w->b.len;
	else
		w->failed = true;
	w->depth++;
	raw(w, room, sizeof(room));
}

void pbw__end(struct pbw *w)
{
	size_t at, n;

	if (w->depth == 0) {
		w->failed = true;
		return;
	}
	if (--w->depth >= PBW_MAX_DEPTH || w->failed)
		return;
	at = w->open[w->depth];
	n = w->b.len - at - LEN_ROOM;
	if (n >= LEN_MAX) {
		w->failed = true;
		return;
	}
	for (int i = 0; i < LEN_ROOM; i++)
		w->b.p[at + i] = (char)(((n >> (7 * i)) & 0x7f) | (i < LEN_ROOM - 1 ? 0x80 : 0));
}
