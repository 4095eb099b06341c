/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One LLM API call as seen on one connection, and the metrics derived from it
 * (definitions: docs/metrics.md).
 */
#ifndef TS_REQUEST_H
#define TS_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "proto/http1.h"
#include "tokenscope.h"

enum api {
	API_UNKNOWN = 0,
	API_OPENAI_CHAT,
	API_OPENAI_COMPLETIONS,
	API_OPENAI_RESPONSES,
	API_ANTHROPIC_MESSAGES,
	API_GEMINI,
	API_OLLAMA,
	API_LLAMACPP,
	API_TGI,
	API_TRITON, /* gRPC: inference.GRPCInferenceService (llm/grpc_dialect.h) */
	API_GRPC,   /* any other gRPC method: each response message a token event */
	API_OPENAI_EMBEDDINGS, /* /v1/embeddings: no tokens out, an engine's embedding steps */
	API__COUNT,
};

enum role { ROLE_CLIENT = 0, ROLE_SERVER = 1 };

#define REQ_MODEL_MAX 128
#define REQ_ADDR_MAX 136 /* "[IPv6]:port", "unix:PATH#INODE" (a path of up to 108 bytes) */
#define REQ_IP_ADDR_MAX 48 /* "[IPv6]:port" */
#define REQ_REASON_MAX 32
#define REQ_ERROR_MAX 64
#define REQ_RESPONSE_ID_MAX 80
#define REQ_USER_AGENT_MAX HTTP_USER_AGENT_MAX
#define REQ_CONV_MAX 1024 /* a conversation's messages hashed, at most */

/* Where a connection runs: its two ends, its network namespace, and, where NAT changed it on
 * its way (a Service address: DNAT, as kube-proxy sets up), its ends as the far side sees
 * them, from its conntrack entry (capture/nat.c). */
struct conn_addr {
	char local[REQ_ADDR_MAX];
	char peer[REQ_ADDR_MAX];
	uint32_t netns;			/* inode number of its net:[N]; 0: unknown (unix, old recordings) */
	char nat_local[REQ_IP_ADDR_MAX]; /* "" where not translated */
	char nat_peer[REQ_IP_ADDR_MAX];
};

/* Whether a connection with these ends (local, peer), seen in network namespace ns_a, may be
 * the same connection as one seen in ns_b: the same namespace (or either unknown), or two
 * that it really crossed (a veth pair, a bridge): its peer neither a loopback address nor its
 * own local one, which never leave their namespace. Two pods' 127.0.0.1:8000 never meet. */
bool conn_addr__may_meet(uint32_t ns_a, uint32_t ns_b, const char *local, const char *peer);

/* A count that may be unknown (null in JSON, never 0). */
struct opt_u64 {
	bool set;
	uint64_t v;
};

struct attribution;

/* Where a token count on the record came from (its *_source in the outputs). */
enum count_source {
	COUNT_NONE = 0,
	COUNT_USAGE,	     /* the API's usage object (or its final object's counts) */
	COUNT_SERVER_TIMINGS, /* the server's own per-request figures (llama-server's timings) */
	COUNT_LLAMA_STEPS,   /* llama.cpp's steps: the request's own sequence */
	COUNT_ENGINE_WIRE,   /* an engine wire's messages for the request */
	COUNT_TOKEN_EVENTS,  /* output only: the stream's token events, one token each */
};
const char *count_source__name(enum count_source s);

/* The server's own account of one request's engine work, where its stream states one
 * (llama-server's `timings` on its last chunk, Ollama's final object): prompt tokens it
 * evaluated (the cached part left out), the tokens it reused from its cache, the tokens it
 * generated, and the time it measured for each phase (0: not said). */
struct server_timings {
	struct opt_u64 evaluated, cached, predicted;
	uint64_t prompt_ns, predicted_ns;
};

struct request {
	uint64_t id; /* unique in the run, in the order requests began */
	/* who */
	uint32_t pid;
	char comm[TS_COMM_LEN];
	enum role role;
	const char *transport;	   /* "tls", "go_tls", "tcp" or "unix" */
	char local[REQ_ADDR_MAX];  /* "ip:port" of this end, "unix:PATH#INODE"; "" when unknown */
	char peer[REQ_ADDR_MAX];   /* of the other end */
	uint32_t netns;		   /* the socket's network namespace (0: unknown) */
	char nat_local[REQ_IP_ADDR_MAX], nat_peer[REQ_IP_ADDR_MAX]; /* struct conn_addr's */
	uint32_t peer_pid;	   /* unix: the other end's process (0: unknown) */
	/* the process's container and pod (capture/identity.h; "" when unknown), set when the
	 * request is delivered */
	char container_id[72], pod_uid[40], pod_name[64], k8s_namespace[64];
	/* what */
	enum api api;
	/* Strings of their own size, "" (not freed) until set (request__set_str): most requests
	 * of an open stream never need the room of a fixed array. */
	const char *model;	    /* as requested; at most REQ_MODEL_MAX - 1 bytes */
	const char *response_model; /* as the response named it; the same */
	char method[HTTP_METHOD_MAX];
	const char *path; /* without the query string: a heap copy of its size (request__set_path),
			     or "" (not freed) */
	int status; /* 0 until the response head is seen */
	uint8_t http_version; /* 1 (HTTP/1.1) or 2 */
	uint32_t stream_id;   /* HTTP/2 stream; 0 for HTTP/1.1 */
	bool headers_partial; /* some header fields were unknown: HTTP/2 joined mid-connection, or
			       * an HTTP/1.1 head past its limit (error http_header_too_large) */
	int grpc_status;      /* -1: not a gRPC call, or no grpc-status seen */
	int stream; /* -1 unknown, 0 no, 1 yes (from the request body, else the response type) */

	/* when (CLOCK_MONOTONIC ns; 0 = not seen) */
	uint64_t start_ns;	 /* first request byte */
	uint64_t response_ns;	 /* response head */
	uint64_t first_token_ns;
	uint64_t last_token_ns;
	uint64_t end_ns;	 /* end of the response (terminator, last byte or close) */
	/* the engine's own time of its first output, off an engine wire (vLLM's: the message
	 * it sent once it had the step's tokens): what the first token's step is bounded by when
	 * the HTTP server writes late (attrib_align.c); 0 = not seen */
	uint64_t engine_output_ns;
	/* the engine's outputs for it, in order (an engine wire, one engine request): when
	 * each was made (the engine's clock) and how many tokens it carried; what ties token
	 * events to the steps that made them when the server merged outputs (attrib_align.c) */
	uint64_t *engine_out_ts;
	uint32_t *engine_out_tokens;
	size_t engine_outs;
	bool stream_end_seen;	 /* [DONE], message_stop, response.completed, done:true, ... */

	/* token events and gaps between them */
	uint64_t token_events;
	uint64_t *gaps_ns; /* token_events - 1 inter-token gaps */
	size_t gaps_cap;
	/* the stream's own count of output tokens so far, at each token event (vLLM's usage on
	 * every chunk, `continuous_usage_stats`): which of the engine's outputs each event carried
	 * when the server merged them (attrib_align.c); 0 where an event stated none, NULL where
	 * none did */
	uint32_t *event_tokens;
	size_t event_tokens_cap;

	/* usage, as the stream reported it */
	struct opt_u64 output_tokens;
	struct opt_u64 input_tokens;  /* whole prompt, cached part included */
	struct opt_u64 cached_tokens;
	/* where each came from; the engine's figures fill what the stream left unsaid, once the
	 * request is attributed (request__engine_counts) */
	enum count_source input_source, cached_source, output_source;
	/* the engine's own counts beside a usage that said otherwise (set: they differ) */
	struct opt_u64 engine_input, engine_cached, engine_output;
	struct server_timings timings;
	char finish_reason[REQ_REASON_MAX];
	/* the id the response carried (chatcmpl-..., msg_..., resp_...): "" when none */
	char response_id[REQ_RESPONSE_ID_MAX];
	/* the W3C trace context the request carried (its traceparent header): the trace and the
	 * caller's span it belongs to; all zero where it carried none, or one not well formed */
	uint8_t trace_id[16], parent_span_id[8];
	uint8_t trace_flags;
	bool traced;
	const char *tracestate; /* its vendors' list with it (request__set_tracestate), or "" */
	/* who sent it, as the request says (llm/judge.h): its User-Agent, cut to
	 * REQ_USER_AGENT_MAX - 1 bytes ("" none); whether it offered tools, and whether its last
	 * message is a tool's result (an agent's loop going on) */
	char user_agent[REQ_USER_AGENT_MAX];
	bool tools_offered, tool_result;
	bool tool_called; /* the reply asked for a tool the client runs (where its finish reason
			   * does not say so: Responses' output items) */
	/* what chains it to the client's earlier calls (llm/session.h): the Responses API's
	 * previous_response_id, and a hash of each prefix of its conversation (conv[k]: of its
	 * first k + 1 messages; no text kept) */
	char previous_response_id[REQ_RESPONSE_ID_MAX];
	uint64_t *conv;
	uint32_t nconv;

	/* health */
	bool response_done; /* the response body ended where its framing said */
	bool lossy;	    /* capture lost bytes of this request or its response */
	char error[REQ_ERROR_MAX]; /* first error: HTTP status, API error, parse or capture */

	/* client role: the server record that served it, traced on this host (match.h) */
	uint64_t server_id; /* 0: not found */
	bool upstream_set;
	int64_t upstream_ns; /* client TTFT - server TTFT */

	/* server role: the TTFT split and the gaps' steps (llm/attribution.h); NULL until attributed */
	struct attribution *attr;
	/* called once, when the first token is written (the pipeline registers it) */
	void (*on_first_token)(void *ctx, struct request *r);
	void *hook_ctx;
};

struct request *request__new(void);
/* Its connection's addresses (a TLS stream learns them after its request began). */
void request__set_addr(struct request *r, const struct conn_addr *a);
void request__free(struct request *r);
/* Set one of the request's heap strings (path, model, response_model) to a copy of the
 * first n bytes of s (cut at REQ_MODEL_MAX - 1 for the models, as before); false without
 * memory, the string then unchanged. Setting the same value again allocates nothing. */
bool request__set_str(const char **field, const char *s, size_t n);
bool request__set_path(struct request *r, const char *path);
/* From a traceparent header's value (W3C Trace Context, version 00 read; a later version's
 * first four fields read as 00's): trace_id, parent_span_id, trace_flags, traced. A value
 * not well formed, or with an all-zero id, leaves the request untraced. */
void request__set_traceparent(struct request *r, const char *value);
/* From a tracestate header's value (the headers joined), for a request traced by its
 * traceparent: kept where it is printable ASCII, to its last whole member within
 * HTTP_TRACESTATE_KEEP characters. Returns false only out of memory. */
bool request__set_tracestate(struct request *r, const char *value);
/* Its User-Agent header's value, cut; a byte outside printable ASCII becomes '?' (the value
 * is printed as text, and a cut never splits a character). */
void request__set_user_agent(struct request *r, const char *value);
/* The reply asked the client to run a tool: its finish reason says so (OpenAI's tool_calls or
 * older function_call, Anthropic's tool_use), or its output items did (r->tool_called). */
bool request__called_tool(const struct request *r);
/* A token-bearing event arrived at ts. */
void request__token(struct request *r, uint64_t ts);
/* The output tokens so far that the last token event's own chunk stated (event_tokens). */
void request__event_tokens(struct request *r, uint64_t so_far);
/* Record the first error only: later ones are consequences. */
void request__error(struct request *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *role__name(enum role r);

/* How much of the prompt the engine found in its cache: none (miss), some (partial), nearly
 * all (hit: CACHE_HIT_SHARE of it or more), or not said. Prefix caching makes TTFT bimodal:
 * every TTFT figure is also given per regime. */
enum cache_regime { CACHE_UNKNOWN = 0, CACHE_MISS, CACHE_PARTIAL, CACHE_HIT, CACHE__COUNT };
#define CACHE_HIT_SHARE 0.9
const char *cache_regime__name(enum cache_regime c);

/* Who reads a reply (llm/judge.h decides): a person reading the stream, a program that acts
 * on the reply and calls again (an agent's loop), any other program, or nothing decided. */
enum consumer {
	CONSUMER_UNKNOWN = 0,
	CONSUMER_INTERACTIVE,
	CONSUMER_AGENT,
	CONSUMER_PROGRAMMATIC,
	CONSUMER__COUNT,
};

/* What decided a request's consumer, strongest first (docs/judgements.md). */
enum consumer_evidence {
	EVIDENCE_NONE = 0,
	EVIDENCE_RULE,	      /* an operator's --consumer rule */
	EVIDENCE_RELAY,	      /* relayed on (a traced proxy) to a browser's or an agent's request */
	EVIDENCE_USER_AGENT,  /* a browser's or an agent's User-Agent */
	EVIDENCE_TOOL_RESULT, /* its last message is a tool's result */
	EVIDENCE_TOOL_CALL,   /* it offered tools and the reply called one */
	EVIDENCE_PROGRAM,     /* an SDK's or HTTP library's User-Agent, and no tool use */
	EVIDENCE__COUNT,
};

/* Derived metrics; NAN when not defined for this request. */
struct request_metrics {
	double ttft_ms, tpot_ms, e2e_ms;
	double itl_p50_ms, itl_p90_ms, itl_p99_ms, itl_max_ms;
	struct opt_u64 output_tokens; /* usage, else token events */
	bool output_tokens_estimated;
	int cache_hit; /* -1 unknown */
	enum cache_regime cache;
	bool complete;
	/* the judgement (llm/judge.h; the pipeline sets it): who reads the reply and what decided
	 * it, the stream's rate (tokens a second after the first: NAN without a TPOT) and, for a
	 * person reading, that rate over the reading speed (NAN otherwise); whether the request
	 * met every SLO of its consumer (-1: none applies, or a figure it needs is unknown) */
	enum consumer consumer;
	enum consumer_evidence consumer_evidence;
	double tokens_per_s, reading_headroom;
	int slo_met;
	/* the agent session it opened or continued (llm/session.h: the session's key; 0: none)
	 * and its place there (0: it opened it) */
	uint64_t session;
	uint32_t session_call;
};

void request__metrics(const struct request *r, struct request_metrics *m);
/* Once attributed (r->attr): the engine's token counts (the request's own llama.cpp
 * sequence, vLLM's engine wire) fill the counts its stream did not state, with their source;
 * where the stream stated one the engine's disagrees with, the engine's is kept beside it. */
void request__engine_counts(struct request *r);

#endif
