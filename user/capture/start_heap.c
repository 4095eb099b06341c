// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture/start_heap.h"

/* What the start allocates at its peak, four BTF parses at once, with room: virtual until
 * touched, and given back after. */
#define START_HEAP_RESERVE (256 << 20)
/* glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): below it, blocks
 * come from the heap, where the advice holds */
#define LARGE_FROM_HEAP (32 << 20)
/* After the start: blocks of 1 MiB and more mmap'd apart, and the heap's free top given back
 * past 4 MiB. Setting any threshold turns glibc's own adjustment of them off for good, so
 * they are set to values of the kind it reaches. */
#define MMAP_AFTER (1 << 20)
#define TRIM_AFTER (4 << 20)
#define TOP_PAD_AFTER (128 << 10) /* glibc's default */

void start_heap__reserve(void)
{
	void *volatile grow;
	char *before, *after;
	uintptr_t from, page = (uintptr_t)sysconf(_SC_PAGESIZE);

	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, LARGE_FROM_HEAP);
	mallopt(M_TRIM_THRESHOLD, 2 * START_HEAP_RESERVE);
	mallopt(M_TOP_PAD, START_HEAP_RESERVE);
	before = sbrk(0);
	grow = malloc(1 << 20); /* more than the heap has free: it grows by the pad */
	free(grow);
	after = sbrk(0);
	from = ((uintptr_t)before + page - 1) & ~(page - 1);
	if (before != (void *)-1 && after != (void *)-1 && (uintptr_t)after > from)
		madvise((void *)from, (uintptr_t)after - from, MADV_HUGEPAGE);
}

void start_heap__release(void)
{
	mallopt(M_TOP_PAD, TOP_PAD_AFTER);
	mallopt(M_MMAP_THRESHOLD, MMAP_AFTER);
	mallopt(M_TRIM_THRESHOLD, TRIM_AFTER);
	malloc_trim(0);
}
