/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What compare.c (the records read, each change judged) and compare_words.c (the report, in
 * words or JSON) share: no other file includes it.
 */
#ifndef TS_COMPARE_STATE_H
#define TS_COMPARE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llm/compare.h"
#include "llm/json.h"

/* What a record splits its TTFT into (ms; NAN: not told): struct cmp_request's parts. A
 * client joined to its server takes the server's parts, and its upstream time as the
 * network's. */
enum part { P_QUEUE, P_PREFILL, P_EMIT, P_NETWORK, P__COUNT };
_Static_assert(P__COUNT == CMP_PARTS, "compare.h's parts are these");


struct reqs {
	struct cmp_request *v;
	size_t n, cap;
};

struct cgroup {
	char comm[16], role[8], api[24], model[128];
	struct reqs side[2];
};

/* A server record's parts, by id: for the clients joined to it later in the same run. */
struct server_parts {
	uint64_t id, end;
	double parts[P__COUNT];
};

struct busy {
	uint32_t pid;
	uint64_t ns;
};

struct side_state {
	uint64_t bad, requests;
	uint64_t first, last; /* the requests' span: first start, last end */
	struct busy *busy;    /* engine step time per process */
	size_t nbusy, capbusy;
	double waiting_sum; /* an engine wire's waiting requests, over its steps */
	uint64_t waiting_n;
	struct server_parts *srv;
	size_t nsrv, capsrv;
};

struct compare {
	struct jdoc doc;
	struct cgroup *g;
	size_t ng, capg;
	struct side_state s[2];
};

/* The requests around a percentile: p50 the middle fifth (p40..p60), p99 the top 5 %. What
 * they are made of stands for what the percentile is made of. */
struct band {
	double ttft, parts[P__COUNT];
	double input, cached; /* tokens, over those of the band with a prefill and both counts */
};

struct change {
	double p, before, after, lo, hi;
	double per_token; /* prefill ms per uncached token, fitted over both sides (NAN: none) */
	size_t nb, na;
	bool judged, significant;
	/* what each cause moved, ms (NAN: not told); other: the band's change left over */
	double by[CAUSE__COUNT], other;
	struct band bb, ba;
	enum cmp_cause cause;
};

struct evidence {
	double arrivals, concurrency, busy, waiting; /* per s; mean in flight; share; mean */
	double prompt_p50, cached_share, hit_share; /* tokens; 0..1; 0..1 */
	double prefill_p50, uncached_p50;	   /* ms; tokens: of the requests with both */
};

/* Requests a side needs for a verdict on p. */
size_t compare__least(double p);
/* The change at percentile p of a group present on both sides (tb, ta: room for each side's
 * requests). */
void compare__judge(const struct cgroup *g, double p, struct change *ch, double *tb, double *ta);
/* A side's evidence, from its group's requests and its own engines. */
void compare__evidence(const struct side_state *s, const struct reqs *r, struct evidence *e);

#endif
