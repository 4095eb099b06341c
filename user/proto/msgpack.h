/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * MessagePack (github.com/msgpack/msgpack/blob/master/spec.md), read in place: one object's
 * header at a time, its strings and binaries pointing into the input, nothing allocated.
 * vLLM's engine-core messages are msgpack (msgspec's array-like structs and maps); what they
 * mean is read above this.
 *
 * Every read is bounded by the input's end; a skip is bounded in depth (MP_DEPTH_MAX), so no
 * input can run it off its bytes or its stack.
 */
#ifndef TS_MSGPACK_H
#define TS_MSGPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MP_DEPTH_MAX 64

enum mp_type {
	MP_NIL,
	MP_BOOL,
	MP_UINT,  /* v.u: positive fixint, uint 8-64 */
	MP_INT,	  /* v.i: negative fixint, int 8-64 (a non-negative int is MP_INT too) */
	MP_FLOAT, /* v.f: float 32 or 64 */
	MP_STR,	  /* p, len */
	MP_BIN,	  /* p, len */
	MP_EXT,	  /* ext_type, p, len */
	MP_ARRAY, /* len elements follow */
	MP_MAP,	  /* len key-value pairs follow */
};

struct mp_obj {
	enum mp_type type;
	union {
		bool b;
		uint64_t u;
		int64_t i;
		double f;
	} v;
	const uint8_t *p; /* MP_STR, MP_BIN, MP_EXT: the bytes */
	uint32_t len;	  /* their count; MP_ARRAY, MP_MAP: elements or pairs */
	int8_t ext_type;
};

/* The object at *p (before end): its header, *p moved past it (past a string's, binary's or
 * ext's bytes too; to an array's or map's first element). 0, or -1 when malformed or cut. */
int mp__next(const uint8_t **p, const uint8_t *end, struct mp_obj *o);
/* Skips one whole object, its elements included. 0, or -1. */
int mp__skip(const uint8_t **p, const uint8_t *end);
/* An integer (MP_UINT or MP_INT) as a signed 64-bit value; false for anything else or a
 * uint past INT64_MAX. */
bool mp__int(const struct mp_obj *o, int64_t *out);
/* A number of any kind (integers and floats) as a double; false for anything else. */
bool mp__number(const struct mp_obj *o, double *out);
/* Is o the string s? */
bool mp__str_is(const struct mp_obj *o, const char *s);

#endif
