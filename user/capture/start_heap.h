/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The start's memory, on huge pages. Loading the probe families parses the kernel's BTF once
 * per BPF object (libbpf: 5.4 MB of BTF and its index, on four threads at once), and every
 * fresh 4 KiB page of it is a page fault, 10-20 us each on a virtual machine: the four parses
 * took 150-200 ms of a 340 ms start here (docs/performance.md, Start). With transparent huge
 * pages a fault brings 2 MiB.
 */
#ifndef TS_START_HEAP_H
#define TS_START_HEAP_H

/* Before the families load: the heap grown once, ahead, and that range advised
 * MADV_HUGEPAGE; every thread allocates from it (one malloc arena, for the tracer's whole
 * life) and large blocks too (not mmap'd apart). Where THP is off ("never"), the advice does
 * nothing and the start is as it was. */
void start_heap__reserve(void);

/* After: what the start freed goes back to the kernel (malloc_trim), and malloc's thresholds
 * are set for the rest of the run. */
void start_heap__release(void);

#endif
