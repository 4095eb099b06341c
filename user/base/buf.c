// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
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
