/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Prometheus metrics: OpenTelemetry GenAI histograms (names and buckets of the semantic
 * conventions, translated as the OTel Collector does), tokenscope's own (TTFT by cache hit,
 * gaps, attribution components, GPU steps) and capture health, rendered in the text
 * exposition format 0.0.4. Families and labels: docs/metrics-export.md.
 *
 * Single-threaded: the capture loop updates and renders; the HTTP exporter (exporter.h) only
 * serves the last rendering.
 */
#ifndef TS_METRICS_H
#define TS_METRICS_H

#include <stddef.h>

#include "base/buf.h"
#include "llm/request.h"
#include "engine/step.h"
#include "stream/pipeline.h"
#include "sinks/sink.h"

#define METRICS_MAX_SERIES_DEFAULT 1000

struct metrics;

/* max_series: label sets per family; past it, new ones are folded into
 * gen_ai_request_model="other" (and counted). file (--metrics-file): the exposition written
 * there at the end, whole (NULL: none). */
struct metrics *metrics__new(size_t max_series, const char *file);
void metrics__free(struct metrics *m);
void metrics__request(struct metrics *m, const struct request *r, const struct request_metrics *rm);
void metrics__step(struct metrics *m, const struct engine_step *s);
/* The whole exposition, with the capture health counters of h (NULL: none). Returns 0, or -1
 * when out of memory (out is then incomplete). */
int metrics__render(struct metrics *m, const struct health *h, struct buf *out);
/* self: a struct metrics; its finish writes the file given to metrics__new. */
extern const struct sink_ops metrics_sink;

#endif
