/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The end-of-run summary: percentiles per group (llm/group.h), the server TTFT split and its
 * tail, the engines and their steps, and capture health. */
#ifndef TS_SUMMARY_H
#define TS_SUMMARY_H

#include <stdio.h>

#include "engine/attrib.h"
#include "llm/judge.h"
#include "sinks/sink.h"

struct summary;

/* out: where finish prints it. a: the correlation state whose engines it describes (NULL:
 * none). j: how requests were judged (their SLOs, the reading speed; NULL: the defaults). */
struct summary *summary__new(FILE *out, const struct attrib *a, const struct judge *j);
void summary__free(struct summary *sm);
/* The summary compares the run's first window with its last (tokenscope compare's verdict),
 * once the run is two windows long: their length (0: never). */
#define SUMMARY_WINDOW_NS (60ull * 1000000000ull)
void summary__set_window(struct summary *sm, uint64_t window_ns);
/* self: a struct summary. */
extern const struct sink_ops summary_sink;
/* The summary as it stands, to out. */
void summary__print(struct summary *sm, FILE *out, const struct health *h);

#endif
