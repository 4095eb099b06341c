// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A request's consumer, reading headroom and SLOs (judge.h; docs/judgements.md). */
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "llm/group.h"
#include "llm/judge.h"
#include "llm/json.h"

static const char *const consumer_names[CONSUMER__COUNT] = {
	[CONSUMER_UNKNOWN] = "unknown",
	[CONSUMER_INTERACTIVE] = "interactive",
	[CONSUMER_AGENT] = "agent",
	[CONSUMER_PROGRAMMATIC] = "programmatic",
};

static const char *const evidence_names[EVIDENCE__COUNT] = {
	[EVIDENCE_NONE] = "none",	     [EVIDENCE_RULE] = "rule",	     [EVIDENCE_RELAY] = "relay",
	[EVIDENCE_USER_AGENT] = "user_agent", [EVIDENCE_TOOL_RESULT] = "tool_result",
	[EVIDENCE_TOOL_CALL] = "tool_call",   [EVIDENCE_PROGRAM] = "program",
};

static const char *const metric_names[SLO__COUNT] = {
	[SLO_TTFT] = "ttft", [SLO_TPOT] = "tpot", [SLO_E2E] = "e2e"
};

const char *consumer__name(enum consumer c)
{
	return c < CONSUMER__COUNT ? consumer_names[c] : "unknown";
}

const char *consumer_evidence__name(enum consumer_evidence e)
{
	return e < EVIDENCE__COUNT ? evidence_names[e] : "none";
}

/* ---- what a User-Agent says ---- */

/* Agents: coding agents and agent frameworks that name themselves first in their User-Agent
 * (compared without case, as a prefix). */
static const char *const agent_names[] = {
	"claude-cli/", "claude-code/", "codex_cli_rs/", "Agents/", "opencode/", "aider/",
	"OpenHands",   "langchain",    "crewai",	"autogen", "llama-index", "llamaindex",
};

/* Programs: the official SDKs ("OpenAI/JS", "AsyncOpenAI/Python", "Anthropic/Python"... are
 * found anywhere in the first product) and HTTP libraries and tools (a prefix). */
static const char *const sdk_products[] = { "OpenAI/", "Anthropic/" };
static const char *const program_names[] = {
	"google-genai-sdk/", "google-api-", "ollama-python/", "ollama-js/", "curl/", "Wget/",
	"python-httpx/",     "python-requests/", "Python-urllib/", "Python/", "aiohttp/",
	"Go-http-client/",   "node-fetch", "node", "undici", "axios/", "okhttp/", "grpc-",
	"Java-http-client/", "Apache-HttpClient/", "reqwest/", "libcurl", "nghttp2/", "h2load",
	"HTTPie/",	     "litellm",
};

#define N(a) (sizeof(a) / sizeof(*(a)))

static bool prefixed(const char *s, const char *const *table, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!strncasecmp(s, table[i], strlen(table[i])))
			return true;
	}
	return false;
}

/* An SDK's name in the first product: the class name before it varies (Async..., Azure...). */
static bool sdk_product(const char *ua)
{
	size_t first = strcspn(ua, " ");

	for (size_t i = 0; i < N(sdk_products); i++) {
		const char *at = strstr(ua, sdk_products[i]);

		if (at && (size_t)(at - ua) < first)
			return true;
	}
	return false;
}

/* ---- what the request says ---- */

/* The last element of an array (NULL for none). */
static const struct jval *last_of(const struct jval *a)
{
	const struct jval *e, *last = NULL;
	size_t i;

	jv_array_foreach(a, i, e)
		last = e;
	return last;
}

/* Whether a message carries a tool's result: a chat message of role "tool" (or the older
 * "function"; Ollama's too), a Responses input item "*_call_output", an Anthropic message
 * with a "tool_result" block, a Gemini content with a "functionResponse" part. */
static bool is_tool_result(const struct jval *m)
{
	const struct jval *type = jv_get(m, "type"), *e;
	size_t i;

	if (jv_str_is(jv_get(m, "role"), "tool") || jv_str_is(jv_get(m, "role"), "function"))
		return true;
	if (jv_is(type, J_STRING) && type->n > 12 && !strcmp(type->s + type->n - 12, "_call_output"))
		return true;
	jv_array_foreach(jv_get(m, "content"), i, e) {
		if (jv_str_is(jv_get(e, "type"), "tool_result"))
			return true;
	}
	jv_array_foreach(jv_get(m, "parts"), i, e) {
		if (jv_get(e, "functionResponse"))
			return true;
	}
	return false;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* A value and everything in it, hashed (FNV-1a): its kinds, strings and numbers, an array's
 * elements in order, an object's members in any order, so that two serialisations of one
 * message (other spacing, escapes or member order) hash alike. */
static uint64_t hash_value(const struct jval *v)
{
	uint64_t h = fnv(1469598103934665603ull, &v->kind, sizeof(v->kind)), sum = 0;
	const struct jval *c = v + 1;

	switch (v->kind) {
	case J_STRING:
		return fnv(h, v->s, v->n);
	case J_INT:
		return fnv(h, &v->i, sizeof(v->i));
	case J_REAL:
		return fnv(h, &v->d, sizeof(v->d));
	case J_ARRAY:
		for (uint32_t i = 0; i < v->n; i++, c += c->skip) {
			uint64_t e = hash_value(c);

			h = fnv(h, &e, sizeof(e));
		}
		return h;
	case J_OBJECT:
		/* each member's key and value together; the members summed: order does not count */
		for (uint32_t i = 0; i < v->n; i++) {
			uint64_t k = hash_value(c), val = hash_value(c + 1);

			sum += fnv(fnv(1469598103934665603ull, &k, sizeof(k)), &val, sizeof(val));
			c = c + 1 + (c + 1)->skip;
		}
		return fnv(fnv(h, &v->n, sizeof(v->n)), &sum, sizeof(sum));
	default:
		return h;
	}
}

/* Each prefix of the conversation, hashed (llm/session.h chains a call to the one whose whole
 * conversation it begins with). At most REQ_CONV_MAX messages. */
static void conversation(struct request *r, const struct jval *conv)
{
	size_t n = jv_array_size(conv), i;
	const struct jval *m;
	uint64_t h = 1469598103934665603ull;

	if (n > REQ_CONV_MAX)
		n = REQ_CONV_MAX;
	free(r->conv);
	r->conv = n ? malloc(n * sizeof(*r->conv)) : NULL;
	r->nconv = 0;
	if (!r->conv)
		return;
	jv_array_foreach(conv, i, m) {
		if (i == n)
			break;
		uint64_t mh = hash_value(m);

		h = fnv(h, &mh, sizeof(mh));
		r->conv[r->nconv++] = h;
	}
}

/* What the request says of its sender's loop (llm/judge.h): tools offered (OpenAI's and
 * Anthropic's "tools", the older "functions"; Gemini's too), and whether the conversation's
 * last message is a tool's result. A tool result further back is history: a person's chat
 * may hold one. */
void judge__request_body(struct request *r, const struct jval *o)
{
	const struct jval *conv = jv_get(o, "messages"), *prev = jv_get(o, "previous_response_id");

	r->tools_offered = jv_array_size(jv_get(o, "tools")) || jv_array_size(jv_get(o, "functions"));
	if (!conv)
		conv = jv_is(jv_get(o, "input"), J_ARRAY) ? jv_get(o, "input") : jv_get(o, "contents");
	r->tool_result = is_tool_result(last_of(conv));
	if (jv_str(prev) && prev->n < sizeof(r->previous_response_id))
		memcpy(r->previous_response_id, prev->s, prev->n + 1);
	conversation(r, conv);
}

/* ---- the consumer ---- */

static bool rule_matches(const struct consumer_rule *rule, const struct request *r)
{
	const char *s = rule->key == RULE_COMM ? r->comm
			: rule->key == RULE_UA ? r->user_agent
					       : request__model(r);

	return fnmatch(rule->glob, s, 0) == 0;
}

/* Strongest evidence first: the operator's rules; the request a traced proxy relays the
 * stream on to (downstream), where its own evidence says a person or an agent; a browser's or
 * an agent's own name; the tools (a result fed back, a tool called where tools were offered);
 * a program's name. An SDK or an HTTP library says a program sends the request, not which
 * kind: the tools say whether it is an agent. Nothing else decides: unknown. */
static void decide(const struct judge *j, const struct request *r, struct request_metrics *m,
		   const struct judge_relay *relay)
{
	enum consumer c = CONSUMER_UNKNOWN;
	enum consumer_evidence e = EVIDENCE_NONE;
	const struct request *downstream;

	for (size_t i = 0; i < j->nrules; i++) {
		if (rule_matches(&j->rules[i], r)) {
			m->consumer = j->rules[i].consumer;
			m->consumer_evidence = EVIDENCE_RULE;
			return;
		}
	}
	if (relay && (downstream = relay->downstream(relay->ctx, r))) {
		struct request_metrics dm = { 0 };

		decide(j, downstream, &dm, NULL);
		if (dm.consumer == CONSUMER_INTERACTIVE || dm.consumer == CONSUMER_AGENT) {
			m->consumer = dm.consumer;
			m->consumer_evidence = EVIDENCE_RELAY;
			return;
		}
	}
	if (!strncmp(r->user_agent, "Mozilla/", 8))
		c = CONSUMER_INTERACTIVE, e = EVIDENCE_USER_AGENT;
	else if (prefixed(r->user_agent, agent_names, N(agent_names)))
		c = CONSUMER_AGENT, e = EVIDENCE_USER_AGENT;
	else if (r->tool_result)
		c = CONSUMER_AGENT, e = EVIDENCE_TOOL_RESULT;
	else if (r->tools_offered && request__called_tool(r))
		c = CONSUMER_AGENT, e = EVIDENCE_TOOL_CALL;
	else if (r->user_agent[0] && (sdk_product(r->user_agent) ||
				      prefixed(r->user_agent, program_names, N(program_names))))
		c = CONSUMER_PROGRAMMATIC, e = EVIDENCE_PROGRAM;
	m->consumer = c;
	m->consumer_evidence = e;
}

/* ---- SLOs ---- */

static double slo_ms(const struct judge *j, const struct slo *s)
{
	return s->reading ? 1e3 / j->reading_tps : s->ms;
}

/* Met, missed, or -1 where no SLO of its consumer could be judged. A reply the server failed
 * (an HTTP or gRPC error) missed them all; an SLO whose figure the request has none of (a TPOT
 * of one token, a TTFT of lost bytes) is not judged. */
static int slo_met(const struct judge *j, const struct request *r, const struct request_metrics *m)
{
	int met = -1;

	for (size_t i = 0; i < j->nslos; i++) {
		const struct slo *s = &j->slos[i];
		double v = s->metric == SLO_TTFT ? m->ttft_ms
			   : s->metric == SLO_TPOT ? m->tpot_ms
						   : m->e2e_ms;

		if (s->consumer != m->consumer)
			continue;
		if (r->status >= 400 || r->grpc_status > 0)
			return 0;
		if (isnan(v))
			continue;
		if (v > slo_ms(j, s))
			return 0;
		met = 1;
	}
	return met;
}

void judge__request(const struct judge *j, const struct request *r, struct request_metrics *m,
		    const struct judge_relay *relay)
{
	decide(j, r, m, relay);
	if (m->consumer == CONSUMER_INTERACTIVE && !isnan(m->tokens_per_s))
		m->reading_headroom = m->tokens_per_s / j->reading_tps;
	m->slo_met = slo_met(j, r, m);
}

/* ---- the options ---- */

static const struct slo default_slos[] = {
	/* Nielsen's 1 s limit: the reader's flow of thought stays uninterrupted */
	{ CONSUMER_INTERACTIVE, SLO_TTFT, 1000, false },
	/* text faster than it is read is not seen: the stream need only keep ahead of reading */
	{ CONSUMER_INTERACTIVE, SLO_TPOT, 0, true },
};

void judge__init(struct judge *j)
{
	memset(j, 0, sizeof(*j));
	j->reading_tps = READING_TPS_DEFAULT;
	memcpy(j->slos, default_slos, sizeof(default_slos));
	j->nslos = N(default_slos);
}

static int fail(char *err, size_t n, const char *fmt, const char *what)
{
	snprintf(err, n, fmt, what);
	return -1;
}

/* "interactive", "agent"... up to the ':'; CONSUMER__COUNT for "all"; -1 for none of them. */
static int consumer_of(const char *s, size_t len)
{
	if (len == 3 && !strncmp(s, "all", 3))
		return CONSUMER__COUNT;
	for (int c = 0; c < CONSUMER__COUNT; c++) {
		if (strlen(consumer_names[c]) == len && !strncmp(s, consumer_names[c], len))
			return c;
	}
	return -1;
}

int judge__add_rule(struct judge *j, const char *spec, char *err, size_t n)
{
	static const char *const keys[] = { [RULE_COMM] = "comm", [RULE_UA] = "ua",
					    [RULE_MODEL] = "model" };
	const char *colon = strchr(spec, ':'), *eq;
	struct consumer_rule *rule;
	int c;

	if (!colon || (c = consumer_of(spec, (size_t)(colon - spec))) < 0 || c == CONSUMER__COUNT)
		return fail(err, n, "--consumer %s: want interactive|agent|programmatic|unknown:"
			    "comm|ua|model=GLOB", spec);
	eq = strchr(colon, '=');
	if (!eq || !eq[1])
		return fail(err, n, "--consumer %s: want KEY=GLOB after the consumer", spec);
	if (j->nrules == JUDGE_RULES_MAX)
		return fail(err, n, "--consumer %s: more rules than tokenscope keeps", spec);
	rule = &j->rules[j->nrules];
	for (size_t k = 0; k < N(keys); k++) {
		if ((size_t)(eq - colon - 1) == strlen(keys[k]) &&
		    !strncmp(colon + 1, keys[k], strlen(keys[k]))) {
			if (strlen(eq + 1) >= sizeof(rule->glob))
				return fail(err, n, "--consumer %s: the glob is too long", spec);
			rule->consumer = (enum consumer)c;
			rule->key = (enum rule_key)k;
			snprintf(rule->glob, sizeof(rule->glob), "%s", eq + 1);
			j->nrules++;
			return 0;
		}
	}
	return fail(err, n, "--consumer %s: the key is comm, ua or model", spec);
}

/* "500ms", "1.5s", "2s": milliseconds, or -1. */
static double duration_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || !isfinite(v) || v < 0)
		return -1;
	if (!strcmp(end, "ms"))
		return v;
	if (!strcmp(end, "s"))
		return v * 1e3;
	return -1;
}

static void add_slo(struct judge *j, enum consumer c, const struct slo *s)
{
	if (!j->slo_given[c]) {
		/* the operator's first SLO for this consumer: its defaults go */
		size_t k = 0;

		for (size_t i = 0; i < j->nslos; i++) {
			if (j->slos[i].consumer != c)
				j->slos[k++] = j->slos[i];
		}
		j->nslos = k;
		j->slo_given[c] = true;
	}
	j->slos[j->nslos] = *s;
	j->slos[j->nslos++].consumer = c;
}

int judge__add_slo(struct judge *j, const char *spec, char *err, size_t n)
{
	const char *colon = strchr(spec, ':'), *le;
	struct slo s = { 0 };
	int c, m;

	if (!strcmp(spec, "none")) {
		j->nslos = 0;
		for (int k = 0; k < CONSUMER__COUNT; k++)
			j->slo_given[k] = true;
		return 0;
	}
	if (!colon || (c = consumer_of(spec, (size_t)(colon - spec))) < 0)
		return fail(err, n, "--slo %s: want CONSUMER:METRIC<=VALUE, CONSUMER one of "
			    "interactive, agent, programmatic, unknown, all", spec);
	le = strstr(colon, "<=");
	for (m = 0; le && m < SLO__COUNT; m++) {
		if ((size_t)(le - colon - 1) == strlen(metric_names[m]) &&
		    !strncmp(colon + 1, metric_names[m], strlen(metric_names[m])))
			break;
	}
	if (!le || m == SLO__COUNT)
		return fail(err, n, "--slo %s: the metric is ttft, tpot or e2e, then <=", spec);
	s.metric = (enum slo_metric)m;
	if (!strcmp(le + 2, "reading")) {
		if (s.metric != SLO_TPOT)
			return fail(err, n, "--slo %s: only tpot can be held to reading", spec);
		s.reading = true;
	} else if ((s.ms = duration_ms(le + 2)) < 0) {
		return fail(err, n, "--slo %s: the value is a time such as 500ms or 2s", spec);
	}
	if (j->nslos + (c == CONSUMER__COUNT ? CONSUMER__COUNT : 1) > JUDGE_SLOS_MAX)
		return fail(err, n, "--slo %s: more SLOs than tokenscope keeps", spec);
	for (int k = 0; k < CONSUMER__COUNT; k++) {
		if (c == CONSUMER__COUNT || c == k)
			add_slo(j, (enum consumer)k, &s);
	}
	return 0;
}

int judge__set_reading(struct judge *j, const char *spec, char *err, size_t n)
{
	char *end;
	double v = strtod(spec, &end);

	if (end == spec || *end || !isfinite(v) || v <= 0)
		return fail(err, n, "--reading-speed %s: want tokens a second, more than 0", spec);
	j->reading_tps = v;
	return 0;
}

bool judge__has_slo(const struct judge *j, enum consumer c)
{
	for (size_t i = 0; i < j->nslos; i++) {
		if (j->slos[i].consumer == c)
			return true;
	}
	return false;
}

void judge__slos_text(const struct judge *j, enum consumer c, char *buf, size_t n)
{
	size_t at = 0;

	buf[0] = 0;
	for (size_t i = 0; i < j->nslos && at < n; i++) {
		const struct slo *s = &j->slos[i];
		int w;

		if (s->consumer != c)
			continue;
		if (s->reading)
			w = snprintf(buf + at, n - at, "%s%s<=reading", at ? " " : "",
				     metric_names[s->metric]);
		else
			w = snprintf(buf + at, n - at, "%s%s<=%gms", at ? " " : "",
				     metric_names[s->metric], s->ms);
		if (w < 0)
			return;
		at += (size_t)w;
	}
}
