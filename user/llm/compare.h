/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tokenscope compare BEFORE AFTER`: why TTFT changed between two runs, per group (process,
 * role, API, model). Each side is a run's JSON Lines records (a recording is replayed into
 * them first: cli/main.c). The change in TTFT p50 and p99 is split into what the records
 * split TTFT into, around each percentile, and named: capacity (queueing), prompt (longer
 * prompts), cache (fewer cached tokens), engine (slower prefill for the same prompts),
 * network (emit and upstream), or none when it is within the runs' own noise (a bootstrap
 * interval of the change, and a least change worth a verdict). docs/judgements.md says how.
 */
#ifndef TS_COMPARE_H
#define TS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cmp_side { CMP_BEFORE = 0, CMP_AFTER = 1 };

enum cmp_cause {
	CAUSE_NONE = 0,
	CAUSE_CAPACITY,
	CAUSE_PROMPT,
	CAUSE_CACHE,
	CAUSE_ENGINE,
	CAUSE_NETWORK,
	CAUSE_UNKNOWN, /* a real change the records do not split (no attribution), or too few */
	CAUSE__COUNT,
};
const char *cmp_cause__name(enum cmp_cause c);

/* The least change named: 2 ms, or 10 % of the figure before, whichever is larger. */
#define CMP_FLOOR_MS 2.0
#define CMP_FLOOR_SHARE 0.10
/* Requests a side needs in a group for a verdict on a percentile (and one past it: p99 wants
 * 100). */
#define CMP_LEAST 10
#define CMP_RESAMPLES 2000

struct compare;
struct request;
struct request_metrics;

/* One request as compare reads it: TTFT and end-to-end time, prompt and cached tokens, the
 * parts of TTFT (ms; NAN: not told: queue, prefill, emit, network), its times; for a client,
 * the server record that served it (its parts are taken from there). */
#define CMP_PARTS 4
struct cmp_request {
	double ttft, e2e, input, cached;
	double parts[CMP_PARTS];
	uint64_t start, end;
	uint64_t id, server_id;
	bool server;
};
/* A finished request, as its record would say it (sinks/jsonl.c). */
void compare__describe(const struct request *r, const struct request_metrics *m,
		       struct cmp_request *q);

struct compare *compare__new(void);
void compare__free(struct compare *c);
/* One JSON Lines object of a side (a request, an engine's step): 0, or -1 for a line that is
 * not a JSON object (counted: compare__bad). Objects of other types are skipped. */
int compare__line(struct compare *c, enum cmp_side side, const char *line, size_t len);
uint64_t compare__bad(const struct compare *c, enum cmp_side side);
/* One finished request of a side, as its record would say it (a live run's windows: the
 * summary's). -1 without memory. */
int compare__request(struct compare *c, enum cmp_side side, const struct request *r,
		     const struct request_metrics *m);
/* The same, described already, with its group's names (top's kept requests). */
int compare__add(struct compare *c, enum cmp_side side, const char *comm, const char *role,
		 const char *api, const char *model, const struct cmp_request *q);
/* The side's requests that ended before before_ns go (a sliding window). */
void compare__expire(struct compare *c, enum cmp_side side, uint64_t before_ns);
uint64_t compare__requests(const struct compare *c, enum cmp_side side);
/* The comparison, in words (json false) or as one JSON document; the verdict's cause (the
 * largest significant change's, CAUSE_NONE for none). -1 without memory. */
int compare__report(struct compare *c, FILE *out, bool json, enum cmp_cause *cause);
/* Each group's verdict where it changed past noise, a line each after prefix (none: the
 * whole's word, "none" or too few). -1 without memory. */
int compare__verdicts(struct compare *c, FILE *out, const char *prefix, enum cmp_cause *cause);
/* The verdict line alone (without "verdict: "), into buf. -1 without memory. */
int compare__verdict(struct compare *c, char *buf, size_t n, enum cmp_cause *cause);

#endif
