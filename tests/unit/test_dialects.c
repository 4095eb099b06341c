// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every dialect through the whole pipeline (records -> HTTP -> SSE/NDJSON -> dialect ->
 * metrics), each conversation also fed split at every byte boundary, byte by byte and in
 * random pieces. Times are chosen so every expected figure is exact.
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

static void test_openai_chat(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/chat/completions",
		     "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
		     "\"messages\":[{\"role\":\"user\",\"content\":\"PROMPT-TEXT\"}]}");
	sse_head(&sc, "text/event-stream; charset=utf-8");
	/* The role-only first chunk is not a token. */
	script__chunk(&sc, T0 + 6 * MS,
		      "data: {\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024\",\"choices\":"
		      "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
		      "\"finish_reason\":null}],\"usage\":null}\r\n\r\n");
	script__chunk(&sc, T0 + 50 * MS,
		      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n");
	/* Two events in one chunk, the second split over two chunks. */
	script__chunk(&sc, T0 + 60 * MS,
		      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\r\n\r\n"
		      "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":");
	script__chunk(&sc, T0 + 75 * MS, "\"hm\"}}]}\r\n\r\n");
	script__chunk(&sc, T0 + 80 * MS,
		      "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
		      "\"function\":{\"arguments\":\"{}\"}}]}}]}\r\n\r\n");
	script__chunk(&sc, T0 + 81 * MS,
		      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n");
	script__chunk(&sc, T0 + 82 * MS,
		      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":"
		      "7,\"total_tokens\":107,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\r\n\r\n");
	script__chunk(&sc, T0 + 83 * MS, "data: [DONE]\r\n\r\n");
	script__add(&sc, false, T0 + 84 * MS, "0\r\n\r\n");

	j = check_all(&sc, 1);
	/* tokens at 50, 60, 75, 80: TPOT = (80-50)/(7-1) with usage's 7 tokens */
	expect_times(j, 50, 5, 80);
	assert_string_equal(json_str(j, "api"), "openai.chat");
	assert_string_equal(json_str(j, "model"), "gpt-4o");
	assert_string_equal(json_str(j, "response_model"), "gpt-4o-2024");
	assert_string_equal(json_str(j, "role"), "client");
	assert_string_equal(json_str(j, "finish_reason"), "stop");
	assert_float_equal(json_num(j, "token_events"), 4, 0);
	assert_float_equal(json_num(j, "output_tokens"), 7, 0);
	assert_int_equal(json_bool(j, "output_tokens_estimated"), 0);
	assert_float_equal(json_num(j, "input_tokens"), 100, 0);
	assert_float_equal(json_num(j, "cached_tokens"), 64, 0);
	assert_int_equal(json_bool(j, "cache_hit"), 1);
	assert_int_equal(json_bool(j, "complete"), 1);
	assert_int_equal(json_bool(j, "stream"), 1);
	assert_float_equal(json_num(j, "status"), 200, 0);
	assert_null(strstr(j, "PROMPT-TEXT"));
	assert_null(strstr(j, "Hel"));
	/* gaps 10, 15, 5: nearest-rank p50 = 10, p90 = p99 = max = 15 */
	assert_non_null(strstr(j, "\"itl_ms\":{\"p50\":10.0,\"p90\":15.0,\"p99\":15.0,\"max\":15.0}"));
	free(j);
	script__free(&sc);
}

static void test_openai_chat_without_usage(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/chat/completions", "{\"model\":\"m\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 20 * MS, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n");
	script__chunk(&sc, T0 + 30 * MS, "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n");
	script__chunk(&sc, T0 + 40 * MS, "data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n");
	script__chunk(&sc, T0 + 41 * MS, "data: [DONE]\n\n");
	script__add(&sc, false, T0 + 41 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 20, 10, 40);
	assert_float_equal(json_num(j, "output_tokens"), 3, 0);
	assert_int_equal(json_bool(j, "output_tokens_estimated"), 1);
	/* Unknown is null, never 0. */
	assert_true(isnan(json_num(j, "input_tokens")));
	assert_true(isnan(json_num(j, "cached_tokens")));
	assert_int_equal(json_bool(j, "cache_hit"), -1);
	free(j);
	script__free(&sc);
}

static void test_openai_completions(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/completions", "{\"model\":\"llama\",\"prompt\":\"x\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 30 * MS,
		      "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"\"}]}\n\n"
		      "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"A\"}]}\n\n");
	script__chunk(&sc, T0 + 34 * MS,
		      "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"B\","
		      "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,"
		      "\"completion_tokens\":2,\"prompt_tokens_details\":null}}\n\ndata: [DONE]\n\n");
	script__add(&sc, false, T0 + 35 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 30, 4, 34);
	assert_string_equal(json_str(j, "api"), "openai.completions");
	assert_string_equal(json_str(j, "finish_reason"), "length");
	assert_float_equal(json_num(j, "input_tokens"), 5, 0);
	assert_true(isnan(json_num(j, "cached_tokens")));
	free(j);
	script__free(&sc);
}

static void test_openai_responses(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/responses", "{\"model\":\"gpt-5\",\"input\":\"x\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 6 * MS,
		      "event: response.created\ndata: {\"type\":\"response.created\",\"response\":"
		      "{\"model\":\"gpt-5-x\"}}\n\n"
		      "event: response.output_item.added\ndata: {\"type\":"
		      "\"response.output_item.added\"}\n\n");
	script__chunk(&sc, T0 + 40 * MS,
		      "event: response.reasoning_summary_text.delta\ndata: {\"type\":"
		      "\"response.reasoning_summary_text.delta\",\"delta\":\"t\"}\n\n");
	script__chunk(&sc, T0 + 44 * MS,
		      "event: response.output_text.delta\ndata: {\"type\":"
		      "\"response.output_text.delta\",\"delta\":\"\"}\n\n");
	script__chunk(&sc, T0 + 48 * MS,
		      "event: response.output_text.delta\ndata: {\"type\":"
		      "\"response.output_text.delta\",\"delta\":\"hi\"}\n\n");
	script__chunk(&sc, T0 + 50 * MS,
		      "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
		      "{\"status\":\"completed\",\"model\":\"gpt-5-x\",\"usage\":{\"input_tokens\":300,"
		      "\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":5}}}\n\n");
	script__add(&sc, false, T0 + 50 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 40, 2, 48);
	assert_string_equal(json_str(j, "api"), "openai.responses");
	assert_string_equal(json_str(j, "finish_reason"), "completed");
	assert_int_equal(json_bool(j, "cache_hit"), 0);
	assert_float_equal(json_num(j, "output_tokens"), 5, 0);
	free(j);
	script__free(&sc);
}

static void test_anthropic(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/messages", "{\"model\":\"claude-x\",\"max_tokens\":9,\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	/* CR-only line ends, a comment and a ping before any text: none ends TTFT. */
	script__chunk(&sc, T0 + 6 * MS,
		      "event: message_start\rdata: {\"type\":\"message_start\",\"message\":{\"model\":"
		      "\"claude-x-1\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,"
		      "\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\r\r"
		      ": keepalive\r\r"
		      "event: ping\rdata: {\"type\": \"ping\"}\r\r");
	script__chunk(&sc, T0 + 7 * MS,
		      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
		      "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n");
	script__chunk(&sc, T0 + 70 * MS,
		      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
		      "{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
		      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
		      "{\"type\":\"signature_delta\",\"signature\":\"abc\"}}\n\n");
	script__chunk(&sc, T0 + 90 * MS,
		      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
		      "{\"type\":\"text_delta\",\"text\":\"Hi there\"}}\n\n");
	script__chunk(&sc, T0 + 91 * MS,
		      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
		      "\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":11}}\n\n"
		      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
	script__add(&sc, false, T0 + 92 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 70, 2, 90); /* (90-70)/(11-1) */
	assert_string_equal(json_str(j, "api"), "anthropic.messages");
	assert_string_equal(json_str(j, "finish_reason"), "end_turn");
	assert_float_equal(json_num(j, "input_tokens"), 105, 0);
	assert_float_equal(json_num(j, "cached_tokens"), 90, 0);
	assert_float_equal(json_num(j, "token_events"), 2, 0);
	free(j);
	script__free(&sc);
}

static void test_anthropic_overloaded_midstream(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/v1/messages", "{\"model\":\"claude-x\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 30 * MS,
		      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":"
		      "{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n");
	script__chunk(&sc, T0 + 40 * MS,
		      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
		      "\"message\":\"Overloaded\"}}\n\n");
	script__add(&sc, false, T0 + 41 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	assert_string_equal(json_str(j, "error"), "api_error:overloaded_error");
	assert_int_equal(json_bool(j, "complete"), 1);
	assert_float_equal(json_num(j, "ttft_ms"), 30, 1e-9);
	free(j);
	script__free(&sc);
}

static void test_gemini(void **state)
{
	struct script sc = { 0 };
	char *j;

	script__add(&sc, true, T0,
		    "POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=SECRET "
		    "HTTP/1.1\r\nHost: g\r\nx-goog-api-key: SECRET\r\nContent-Length: 2\r\n\r\n{}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 25 * MS,
		      "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"A\"}]}}],"
		      "\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":4,"
		      "\"cachedContentTokenCount\":32},\"modelVersion\":\"gemini-2.5-flash-001\"}\r\n\r\n");
	script__chunk(&sc, T0 + 45 * MS,
		      "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"B\"}]},"
		      "\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":50,"
		      "\"candidatesTokenCount\":9,\"cachedContentTokenCount\":32}}\r\n\r\n");
	script__add(&sc, false, T0 + 46 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 25, 2.5, 45);
	assert_string_equal(json_str(j, "api"), "gemini");
	assert_string_equal(json_str(j, "model"), "gemini-2.5-flash");
	assert_string_equal(json_str(j, "path"), "/v1beta/models/gemini-2.5-flash:streamGenerateContent");
	assert_string_equal(json_str(j, "finish_reason"), "STOP");
	assert_float_equal(json_num(j, "cached_tokens"), 32, 0);
	free(j);
	script__free(&sc);
}

static void test_ollama_ndjson(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/api/chat", "{\"model\":\"llama3\",\"messages\":[]}");
	sse_head(&sc, "application/x-ndjson");
	script__chunk(&sc, T0 + 15 * MS,
		      "{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
		      "\"done\":false}\n{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\","
		      "\"content\":\"Hi\"},\"done\":false}\n");
	script__chunk(&sc, T0 + 35 * MS,
		      "{\"model\":\"llama3\",\"message\":{\"content\":\"!\"},\"done\":false}\r\n"
		      "{\"model\":\"llama3\",\"done\":true,\"done_reason\":\"stop\","
		      "\"prompt_eval_count\":26,\"eval_count\":3}");
	script__add(&sc, false, T0 + 36 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 15, 10, 35);
	assert_string_equal(json_str(j, "api"), "ollama");
	assert_int_equal(json_bool(j, "stream"), 1);
	assert_float_equal(json_num(j, "input_tokens"), 26, 0);
	assert_string_equal(json_str(j, "finish_reason"), "stop");
	free(j);
	script__free(&sc);
}

static void test_llamacpp(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/completion", "{\"prompt\":\"x\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 12 * MS, "data: {\"content\":\"a\",\"stop\":false}\n\n");
	script__chunk(&sc, T0 + 22 * MS, "data: {\"content\":\"b\",\"stop\":false}\n\n");
	script__chunk(&sc, T0 + 23 * MS,
		      "data: {\"content\":\"\",\"stop\":true,\"model\":\"qwen.gguf\",\"stop_type\":"
		      "\"eos\",\"timings\":{\"prompt_n\":10,\"cache_n\":90,\"predicted_n\":2}}\n\n");
	script__add(&sc, false, T0 + 24 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 12, 10, 22);
	assert_string_equal(json_str(j, "api"), "llamacpp");
	assert_string_equal(json_str(j, "model"), "qwen.gguf");
	assert_float_equal(json_num(j, "input_tokens"), 100, 0);
	assert_float_equal(json_num(j, "cached_tokens"), 90, 0);
	assert_string_equal(json_str(j, "finish_reason"), "eos");
	free(j);
	script__free(&sc);
}

static void test_tgi(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/generate_stream", "{\"inputs\":\"x\"}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 11 * MS,
		      "data:{\"index\":1,\"token\":{\"id\":5,\"text\":\"a\",\"special\":false},"
		      "\"generated_text\":null,\"details\":null}\n\n");
	script__chunk(&sc, T0 + 19 * MS,
		      "data:{\"index\":2,\"token\":{\"id\":6,\"text\":\"b\",\"special\":false},"
		      "\"generated_text\":null,\"details\":null}\n\n");
	script__chunk(&sc, T0 + 20 * MS,
		      "data:{\"index\":3,\"token\":{\"id\":2,\"text\":\"</s>\",\"special\":true},"
		      "\"generated_text\":\"ab\",\"details\":{\"finish_reason\":\"eos_token\","
		      "\"generated_tokens\":3}}\n\n");
	script__add(&sc, false, T0 + 21 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	expect_times(j, 11, 4, 19);
	assert_string_equal(json_str(j, "api"), "tgi");
	assert_string_equal(json_str(j, "finish_reason"), "eos_token");
	free(j);
	script__free(&sc);
}

/* An unknown path on an SSE reply: the payload names the API. */
static void test_detect_from_payload(void **state)
{
	struct script sc = { 0 };
	char *j;

	request_head(&sc, "/proxy/llm", "{\"model\":\"m\",\"stream\":true}");
	sse_head(&sc, "text/event-stream");
	script__chunk(&sc, T0 + 9 * MS,
		      "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":"
		      "{\"content\":\"x\"}}]}\n\n");
	script__add(&sc, false, T0 + 10 * MS, "0\r\n\r\n");
	j = check_all(&sc, 1);
	assert_string_equal(json_str(j, "api"), "openai.chat");
	assert_float_equal(json_num(j, "ttft_ms"), 9, 1e-9);
	free(j);
	script__free(&sc);
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
		cmocka_unit_test(test_openai_chat),
		cmocka_unit_test(test_openai_chat_without_usage),
		cmocka_unit_test(test_openai_completions),
		cmocka_unit_test(test_openai_responses),
		cmocka_unit_test(test_anthropic),
		cmocka_unit_test(test_anthropic_overloaded_midstream),
		cmocka_unit_test(test_gemini),
		cmocka_unit_test(test_ollama_ndjson),
		cmocka_unit_test(test_llamacpp),
		cmocka_unit_test(test_tgi),
		cmocka_unit_test(test_detect_from_payload),
		cmocka_unit_test(test_non_streamed),
		cmocka_unit_test(test_http_error_status),
		cmocka_unit_test(test_gzip_sse),
		cmocka_unit_test(test_unsupported_encoding),
	};

	return cmocka_run_group_tests_name("dialects", tests, NULL, NULL);
}
