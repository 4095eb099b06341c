// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The summary's agent sessions: per client command, role and consumer (sessions.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"
#include "base/text.h"
#include "llm/judge.h"
#include "sinks/sessions.h"

struct session_summary {
	struct session_group g[SESSION_GROUPS_MAX];
	size_t n;
	uint64_t folded; /* sessions of groups past SESSION_GROUPS_MAX: in the last one */
};

struct session_summary *session_summary__new(void)
{
	return calloc(1, sizeof(struct session_summary));
}

void session_summary__free(struct session_summary *ss)
{
	if (!ss)
		return;
	for (size_t i = 0; i < ss->n; i++) {
		struct session_group *g = &ss->g[i];
		struct sample *all[] = { &g->calls, &g->total, &g->model, &g->between, &g->share };

		for (size_t k = 0; k < sizeof(all) / sizeof(*all); k++)
			sample__free(all[k]);
	}
	free(ss);
}

static struct session_group *group_of(struct session_summary *ss, const struct session *s)
{
	for (size_t i = 0; i < ss->n; i++) {
		struct session_group *g = &ss->g[i];

		if (!strcmp(g->comm, s->comm) && g->role == s->role && g->consumer == s->consumer)
			return g;
	}
	if (ss->n == SESSION_GROUPS_MAX) {
		ss->folded++;
		return &ss->g[SESSION_GROUPS_MAX - 1];
	}
	memcpy(ss->g[ss->n].comm, s->comm, sizeof(s->comm));
	ss->g[ss->n].role = s->role;
	ss->g[ss->n].consumer = s->consumer;
	return &ss->g[ss->n++];
}

void session_summary__add(struct session_summary *ss, const struct session *s)
{
	struct session_group *g = group_of(ss, s);
	struct session_times t;

	session__times(s, &t);
	g->n++;
	sample__add(&g->calls, (double)s->ncalls);
	sample__add(&g->total, (double)t.total_ns / 1e6);
	sample__add(&g->model, (double)t.model_ns / 1e6);
	sample__add(&g->between, (double)t.between_ns / 1e6);
	if (t.total_ns)
		sample__add(&g->share, 100.0 * (double)t.model_ns / (double)t.total_ns);
}

struct session_group *session_summary__groups(struct session_summary *ss, size_t *n)
{
	*n = ss->n;
	return ss->g;
}

void session_summary__print(struct session_summary *ss, FILE *out)
{
	for (size_t i = 0; i < ss->n; i++) {
		struct session_group *g = &ss->g[i];
		char comm[TS_COMM_LEN * 8];

		fprintf(out, "sessions: %s %s %s: %llu (a client's chained calls)\n",
			text__safe(comm, sizeof(comm), g->comm), role__name(g->role),
			consumer__name(g->consumer), (unsigned long long)g->n);
		sample__print(out, "calls", &g->calls);
		sample__print(out, "session_ms", &g->total);
		sample__print(out, "model_ms", &g->model);
		sample__print(out, "between_ms", &g->between);
		sample__print(out, "model_share %", &g->share);
	}
	if (ss->folded)
		fprintf(out, "sessions: %llu of groups past the first %d are in the last one\n",
			(unsigned long long)ss->folded, SESSION_GROUPS_MAX);
}
