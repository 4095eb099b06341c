/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The metric families (metrics.c includes this, and nothing else does): their bucket
 * boundaries, every label a family may carry, and one row per family, its name, help,
 * bounds and labels. A new family is a value of enum fam_id and its row here
 * (docs/metrics-export.md lists them).
 */
#ifndef TS_METRICS_FAMILIES_H
#define TS_METRICS_FAMILIES_H


/* OpenTelemetry GenAI semantic conventions' explicit bucket boundaries. */
static const double b_duration[] = { 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
				     1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92 };
static const double b_tokens[] = { 1,	    4,	     16,      64,	256,	  1024,	    4096,
				   16384,   65536,   262144,  1048576,	4194304,  16777216, 67108864 };
static const double b_server_ttft[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
					0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0 };
static const double b_server_tpot[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
					0.3,  0.4,   0.5,  0.75,  1.0, 2.5 };
/* tokenscope's own: gaps and components are milliseconds long */
static const double b_fine[] = { 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
				 0.2,	 0.5,	1,     2,     5,    10,	  30,	60 };


/* Every label a family may carry: a request's or step's values are filled by name
 * (struct label_values), and each family lists the labels it carries, in its order. */
enum label {
	L_OPERATION,
	L_PROVIDER,
	L_REQUEST_MODEL,
	L_RESPONSE_MODEL,
	L_SERVER_ADDRESS,
	L_SERVER_PORT,
	L_ERROR_TYPE,
	L_PROCESS,
	L_PROTOCOL_VERSION,
	L_K8S_NAMESPACE,
	L_K8S_POD,
	L_CONTAINER_ID,
	L_TOKEN_TYPE,
	L_ROLE,
	L_CACHE,
	L_COMPONENT,
	L_KIND,
	L_SOURCE,
	L_MODEL,
	L_CONSUMER,
	L_SLO,
	L__COUNT,
};

static const char *const label_names[L__COUNT] = {
	[L_OPERATION] = "gen_ai_operation_name",
	[L_PROVIDER] = "gen_ai_provider_name",
	[L_REQUEST_MODEL] = "gen_ai_request_model",
	[L_RESPONSE_MODEL] = "gen_ai_response_model",
	[L_SERVER_ADDRESS] = "server_address",
	[L_SERVER_PORT] = "server_port",
	[L_ERROR_TYPE] = "error_type",
	[L_PROCESS] = "process",
	[L_PROTOCOL_VERSION] = "network_protocol_version",
	[L_K8S_NAMESPACE] = "k8s_namespace_name",
	[L_K8S_POD] = "k8s_pod_name",
	[L_CONTAINER_ID] = "container_id",
	[L_TOKEN_TYPE] = "gen_ai_token_type",
	[L_ROLE] = "role",
	[L_CACHE] = "cache",
	[L_COMPONENT] = "component",
	[L_KIND] = "kind",
	[L_SOURCE] = "source",
	[L_MODEL] = "model",
	[L_CONSUMER] = "consumer",
	[L_SLO] = "slo",
};

/* The values of one observation, by label (NULL: the empty value). */
struct label_values {
	const char *v[L__COUNT];
};

#define GENAI_LABELS                                                                              \
	L_OPERATION, L_PROVIDER, L_REQUEST_MODEL, L_RESPONSE_MODEL, L_SERVER_ADDRESS,             \
		L_SERVER_PORT, L_ERROR_TYPE, L_PROCESS, L_PROTOCOL_VERSION, L_K8S_NAMESPACE,      \
		L_K8S_POD, L_CONTAINER_ID
static const enum label l_genai[] = { GENAI_LABELS };
static const enum label l_usage[] = { GENAI_LABELS, L_TOKEN_TYPE };
static const enum label l_cache[] = { L_PROCESS, L_ROLE, L_REQUEST_MODEL, L_CACHE };
static const enum label l_gap[] = { L_PROCESS, L_ROLE, L_REQUEST_MODEL };
static const enum label l_component[] = { L_PROCESS, L_REQUEST_MODEL, L_COMPONENT };
static const enum label l_process[] = { L_PROCESS };
static const enum label l_spec[] = { L_PROCESS, L_REQUEST_MODEL };
static const enum label l_spec_tokens[] = { L_PROCESS, L_REQUEST_MODEL, L_KIND };
static const double b_ratio[] = { 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1 };
static const enum label l_engine[] = { L_PROCESS, L_SOURCE, L_MODEL, L_KIND };
static const enum label l_judged[] = { L_PROCESS, L_ROLE, L_REQUEST_MODEL, L_CONSUMER, L_SLO };
static const enum label l_reading[] = { L_PROCESS, L_ROLE, L_REQUEST_MODEL };
static const enum label l_session[] = { L_PROCESS, L_ROLE, L_CONSUMER };
static const double b_session[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800 };
static const double b_calls[] = { 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000 };
/* a stream's rate over reading speed: below 1 its reader waits */
static const double b_headroom[] = { 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 50 };

enum fam_id {
	F_CLIENT_DURATION,
	F_CLIENT_TTFC,
	F_CLIENT_TPOC,
	F_CLIENT_TOKENS,
	F_SERVER_DURATION,
	F_SERVER_TTFT,
	F_SERVER_TPOT,
	F_TTFT,
	F_GAP,
	F_TTFT_COMPONENT,
	F_GAP_COMPONENT,
	F_STEP,
	F_STEPS,
	F_LAUNCHES,
	F_ENGINE_STEP,
	F_ENGINE_STEPS,
	F_ENGINE_TOKENS,
	F_ENGINE_FAILED,
	F_SPEC_ACCEPTANCE,
	F_SPEC_TOKENS,
	F_JUDGED,
	F_HEADROOM,
	F_PROMPT,
	F_CACHED_SHARE,
	F_SESSION,
	F_SESSION_CALLS,
	F_SESSION_MODEL,
	F__COUNT,
};

struct family_def {
	const char *name, *help;
	bool histogram; /* else a counter */
	const double *bounds;
	size_t nbounds;
	const enum label *labels;
	size_t nlabels;
};

#define HIST(n, h, b, l) { n, h, true, b, N(b), l, N(l) }
#define COUNTER(n, h, l) { n, h, false, NULL, 0, l, N(l) }

static const struct family_def defs[F__COUNT] = {
	[F_CLIENT_DURATION] = HIST("gen_ai_client_operation_duration_seconds",
				   "GenAI operation duration, client side (request to end of response).",
				   b_duration, l_genai),
	[F_CLIENT_TTFC] = HIST("gen_ai_client_operation_time_to_first_chunk_seconds",
			       "Time to the first chunk with content, client side.", b_duration, l_genai),
	[F_CLIENT_TPOC] = HIST("gen_ai_client_operation_time_per_output_chunk_seconds",
			       "Time between content chunks after the first, client side (one sample "
			       "per chunk).",
			       b_duration, l_genai),
	[F_CLIENT_TOKENS] = HIST("gen_ai_client_token_usage",
				 "Tokens used, by type (input, output), as the response reported them.",
				 b_tokens, l_usage),
	[F_SERVER_DURATION] = HIST("gen_ai_server_request_duration_seconds",
				   "GenAI request duration, server side (request to end of response).",
				   b_duration, l_genai),
	[F_SERVER_TTFT] = HIST("gen_ai_server_time_to_first_token_seconds",
			       "Time to the first content token, server side.", b_server_ttft, l_genai),
	[F_SERVER_TPOT] = HIST("gen_ai_server_time_per_output_token_seconds",
			       "Time per output token after the first, server side (one sample per "
			       "request).",
			       b_server_tpot, l_genai),
	[F_TTFT] = HIST("tokenscope_ttft_seconds",
			"Time to the first content token, by role and prompt-cache regime (hit: "
			"90 % of the prompt cached or more, partial, miss, unknown).",
			b_duration, l_cache),
	[F_GAP] = HIST("tokenscope_inter_token_gap_seconds",
		       "Gaps between content events after the first.", b_fine, l_gap),
	[F_TTFT_COMPONENT] = HIST("tokenscope_ttft_component_seconds",
				  "Server TTFT split: queue_busy, queue_idle, prefill, emit "
				  "(docs/attribution.md).",
				  b_fine, l_component),
	[F_GAP_COMPONENT] = HIST("tokenscope_token_gap_component_seconds",
				 "Server token gaps split: decode (without interference), "
				 "interference, host.",
				 b_fine, l_component),
	[F_STEP] = HIST("tokenscope_gpu_step_duration_seconds",
			"GPU step time, first launch to completion (docs/gpu.md).", b_fine, l_process),
	[F_STEPS] = COUNTER("tokenscope_gpu_steps_total", "GPU steps observed.", l_process),
	[F_LAUNCHES] = COUNTER("tokenscope_gpu_launches_total",
			       "Kernel and graph launches in the observed steps.", l_process),
	[F_ENGINE_STEP] = HIST("tokenscope_engine_step_duration_seconds",
			       "An engine's own step time (llama.cpp: one llama_decode call), by "
			       "kind: prefill, decode, chunk, mixed.",
			       b_fine, l_engine),
	[F_ENGINE_STEPS] = COUNTER("tokenscope_engine_steps_total",
				   "Engine steps that did work, by kind.", l_engine),
	[F_ENGINE_TOKENS] = COUNTER("tokenscope_engine_step_tokens_total",
				    "Tokens the engine's steps carried (prompt and decode), by step "
				    "kind.",
				    l_engine),
	[F_SPEC_ACCEPTANCE] = HIST("tokenscope_speculative_acceptance_ratio",
				   "Speculative decoding: per server request, the drafted tokens its "
				   "engine's steps accepted, of those they verified (llama.cpp).",
				   b_ratio, l_spec),
	[F_SPEC_TOKENS] = COUNTER("tokenscope_speculative_tokens_total",
				  "Speculative decoding: tokens a draft model proposed that the "
				  "engine's steps verified (drafted) and accepted, by kind.",
				  l_spec_tokens),
	[F_ENGINE_FAILED] = COUNTER("tokenscope_engine_steps_failed_total",
				    "Engine step calls that did no work (llama_decode returned an "
				    "error: no KV slot, aborted).",
				    l_engine),
	[F_JUDGED] = COUNTER("tokenscope_requests_judged_total",
			     "Requests by consumer (interactive, agent, programmatic, unknown) and "
			     "whether they met every SLO of their consumer (met, missed, none: no SLO "
			     "judged them); goodput is the rate of slo=\"met\" (docs/judgements.md).",
			     l_judged),
	[F_HEADROOM] = HIST("tokenscope_reading_headroom_ratio",
			    "Interactive streams: tokens a second after the first, over the reading "
			    "speed (below 1 the reader waits).",
			    b_headroom, l_reading),
	[F_PROMPT] = HIST("tokenscope_prompt_tokens",
			  "Prompt tokens per request, the cached part included (usage, else the "
			  "server's or the engine's counts).",
			  b_tokens, l_reading),
	[F_CACHED_SHARE] = HIST("tokenscope_prompt_cached_ratio",
				"The share of each request's prompt tokens the engine found cached.",
				b_ratio, l_reading),
	[F_SESSION] = HIST("tokenscope_session_duration_seconds",
			   "Agent sessions (a client's chained calls): first call's start to last "
			   "call's end.",
			   b_session, l_session),
	[F_SESSION_CALLS] = HIST("tokenscope_session_calls", "Agent sessions: their calls.",
				 b_calls, l_session),
	[F_SESSION_MODEL] = HIST("tokenscope_session_model_ratio",
				 "Agent sessions: the share of their time inside calls (the rest is "
				 "the client's own: tools, the program).",
				 b_ratio, l_session),
};

#endif
