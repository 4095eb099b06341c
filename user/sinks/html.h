/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --html FILE: a report a person opens (docs/html-report.md). One self-contained file: inline
 * CSS and SVG charts drawn here, no script, no font or image from elsewhere, so it opens
 * anywhere, offline, and asks for nothing. Written at the end of the run (live or `report`).
 *
 *   per (command, role, API, model): TTFT on a log axis split by cache hit, TPOT and token
 *   gap distributions, TTFT against prompt length, TPOT against concurrent streams, the TTFT
 *   and gap breakdowns per percentile band; the slowest requests with their phases; per
 *   engine step stream: steps/s, busy fraction, step time by kind; capture health at the top.
 */
#ifndef TS_HTML_H
#define TS_HTML_H

#include "base/buf.h"
#include "engine/step.h"
#include "llm/request.h"
#include "stream/pipeline.h"
#include "llm/judge.h"
#include "sinks/sink.h"

struct html;

/* path: where finish writes the page (NULL: nowhere; html__render still makes it). */
struct html *html__new(const char *path);
/* How requests were judged (their SLOs, the reading speed): the defaults until set. */
void html__set_judge(struct html *h, const struct judge *j);
void html__free(struct html *h);
void html__request(struct html *h, const struct request *r, const struct request_metrics *m);
void html__step(struct html *h, const struct engine_step *s);
/* The whole page into out (emptied first). Returns 0, or -1 without memory. */
int html__render(struct html *h, const struct health *health, struct buf *out);
/* self: a struct html. */
extern const struct sink_ops html_sink;

#endif
