// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* MessagePack, read in place (proto/msgpack.h). */
#include <string.h>

#include "proto/msgpack.h"

/* n bytes big-endian at *p (n <= 8), *p moved past them. */
static int be(const uint8_t **p, const uint8_t *end, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if ((size_t)(end - *p) < n)
		return -1;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | (*p)[i];
	*p += n;
	*out = v;
	return 0;
}

/* len bytes of payload at *p: kept in o, *p moved past them. */
static int payload(const uint8_t **p, const uint8_t *end, uint64_t len, struct mp_obj *o)
{
	if ((uint64_t)(end - *p) < len)
		return -1;
	o->p = *p;
	o->len = (uint32_t)len;
	*p += len;
	return 0;
}

static int sized(const uint8_t **p, const uint8_t *end, size_t width, enum mp_type t,
		 struct mp_obj *o)
{
	uint64_t n;

	if (be(p, end, width, &n))
		return -1;
	o->type = t;
	if (t == MP_ARRAY || t == MP_MAP) {
		o->len = (uint32_t)n;
		return 0;
	}
	return payload(p, end, n, o);
}

static int ext(const uint8_t **p, const uint8_t *end, size_t width, int fixed, struct mp_obj *o)
{
	uint64_t n = (uint64_t)fixed;

	if (width && be(p, end, width, &n))
		return -1;
	if (end - *p < 1)
		return -1;
	o->type = MP_EXT;
	o->ext_type = (int8_t)**p;
	(*p)++;
	return payload(p, end, n, o);
}

int mp__next(const uint8_t **p, const uint8_t *end, struct mp_obj *o)
{
	uint8_t b;
	uint64_t v;

	memset(o, 0, sizeof(*o));
	if (*p >= end)
		return -1;
	b = *(*p)++;
	if (b <= 0x7f) {
		o->type = MP_UINT;
		o->v.u = b;
		return 0;
	}
	if (b >= 0xe0) {
		o->type = MP_INT;
		o->v.i = (int8_t)b;
		return 0;
	}
	if ((b & 0xf0) == 0x80 || (b & 0xf0) == 0x90) {
		o->type = (b & 0xf0) == 0x80 ? MP_MAP : MP_ARRAY;
		o->len = b & 0x0f;
		return 0;
	}
	if ((b & 0xe0) == 0xa0) {
		o->type = MP_STR;
		return payload(p, end, b & 0x1f, o);
	}
	switch (b) {
	case 0xc0: o->type = MP_NIL; return 0;
	case 0xc2: case 0xc3: o->type = MP_BOOL; o->v.b = b == 0xc3; return 0;
	case 0xc4: return sized(p, end, 1, MP_BIN, o);
	case 0xc5: return sized(p, end, 2, MP_BIN, o);
	case 0xc6: return sized(p, end, 4, MP_BIN, o);
	case 0xc7: return ext(p, end, 1, 0, o);
	case 0xc8: return ext(p, end, 2, 0, o);
	case 0xc9: return ext(p, end, 4, 0, o);
	case 0xca: {
		uint32_t bits;
		float f;

		if (be(p, end, 4, &v))
			return -1;
		bits = (uint32_t)v;
		memcpy(&f, &bits, sizeof(f));
		o->type = MP_FLOAT;
		o->v.f = f;
		return 0;
	}
	case 0xcb:
		if (be(p, end, 8, &v))
			return -1;
		o->type = MP_FLOAT;
		memcpy(&o->v.f, &v, sizeof(o->v.f));
		return 0;
	case 0xcc: case 0xcd: case 0xce: case 0xcf:
		if (be(p, end, (size_t)1 << (b - 0xcc), &v))
			return -1;
		o->type = MP_UINT;
		o->v.u = v;
		return 0;
	case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
		size_t n = (size_t)1 << (b - 0xd0);

		if (be(p, end, n, &v))
			return -1;
		o->type = MP_INT;
		/* sign-extend from n bytes */
		o->v.i = n == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * n)) >> (64 - 8 * n);
		return 0;
	}
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
		return ext(p, end, 0, 1 << (b - 0xd4), o);
	case 0xd9: return sized(p, end, 1, MP_STR, o);
	case 0xda: return sized(p, end, 2, MP_STR, o);
	case 0xdb: return sized(p, end, 4, MP_STR, o);
	case 0xdc: return sized(p, end, 2, MP_ARRAY, o);
	case 0xdd: return sized(p, end, 4, MP_ARRAY, o);
	case 0xde: return sized(p, end, 2, MP_MAP, o);
	case 0xdf: return sized(p, end, 4, MP_MAP, o);
	}
	return -1; /* 0xc1: never used */
}

/*
 * One whole object. Iterative, with a stack of what is left to read at each depth: an input
 * cannot nest past MP_DEPTH_MAX, and each element read takes at least one byte, so the work
 * is bounded by the input's length however large a count claims to be.
 */
int mp__skip(const uint8_t **p, const uint8_t *end)
{
	uint64_t left[MP_DEPTH_MAX + 1];
	int depth = 0;
	struct mp_obj o;

	left[0] = 1;
	while (depth >= 0) {
		if (!left[depth]) {
			depth--;
			continue;
		}
		left[depth]--;
		if (mp__next(p, end, &o))
			return -1;
		if ((o.type == MP_ARRAY || o.type == MP_MAP) && o.len) {
			if (depth == MP_DEPTH_MAX)
				return -1;
			left[++depth] = o.type == MP_MAP ? 2ull * o.len : o.len;
		}
	}
	return 0;
}

bool mp__int(const struct mp_obj *o, int64_t *out)
{
	if (o->type == MP_INT) {
		*out = o->v.i;
		return true;
	}
	if (o->type == MP_UINT && o->v.u <= (uint64_t)INT64_MAX) {
		*out = (int64_t)o->v.u;
		return true;
	}
	return false;
}

bool mp__number(const struct mp_obj *o, double *out)
{
	int64_t i;

	if (o->type == MP_FLOAT) {
		*out = o->v.f;
		return true;
	}
	if (o->type == MP_UINT) {
		*out = (double)o->v.u;
		return true;
	}
	if (mp__int(o, &i)) {
		*out = (double)i;
		return true;
	}
	return false;
}

bool mp__str_is(const struct mp_obj *o, const char *s)
{
	size_t n = strlen(s);

	return o->type == MP_STR && o->len == n && !memcmp(o->p, s, n);
}
