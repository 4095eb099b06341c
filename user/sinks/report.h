/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Outputs: one text line per finished request, JSON Lines records, and the end-of-run summary
 * (percentiles per process, API and model, plus capture health). */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "base/outfile.h"
#include "llm/request.h"
#include "engine/attrib.h"
#include "engine/step.h"
#include "stream/pipeline.h"

struct report;

/* lines: per-request text lines (NULL: none). jsonl: JSON Lines records (NULL: none). */
struct report *report__new(FILE *lines, struct outfile *jsonl);
void report__free(struct report *rp);
/* --gaps: request records carry each token gap's steps. */
void report__set_gaps(struct report *rp, bool gaps);
struct metrics;
/* Also feed every request and step to these metrics (NULL: none). */
void report__set_metrics(struct report *rp, struct metrics *m);
/* --perfetto: the timeline gets every request and step too (NULL: none). */
struct perfetto;
void report__set_perfetto(struct report *rp, struct perfetto *pf);
/* --html: the page gets every request and step too (NULL: none). */
struct html;
void report__set_html(struct report *rp, struct html *h);
/* `tokenscope top`: its figures get every request, step and process exit too (NULL: none). */
struct top;
void report__set_top(struct report *rp, struct top *t);
/* The correlation state whose engines the summary describes (NULL: none). */
void report__set_attrib(struct report *rp, const struct attrib *a);
/* A request_fn for pipeline__new. */
void report__request(void *rp, const struct request *r, const struct request_metrics *m);
/* A process exited (a pipeline exit_fn): summary lines stop keeping it. */
void report__process_exit(void *rp, uint32_t pid);
/* A step_fn for pipeline__new. */
void report__step(void *rp, const struct engine_step *s);
void report__summary(struct report *rp, FILE *out, const struct health *h);
/* The JSON Lines object of one request (caller frees with free()). */
char *report__request_json(const struct request *r, const struct request_metrics *m);

#endif
