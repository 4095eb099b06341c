/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --perfetto FILE: a timeline in Perfetto's native protobuf trace format (docs/perfetto.md),
 * for ui.perfetto.dev and trace_processor. Timestamps are tokenscope's own CLOCK_MONOTONIC
 * nanoseconds, declared as such.
 *
 *   a process track per traced process, under it a track per request: its phases as slices
 *   (queued, prefill, emit, then each token gap; a client's wait for its first token), an
 *   instant per token event;
 *   a track per engine step stream (a process's CUDA stream, a llama.cpp context): a slice
 *   per step, named by its kind, and a busy counter beside it;
 *   flows from the step that produced a token event to it, and from a server's token write
 *   to the client's read of it when both ends are traced;
 *   counters per server: requests in flight, requests queued.
 *
 * Each packet is a whole record of the file (base/outfile.h). Past the size cap, packets are
 * cut, counted and said at the end; the file stays a valid trace.
 */
#ifndef TS_PERFETTO_H
#define TS_PERFETTO_H

#include <stdint.h>

#include "base/outfile.h"
#include "engine/step.h"
#include "llm/request.h"
#include "sinks/sink.h"

#define PERFETTO_DEFAULT_MAX_MB 512

struct perfetto;

/* Writes to f (opened and started by the caller), at most max_bytes. */
struct perfetto *perfetto__new(struct outfile *f, uint64_t max_bytes);
/* Writes what is held back (the counters), says what the cap cut; frees. Returns -1 when
 * the file failed (its errors are said by outfile); a cut is not a failure. */
int perfetto__close(struct perfetto *pf);
void perfetto__request(struct perfetto *pf, const struct request *r,
		       const struct request_metrics *m);
void perfetto__step(struct perfetto *pf, const struct engine_step *s);
/* Packets cut by the size cap so far. */
uint64_t perfetto__cut(const struct perfetto *pf);
/* self: a struct perfetto. */
extern const struct sink_ops perfetto_sink;

#endif
