// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The API dialects, one section each, and the table that joins them (at the end). Each
 * dialect says how its requests are recognized (the path, else the shape of the first JSON
 * object of the reply) and what each streamed event or whole body means for the request.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "llm/dialect.h"
#include "llm/json.h"
#include "llm/judge.h"

/* ---- helpers over json.h ---- */

static const struct jval *get(const struct jval *o, const char *k)
{
	return jv_get(o, k);
}

/* o.k1.k2.k3, the later keys optional */
static const struct jval *dig(const struct jval *o, const char *k1, const char *k2,
			      const char *k3)
{
	o = get(o, k1);
	if (k2)
		o = get(o, k2);
	if (k3)
		o = get(o, k3);
	return o;
}

static bool is_true(const struct jval *v)
{
	return jv_is(v, J_TRUE);
}

static bool nonempty_str(const struct jval *v)
{
	return jv_is(v, J_STRING) && v->n > 0;
}

static void set_count(struct opt_u64 *dst, const struct jval *v)
{
	if (jv_is(v, J_INT) && v->i >= 0) {
		dst->set = true;
		dst->v = (uint64_t)v->i;
	}
}

/* A count of the API's usage: it wins over the server's timings, whichever came first. */
static void usage_count(struct opt_u64 *dst, enum count_source *src, const struct jval *v)
{
	if (jv_is(v, J_INT) && v->i >= 0) {
		dst->set = true;
		dst->v = (uint64_t)v->i;
		*src = COUNT_USAGE;
	}
}

/* A duration in ns, as Ollama states them. */
static void set_count_ns(uint64_t *dst, const struct jval *v)
{
	if (jv_is(v, J_INT) && v->i >= 0)
		*dst = (uint64_t)v->i;
}

/* A duration in ms (an integer or a real) as ns, where it is one a server could measure. */
static void set_ms_as_ns(uint64_t *dst, const struct jval *v)
{
	double ms = jv_is(v, J_INT) ? (double)v->i : jv_is(v, J_REAL) ? v->d : -1;

	if (ms >= 0 && ms < 1e9)
		*dst = (uint64_t)(ms * 1e6);
}

static void set_str(char *dst, size_t cap, const struct jval *v)
{
	if (nonempty_str(v))
		snprintf(dst, cap, "%s", v->s);
}

/* A model name, cut at REQ_MODEL_MAX - 1 bytes as a fixed array would (out of memory: the
 * name stays as it was, and nothing else depends on it). */
static void set_model(const char **dst, const struct jval *v)
{
	if (nonempty_str(v))
		request__set_str(dst, v->s, REQ_MODEL_MAX - 1);
}

/* The id the response carried, from its first event that had one: what an engine's own
 * records name the request by (vLLM's engine wire: engine/vllm_wire.c). */
static void set_response_id(struct request *r, const struct jval *v)
{
	if (!r->response_id[0])
		set_str(r->response_id, sizeof(r->response_id), v);
}

/* Error objects carry a type or code we may show; never their message (it can echo input). */
static void set_api_error(struct request *r, const struct jval *err)
{
	const struct jval *t = get(err, "type");

	if (!nonempty_str(t))
		t = get(err, "code");
	if (!nonempty_str(t))
		t = get(err, "status");
	if (nonempty_str(t))
		request__error(r, "api_error:%.40s", t->s);
	else
		request__error(r, "api_error");
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static bool str_starts(const struct jval *v, const char *prefix)
{
	return jv_is(v, J_STRING) && !strncmp(v->s, prefix, strlen(prefix));
}

/* llama-server's own figures for the request (`timings`: on its last chunk, on every chunk
 * with timings_per_token; the latest holds the totals), on /completion and its OpenAI
 * endpoints alike. They are the server's statement of the request's engine work: the
 * attribution joins the request to its sequence by them (engine/attrib_seqs.c). Where no usage
 * said them, they are the record's counts too. */
static void server_timings(struct request *r, const struct jval *tm)
{
	struct server_timings *t = &r->timings;

	if (!jv_is(tm, J_OBJECT))
		return;
	set_count(&t->evaluated, get(tm, "prompt_n"));
	set_count(&t->cached, get(tm, "cache_n"));
	set_count(&t->predicted, get(tm, "predicted_n"));
	set_ms_as_ns(&t->prompt_ns, get(tm, "prompt_ms"));
	set_ms_as_ns(&t->predicted_ns, get(tm, "predicted_ms"));
	if (t->evaluated.set && r->input_source != COUNT_USAGE) {
		r->input_tokens.set = true;
		r->input_tokens.v = t->evaluated.v + (t->cached.set ? t->cached.v : 0);
		r->input_source = COUNT_SERVER_TIMINGS;
	}
	if (t->cached.set && r->cached_source != COUNT_USAGE) {
		r->cached_tokens = t->cached;
		r->cached_source = COUNT_SERVER_TIMINGS;
	}
	if (t->predicted.set && r->output_source != COUNT_USAGE) {
		r->output_tokens = t->predicted;
		r->output_source = COUNT_SERVER_TIMINGS;
	}
}

/* ---- OpenAI Chat Completions and Completions ---- */

static void openai_usage(struct request *r, const struct jval *u)
{
	if (!jv_is(u, J_OBJECT))
		return;
	usage_count(&r->input_tokens, &r->input_source, get(u, "prompt_tokens"));
	usage_count(&r->output_tokens, &r->output_source, get(u, "completion_tokens"));
	usage_count(&r->cached_tokens, &r->cached_source,
		    dig(u, "prompt_tokens_details", "cached_tokens", NULL));
}

static bool openai_choice_has_text(const struct jval *c, bool completions, bool whole)
{
	const struct jval *d = get(c, whole ? "message" : "delta"), *tc, *call;
	size_t i;

	if (completions)
		return nonempty_str(get(c, "text"));
	if (nonempty_str(get(d, "content")) || nonempty_str(get(d, "reasoning_content")) ||
	    nonempty_str(get(d, "reasoning")) || nonempty_str(get(d, "refusal")))
		return true;
	tc = get(d, "tool_calls");
	jv_array_foreach(tc, i, call) {
		if (nonempty_str(dig(call, "function", "arguments", NULL)) ||
		    nonempty_str(dig(call, "function", "name", NULL)))
			return true;
	}
	return false;
}

static void openai_chunk(struct request *r, const struct jval *o, uint64_t ts, bool whole)
{
	bool completions = r->api == API_OPENAI_COMPLETIONS, text = false;
	const struct jval *choices = get(o, "choices"), *c;
	size_t i;

	if (get(o, "error")) {
		set_api_error(r, get(o, "error"));
		return;
	}
	set_model(&r->response_model, get(o, "model"));
	set_response_id(r, get(o, "id"));
	jv_array_foreach(choices, i, c) {
		text |= openai_choice_has_text(c, completions, whole);
		set_str(r->finish_reason, sizeof(r->finish_reason), get(c, "finish_reason"));
	}
	openai_usage(r, get(o, "usage"));
	server_timings(r, get(o, "timings"));
	if (text) {
		const struct jval *so_far = get(get(o, "usage"), "completion_tokens");

		request__token(r, ts);
		/* usage on every chunk (vLLM's continuous_usage_stats): this event's own count */
		if (jv_is(so_far, J_INT) && so_far->i > 0)
			request__event_tokens(r, (uint64_t)so_far->i);
	}
}

static bool chat_path(const char *path)
{
	return ends_with(path, "/chat/completions");
}

static bool chat_sniff(const struct jval *o)
{
	return jv_str_is(get(o, "object"), "chat.completion.chunk") ||
	       jv_str_is(get(o, "object"), "chat.completion");
}

static bool completions_path(const char *path)
{
	return ends_with(path, "/v1/completions") || !strcmp(path, "/completions");
}

static bool completions_sniff(const struct jval *o)
{
	return jv_str_is(get(o, "object"), "text_completion");
}

static void openai_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	openai_chunk(r, o, ts, false);
}

static void openai_body(struct request *r, const struct jval *o, uint64_t ts)
{
	openai_chunk(r, o, ts, true);
}

/* ---- OpenAI Embeddings (and the servers that copy it: llama-server, vLLM, Ollama's /v1) ----
 * One JSON reply, no token: what is measured is its end, and the engine's embedding steps it
 * took (which chat requests name when they waited behind them). */

static bool embeddings_path(const char *path)
{
	return ends_with(path, "/v1/embeddings") || !strcmp(path, "/embeddings");
}

static bool embeddings_sniff(const struct jval *o)
{
	const struct jval *data = get(o, "data");

	return jv_str_is(get(o, "object"), "list") && jv_array_size(data) &&
	       jv_str_is(get(data + 1, "object"), "embedding");
}

static void embeddings_event(struct request *r, const char *event, const struct jval *o,
			     uint64_t ts)
{
	if (get(o, "error")) {
		set_api_error(r, get(o, "error"));
		return;
	}
	set_model(&r->response_model, get(o, "model"));
	openai_usage(r, get(o, "usage"));
	r->stream_end_seen = true;
}

/* ---- OpenAI Responses ---- */

static bool responses_path(const char *path)
{
	return ends_with(path, "/v1/responses") || !strcmp(path, "/responses");
}

static bool responses_sniff(const struct jval *o)
{
	return str_starts(get(o, "type"), "response.");
}

static const char *const responses_token_types[] = {
	"response.output_text.delta",	    "response.reasoning_text.delta",
	"response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
	"response.refusal.delta",
};

/* A Responses reply's output items: a call of a tool the client runs (a function, a custom
 * tool) asks for the next call; the server's own tools (web_search_call...) do not. */
static void called_tools(struct request *r, const struct jval *output)
{
	const struct jval *e;
	size_t i;

	jv_array_foreach(output, i, e) {
		if (jv_str_is(get(e, "type"), "function_call") ||
		    jv_str_is(get(e, "type"), "custom_tool_call"))
			r->tool_called = true;
	}
}

static void responses_final(struct request *r, const struct jval *resp)
{
	const struct jval *u = get(resp, "usage"), *st = get(resp, "status");

	set_model(&r->response_model, get(resp, "model"));
	set_response_id(r, get(resp, "id"));
	if (jv_is(u, J_OBJECT)) {
		set_count(&r->input_tokens, get(u, "input_tokens"));
		set_count(&r->output_tokens, get(u, "output_tokens"));
		set_count(&r->cached_tokens, dig(u, "input_tokens_details", "cached_tokens", NULL));
	}
	if (nonempty_str(dig(resp, "incomplete_details", "reason", NULL)))
		set_str(r->finish_reason, sizeof(r->finish_reason),
			dig(resp, "incomplete_details", "reason", NULL));
	else
		set_str(r->finish_reason, sizeof(r->finish_reason), st);
	if (jv_str_is(st, "failed"))
		set_api_error(r, get(resp, "error"));
	called_tools(r, get(resp, "output"));
}

static void responses_body(struct request *r, const struct jval *o, uint64_t ts)
{
	responses_final(r, o);
	if (jv_array_size(get(o, "output")))
		request__token(r, ts);
}

static void responses_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	const char *t = jv_str(get(o, "type")) ? jv_str(get(o, "type")) : event;

	for (size_t i = 0; i < sizeof(responses_token_types) / sizeof(*responses_token_types); i++) {
		if (!strcmp(t, responses_token_types[i])) {
			if (nonempty_str(get(o, "delta")))
				request__token(r, ts);
			return;
		}
	}
	if (!strcmp(t, "response.created") || !strcmp(t, "response.in_progress")) {
		set_model(&r->response_model, dig(o, "response", "model", NULL));
		set_response_id(r, dig(o, "response", "id", NULL));
	} else if (!strcmp(t, "response.completed") || !strcmp(t, "response.failed") ||
		   !strcmp(t, "response.incomplete")) {
		responses_final(r, get(o, "response"));
		r->stream_end_seen = true;
	} else if (!strcmp(t, "error")) {
		set_api_error(r, get(o, "error") ? get(o, "error") : o);
		r->stream_end_seen = true;
	}
}

/* ---- Anthropic Messages ---- */

static bool anthropic_path(const char *path)
{
	return ends_with(path, "/v1/messages");
}

static bool anthropic_sniff(const struct jval *o)
{
	const struct jval *t = get(o, "type");

	return str_starts(t, "message_") || str_starts(t, "content_block_") || jv_str_is(t, "ping");
}

static void anthropic_usage(struct request *r, const struct jval *u)
{
	struct opt_u64 in = { 0 }, read = { 0 }, create = { 0 };

	if (!jv_is(u, J_OBJECT))
		return;
	set_count(&in, get(u, "input_tokens"));
	set_count(&read, get(u, "cache_read_input_tokens"));
	set_count(&create, get(u, "cache_creation_input_tokens"));
	/* input_tokens excludes the cached parts: the prompt is the sum of the three. */
	if (in.set) {
		r->input_tokens.set = true;
		r->input_tokens.v = in.v + read.v + create.v;
	}
	if (read.set)
		r->cached_tokens = read;
	else if (in.set && !r->cached_tokens.set)
		r->cached_tokens = (struct opt_u64){ true, 0 };
	set_count(&r->output_tokens, get(u, "output_tokens"));
}

static void anthropic_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	const char *t = jv_str(get(o, "type")) ? jv_str(get(o, "type")) : event;
	const struct jval *d = get(o, "delta");

	if (!strcmp(t, "content_block_delta")) {
		if (nonempty_str(get(d, "text")) || nonempty_str(get(d, "thinking")) ||
		    nonempty_str(get(d, "partial_json")))
			request__token(r, ts);
	} else if (!strcmp(t, "message_start")) {
		const struct jval *m = get(o, "message");

		set_model(&r->response_model, get(m, "model"));
		set_response_id(r, get(m, "id"));
		anthropic_usage(r, get(m, "usage"));
		/* message_start's output_tokens is provisional: only message_delta's counts. */
		r->output_tokens.set = false;
	} else if (!strcmp(t, "message_delta")) {
		set_str(r->finish_reason, sizeof(r->finish_reason), get(d, "stop_reason"));
		anthropic_usage(r, get(o, "usage"));
	} else if (!strcmp(t, "message_stop")) {
		r->stream_end_seen = true;
	} else if (!strcmp(t, "error")) {
		set_api_error(r, get(o, "error"));
		r->stream_end_seen = true;
	}
}

static void anthropic_body(struct request *r, const struct jval *o, uint64_t ts)
{
	const struct jval *content = get(o, "content"), *b;
	bool text = false;
	size_t i;

	if (get(o, "error") ||
	    jv_str_is(get(o, "type"), "error")) {
		set_api_error(r, get(o, "error"));
		return;
	}
	set_model(&r->response_model, get(o, "model"));
	anthropic_usage(r, get(o, "usage"));
	set_str(r->finish_reason, sizeof(r->finish_reason), get(o, "stop_reason"));
	jv_array_foreach(content, i, b) {
		text |= nonempty_str(get(b, "text")) || nonempty_str(get(b, "thinking")) ||
			get(b, "input") != NULL;
	}
	if (text)
		request__token(r, ts);
}

/* ---- Gemini generateContent / streamGenerateContent ---- */

static bool gemini_path(const char *path)
{
	return strstr(path, ":streamGenerateContent") || strstr(path, ":generateContent");
}

static bool gemini_sniff(const struct jval *o)
{
	return get(o, "candidates") || get(o, "usageMetadata");
}

static void gemini_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	const struct jval *cands = get(o, "candidates"), *c, *u = get(o, "usageMetadata");
	bool text = false;
	size_t i, k;

	if (get(o, "error")) {
		set_api_error(r, get(o, "error"));
		return;
	}
	set_model(&r->response_model, get(o, "modelVersion"));
	set_response_id(r, get(o, "responseId"));
	jv_array_foreach(cands, i, c) {
		const struct jval *parts = dig(c, "content", "parts", NULL), *part;

		jv_array_foreach(parts, k, part) {
			if (nonempty_str(get(part, "text")) || get(part, "functionCall"))
				text = true;
		}
		set_str(r->finish_reason, sizeof(r->finish_reason), get(c, "finishReason"));
	}
	if (jv_is(u, J_OBJECT)) {
		/* usageMetadata is cumulative: the last one holds the totals. */
		set_count(&r->input_tokens, get(u, "promptTokenCount"));
		set_count(&r->output_tokens, get(u, "candidatesTokenCount"));
		if (get(u, "cachedContentTokenCount"))
			set_count(&r->cached_tokens, get(u, "cachedContentTokenCount"));
		else if (get(u, "promptTokenCount"))
			r->cached_tokens = (struct opt_u64){ true, 0 };
	}
	if (text)
		request__token(r, ts);
}

/* ---- Ollama /api/generate, /api/chat (NDJSON) ---- */

static bool ollama_path(const char *path)
{
	return !strcmp(path, "/api/generate") || !strcmp(path, "/api/chat");
}

static bool ollama_sniff(const struct jval *o)
{
	return get(o, "done") && get(o, "model") && (get(o, "response") || get(o, "message"));
}

static void ollama_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	if (jv_is(get(o, "error"), J_STRING)) {
		request__error(r, "api_error");
		return;
	}
	set_model(&r->response_model, get(o, "model"));
	if (nonempty_str(get(o, "response")) || nonempty_str(dig(o, "message", "content", NULL)) ||
	    nonempty_str(dig(o, "message", "thinking", NULL)) ||
	    jv_array_size(dig(o, "message", "tool_calls", NULL)))
		request__token(r, ts);
	if (is_true(get(o, "done"))) {
		set_count(&r->input_tokens, get(o, "prompt_eval_count"));
		set_count(&r->output_tokens, get(o, "eval_count"));
		/* the server's own figures: the prompt's tokens it evaluated, the cached part
		 * left out, and how long each phase took (ns) */
		set_count(&r->timings.evaluated, get(o, "prompt_eval_count"));
		set_count(&r->timings.predicted, get(o, "eval_count"));
		set_count_ns(&r->timings.prompt_ns, get(o, "prompt_eval_duration"));
		set_count_ns(&r->timings.predicted_ns, get(o, "eval_duration"));
		set_str(r->finish_reason, sizeof(r->finish_reason), get(o, "done_reason"));
		r->stream_end_seen = true;
	}
}

/* ---- llama.cpp server /completion ---- */

static bool llamacpp_path(const char *path)
{
	return !strcmp(path, "/completion");
}

static bool llamacpp_sniff(const struct jval *o)
{
	return get(o, "content") && get(o, "stop");
}

static void llamacpp_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	if (get(o, "error")) {
		set_api_error(r, get(o, "error"));
		return;
	}
	set_model(&r->response_model, get(o, "model"));
	if (nonempty_str(get(o, "content")))
		request__token(r, ts);
	server_timings(r, get(o, "timings"));
	if (!is_true(get(o, "stop")))
		return;
	r->stream_end_seen = true;
	if (!r->output_tokens.set)
		set_count(&r->output_tokens, get(o, "tokens_predicted"));
	if (nonempty_str(get(o, "stop_type")))
		set_str(r->finish_reason, sizeof(r->finish_reason), get(o, "stop_type"));
	else if (is_true(get(o, "stopped_eos")))
		snprintf(r->finish_reason, sizeof(r->finish_reason), "eos");
	else if (is_true(get(o, "stopped_limit")))
		snprintf(r->finish_reason, sizeof(r->finish_reason), "limit");
	else if (is_true(get(o, "stopped_word")))
		snprintf(r->finish_reason, sizeof(r->finish_reason), "word");
}

/* ---- TGI /generate_stream, /generate ---- */

static bool tgi_path(const char *path)
{
	return !strcmp(path, "/generate_stream") || !strcmp(path, "/generate");
}

static bool tgi_sniff(const struct jval *o)
{
	return jv_is(get(o, "token"), J_OBJECT);
}

static void tgi_event(struct request *r, const char *event, const struct jval *o, uint64_t ts)
{
	const struct jval *tok = get(o, "token"), *details = get(o, "details");

	if (get(o, "error")) {
		const struct jval *t = get(o, "error_type");

		if (nonempty_str(t))
			request__error(r, "api_error:%.40s", t->s);
		else
			request__error(r, "api_error");
		return;
	}
	/* One token per event; special tokens (end of sequence) carry no generated text. */
	if (nonempty_str(get(tok, "text")) && !is_true(get(tok, "special")))
		request__token(r, ts);
	if (jv_is(details, J_OBJECT)) {
		set_count(&r->output_tokens, get(details, "generated_tokens"));
		set_str(r->finish_reason, sizeof(r->finish_reason), get(details, "finish_reason"));
	}
	if (get(o, "generated_text") && !jv_is(get(o, "generated_text"), J_NULL))
		r->stream_end_seen = true;
}

/* ---- the table ---- */

struct dialect {
	const char *name;			/* in outputs: "openai.chat" */
	/* OpenTelemetry GenAI's gen_ai.operation.name and gen_ai.provider.name (metrics):
	 * "" only for what has none (an unknown API, a gRPC method that is no LLM API) */
	const char *otel_operation, *otel_provider;
	bool (*path)(const char *path);		/* the request path names this API */
	bool (*sniff)(const struct jval *o);		/* a reply object of this shape is this API */
	void (*event)(struct request *r, const char *event, const struct jval *o, uint64_t ts);
	void (*body)(struct request *r, const struct jval *o, uint64_t ts); /* NULL: read as one event */
	bool event_arrays; /* a reply may be a JSON array of events (Gemini without alt=sse) */
};

static bool no_path(const char *path)
{
	return false;
}

/*
 * A new API: an enum api value (request.h), a section above, a line here (its OpenTelemetry
 * names with it: test_dialects checks every LLM API has them) and in sniff_order.
 * Paths are tried in table order; when none matched, the first reply object's shape decides,
 * in sniff_order.
 */
static const struct dialect dialects[API__COUNT] = {
	[API_UNKNOWN] = { "unknown", "", "" },
	[API_OPENAI_CHAT] = { "openai.chat", "chat", "openai", chat_path, chat_sniff, openai_event,
			      openai_body },
	[API_OPENAI_COMPLETIONS] = { "openai.completions", "text_completion", "openai",
				     completions_path, completions_sniff, openai_event,
				     openai_body },
	[API_OPENAI_RESPONSES] = { "openai.responses", "chat", "openai", responses_path,
				   responses_sniff, responses_event, responses_body },
	[API_ANTHROPIC_MESSAGES] = { "anthropic.messages", "chat", "anthropic", anthropic_path,
				     anthropic_sniff, anthropic_event, anthropic_body },
	[API_GEMINI] = { "gemini", "generate_content", "gcp.gemini", gemini_path, gemini_sniff,
			 gemini_event, NULL, true },
	/* outside the conventions' provider list: the engines' own names */
	[API_OLLAMA] = { "ollama", "chat", "ollama", ollama_path, ollama_sniff, ollama_event },
	[API_LLAMACPP] = { "llamacpp", "text_completion", "llama.cpp", llamacpp_path,
			   llamacpp_sniff, llamacpp_event },
	[API_TGI] = { "tgi", "text_completion", "tgi", tgi_path, tgi_sniff, tgi_event },
	/* gRPC calls are read by llm/grpc_dialect.c; HTTP/1.1 never carries them */
	[API_TRITON] = { "triton", "text_completion", "triton", no_path },
	[API_GRPC] = { "grpc", "", "", no_path },
	[API_OPENAI_EMBEDDINGS] = { "openai.embeddings", "embeddings", "openai", embeddings_path,
				    embeddings_sniff, embeddings_event },
};

/* TGI's token object is the more specific shape: it is asked before llama.cpp's. */
static const enum api sniff_order[] = {
	API_OPENAI_CHAT, API_OPENAI_COMPLETIONS, API_OPENAI_RESPONSES, API_ANTHROPIC_MESSAGES,
	API_GEMINI,	 API_OLLAMA,		 API_TGI,		   API_LLAMACPP,
	API_OPENAI_EMBEDDINGS,
};

const char *api__name(enum api a)
{
	return a < API__COUNT ? dialects[a].name : "unknown";
}

const char *api__otel_operation(enum api a)
{
	return a < API__COUNT ? dialects[a].otel_operation : "";
}

const char *api__otel_provider(enum api a)
{
	return a < API__COUNT ? dialects[a].otel_provider : "";
}

enum api dialect__from_path(const char *path)
{
	for (int a = API_UNKNOWN + 1; a < API__COUNT; a++) {
		if (dialects[a].path(path))
			return a;
	}
	return API_UNKNOWN;
}

/* A reply whose request path told nothing: its first object's shape names the API. */
static enum api from_payload(const struct jval *o)
{
	for (size_t i = 0; i < sizeof(sniff_order) / sizeof(sniff_order[0]); i++) {
		if (dialects[sniff_order[i]].sniff(o))
			return sniff_order[i];
	}
	return API_UNKNOWN;
}

void dialect__request_head(struct request *r)
{
	const char *m, *end;

	r->api = dialect__from_path(r->path);
	if (r->api != API_GEMINI || !(m = strstr(r->path, "/models/")))
		return;
	m += strlen("/models/");
	end = strchr(m, ':');
	if (end && end > m && (size_t)(end - m) < REQ_MODEL_MAX)
		request__set_str(&r->model, m, (size_t)(end - m));
}

void dialect__request_body(struct jdoc *doc, struct request *r, const char *body, size_t len)
{
	const struct jval *o = jdoc__parse(doc, body, len), *stream;

	if (!o)
		return; /* not JSON (or cut short): model stays unknown */
	set_model(&r->model, get(o, "model"));
	judge__request_body(r, o);
	stream = get(o, "stream");
	if (jv_is(stream, J_TRUE) || jv_is(stream, J_FALSE))
		r->stream = is_true(stream);
	else if (r->api == API_OLLAMA)
		r->stream = 1; /* Ollama streams unless told not to */
}

/* One JSON value of the reply: an object, or (where the dialect streams so) an array of them. */
static void dispatch(struct request *r, const char *event, const struct jval *o, uint64_t ts, bool whole)
{
	const struct dialect *d;
	const struct jval *e;
	size_t i;

	if (jv_is(o, J_ARRAY)) {
		if (!dialects[r->api].event_arrays)
			return;
		jv_array_foreach(o, i, e)
			dialects[r->api].event(r, event, e, ts);
		return;
	}
	if (!jv_is(o, J_OBJECT))
		return;
	if (r->api == API_UNKNOWN)
		r->api = from_payload(o);
	d = &dialects[r->api];
	if (!d->event)
		return;
	if (whole && d->body)
		d->body(r, o, ts);
	else
		d->event(r, event, o, ts);
}

/* Why the last parse failed: JSON nested deeper than the reader goes (valid, perhaps, but not
 * read) is not called malformed. */
static const char *json_error(const struct jdoc *doc)
{
	return doc->too_deep ? "json_too_deep" : "malformed_json";
}

void dialect__stream_event(struct jdoc *doc, struct request *r, const char *event,
			   const char *data, size_t len, uint64_t ts)
{
	const struct jval *o;

	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		r->stream_end_seen = true;
		return;
	}
	o = jdoc__parse(doc, data, len);
	if (!o) {
		request__error(r, "%s", json_error(doc));
		return;
	}
	dispatch(r, event, o, ts, false);
}

void dialect__response_body(struct jdoc *doc, struct request *r, const char *body, size_t len,
			    uint64_t ts)
{
	const struct jval *o = jdoc__parse(doc, body, len);

	if (!o) {
		if (r->status >= 200 && r->status < 300)
			request__error(r, "%s", json_error(doc));
		return;
	}
	if (r->status >= 400) {
		const struct jval *err = get(o, "error");

		if (err && !jv_is(err, J_STRING))
			set_api_error(r, err);
	} else {
		dispatch(r, "", o, ts, true);
	}
}
