// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The newest items of one size (base/recent.h). */
#include <stdlib.h>
#include <string.h>

#include "base/recent.h"

void recent__init(struct recent *r, size_t size, size_t max, uint64_t horizon_ns)
{
	*r = (struct recent){ .size = size, .max = max, .horizon_ns = horizon_ns };
}

void recent__free(struct recent *r)
{
	free(r->v);
	r->v = NULL;
	r->len = r->cap = r->head = 0;
}

/* The i-th oldest item. */
static void *oldest(const struct recent *r, size_t i)
{
	return (char *)r->v + (r->head + i) % r->cap * r->size;
}

void *recent__newest(const struct recent *r, size_t i)
{
	return oldest(r, r->len - 1 - i);
}

static void pop(struct recent *r)
{
	uint64_t end = *(const uint64_t *)oldest(r, 0);

	if (end > r->dropped_ns)
		r->dropped_ns = end;
	r->head = (r->head + 1) % r->cap;
	r->len--;
	r->dropped++;
}

void *recent__push(struct recent *r)
{
	if (r->len == r->cap && r->cap == r->max) {
		pop(r);
	} else if (r->len == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		char *v;

		if (cap > r->max)
			cap = r->max;
		v = malloc(cap * r->size);
		if (!v)
			return NULL;
		for (size_t i = 0; i < r->len; i++) /* oldest first again, from 0 */
			memcpy(v + i * r->size, oldest(r, i), r->size);
		free(r->v);
		r->v = v;
		r->cap = cap;
		r->head = 0;
	}
	return oldest(r, r->len++);
}

void recent__expire(struct recent *r, uint64_t newest_ns)
{
	while (r->len > 1 && *(const uint64_t *)oldest(r, 0) + r->horizon_ns < newest_ns)
		pop(r);
}
