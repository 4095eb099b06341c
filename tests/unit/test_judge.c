// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The judgements (llm/judge.h): a request's consumer from each kind of evidence, strongest
 * first; the options' rules, SLOs and reading speed, and their errors; slo_met, the reading
 * headroom and the cache regime from a request's own figures; and, through the whole
 * pipeline, what a request's head and body say of its sender (User-Agent, tools, a tool's
 * result) in each API's shape.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/dialect.h"
#include "llm/judge.h"
#include "llm/json.h"
#include "helpers.h"

#define T0 (1000 * MS)

/* A finished chat request: 10 tokens, the first at ttft_ms, one every tpot_ms after. */
static struct request *made(const char *ua, double ttft_ms, double tpot_ms)
{
	struct request *r = request__new();

	assert_non_null(r);
	snprintf(r->comm, sizeof(r->comm), "app");
	request__set_user_agent(r, ua);
	r->start_ns = T0;
	for (int i = 0; i < 10; i++)
		request__token(r, T0 + (uint64_t)((ttft_ms + i * tpot_ms) * MS));
	r->end_ns = r->last_token_ns;
	r->response_done = true;
	r->status = 200;
	return r;
}

static void judged(const struct judge *j, const struct request *r, struct request_metrics *m)
{
	request__metrics(r, m);
	judge__request(j, r, m, NULL);
}

struct evidence_case {
	const char *ua;
	bool tools_offered, tool_result, tool_called;
	const char *finish;
	enum consumer consumer;
	enum consumer_evidence evidence;
};

static void test_consumer_evidence(void **state)
{
	static const struct evidence_case cases[] = {
		/* a browser wins over tools: a person's chat may offer them */
		{ "Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/120", true, true, false, "stop",
		  CONSUMER_INTERACTIVE, EVIDENCE_USER_AGENT },
		{ "claude-cli/1.0.83 (external, cli)", false, false, false, "stop", CONSUMER_AGENT,
		  EVIDENCE_USER_AGENT },
		{ "Agents/Python 0.2.9", false, false, false, "stop", CONSUMER_AGENT,
		  EVIDENCE_USER_AGENT },
		/* an SDK says a program; the tools say which kind */
		{ "OpenAI/JS 6.30.1", true, true, false, "stop", CONSUMER_AGENT, EVIDENCE_TOOL_RESULT },
		{ "AsyncOpenAI/Python 1.99.0", true, false, false, "tool_calls", CONSUMER_AGENT,
		  EVIDENCE_TOOL_CALL },
		{ "Anthropic/JS 1.14.0", true, false, false, "tool_use", CONSUMER_AGENT,
		  EVIDENCE_TOOL_CALL },
		{ "OpenAI/Python 1.99.0", true, false, true, "completed", CONSUMER_AGENT,
		  EVIDENCE_TOOL_CALL },
		/* tools offered and not called: a program, not yet an agent */
		{ "OpenAI/JS 6.30.1", true, false, false, "stop", CONSUMER_PROGRAMMATIC,
		  EVIDENCE_PROGRAM },
		/* a tool call without tools offered is not believed */
		{ "curl/7.88.1", false, false, false, "tool_calls", CONSUMER_PROGRAMMATIC,
		  EVIDENCE_PROGRAM },
		{ "python-httpx/0.23.3", false, false, false, "stop", CONSUMER_PROGRAMMATIC,
		  EVIDENCE_PROGRAM },
		/* no User-Agent, or one nobody knows: the tools alone, else unknown */
		{ "", false, true, false, "stop", CONSUMER_AGENT, EVIDENCE_TOOL_RESULT },
		{ "", false, false, false, "stop", CONSUMER_UNKNOWN, EVIDENCE_NONE },
		{ "MyInternalThing/2", false, false, false, "stop", CONSUMER_UNKNOWN, EVIDENCE_NONE },
		/* the SDK's name past the first product is somebody else's */
		{ "Thing/1 OpenAI/JS", false, false, false, "stop", CONSUMER_UNKNOWN, EVIDENCE_NONE },
	};
	struct judge j;

	(void)state;
	judge__init(&j);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const struct evidence_case *c = &cases[i];
		struct request *r = made(c->ua, 100, 20);
		struct request_metrics m;

		r->tools_offered = c->tools_offered;
		r->tool_result = c->tool_result;
		r->tool_called = c->tool_called;
		snprintf(r->finish_reason, sizeof(r->finish_reason), "%s", c->finish);
		judged(&j, r, &m);
		if (m.consumer != c->consumer || m.consumer_evidence != c->evidence)
			fail_msg("case %zu (%s): %s by %s, want %s by %s", i, c->ua,
				 consumer__name(m.consumer), consumer_evidence__name(m.consumer_evidence),
				 consumer__name(c->consumer), consumer_evidence__name(c->evidence));
		request__free(r);
	}
}

static void test_rules(void **state)
{
	struct judge j;
	struct request_metrics m;
	struct request *r = made("Mozilla/5.0", 100, 20);
	char err[256];

	(void)state;
	judge__init(&j);
	request__set_str(&r->model, "batch-7b", 8);
	assert_int_equal(judge__add_rule(&j, "programmatic:model=batch-*", err, sizeof(err)), 0);
	assert_int_equal(judge__add_rule(&j, "agent:comm=app", err, sizeof(err)), 0);
	judged(&j, r, &m);
	/* the first rule that matches wins, over the browser's User-Agent too */
	assert_int_equal(m.consumer, CONSUMER_PROGRAMMATIC);
	assert_int_equal(m.consumer_evidence, EVIDENCE_RULE);
	request__set_str(&r->model, "chat-7b", 7);
	judged(&j, r, &m);
	assert_int_equal(m.consumer, CONSUMER_AGENT);
	judge__init(&j);
	assert_int_equal(judge__add_rule(&j, "interactive:ua=*HeadlessChrome*", err, sizeof(err)), 0);
	judged(&j, r, &m);
	assert_int_equal(m.consumer_evidence, EVIDENCE_USER_AGENT); /* the rule did not match */

	static const char *const bad[] = { "interactive", "robot:comm=x", "agent:pid=3",
					   "agent:comm=", "all:comm=x", "agent=comm:x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = 0;
		if (judge__add_rule(&j, bad[i], err, sizeof(err)) != -1 || !strstr(err, bad[i]))
			fail_msg("--consumer %s was taken (%s)", bad[i], err);
	}
	request__free(r);
}

static const struct request *relayed_to;

static const struct request *to(void *ctx, const struct request *r)
{
	(void)ctx;
	(void)r;
	return relayed_to;
}

/* A stream relayed on to a person's or an agent's request is theirs, over the relay's own
 * name; to a program's, the request's own evidence decides. Rules still win. */
static void test_relay(void **state)
{
	struct judge j;
	struct request_metrics m;
	struct request *r = made("relay/1.0", 100, 20), *browser = made("Mozilla/5.0", 90, 20),
		       *agent = made("claude-cli/1.0", 90, 20), *curl = made("curl/8", 90, 20);
	const struct judge_relay relay = { to, NULL };
	char err[256];

	(void)state;
	judge__init(&j);
	r->tools_offered = true;
	snprintf(r->finish_reason, sizeof(r->finish_reason), "tool_calls");
	relayed_to = browser;
	request__metrics(r, &m);
	judge__request(&j, r, &m, &relay);
	assert_int_equal(m.consumer, CONSUMER_INTERACTIVE);
	assert_int_equal(m.consumer_evidence, EVIDENCE_RELAY);
	relayed_to = agent;
	judge__request(&j, r, &m, &relay);
	assert_int_equal(m.consumer, CONSUMER_AGENT);
	assert_int_equal(m.consumer_evidence, EVIDENCE_RELAY);
	relayed_to = curl; /* a program's: the request's own tool call decides */
	judge__request(&j, r, &m, &relay);
	assert_int_equal(m.consumer, CONSUMER_AGENT);
	assert_int_equal(m.consumer_evidence, EVIDENCE_TOOL_CALL);
	relayed_to = NULL;
	judge__request(&j, r, &m, &relay);
	assert_int_equal(m.consumer_evidence, EVIDENCE_TOOL_CALL);
	relayed_to = browser;
	assert_int_equal(judge__add_rule(&j, "programmatic:ua=relay/*", err, sizeof(err)), 0);
	judge__request(&j, r, &m, &relay);
	assert_int_equal(m.consumer, CONSUMER_PROGRAMMATIC);
	assert_int_equal(m.consumer_evidence, EVIDENCE_RULE);
	request__free(r);
	request__free(browser);
	request__free(agent);
	request__free(curl);
}

static void test_slo_options(void **state)
{
	struct judge j;
	char err[256], text[160];

	(void)state;
	judge__init(&j);
	judge__slos_text(&j, CONSUMER_INTERACTIVE, text, sizeof(text));
	assert_string_equal(text, "ttft<=1000ms tpot<=reading");
	assert_false(judge__has_slo(&j, CONSUMER_AGENT));
	/* a consumer's first SLO replaces its defaults; its later ones add */
	assert_int_equal(judge__add_slo(&j, "interactive:ttft<=0.5s", err, sizeof(err)), 0);
	assert_int_equal(judge__add_slo(&j, "interactive:e2e<=30s", err, sizeof(err)), 0);
	judge__slos_text(&j, CONSUMER_INTERACTIVE, text, sizeof(text));
	assert_string_equal(text, "ttft<=500ms e2e<=30000ms");
	assert_int_equal(judge__add_slo(&j, "all:ttft<=250ms", err, sizeof(err)), 0);
	judge__slos_text(&j, CONSUMER_INTERACTIVE, text, sizeof(text));
	assert_string_equal(text, "ttft<=500ms e2e<=30000ms ttft<=250ms");
	judge__slos_text(&j, CONSUMER_UNKNOWN, text, sizeof(text));
	assert_string_equal(text, "ttft<=250ms");
	assert_int_equal(judge__add_slo(&j, "none", err, sizeof(err)), 0);
	for (int c = 0; c < CONSUMER__COUNT; c++)
		assert_false(judge__has_slo(&j, (enum consumer)c));
	/* after none, the defaults do not come back */
	assert_int_equal(judge__add_slo(&j, "agent:e2e<=20s", err, sizeof(err)), 0);
	assert_false(judge__has_slo(&j, CONSUMER_INTERACTIVE));

	static const char *const bad[] = { "ttft<=1s", "robot:ttft<=1s", "agent:itl<=1s",
					   "agent:ttft<1s", "agent:ttft<=1", "agent:ttft<=-1s",
					   "agent:e2e<=reading", "agent:ttft<=1sx", "agent:ttft<=nans" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = 0;
		if (judge__add_slo(&j, bad[i], err, sizeof(err)) != -1 || !strstr(err, bad[i]))
			fail_msg("--slo %s was taken (%s)", bad[i], err);
	}
	static const char *const bad_speed[] = { "0", "-3", "x", "5x", "inf", "" };
	for (size_t i = 0; i < sizeof(bad_speed) / sizeof(*bad_speed); i++)
		assert_int_equal(judge__set_reading(&j, bad_speed[i], err, sizeof(err)), -1);
	assert_int_equal(judge__set_reading(&j, "8.5", err, sizeof(err)), 0);
	assert_float_equal(j.reading_tps, 8.5, 0);
}

static void test_slo_met_and_reading(void **state)
{
	struct judge j;
	struct request_metrics m;
	char err[256];
	struct request *fast = made("Mozilla/5.0", 800, 100);  /* 10 tokens/s */
	struct request *slow = made("Mozilla/5.0", 800, 250);  /* 4 tokens/s */
	struct request *late = made("Mozilla/5.0", 1200, 100); /* TTFT past 1 s */
	struct request *one = made("Mozilla/5.0", 100, 0);

	(void)state;
	judge__init(&j);
	judged(&j, fast, &m);
	assert_float_equal(m.tokens_per_s, 10, 1e-9);
	assert_float_equal(m.reading_headroom, 10 / READING_TPS_DEFAULT, 1e-9);
	assert_int_equal(m.slo_met, 1);
	judged(&j, slow, &m);
	assert_float_equal(m.reading_headroom, 4 / READING_TPS_DEFAULT, 1e-9);
	assert_int_equal(m.slo_met, 0); /* TPOT 250 ms: slower than 5.3 tokens/s */
	judged(&j, late, &m);
	assert_int_equal(m.slo_met, 0);
	/* one token: no TPOT, judged on its TTFT alone */
	one->output_tokens = (struct opt_u64){ true, 1 };
	judged(&j, one, &m);
	assert_true(isnan(m.tpot_ms) && isnan(m.reading_headroom));
	assert_int_equal(m.slo_met, 1);
	/* a server's error misses its SLOs, whatever its times */
	fast->status = 503;
	judged(&j, fast, &m);
	assert_int_equal(m.slo_met, 0);
	fast->status = 200;
	/* lost bytes: no figure to judge */
	fast->lossy = true;
	judged(&j, fast, &m);
	assert_int_equal(m.slo_met, -1);
	fast->lossy = false;
	/* a program: no SLO by default, and no reading headroom (nobody reads it) */
	request__set_user_agent(slow, "curl/8");
	judged(&j, slow, &m);
	assert_int_equal(m.consumer, CONSUMER_PROGRAMMATIC);
	assert_int_equal(m.slo_met, -1);
	assert_true(isnan(m.reading_headroom) && !isnan(m.tokens_per_s));
	assert_int_equal(judge__add_slo(&j, "programmatic:e2e<=3s", err, sizeof(err)), 0);
	judged(&j, slow, &m); /* e2e 800 + 9 * 250 = 3050 ms */
	assert_int_equal(m.slo_met, 0);
	assert_int_equal(judge__set_reading(&j, "3", err, sizeof(err)), 0);
	request__set_user_agent(slow, "Mozilla/5.0");
	judged(&j, slow, &m);
	assert_int_equal(m.slo_met, 1); /* 4 tokens/s keeps ahead of 3 */
	request__free(fast);
	request__free(slow);
	request__free(late);
	request__free(one);
}

static void test_cache_regime(void **state)
{
	static const struct {
		bool input_set, cached_set;
		uint64_t input, cached;
		enum cache_regime want;
	} cases[] = {
		{ true, false, 100, 0, CACHE_UNKNOWN }, { true, true, 100, 0, CACHE_MISS },
		{ true, true, 100, 50, CACHE_PARTIAL }, { true, true, 100, 89, CACHE_PARTIAL },
		{ true, true, 100, 90, CACHE_HIT },	{ true, true, 100, 100, CACHE_HIT },
		{ false, true, 0, 40, CACHE_UNKNOWN },	{ true, true, 10, 40, CACHE_UNKNOWN },
		{ false, true, 0, 0, CACHE_MISS },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct request *r = made("", 10, 10);
		struct request_metrics m;

		r->input_tokens = (struct opt_u64){ cases[i].input_set, cases[i].input };
		r->cached_tokens = (struct opt_u64){ cases[i].cached_set, cases[i].cached };
		request__metrics(r, &m);
		if (m.cache != cases[i].want)
			fail_msg("case %zu: %s, want %s", i, cache_regime__name(m.cache),
				 cache_regime__name(cases[i].want));
		request__free(r);
	}
}

/* What each API's request body says of the sender's loop: a tool's result last (not further
 * back, which is history), tools offered. */
static void test_tool_facts(void **state)
{
	static const struct {
		const char *path, *body;
		bool tools, result;
	} cases[] = {
		{ "/v1/chat/completions",
		  "{\"model\":\"m\",\"tools\":[{\"type\":\"function\"}],\"messages\":[{\"role\":\"user\"},"
		  "{\"role\":\"assistant\",\"tool_calls\":[]},{\"role\":\"tool\",\"content\":\"r\"}]}",
		  true, true },
		{ "/v1/chat/completions",
		  "{\"model\":\"m\",\"tools\":[],\"messages\":[{\"role\":\"tool\"},{\"role\":\"user\"}]}",
		  false, false },
		{ "/v1/chat/completions",
		  "{\"model\":\"m\",\"functions\":[{}],\"messages\":[{\"role\":\"function\"}]}", true,
		  true },
		{ "/v1/messages",
		  "{\"model\":\"m\",\"tools\":[{}],\"messages\":[{\"role\":\"user\",\"content\":"
		  "[{\"type\":\"tool_result\",\"tool_use_id\":\"t\"}]}]}",
		  true, true },
		{ "/v1/messages",
		  "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"plain\"}]}", false,
		  false },
		{ "/v1/responses",
		  "{\"model\":\"m\",\"tools\":[{}],\"input\":[{\"type\":\"function_call\"},"
		  "{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
		  true, true },
		{ "/v1/responses", "{\"model\":\"m\",\"input\":\"a string prompt\"}", false, false },
		{ "/v1beta/models/g:streamGenerateContent",
		  "{\"tools\":[{}],\"contents\":[{\"role\":\"user\",\"parts\":[{\"functionResponse\":"
		  "{}}]}]}",
		  true, true },
	};
	struct jdoc doc = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct request *r = request__new();

		request__set_path(r, cases[i].path);
		dialect__request_head(r);
		dialect__request_body(&doc, r, cases[i].body, strlen(cases[i].body));
		if (r->tools_offered != cases[i].tools || r->tool_result != cases[i].result)
			fail_msg("case %zu: tools %d result %d", i, r->tools_offered, r->tool_result);
		request__free(r);
	}
	jdoc__free(&doc);
}

/* Through the whole pipeline: the User-Agent (cut, made printable), the tools, the Responses
 * output's function call, and the judgement on the record. */
static void test_pipeline_record(void **state)
{
	struct script sc = { 0 };
	const char *body = "{\"model\":\"m\",\"stream\":true,\"tools\":[{\"type\":\"function\"}],"
			   "\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}";
	char ua[200];
	char *j;
	size_t n;

	(void)state;
	memset(ua, 'q', sizeof(ua) - 1); /* past the 63 kept: cut */
	ua[sizeof(ua) - 1] = 0;
	memcpy(ua, "OpenAI/Python 1.0 \x01", 19);
	script__add(&sc, true, T0,
		    "POST /v1/responses HTTP/1.1\r\nHost: a\r\nUser-Agent: %s\r\n"
		    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		    ua, strlen(body), body);
	script__add(&sc, false, T0 + 5 * MS,
		    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000000\r\n\r\n");
	script__add(&sc, false, T0 + 40 * MS,
		    "event: response.function_call_arguments.delta\ndata: {\"type\":"
		    "\"response.function_call_arguments.delta\",\"delta\":\"{}\"}\n\n");
	script__add(&sc, false, T0 + 50 * MS,
		    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
		    "{\"id\":\"r\",\"status\":\"completed\",\"output\":[{\"type\":\"function_call\","
		    "\"name\":\"f\"}]}}\n\n");
	j = run_all_splits(sc.s, sc.n, &n);
	assert_int_equal(n, 1);
	assert_int_equal(strlen(json_str(j, "user_agent")), REQ_USER_AGENT_MAX - 1);
	assert_memory_equal(json_str(j, "user_agent"), "OpenAI/Python 1.0 ?qqq", 22);
	assert_string_equal(json_str(j, "consumer"), "agent");
	assert_string_equal(json_str(j, "consumer_evidence"), "tool_call");
	assert_int_equal(json_bool(j, "slo_met"), -1);
	free(j);
	script__free(&sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_consumer_evidence), cmocka_unit_test(test_rules),
		cmocka_unit_test(test_relay),
		cmocka_unit_test(test_slo_options),	  cmocka_unit_test(test_slo_met_and_reading),
		cmocka_unit_test(test_cache_regime),	  cmocka_unit_test(test_tool_facts),
		cmocka_unit_test(test_pipeline_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
