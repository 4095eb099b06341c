// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

int buf__add(struct buf *b, const void *src, size_t n, size_t max)
{
	if (b->overflow)
		return -1;
	if (b->len + n > max || !array__reserve((void **)&b->p, &b->cap, b->len + n + 1, 1)) {
		b->overflow = true;
		return -1;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

int buf__vprintf(struct buf *b, size_t max, const char *fmt, va_list ap)
{
	char small[512], *big = NULL;
	va_list again;
	int n, err;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	if (n >= (int)sizeof(small)) {
		big = malloc((size_t)n + 1);
		if (big)
			vsnprintf(big, (size_t)n + 1, fmt, again);
	}
	va_end(again);
	if (n < 0 || (n >= (int)sizeof(small) && !big)) {
		b->overflow = true;
		return -1;
	}
	err = buf__add(b, big ? big : small, (size_t)n, max);
	free(big);
	return err;
}

int buf__printf(struct buf *b, size_t max, const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = buf__vprintf(b, max, fmt, ap);
	va_end(ap);
	return err;
}

void buf__reset(struct buf *b)
{
	b->len = 0;
	b->overflow = false;
	if (b->p)
		b->p[0] = 0;
}

void buf__free(struct buf *b)
{
	free(b->p);
	*b = (struct buf){ 0 };
}

bool array__reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return true;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*arr, ncap * elem);
	if (!np)
		return false;
	*arr = np;
	*cap = ncap;
	return true;
}
