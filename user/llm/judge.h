/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a request means to the one waiting for it: who reads the reply (its consumer, and what
 * decided it), how fast its stream runs against a person's reading, and whether it met the
 * SLOs set for its consumer. docs/judgements.md says how each is decided and where the
 * defaults come from; the pipeline judges every request once, on its request_metrics. The
 * request body's part of the evidence (tools, a tool's result, the conversation's hashes that
 * llm/session.h chains calls by) is read here too, from the dialects' parse.
 */
#ifndef TS_JUDGE_H
#define TS_JUDGE_H

#include <stdbool.h>
#include <stddef.h>

#include "llm/request.h"

/* Silent reading of English: 238 words a minute (Brysbaert 2019, a meta-analysis of 190
 * studies), at 0.75 words a token: 5.3 tokens a second. */
#define READING_TPS_DEFAULT 5.3

enum slo_metric { SLO_TTFT = 0, SLO_TPOT, SLO_E2E, SLO__COUNT };

struct slo {
	enum consumer consumer;
	enum slo_metric metric;
	double ms;    /* at most this */
	bool reading; /* tpot<=reading: at most 1 s over the reading speed (ms follows it) */
};

enum rule_key { RULE_COMM = 0, RULE_UA, RULE_MODEL };

/* --consumer CONSUMER:KEY=GLOB: requests whose process (comm), User-Agent (ua) or model
 * matches the glob (fnmatch) are that consumer's; the first rule that matches wins. */
struct consumer_rule {
	enum consumer consumer;
	enum rule_key key;
	char glob[128];
};

#define JUDGE_RULES_MAX 32
#define JUDGE_SLOS_MAX 32

struct judge {
	double reading_tps;
	struct consumer_rule rules[JUDGE_RULES_MAX];
	size_t nrules;
	struct slo slos[JUDGE_SLOS_MAX];
	size_t nslos;
	/* the operator set SLOs for this consumer: its defaults are gone */
	bool slo_given[CONSUMER__COUNT];
};

/* The defaults: the reading speed above, interactive:ttft<=1s and interactive:tpot<=reading,
 * no rules. */
void judge__init(struct judge *j);
/* One option's value each; 0, or -1 with why in err. */
int judge__add_rule(struct judge *j, const char *spec, char *err, size_t errlen);
/* CONSUMER:METRIC<=VALUE (ttft, tpot or e2e; VALUE in ms or s, or "reading" for tpot;
 * CONSUMER "all" for each of them), or "none": no SLO at all. The first SLO given for a
 * consumer replaces its defaults. */
int judge__add_slo(struct judge *j, const char *spec, char *err, size_t errlen);
/* TOKENS a second, more than 0. */
int judge__set_reading(struct judge *j, const char *spec, char *err, size_t errlen);

struct jval;
/* What a request's body (its JSON, o) says of its sender's loop: r->tools_offered, and
 * r->tool_result where its conversation's last message is a tool's result. */
void judge__request_body(struct request *r, const struct jval *o);

/* Where a request's stream is relayed on to (stream/relay.h): asked only when no rule
 * decided; NULL: nowhere known. */
struct judge_relay {
	const struct request *(*downstream)(void *ctx, const struct request *r);
	void *ctx;
};

/* The request's consumer and evidence, reading headroom and slo_met, into m (its metrics).
 * relay NULL: no relay is looked for. */
void judge__request(const struct judge *j, const struct request *r, struct request_metrics *m,
		    const struct judge_relay *relay);

/* A consumer's SLOs as the option spells them ("ttft<=1000ms tpot<=reading"; "" for none). */
void judge__slos_text(const struct judge *j, enum consumer c, char *buf, size_t n);
/* Whether any SLO is set for the consumer. */
bool judge__has_slo(const struct judge *j, enum consumer c);

const char *consumer__name(enum consumer c);
const char *consumer_evidence__name(enum consumer_evidence e);

#endif
