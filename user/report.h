/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Outputs: one text line per finished request, JSON Lines records, and the end-of-run summary
 * (percentiles per process, API and model, plus capture health). */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "attrib.h"
#include "gpu.h"
#include "outfile.h"
#include "pipeline.h"
#include "request.h"

struct report;

/* lines: per-request text lines (NULL: none). jsonl: JSON Lines records (NULL: none). */
struct report *report__new(FILE *lines, struct outfile *jsonl);
void report__free(struct report *rp);
/* --gaps: request records carry each token gap's steps. */
void report__set_gaps(struct report *rp, bool gaps);
struct metrics;
/* Also feed every request and step to these metrics (NULL: none). */
void report__set_metrics(struct report *rp, struct metrics *m);
/* The correlation state whose engines the summary describes (NULL: none). */
void report__set_attrib(struct report *rp, const struct attrib *a);
/* A request_fn for pipeline__new. */
void report__request(void *rp, const struct request *r, const struct request_metrics *m);
/* A process exited (a pipeline exit_fn): summary lines stop keeping it. */
void report__process_exit(void *rp, uint32_t pid);
/* A gpu_step_fn for pipeline__new. */
void report__step(void *rp, const struct gpu *g, const struct gpu_step *s);
void report__summary(struct report *rp, FILE *out, const struct health *h);
/* The JSON Lines object of one GPU step (caller frees with free()). */
char *report__step_json(const struct gpu *g, const struct gpu_step *s);
/* The JSON Lines object of one request (caller frees with free()). */
char *report__request_json(const struct request *r, const struct request_metrics *m);

/*
 * s as text that is safe on a terminal or in a text file: what comes from traced traffic or
 * processes (model names, paths, error types, command names, file names) could carry escape
 * sequences that retitle, recolour or rewrite the reader's terminal. Control bytes (C0, DEL,
 * and C1 as UTF-8: 0xC2 0x80-0x9F) are written as \xNN; the rest is kept. Cut to fit out,
 * which REPORT_SAFE_MAX(len) bytes always suffice for. Returns out.
 */
#define REPORT_SAFE_MAX(len) ((len) * 4 + 16)
const char *report__text_safe(char *out, size_t n, const char *s);

#endif
