/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tokenscope top`'s judgements (sinks/top.c owns one): whether TTFT changed in the view's
 * window against the run's first minute, in `tokenscope compare`'s words (llm/compare.h),
 * and the agent sessions that ended in the window (llm/session.h).
 */
#ifndef TS_TOP_JUDGE_H
#define TS_TOP_JUDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/compare.h"
#include "llm/request.h"
#include "llm/session.h"

#define TOP_BASELINE_NS (60ull * 1000000000ull) /* the run's first minute */
#define TOP_CHANGE_EVERY_NS (10ull * 1000000000ull)
#define TOP_SESSIONS_KEPT 4096 /* the newest sessions, for the window's rows */
#define TOP_SESSION_ROWS 4
#define TOP_JUDGE_LINE 1200

/* Sessions of one client command, role and consumer that ended in the window. */
struct top_session_row {
	char name[64]; /* "comm role consumer", printable */
	uint64_t n;
	double calls_p50, total_p50_ms, share_p50; /* share: inside calls, 0..100 */
};

struct top_judge;

struct top_judge *top_judge__new(void);
void top_judge__free(struct top_judge *tj);
/* A finished request: the baseline takes it while it began in the run's first minute. */
void top_judge__request(struct top_judge *tj, const struct request *r,
			const struct request_metrics *m, uint64_t run_start_ns);
void top_judge__session(struct top_judge *tj, const struct session *s);
/* Whether the change line is due for a window ending at as_of (every TOP_CHANGE_EVERY_NS,
 * once the window begins past the baseline); then the window's requests go in one by one,
 * and top_judge__change says it. */
bool top_judge__due(struct top_judge *tj, uint64_t as_of_ns, uint64_t window_ns,
		    uint64_t run_start_ns);
void top_judge__window_add(struct top_judge *tj, const char *comm, const char *role,
			   const char *api, const char *model, const struct cmp_request *q);
void top_judge__change(struct top_judge *tj, const char *window_name, uint64_t as_of_ns);
/* The last change line ("" when TTFT did not change past noise, or none was due yet). */
const char *top_judge__line(const struct top_judge *tj);
/* The sessions that ended in (lo, hi] (all: every one kept), grouped: rows written. */
size_t top_judge__sessions(struct top_judge *tj, uint64_t lo, uint64_t hi, bool all,
			   struct top_session_row *rows, size_t max);

#endif
