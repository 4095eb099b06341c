/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A set of process ids (open addressing, linear probing, deletion by backward shift): the
 * processes a summary line stands for while they live. Memory follows the live ones. */
#ifndef TS_PIDSET_H
#define TS_PIDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pidset {
	uint32_t *v; /* 0: empty (pid 0 is never a traced process) */
	size_t n, cap;
};

/* Add pid. Returns true if it was not there (false also when memory runs out). */
bool pidset__add(struct pidset *s, uint32_t pid);
bool pidset__has(const struct pidset *s, uint32_t pid);
void pidset__del(struct pidset *s, uint32_t pid);
void pidset__free(struct pidset *s);

#endif
