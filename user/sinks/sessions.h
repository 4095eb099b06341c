/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The summary's agent sessions (llm/session.h): per client command, role and consumer, the
 * percentiles of their calls, wall time, time inside calls, time between them and the share
 * inside. */
#ifndef TS_SESSIONS_H
#define TS_SESSIONS_H

#include <stdio.h>

#include "llm/session.h"

#define SESSION_GROUPS_MAX 64

struct session_summary;

struct session_summary *session_summary__new(void);
void session_summary__free(struct session_summary *ss);
void session_summary__add(struct session_summary *ss, const struct session *s);
void session_summary__print(struct session_summary *ss, FILE *out);

#endif
