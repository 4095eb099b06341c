// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "sinks/sink.h"

int sinks__add(struct sinks *s, const struct sink_ops *ops, void *self)
{
	if (s->n == SINKS_MAX)
		return -1;
	s->v[s->n++] = (struct sink){ ops, self };
	return 0;
}

void sinks__request(void *ctx, const struct request *r, const struct request_metrics *m)
{
	struct sinks *s = ctx;

	for (int i = 0; i < s->n; i++)
		s->v[i].ops->on_request(s->v[i].self, r, m);
}

void sinks__step(void *ctx, const struct engine_step *st)
{
	struct sinks *s = ctx;

	for (int i = 0; i < s->n; i++) {
		if (s->v[i].ops->on_step)
			s->v[i].ops->on_step(s->v[i].self, st);
	}
}

void sinks__sched(void *ctx, const struct engine_sched *s)
{
	struct sinks *l = ctx;

	for (int i = 0; i < l->n; i++) {
		if (l->v[i].ops->on_sched)
			l->v[i].ops->on_sched(l->v[i].self, s);
	}
}

void sinks__session(void *ctx, const struct session *s)
{
	struct sinks *l = ctx;

	for (int i = 0; i < l->n; i++) {
		if (l->v[i].ops->on_session)
			l->v[i].ops->on_session(l->v[i].self, s);
	}
}

void sinks__time(void *ctx, uint64_t handed_to)
{
	struct sinks *l = ctx;

	for (int i = 0; i < l->n; i++) {
		if (l->v[i].ops->on_time)
			l->v[i].ops->on_time(l->v[i].self, handed_to);
	}
}

void sinks__exit(void *ctx, uint32_t pid)
{
	struct sinks *s = ctx;

	for (int i = 0; i < s->n; i++) {
		if (s->v[i].ops->on_exit)
			s->v[i].ops->on_exit(s->v[i].self, pid);
	}
}

int sinks__finish(struct sinks *s, const struct health *h)
{
	int err = 0;

	for (int i = 0; i < s->n; i++) {
		if (s->v[i].ops->finish && s->v[i].ops->finish(s->v[i].self, h))
			err = -1;
	}
	return err;
}
