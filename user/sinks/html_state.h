/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What html.c (what is kept, the page) and html_bands.c (the breakdown charts) share: no
 * other file includes it.
 */
#ifndef TS_HTML_STATE_H
#define TS_HTML_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/stats.h"
#include "llm/attribution.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "engine/llama_models.h"
#include "engine/step.h"
#include "sinks/html_judge.h"

#define ROWS_MAX 100000 /* requests kept for the charts and tables; more are counted */
#define SLOWEST 20
#define NBUCKETS 36	/* log buckets: 6 per decade from 0.01 ms to 10^4 s */
#define BUCKET_MIN_MS 0.01
#define PER_DECADE 6

/* One finished request, as much as the page shows of it. */
struct row {
	uint64_t id, start, first, end;
	double ttft, tpot, worst_gap; /* ms; NAN when none */
	int64_t prompt;		      /* input tokens, -1 unknown */
	enum cache_regime cache;
	enum ttft_source source; /* the TTFT split's (llm/attribution.h); NOT_ATTRIBUTED: none */
	struct {
		const char *name;
		double ms;
	} parts[TTFT_PARTS_MAX]; /* the split's; by the steps: busy, idle, prefill, emit */
	int nparts;
	double decode, host, interference; /* ms */
	uint64_t interfered_by[4];
	uint32_t ninterfered, concurrency;
	const struct hgroup *g;
};

struct hgroup {
	struct request_group key; /* first: llm/group.h keeps the table */
	struct row *rows;
	size_t nrows, caprows;
	uint64_t gaps[NBUCKETS], ngaps;
	struct sample gap_ms;
	struct html_consumers consumers; /* its requests by who reads them (html_judge.h) */
};

/* One step stream: a process's CUDA stream, a llama.cpp context. */
struct hsteps {
	uint32_t pid;
	char comm[TS_COMM_LEN];
	char model[LLAMA_MODEL_NAME_MAX]; /* a llama.cpp context's model, where known */
	bool cuda;
	uint64_t stream, n, failed, busy_ns, first_ns, last_ns;
	uint64_t hist[STEP_KIND__N][NBUCKETS];
	struct sample ms[STEP_KIND__N];
	struct hsteps *next;
};

struct html {
	struct request_groups groups; /* struct hgroup */
	struct hsteps *steps;
	uint64_t requests, not_kept;
	uint64_t first_ns, last_ns; /* the requests' span: goodput's time */
	const struct judge *judge;  /* their SLOs and the reading speed */
	struct judge defaults;	    /* judge without html__set_judge */
	struct html_sessions *sessions;
	struct buf *out;
	bool oom;
	const char *path; /* written there at the end (NULL: none) */
};

/* Append to the page (a failure marks it out of memory). */
void html__put(struct html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A row's TTFT and TPOT (ms; NAN: none): the band charts' keys, and the scatter plots' y. */
double html__y_ttft(const struct row *w);
double html__y_tpot(const struct row *w);
/* Whether a row's TTFT was split (its attribution). */
bool html__attributed(const struct row *w);
/* A group's breakdown charts: TTFT (the steps' split, an engine wire's), token gaps. */
void html__bands(struct html *h, const struct hgroup *g);

#endif
