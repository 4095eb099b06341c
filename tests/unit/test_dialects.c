// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every dialect through the whole pipeline (records -> HTTP -> SSE/NDJSON -> dialect ->
 * metrics), each conversation also fed split at every byte boundary, byte by byte and in
 * random pieces. Times are chosen so every expected figure is exact. The dialects are one
 * table of cases with every figure each must give; a new dialect is a new case.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "llm/dialect.h"
#include "llm/grpc_dialect.h"
#include "helpers.h"

#define T0 (1000 * MS)

static void request_head(struct script *sc, const char *path, const char *body)
{
	script__add(sc, true, T0,
		    "POST %s HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer sk-SECRET\r\n"
		    "x-api-key: sk-ant-SECRET\r\nCookie: session=SECRET\r\n"
		    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		    path, strlen(body), body);
}

static void sse_head(struct script *sc, const char *ctype)
{
	script__add(sc, false, T0 + 5 * MS,
		    "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n", ctype);
}

static char *check_all(struct script *sc, size_t want_requests)
{
	size_t n = 0;
	char *json = run_all_splits(sc->s, sc->n, &n);

	assert_int_equal(n, want_requests);
	/* Secrets never reach an output. */
	assert_null(strstr(json, "SECRET"));
	return json;
}

static void expect_times(const char *j, double ttft, double tpot, double e2e)
{
	assert_float_equal(json_num(j, "ttft_ms"), ttft, 1e-6);
	if (isnan(tpot))
		assert_true(isnan(json_num(j, "tpot_ms")));
	else
		assert_float_equal(json_num(j, "tpot_ms"), tpot, 1e-6);
	assert_float_equal(json_num(j, "e2e_ms"), e2e, 1e-6);
}

/* ---- one table: every dialect's stream, and every figure it must give ---- */

#define NUL NAN /* a JSON null */

struct chunk {
	unsigned ms; /* after T0 */
	const char *data;
};

struct want {
	const char *api, *model, *response_model, *finish_reason, *error;
	double ttft, tpot, e2e;
	double token_events, output_tokens, input_tokens, cached_tokens;
	int estimated, cache_hit; /* 1, 0, -1 for null */
	const char *also;	  /* a substring the record must hold (NULL: none) */
};

struct dialect_case {
	const char *name;
	const char *path, *body; /* the request; path NULL: raw_request */
	const char *raw_request;
	const char *ctype;
	struct chunk chunks[8];
	unsigned end_ms; /* the last chunk, "0\r\n\r\n" */
	struct want want;
};

static const struct dialect_case cases[] = {
	{ "openai chat: usage, reasoning, tool calls, events split over chunks",
	  "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
	  "\"messages\":[{\"role\":\"user\",\"content\":\"PROMPT-TEXT\"}]}",
	  NULL, "text/event-stream; charset=utf-8",
	  {
		  /* The role-only first chunk is not a token. */
		  { 6, "data: {\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024\",\"choices\":"
		       "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
		       "\"finish_reason\":null}],\"usage\":null}\r\n\r\n" },
		  { 50, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n" },
		  /* Two events in one chunk, the second split over two chunks. */
		  { 60, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n"
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":" },
		  { 75, "\"hm\"}}]}\r\n\r\n" },
		  { 80, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
			"\"function\":{\"arguments\":\"{}\"}}]}}]}\r\n\r\n" },
		  { 81, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n" },
		  { 82, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":"
			"7,\"total_tokens\":107,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\r\n\r\n" },
		  { 83, "data: [DONE]\r\n\r\n" },
	  },
	  84,
	  /* tokens at 50, 60, 75, 80: TPOT = (80-50)/(7-1) with usage's 7 tokens; gaps 10, 15,
	   * 5: nearest-rank p50 = 10, p90 = p99 = max = 15 */
	  {
	    .api = "openai.chat", .model = "gpt-4o", .response_model = "gpt-4o-2024",
	    .finish_reason = "stop", .ttft = 50, .tpot = 5, .e2e = 80, .token_events = 4,
	    .output_tokens = 7, .input_tokens = 100, .cached_tokens = 64, .estimated = 0,
	    .cache_hit = 1,
	    .also = "\"itl_ms\":{\"p50\":10.0,\"p90\":15.0,\"p99\":15.0,\"max\":15.0}" } },
	{ "openai chat without usage: output tokens estimated, the rest unknown (null, never 0)",
	  "/v1/chat/completions", "{\"model\":\"m\",\"stream\":true}", NULL, "text/event-stream",
	  {
		  { 20, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" },
		  { 30, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n" },
		  { 40, "data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n" },
		  { 41, "data: [DONE]\n\n" },
	  },
	  41,
	  {
	    .api = "openai.chat", .model = "m", .response_model = "", .finish_reason = "",
	    .ttft = 20, .tpot = 10, .e2e = 40, .token_events = 3, .output_tokens = 3,
	    .input_tokens = NUL, .cached_tokens = NUL, .estimated = 1, .cache_hit = -1 } },
	{ "openai completions: an empty text is no token",
	  "/v1/completions", "{\"model\":\"llama\",\"prompt\":\"x\",\"stream\":true}", NULL,
	  "text/event-stream",
	  {
		  { 30, "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"\"}]}\n\n"
			"data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"A\"}]}\n\n" },
		  { 34, "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"B\","
			"\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,"
			"\"completion_tokens\":2,\"prompt_tokens_details\":null}}\n\ndata: [DONE]\n\n" },
	  },
	  35,
	  {
	    .api = "openai.completions", .model = "llama", .response_model = "",
	    .finish_reason = "length", .ttft = 30, .tpot = 4, .e2e = 34, .token_events = 2,
	    .output_tokens = 2, .input_tokens = 5, .cached_tokens = NUL, .estimated = 0,
	    .cache_hit = -1 } },
	{ "openai responses: reasoning summary deltas count, empty deltas do not",
	  "/v1/responses", "{\"model\":\"gpt-5\",\"input\":\"x\",\"stream\":true}", NULL,
	  "text/event-stream",
	  {
		  { 6, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":"
		       "{\"model\":\"gpt-5-x\"}}\n\n"
		       "event: response.output_item.added\ndata: {\"type\":"
		       "\"response.output_item.added\"}\n\n" },
		  { 40, "event: response.reasoning_summary_text.delta\ndata: {\"type\":"
			"\"response.reasoning_summary_text.delta\",\"delta\":\"t\"}\n\n" },
		  { 44, "event: response.output_text.delta\ndata: {\"type\":"
			"\"response.output_text.delta\",\"delta\":\"\"}\n\n" },
		  { 48, "event: response.output_text.delta\ndata: {\"type\":"
			"\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" },
		  { 50, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
			"{\"status\":\"completed\",\"model\":\"gpt-5-x\",\"usage\":{\"input_tokens\":300,"
			"\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":5}}}\n\n" },
	  },
	  50,
	  {
	    .api = "openai.responses", .model = "gpt-5", .response_model = "gpt-5-x",
	    .finish_reason = "completed", .ttft = 40, .tpot = 2, .e2e = 48, .token_events = 2,
	    .output_tokens = 5, .input_tokens = 300, .cached_tokens = 0, .estimated = 0,
	    .cache_hit = 0 } },
	{ "anthropic: CR line ends, comments and pings are no tokens; the prompt is the sum of three",
	  "/v1/messages", "{\"model\":\"claude-x\",\"max_tokens\":9,\"stream\":true}", NULL,
	  "text/event-stream",
	  {
		  { 6, "event: message_start\rdata: {\"type\":\"message_start\",\"message\":{\"model\":"
		       "\"claude-x-1\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,"
		       "\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\r\r"
		       ": keepalive\r\r"
		       "event: ping\rdata: {\"type\": \"ping\"}\r\r" },
		  { 7, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
		       "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" },
		  { 70, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
			"{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
			"{\"type\":\"signature_delta\",\"signature\":\"abc\"}}\n\n" },
		  { 90, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
			"{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\n\n" },
		  { 91, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
			"\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":11}}\n\n"
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" },
	  },
	  /* (90-70)/(11-1) */
	  92,
	  {
	    .api = "anthropic.messages", .model = "claude-x", .response_model = "claude-x-1",
	    .finish_reason = "end_turn", .ttft = 70, .tpot = 2, .e2e = 90, .token_events = 2,
	    .output_tokens = 11, .input_tokens = 105, .cached_tokens = 90, .estimated = 0,
	    .cache_hit = 1 } },
	{ "anthropic overloaded mid-stream: an API error, the stream still measured",
	  "/v1/messages", "{\"model\":\"claude-x\",\"stream\":true}", NULL, "text/event-stream",
	  {
		  { 30, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
			"{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n" },
		  { 40, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
			"\"message\":\"Overloaded\"}}\n\n" },
	  },
	  41,
	  {
	    .api = "anthropic.messages", .model = "claude-x", .response_model = "",
	    .finish_reason = "", .error = "api_error:overloaded_error", .ttft = 30, .tpot = NUL,
	    .e2e = 30, .token_events = 1, .output_tokens = 1, .input_tokens = NUL,
	    .cached_tokens = NUL, .estimated = 1, .cache_hit = -1 } },
	{ "gemini: the model from the path, the key out of every output",
	  NULL, NULL,
	  "POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=SECRET "
	  "HTTP/1.1\r\nHost: g\r\nx-goog-api-key: SECRET\r\nContent-Length: 2\r\n\r\n{}",
	  "text/event-stream",
	  {
		  { 25, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"A\"}]}}],"
			"\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":4,"
			"\"cachedContentTokenCount\":32},\"modelVersion\":\"gemini-2.5-flash-001\"}\r\n\r\n" },
		  { 45, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"B\"}]},"
			"\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":50,"
			"\"candidatesTokenCount\":9,\"cachedContentTokenCount\":32}}\r\n\r\n" },
	  },
	  46,
	  {
	    .api = "gemini", .model = "gemini-2.5-flash", .response_model = "gemini-2.5-flash-001",
	    .finish_reason = "STOP", .ttft = 25, .tpot = 2.5, .e2e = 45, .token_events = 2,
	    .output_tokens = 9, .input_tokens = 50, .cached_tokens = 32, .estimated = 0,
	    .cache_hit = 1,
	    .also = "\"path\":\"/v1beta/models/gemini-2.5-flash:streamGenerateContent\"" } },
	{ "ollama: NDJSON, LF and CRLF lines, the last one unterminated",
	  "/api/chat", "{\"model\":\"llama3\",\"messages\":[]}", NULL, "application/x-ndjson",
	  {
		  { 15, "{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
			"\"done\":false}\n{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\","
			"\"content\":\"Hi\"},\"done\":false}\n" },
		  { 35, "{\"model\":\"llama3\",\"message\":{\"content\":\"!\"},\"done\":false}\r\n"
			"{\"model\":\"llama3\",\"done\":true,\"done_reason\":\"stop\","
			"\"prompt_eval_count\":26,\"eval_count\":3}" },
	  },
	  36,
	  {
	    .api = "ollama", .model = "llama3", .response_model = "llama3",
	    .finish_reason = "stop", .ttft = 15, .tpot = 10, .e2e = 35, .token_events = 2,
	    .output_tokens = 3, .input_tokens = 26, .cached_tokens = NUL, .estimated = 0,
	    .cache_hit = -1, .also = "\"stream\":true" } },
	{ "llama.cpp: timings give prompt and cache; the model named by the reply",
	  "/completion", "{\"prompt\":\"x\",\"stream\":true}", NULL, "text/event-stream",
	  {
		  { 12, "data: {\"content\":\"a\",\"stop\":false}\n\n" },
		  { 22, "data: {\"content\":\"b\",\"stop\":false}\n\n" },
		  { 23, "data: {\"content\":\"\",\"stop\":true,\"model\":\"qwen.gguf\",\"stop_type\":"
			"\"eos\",\"timings\":{\"prompt_n\":10,\"cache_n\":90,\"predicted_n\":2}}\n\n" },
	  },
	  24,
	  {
	    .api = "llamacpp", .model = "qwen.gguf", .response_model = "qwen.gguf",
	    .finish_reason = "eos", .ttft = 12, .tpot = 10, .e2e = 22, .token_events = 2,
	    .output_tokens = 2, .input_tokens = 100, .cached_tokens = 90, .estimated = 0,
	    .cache_hit = 1 } },
	{ "tgi: special tokens carry no text",
	  "/generate_stream", "{\"inputs\":\"x\"}", NULL, "text/event-stream",
	  {
		  { 11, "data:{\"index\":1,\"token\":{\"id\":5,\"text\":\"a\",\"special\":false},"
			"\"generated_text\":null,\"details\":null}\n\n" },
		  { 19, "data:{\"index\":2,\"token\":{\"id\":6,\"text\":\"b\",\"special\":false},"
			"\"generated_text\":null,\"details\":null}\n\n" },
		  { 20, "data:{\"index\":3,\"token\":{\"id\":2,\"text\":\"</s>\",\"special\":true},"
			"\"generated_text\":\"ab\",\"details\":{\"finish_reason\":\"eos_token\","
			"\"generated_tokens\":3}}\n\n" },
	  },
	  21,
	  {
	    .api = "tgi", .model = "", .response_model = "", .finish_reason = "eos_token",
	    .ttft = 11, .tpot = 4, .e2e = 19, .token_events = 2, .output_tokens = 3,
	    .input_tokens = NUL, .cached_tokens = NUL, .estimated = 0, .cache_hit = -1 } },
	{ "an unknown path on an SSE reply: the payload names the API",
	  "/proxy/llm", "{\"model\":\"m\",\"stream\":true}", NULL, "text/event-stream",
	  {
		  { 9, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":"
		       "{\"content\":\"x\"}}]}\n\n" },
	  },
	  10,
	  {
	    .api = "openai.chat", .model = "m", .response_model = "", .finish_reason = "",
	    .ttft = 9, .tpot = NUL, .e2e = 9, .token_events = 1, .output_tokens = 1,
	    .input_tokens = NUL, .cached_tokens = NUL, .estimated = 1, .cache_hit = -1 } },
};

static void expect_num(const char *j, const char *key, double want, const char *name)
{
	double got = json_num(j, key);

	if (isnan(want) ? !isnan(got) : fabs(got - want) > 1e-6)
		fail_msg("%s: %s is %g, want %g", name, key, got, want);
}

static void expect_str(const char *j, const char *key, const char *want, const char *name)
{
	if (strcmp(json_str(j, key), want))
		fail_msg("%s: %s is \"%s\", want \"%s\"", name, key, json_str(j, key), want);
}

static void test_dialect_table(void **state)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct dialect_case *c = &cases[i];
		const struct want *w = &c->want;
		struct script sc = { 0 };
		char *j;

		if (c->path)
			request_head(&sc, c->path, c->body);
		else
			script__add(&sc, true, T0, "%s", c->raw_request);
		sse_head(&sc, c->ctype);
		for (size_t k = 0; k < 8 && c->chunks[k].data; k++)
			script__chunk(&sc, T0 + c->chunks[k].ms * MS, c->chunks[k].data);
		script__add(&sc, false, T0 + c->end_ms * MS, "0\r\n\r\n");

		print_message("case: %s\n", c->name);
		j = check_all(&sc, 1);
		expect_str(j, "api", w->api, c->name);
		expect_str(j, "model", w->model, c->name);
		expect_str(j, "response_model", w->response_model, c->name);
		expect_str(j, "finish_reason", w->finish_reason, c->name);
		expect_str(j, "error", w->error ? w->error : "", c->name);
		expect_str(j, "role", "client", c->name);
		expect_num(j, "status", 200, c->name);
		expect_num(j, "ttft_ms", w->ttft, c->name);
		expect_num(j, "tpot_ms", w->tpot, c->name);
		expect_num(j, "e2e_ms", w->e2e, c->name);
		expect_num(j, "token_events", w->token_events, c->name);
		expect_num(j, "output_tokens", w->output_tokens, c->name);
		expect_num(j, "input_tokens", w->input_tokens, c->name);
		expect_num(j, "cached_tokens", w->cached_tokens, c->name);
		assert_int_equal(json_bool(j, "output_tokens_estimated"), w->estimated);
		assert_int_equal(json_bool(j, "cache_hit"), w->cache_hit);
		assert_int_equal(json_bool(j, "complete"), 1);
		assert_int_equal(json_bool(j, "stream"), 1);
		if (w->also && !strstr(j, w->also))
			fail_msg("%s: no %s in %s", c->name, w->also, j);
		/* No prompt and no completion text in any output. */
		assert_null(strstr(j, "PROMPT"));
		assert_null(strstr(j, "Hel"));
		free(j);
		script__free(&sc);
	}
}

/* The table's own promises: every API has a name and a path that names it. */
static void test_paths_name_their_api(void **state)
{
	static const struct {
		const char *path;
		enum api api;
		const char *name;
	} paths[] = {
		{ "/v1/chat/completions", API_OPENAI_CHAT, "openai.chat" },
		{ "/openai/deployments/x/chat/completions", API_OPENAI_CHAT, "openai.chat" },
		{ "/v1/completions", API_OPENAI_COMPLETIONS, "openai.completions" },
		{ "/v1/responses", API_OPENAI_RESPONSES, "openai.responses" },
		{ "/v1/messages", API_ANTHROPIC_MESSAGES, "anthropic.messages" },
		{ "/v1beta/models/g:generateContent", API_GEMINI, "gemini" },
		{ "/api/generate", API_OLLAMA, "ollama" },
		{ "/completion", API_LLAMACPP, "llamacpp" },
		{ "/generate_stream", API_TGI, "tgi" },
		{ "/v1/embeddings", API_OPENAI_EMBEDDINGS, "openai.embeddings" },
		{ "/embeddings", API_OPENAI_EMBEDDINGS, "openai.embeddings" },
		{ "/v1/models", API_UNKNOWN, "unknown" },
	};
	bool named[API__COUNT] = { 0 };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		assert_int_equal(dialect__from_path(paths[i].path), paths[i].api);
		assert_string_equal(api__name(paths[i].api), paths[i].name);
		named[paths[i].api] = true;
	}
	/* gRPC calls are named by their method (llm/grpc_dialect.c), never by an HTTP/1.1 path */
	assert_int_equal(dialect__from_path("/inference.GRPCInferenceService/ModelStreamInfer"),
			 API_UNKNOWN);
	named[grpc_dialect__from_path("/inference.GRPCInferenceService/ModelStreamInfer")] = true;
	named[grpc_dialect__from_path("/helloworld.Greeter/SayHello")] = true;
	assert_string_equal(api__name(API_TRITON), "triton");
	assert_string_equal(api__name(API_GRPC), "grpc");
	for (int a = 0; a < API__COUNT; a++)
		assert_true(named[a]);
}

/* vLLM's usage on every chunk (stream_options.continuous_usage_stats): each token event keeps
 * its own count so far (what ties a merged event to the engine's outputs it carried); the
 * role-only chunk and the usage-only last chunk are no events, and a stream without it keeps
 * none. */
static void test_usage_on_every_chunk(void **state)
{
	static const char *const events[] = {
		"{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],"
		"\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":0,\"total_tokens\":9}}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}],"
		"\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,\"total_tokens\":10}}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b c d\"}}],"
		"\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"e\"}}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"f\"},\"finish_reason\":\"length\"}],"
		"\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6,\"total_tokens\":15}}",
		"{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6,"
		"\"total_tokens\":15}}",
	};
	static const uint32_t want[] = { 1, 4, 0, 6 };
	struct jdoc doc = { 0 };

	for (int with = 0; with < 2; with++) {
		struct request *r = request__new();

		assert_non_null(r);
		assert_true(request__set_path(r, "/v1/chat/completions"));
		dialect__request_head(r);
		for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
			if (!with && i != 3) /* only the chunk without usage */
				continue;
			dialect__stream_event(&doc, r, "", events[i], strlen(events[i]), T0 + i * MS);
		}
		if (with) {
			assert_int_equal(r->token_events, 4);
			assert_non_null(r->event_tokens);
			for (size_t i = 0; i < 4; i++)
				assert_int_equal(r->event_tokens[i], want[i]);
			assert_int_equal(r->output_tokens.v, 6);
		} else {
			assert_int_equal(r->token_events, 1);
			assert_null(r->event_tokens);
		}
		request__free(r);
	}
	jdoc__free(&doc);
}

/* Every LLM API carries its OpenTelemetry names, which metrics label its requests with: a
 * dialect added without them would export empty gen_ai_* labels. Only an unknown API and a
 * gRPC method that is no LLM API have none. */
static void test_otel_names(void **state)
{
	static const struct {
		enum api api;
		const char *operation, *provider;
	} want[] = {
		{ API_OPENAI_CHAT, "chat", "openai" },
		{ API_OPENAI_COMPLETIONS, "text_completion", "openai" },
		{ API_OPENAI_RESPONSES, "chat", "openai" },
		{ API_ANTHROPIC_MESSAGES, "chat", "anthropic" },
		{ API_GEMINI, "generate_content", "gcp.gemini" },
		{ API_OLLAMA, "chat", "ollama" },
		{ API_LLAMACPP, "text_completion", "llama.cpp" },
		{ API_TGI, "text_completion", "tgi" },
		{ API_TRITON, "text_completion", "triton" },
		{ API_OPENAI_EMBEDDINGS, "embeddings", "openai" },
	};

	for (int a = 0; a < API__COUNT; a++) {
		bool none = a == API_UNKNOWN || a == API_GRPC;

		assert_int_equal(api__otel_operation(a)[0] == 0, none);
		assert_int_equal(api__otel_provider(a)[0] == 0, none);
	}
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_string_equal(api__otel_operation(want[i].api), want[i].operation);
		assert_string_equal(api__otel_provider(want[i].api), want[i].provider);
	}
}

static void test_non_streamed(void **state)
{
	struct script sc = { 0 };
	const char *body = "{\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{\"message\":"
			   "{\"role\":\"assistant\",\"content\":\"hello\"},\"finish_reason\":\"stop\"}],"
			   "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2}}";
	char *j;

	request_head(&sc, "/v1/chat/completions", "{\"model\":\"m\",\"stream\":false}");
	script__add(&sc, false, T0 + 5 * MS,
		    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		    strlen(body));
	script__add(&sc, false, T0 + 70 * MS, "%s", body);
	j = check_all(&sc, 1);
	/* The whole answer arrives at once: TTFT = E2E, no TPOT. */
	expect_times(j, 70, NAN, 70);
	assert_int_equal(json_bool(j, "stream"), 0);
	assert_float_equal(json_num(j, "output_tokens"), 2, 0);
	free(j);
	script__free(&sc);
}

/* An embeddings call: one JSON reply and no token; its prompt's usage and model, complete, and
 * no TTFT (nothing is streamed or generated). The same reply is known by its shape where the
 * path says nothing. */
static void test_embeddings(void **state)
{
	const char *body = "{\"object\":\"list\",\"model\":\"tiny\",\"data\":[{\"object\":"
			   "\"embedding\",\"index\":0,\"embedding\":[0.25,-0.5]}],\"usage\":"
			   "{\"prompt_tokens\":7,\"total_tokens\":7}}";

	for (int by_shape = 0; by_shape < 2; by_shape++) {
		struct script sc = { 0 };
		char *j;

		request_head(&sc, by_shape ? "/x/embed" : "/v1/embeddings",
			     "{\"model\":\"tiny\",\"input\":\"hello\"}");
		script__add(&sc, false, T0 + 30 * MS,
			    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
			    "%zu\r\n\r\n%s",
			    strlen(body), body);
		j = check_all(&sc, 1);
		expect_str(j, "api", "openai.embeddings", "api");
		expect_str(j, "response_model", "tiny", "response_model");
		assert_float_equal(json_num(j, "input_tokens"), 7, 0);
		assert_float_equal(json_num(j, "token_events"), 0, 0);
		assert_true(json_bool(j, "complete"));
		assert_true(isnan(json_num(j, "ttft_ms")));
		assert_float_equal(json_num(j, "e2e_ms"), 30, 1e-6);
		free(j);
		script__free(&sc);
	}
}

static void test_http_error_status(void **state)
{
	struct script sc = { 0 };
	const char *body = "{\"error\":{\"type\":\"rate_limit_error\",\"message\":\"PROMPT echo\"}}";
	char *j;

	request_head(&sc, "/v1/messages", "{\"model\":\"claude\",\"stream\":true}");
	script__add(&sc, false, T0 + 5 * MS,
		    "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
		    "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
	j = check_all(&sc, 1);
	assert_string_equal(json_str(j, "error"), "http_429");
	assert_true(isnan(json_num(j, "ttft_ms")));
	assert_int_equal(json_bool(j, "complete"), 1);
	assert_null(strstr(j, "PROMPT"));
	free(j);
	script__free(&sc);
}

/* gzip with a sync flush per event: each event keeps the time of the bytes that completed
 * it (the decoder's output time). */
static void test_gzip_sse(void **state)
{
	const char *events[] = {
		"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
		"data: [DONE]\n\n",
	};
	const uint64_t at[] = { 6, 40, 52, 53 };
	struct script sc = { 0 };
	z_stream z = { 0 };
	char *j;

	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	request_head(&sc, "/v1/chat/completions", "{\"model\":\"m\",\"stream\":true}");
	script__add(&sc, false, T0 + 5 * MS,
		    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n");
	for (size_t i = 0; i < 4; i++) {
		unsigned char out[512], framed[600];
		int hdr;

		z.next_in = (unsigned char *)events[i];
		z.avail_in = strlen(events[i]);
		z.next_out = out;
		z.avail_out = sizeof(out);
		assert_int_equal(deflate(&z, i == 3 ? Z_FINISH : Z_SYNC_FLUSH), i == 3 ? Z_STREAM_END : Z_OK);
		hdr = snprintf((char *)framed, sizeof(framed), "%zx\r\n", sizeof(out) - z.avail_out);
		memcpy(framed + hdr, out, sizeof(out) - z.avail_out);
		memcpy(framed + hdr + sizeof(out) - z.avail_out, "\r\n", 2);
		script__bytes(&sc, false, T0 + at[i] * MS, framed, hdr + sizeof(out) - z.avail_out + 2);
	}
	deflateEnd(&z);
	script__add(&sc, false, T0 + 54 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 40, 12, 52);
	assert_int_equal(json_bool(j, "complete"), 1);
	free(j);
	script__free(&sc);
}

static void test_unsupported_encoding(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/chat/completions", "{\"model\":\"m\",\"stream\":true}");
	script__add(&sc, false, T0 + 5 * MS,
		    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: br\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n");
	script__chunk(&sc, T0 + 9 * MS, "\x8b\x02\x80garbage");
	script__add(&sc, false, T0 + 10 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	assert_string_equal(json_str(j, "error"), "unsupported_content_encoding");
	assert_int_equal(json_bool(j, "complete"), 0);
	assert_true(isnan(json_num(j, "ttft_ms")));
	free(j);
	script__free(&sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dialect_table),
		cmocka_unit_test(test_paths_name_their_api),
		cmocka_unit_test(test_non_streamed),
		cmocka_unit_test(test_embeddings),
		cmocka_unit_test(test_http_error_status),
		cmocka_unit_test(test_otel_names),
		cmocka_unit_test(test_usage_on_every_chunk),
		cmocka_unit_test(test_gzip_sse),
		cmocka_unit_test(test_unsupported_encoding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
