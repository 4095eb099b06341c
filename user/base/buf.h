/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Growable memory: a byte buffer with a size limit, and capacity doubling for arrays. */
#ifndef TS_BUF_H
#define TS_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Bytes, always followed by a NUL (not counted in len) once anything was added. */
struct buf {
	char *p;
	size_t len, cap;
	bool overflow; /* something did not fit (max, or no memory): the contents are cut */
};

/* Append n bytes. Past max bytes (the NUL not counted), or without memory, nothing more is kept:
 * overflow is set and stays set until buf__reset. Returns 0, or -1 when overflowed. */
int buf__add(struct buf *b, const void *src, size_t n, size_t max);
/* Append printf's output of fmt, as buf__add does. */
int buf__printf(struct buf *b, size_t max, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int buf__vprintf(struct buf *b, size_t max, const char *fmt, va_list ap);
/* Empty again, memory kept. */
void buf__reset(struct buf *b);
void buf__free(struct buf *b);

/* Room for at least need elements of elem bytes in *arr, whose capacity is *cap (doubled as
 * needed, from 16). Returns false, leaving both unchanged, when memory runs out. */
bool array__reserve(void **arr, size_t *cap, size_t need, size_t elem);

#endif
