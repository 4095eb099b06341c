/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An output, as the pipeline sees it: what it does with each finished request, each engine
 * step and each process's exit, and what it writes when the run ends. The text line, JSON
 * Lines, the summary, the metrics, the Perfetto timeline, the HTML report and `top`'s figures
 * are each one; cli/ registers those the options ask for. The pipeline hands everything to the
 * list and never names an output, and no output names another.
 */
#ifndef TS_SINK_H
#define TS_SINK_H

#include <stdint.h>

#include "llm/request.h"
#include "engine/step.h"
#include "stream/pipeline.h"

struct sink_ops {
	const char *name; /* "jsonl", "summary", ...: for a reader of the code and the tests */
	void (*on_request)(void *self, const struct request *r, const struct request_metrics *m);
	void (*on_step)(void *self, const struct engine_step *s);	/* NULL: none */
	void (*on_exit)(void *self, uint32_t pid);			/* NULL: none */
	/* An engine's scheduler stats, one step's (engine/engine_wire.h). NULL: none */
	void (*on_sched)(void *self, const struct engine_sched *s);
	/* A client's chained calls ended (llm/session.h). NULL: none */
	void (*on_session)(void *self, const struct session *s);
	/* Record time moved on: every request that ended before handed_to was handed on
	 * (pipeline.h's time_fn). NULL: none */
	void (*on_time)(void *self, uint64_t handed_to);
	/* The run ended (not called for one that failed): write what is written at the end.
	 * Returns 0, or -1 having said why. NULL: nothing to write. */
	int (*finish)(void *self, const struct health *h);
};

#define SINKS_MAX 12

struct sinks {
	struct sink {
		const struct sink_ops *ops;
		void *self;
	} v[SINKS_MAX];
	int n;
};

/* Add an output; the list keeps the order (finish runs in it). Returns 0, or -1 when full. */
int sinks__add(struct sinks *s, const struct sink_ops *ops, void *self);
/* For pipeline__new and pipeline__set_exit_fn: ctx is the struct sinks. */
void sinks__request(void *ctx, const struct request *r, const struct request_metrics *m);
void sinks__step(void *ctx, const struct engine_step *st);
void sinks__exit(void *ctx, uint32_t pid);
void sinks__sched(void *ctx, const struct engine_sched *s);
void sinks__session(void *ctx, const struct session *s);
void sinks__time(void *ctx, uint64_t handed_to);
/* Every output's finish, each called even when one before failed. Returns 0, or -1. */
int sinks__finish(struct sinks *s, const struct health *h);

#endif
