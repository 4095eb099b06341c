/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The summary's agent sessions (llm/session.h): per client command, role and consumer, the
 * percentiles of their calls, wall time, time inside calls, time between them and the share
 * inside. */
#ifndef TS_SESSIONS_H
#define TS_SESSIONS_H

#include <stdio.h>

#include "base/stats.h"
#include "llm/session.h"

#define SESSION_GROUPS_MAX 64

/* Sessions of one client command, role and consumer: their calls, wall time, time inside
 * calls, between them, and the share inside (%). */
struct session_group {
	char comm[TS_COMM_LEN];
	enum role role;
	enum consumer consumer;
	uint64_t n;
	struct sample calls, total, model, between, share;
};

struct session_summary;

struct session_summary *session_summary__new(void);
void session_summary__free(struct session_summary *ss);
void session_summary__add(struct session_summary *ss, const struct session *s);
void session_summary__print(struct session_summary *ss, FILE *out);
/* Its groups, in the order they first ended a session (the HTML report's table). */
struct session_group *session_summary__groups(struct session_summary *ss, size_t *n);

#endif
