/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The engine steps' outputs (engine/step.h): one JSON Lines object per step ("gpu_step" for
 * CUDA, "engine_step" for llama.cpp; docs/output.md) and the summary's lines per step
 * stream: a process's CUDA steps; a llama.cpp context's.
 */
#ifndef TS_SINKS_STEPS_H
#define TS_SINKS_STEPS_H

#include <stdio.h>

#include "engine/step.h"

struct step_summary;

struct step_summary *step_summary__new(void);
void step_summary__free(struct step_summary *ss);
void step_summary__add(struct step_summary *ss, const struct engine_step *s);
/* Whether any step was added. */
bool step_summary__any(const struct step_summary *ss);
void step_summary__print(struct step_summary *ss, FILE *out);
/* Context ctx of process pid drafted for speculating requests (their attribution says so):
 * its line says it is a draft model's. */
void step_summary__draft(struct step_summary *ss, uint32_t pid, uint64_t ctx);

/* The JSON Lines object of one step (caller frees with free()); NULL without memory. */
char *steps__json(const struct engine_step *s);

#endif
