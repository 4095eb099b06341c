// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>

#include "base/pidset.h"

static size_t slot(const struct pidset *s, uint32_t pid)
{
	return (size_t)(pid * 2654435761u) & (s->cap - 1);
}

static bool grow(struct pidset *s)
{
	size_t cap = s->cap ? 2 * s->cap : 16;
	uint32_t *old = s->v, *v = calloc(cap, sizeof(*v));
	size_t oldcap = s->cap;

	if (!v)
		return false;
	s->v = v;
	s->cap = cap;
	s->n = 0;
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i])
			pidset__add(s, old[i]);
	}
	free(old);
	return true;
}

bool pidset__has(const struct pidset *s, uint32_t pid)
{
	if (!s->cap || !pid)
		return false;
	for (size_t i = slot(s, pid); s->v[i]; i = (i + 1) & (s->cap - 1)) {
		if (s->v[i] == pid)
			return true;
	}
	return false;
}

bool pidset__add(struct pidset *s, uint32_t pid)
{
	size_t i;

	if (!pid || pidset__has(s, pid))
		return false;
	if ((s->n + 1) * 2 > s->cap && !grow(s))
		return false;
	for (i = slot(s, pid); s->v[i]; i = (i + 1) & (s->cap - 1))
		;
	s->v[i] = pid;
	s->n++;
	return true;
}

void pidset__del(struct pidset *s, uint32_t pid)
{
	size_t i, j;

	if (!s->cap || !pid)
		return;
	for (i = slot(s, pid); s->v[i] != pid; i = (i + 1) & (s->cap - 1)) {
		if (!s->v[i])
			return;
	}
	/* backward shift: entries after it that probed past i move back into the hole */
	for (j = (i + 1) & (s->cap - 1); s->v[j]; j = (j + 1) & (s->cap - 1)) {
		size_t home = slot(s, s->v[j]);

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			s->v[i] = s->v[j];
			i = j;
		}
	}
	s->v[i] = 0;
	s->n--;
	/* a set that emptied gives its memory back */
	if (!s->n)
		pidset__free(s);
}

void pidset__free(struct pidset *s)
{
	free(s->v);
	*s = (struct pidset){ 0 };
}
