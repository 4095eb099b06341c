/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* tokenscope's clock: CLOCK_MONOTONIC, the clock bpf_ktime_get_ns reads and every record's
 * time is on. */
#ifndef TS_CLOCK_H
#define TS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
