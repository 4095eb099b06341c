/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A protobuf writer for the few wire types tokenscope's binary outputs need (varint, fixed64,
 * double, length-delimited, nested messages). The bytes gather in one buffer; a caller takes
 * them whole (b.p, b.len) once the outermost message is ended.
 */
#ifndef TS_PBWRITE_H
#define TS_PBWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define PBW_MAX_DEPTH 8 /* nested messages open at once */

struct pbw {
	struct buf b;
	size_t open[PBW_MAX_DEPTH]; /* where each open message's length goes */
	int depth;
	bool failed; /* out of memory, or nested too deep: the bytes are not a message */
};

/* Empty again (memory kept), for the next message. */
void pbw__reset(struct pbw *w);
void pbw__free(struct pbw *w);

void pbw__uint(struct pbw *w, uint32_t field, uint64_t v);      /* varint */
void pbw__fixed64(struct pbw *w, uint32_t field, uint64_t v);
void pbw__double(struct pbw *w, uint32_t field, double d);
void pbw__bytes(struct pbw *w, uint32_t field, const void *p, size_t n);
void pbw__string(struct pbw *w, uint32_t field, const char *s);

/* Bytes already encoded (whole fields), as they are. */
void pbw__raw(struct pbw *w, const void *p, size_t n);

/* A nested message as field `field`: everything written until the matching pbw__end is its
 * body. Its length goes in a 4-byte varint (a redundant encoding every protobuf reader takes),
 * so a message is at most 256 MiB. */
void pbw__begin(struct pbw *w, uint32_t field);
void pbw__end(struct pbw *w);

#endif
