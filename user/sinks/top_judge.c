// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `tokenscope top`'s judgements (top_judge.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"
#include "base/text.h"
#include "llm/judge.h"
#include "sinks/top_judge.h"

struct kept_session {
	uint64_t end_ns, total_ns, model_ns;
	uint32_t calls;
	char name[64];
};

struct top_judge {
	struct compare *cmp; /* before: the run's first minute; after: the window, refilled */
	uint64_t last_ns;    /* when the change line was last made (record time) */
	char line[TOP_JUDGE_LINE];
	struct kept_session sessions[TOP_SESSIONS_KEPT]; /* a ring */
	size_t next, nsessions;
};

struct top_judge *top_judge__new(void)
{
	struct top_judge *tj = calloc(1, sizeof(*tj));

	if (tj && !(tj->cmp = compare__new())) {
		free(tj);
		return NULL;
	}
	return tj;
}

void top_judge__free(struct top_judge *tj)
{
	if (!tj)
		return;
	compare__free(tj->cmp);
	free(tj);
}

void top_judge__request(struct top_judge *tj, const struct request *r,
			const struct request_metrics *m, uint64_t run_start_ns)
{
	if (r->start_ns >= run_start_ns && r->start_ns - run_start_ns < TOP_BASELINE_NS)
		compare__request(tj->cmp, CMP_BEFORE, r, m);
}

bool top_judge__due(struct top_judge *tj, uint64_t as_of_ns, uint64_t window_ns,
		    uint64_t run_start_ns)
{
	if (!window_ns || as_of_ns < run_start_ns + TOP_BASELINE_NS + window_ns ||
	    (tj->last_ns && as_of_ns < tj->last_ns + TOP_CHANGE_EVERY_NS))
		return false;
	compare__expire(tj->cmp, CMP_AFTER, UINT64_MAX); /* the window's requests come anew */
	return true;
}

void top_judge__window_add(struct top_judge *tj, const char *comm, const char *role,
			   const char *api, const char *model, const struct cmp_request *q)
{
	compare__add(tj->cmp, CMP_AFTER, comm, role, api, model, q);
}

void top_judge__change(struct top_judge *tj, const char *window_name, uint64_t as_of_ns)
{
	char verdict[1024];
	enum cmp_cause cause;

	tj->last_ns = as_of_ns;
	tj->line[0] = 0;
	if (compare__verdict(tj->cmp, verdict, sizeof(verdict), &cause) || cause == CAUSE_NONE ||
	    cause == CAUSE_UNKNOWN)
		return;
	snprintf(tj->line, sizeof(tj->line), "change (the last %s against the first minute): %s",
		 window_name, verdict);
}

const char *top_judge__line(const struct top_judge *tj)
{
	return tj->line;
}

void top_judge__session(struct top_judge *tj, const struct session *s)
{
	struct kept_session *k = &tj->sessions[tj->next];
	struct session_times t;
	char comm[TS_COMM_LEN * 4];

	session__times(s, &t);
	*k = (struct kept_session){ s->calls[s->ncalls - 1].end_ns, t.total_ns, t.model_ns,
				    (uint32_t)s->ncalls };
	snprintf(k->name, sizeof(k->name), "%s %s %s", text__ascii(comm, sizeof(comm), s->comm),
		 role__name(s->role), consumer__name(s->consumer));
	tj->next = (tj->next + 1) % TOP_SESSIONS_KEPT;
	if (tj->nsessions < TOP_SESSIONS_KEPT)
		tj->nsessions++;
}

size_t top_judge__sessions(struct top_judge *tj, uint64_t lo, uint64_t hi, bool all,
			   struct top_session_row *rows, size_t max)
{
	struct sample calls[TOP_SESSION_ROWS] = { { 0 } }, total[TOP_SESSION_ROWS] = { { 0 } },
		      share[TOP_SESSION_ROWS] = { { 0 } };
	size_t n = 0;

	if (max > TOP_SESSION_ROWS)
		max = TOP_SESSION_ROWS;
	for (size_t i = 0; i < tj->nsessions; i++) {
		const struct kept_session *k = &tj->sessions[i];
		size_t r;

		if (!all && (k->end_ns <= lo || k->end_ns > hi))
			continue;
		for (r = 0; r < n && strcmp(rows[r].name, k->name); r++)
			;
		if (r == n) {
			if (n == max)
				continue; /* more kinds of session than rows: the first ones shown */
			memset(&rows[n], 0, sizeof(rows[n]));
			snprintf(rows[n].name, sizeof(rows[n].name), "%s", k->name);
			n++;
		}
		rows[r].n++;
		sample__add(&calls[r], k->calls);
		sample__add(&total[r], (double)k->total_ns / 1e6);
		if (k->total_ns)
			sample__add(&share[r], 100.0 * (double)k->model_ns / (double)k->total_ns);
	}
	for (size_t r = 0; r < n; r++) {
		rows[r].calls_p50 = sample__pct(&calls[r], 50);
		rows[r].total_p50_ms = sample__pct(&total[r], 50);
		rows[r].share_p50 = sample__pct(&share[r], 50);
		sample__free(&calls[r]);
		sample__free(&total[r]);
		sample__free(&share[r]);
	}
	return n;
}
