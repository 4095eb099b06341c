/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tokenscope top`'s figures: what the live view shows, over a sliding window, computed from
 * the same finished-request records (and the same percentile code, base/stats.h) as the
 * summary. The terminal side (user/cli/top_screen.c) only lays the rows out.
 *
 *   top_sink: requests -> top__request (kept per group, by end time) --+
 *             steps    -> top__step    (kept per engine, by end time) --+-> top__view (once
 *   pipeline: requests in flight, capture health ----------------------+   a refresh) -> rows
 *
 * A window ends where every request that finished before it has been reported: requests are
 * held ATTRIB_SETTLE_NS for their attribution (stream/pipeline.h), so under GPU load the
 * window ends that long ago, and the header says so.
 */
#ifndef TS_TOP_H
#define TS_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/step.h"
#include "llm/request.h"
#include "stream/pipeline.h"
#include "sinks/sink.h"
#include "sinks/top_judge.h"

/* The windows `w` cycles through. */
enum top_window { TOP_W10S, TOP_W60S, TOP_W5MIN, TOP_WALL, TOP_W__COUNT };
/* The window's length (0: all), and its name on screen. */
uint64_t top_window__ns(enum top_window w);
const char *top_window__name(enum top_window w);

/* The request table's columns (the keys sort by them). */
enum top_col {
	TOP_COL_NAME, TOP_COL_DONE, TOP_COL_RPS, TOP_COL_FLIGHT, TOP_COL_TTFT50, TOP_COL_TTFT90,
	TOP_COL_TTFT99, TOP_COL_TPOT50, TOP_COL_TPOT99, TOP_COL_GAP, TOP_COL_HIT, TOP_COL_SLO,
	TOP_COL_GOOD, TOP_COL_READ, TOP_COL__COUNT
};
const char *top_col__name(enum top_col c);

#define TOP_NAME_MAX 48	  /* "comm[pid]" (and a model), "comm[N pids]"; escaped, cut */
#define TOP_MODEL_MAX 64  /* escaped, cut */
#define TOP_TAIL_BAR 10	  /* the TTFT tail's split, in letters */
#define TOP_SLOW_MAX 32	  /* slow requests a view lists */
#define TOP_LINE_MAX 256

/* One (command, role, API, model) group, as the summary groups requests. */
struct top_row {
	char name[TOP_NAME_MAX];
	enum role role;
	enum api api;
	char model[TOP_MODEL_MAX];
	uint64_t done, incomplete; /* finished in the window */
	double rps;
	uint64_t in_flight, waiting; /* now; waiting: no first token yet */
	double ttft[3];		     /* p50 p90 p99 (NAN: none) */
	double tpot[2];		     /* p50 p99 */
	double gap_max;
	double hit_share;	     /* of requests whose cache hit is known (NAN: none known) */
	/* the judgement (llm/judge.h): the share of requests judged that met their consumer's
	 * SLOs, those met a second (goodput), and the slowest tenth of interactive streams'
	 * reading headroom (p10); NAN: none judged, no interactive stream */
	double slo_share, goodput, headroom;
	/* The requests at or above the window's TTFT p90 that the engine's steps split (an engine
	 * wire's split says no busy or idle): queue behind engine work (B),
	 * queue idle (I), prefill (P), emit (E), in TOP_TAIL_BAR letters ("" when none). */
	char tail[TOP_TAIL_BAR + 1];
	size_t group; /* which group (for top__slow) */
};

/* One engine process: its steps that ended in the window. */
struct top_engine_row {
	char name[TOP_NAME_MAX];
	const char *source; /* "cuda" or "llama.cpp" */
	uint64_t steps, failed;
	double steps_per_s;
	double busy; /* share of the window its steps' work covered */
	/* Of the steps whose sequences are known (NAN: none): prefill (chunks too), decode,
	 * mixed, and the p50 sequences per step. */
	double prefill_share, decode_share, mixed_share, batch_p50;
};

/* An engine's scheduler, as its latest step's stats said (engine/engine_wire.h). */
struct top_sched_row {
	const char *wire;	 /* the engine wire's name (engine/engine_wire.h) */
	char name[TOP_NAME_MAX]; /* the process that carried them, "comm[pid]" */
	uint32_t engine;	 /* its engine index */
	uint64_t running, waiting;
	double kv_cache_usage;	 /* 0..1 (NAN: not sent) */
	uint64_t age_ns;	 /* since that step (as of the view's end) */
};

/* A slow request: TTFT at or above its group's window p90 (groups of 10 or more). */
struct top_slow {
	size_t group;
	uint64_t end_ns;
	char line[TOP_LINE_MAX]; /* its one-line account, escaped */
};

struct top_view {
	uint64_t as_of_ns;   /* the window's end (CLOCK_MONOTONIC, as the records' times) */
	uint64_t lag_ns;     /* how long before now that is */
	uint64_t window_ns;  /* its length (0: all) */
	uint64_t uptime_ns;
	double events_per_s; /* records consumed, since the previous view */
	uint64_t drops;	     /* records the kernel could not hand over (ring full), all probes */
	uint64_t lost;	     /* pieces lost or truncated: requests marked incomplete */
	double rps;	     /* over all groups */
	uint64_t in_flight, waiting;
	/* the window reaches past what is kept (the last 5 min and 10 s, at most KEEP_MAX a
	 * group or engine): "all" then takes its tail, slow requests and engine figures from
	 * what is kept */
	bool window_cut;
	struct top_row *rows;
	size_t nrows;
	struct top_engine_row *engines;
	size_t nengines;
	struct top_sched_row sched[ENGINE_SCHED_MAX]; /* engines' queue depths */
	size_t nsched;
	struct top_slow slow[TOP_SLOW_MAX]; /* newest first */
	size_t nslow;
	/* why TTFT changed in the window against the run's first minute (sinks/top_judge.h;
	 * "" when it did not, past noise), and the agent sessions that ended in it */
	char change[TOP_JUDGE_LINE];
	struct top_session_row sessions[TOP_SESSION_ROWS];
	size_t nsessions;
};

struct top;

/* start_ns: when the run began (record time; 0: set later, by top__set_start). */
struct top *top__new(uint64_t start_ns);
void top__set_start(struct top *t, uint64_t start_ns);
void top__free(struct top *t);
/* A finished request and its metrics (the list of sinks hands every one over). */
void top__request(struct top *t, const struct request *r, const struct request_metrics *m);
void top__step(struct top *t, const struct engine_step *s);
/* A process exited (the pipeline's word, through the sinks): names count it as the summary. */
void top__process_exit(struct top *t, uint32_t pid);
/* self: a struct top. */
extern const struct sink_ops top_sink;
/* The figures at now (record time), over window w, into v (rows: its own, freed by the next
 * call or top_view__free); the slow requests of every group, or of group only_group.
 * Returns 0, or -1 without memory. */
#define TOP_ALL_GROUPS ((size_t)-1)
int top__view(struct top *t, struct pipeline *pl, uint64_t now_ns, enum top_window w,
	      size_t only_group, struct top_view *v);
void top_view__free(struct top_view *v);
/* Sort v's rows by column c (descending: the largest first; names ascending). */
void top_view__sort(struct top_view *v, enum top_col c, bool reverse);
/* Keep only the rows whose name, role, API or model contains text (NULL or "": all). */
void top_view__filter(struct top_view *v, const char *text);

#endif
