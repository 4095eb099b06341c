/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The HTML report's judgements (sinks/html.c): per group, who reads its requests and how
 * they fared against their SLOs and against reading; the agent sessions. */
#ifndef TS_HTML_JUDGE_H
#define TS_HTML_JUDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/stats.h"
#include "llm/judge.h"
#include "llm/session.h"

/* A group's requests by consumer. */
struct html_consumers {
	struct html_consumer {
		uint64_t n, judged, met;
		struct sample headroom;
	} by[CONSUMER__COUNT];
};

void html_consumers__add(struct html_consumers *c, const struct request_metrics *m);
void html_consumers__free(struct html_consumers *c);
/* Its table: each consumer's requests, SLOs, met of judged, goodput over span_s, reading
 * headroom; -1 without memory. */
int html_consumers__table(struct buf *out, struct html_consumers *c, const struct judge *j,
			  double span_s);

/* The agent sessions, per client command, role and consumer. */
struct html_sessions;
struct html_sessions *html_sessions__new(void);
void html_sessions__free(struct html_sessions *s);
void html_sessions__add(struct html_sessions *s, const struct session *ss);
/* Its section ("" when there was no session); -1 without memory. */
int html_sessions__section(struct buf *out, struct html_sessions *s);

#endif
