/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* -o: one JSON object per finished request and per engine step, a whole line each
 * (docs/output.md). */
#ifndef TS_JSONL_H
#define TS_JSONL_H

#include <stdbool.h>

#include "base/outfile.h"
#include "sinks/sink.h"

struct jsonl;

/* gaps (--gaps): request records list each token gap's steps. */
struct jsonl *jsonl__new(struct outfile *out, bool gaps);
void jsonl__free(struct jsonl *j);
/* self: a struct jsonl. */
extern const struct sink_ops jsonl_sink;
/* The JSON Lines object of one request, without --gaps (caller frees with free()). */
char *jsonl__request_json(const struct request *r, const struct request_metrics *m);

#endif
