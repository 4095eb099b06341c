// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/stats.h"
#include "llm/attribution.h"
#include "llm/request.h"

const char *role__name(enum role r)
{
	return r == ROLE_SERVER ? "server" : "client";
}

const char *count_source__name(enum count_source s)
{
	static const char *const names[] = {
		[COUNT_NONE] = NULL,
		[COUNT_USAGE] = "usage",
		[COUNT_SERVER_TIMINGS] = "server_timings",
		[COUNT_LLAMA_STEPS] = "llama_steps",
		[COUNT_ENGINE_WIRE] = "engine_wire",
		[COUNT_TOKEN_EVENTS] = "token_events",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : NULL;
}

struct request *request__new(void)
{
	struct request *r = calloc(1, sizeof(*r));

	if (r) {
		r->stream = -1;
		r->http_version = 1;
		r->grpc_status = -1;
		r->path = "";
		r->tracestate = "";
		r->model = "";
		r->response_model = "";
	}
	return r;
}

bool request__set_str(const char **field, const char *s, size_t n)
{
	char *copy = NULL;

	n = strnlen(s, n);
	if (!strncmp(*field, s, n) && !(*field)[n])
		return true; /* the same again: each SSE event names the model */
	if (n && !(copy = strndup(s, n)))
		return false;
	if (**field)
		free((char *)*field);
	*field = copy ? copy : "";
	return true;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* n bytes from 2n lower-case hex digits; false on anything else */
static bool hex_bytes(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i])
			return false;
	}
	return true;
}

void request__set_traceparent(struct request *r, const char *v)
{
	uint8_t version, flags, trace[16], span[8];

	r->traced = false;
	/* "VV-" 32 hex "-" 16 hex "-" 2 hex: 55 characters */
	if (!v || strlen(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' ||
	    !hex_bytes(v, &version, 1) || version == 0xff || !hex_bytes(v + 3, trace, 16) ||
	    !hex_bytes(v + 36, span, 8) || !hex_bytes(v + 53, &flags, 1) ||
	    (v[55] && (version == 0 || v[55] != '-')) || all_zero(trace, 16) ||
	    all_zero(span, 8))
		return;
	memcpy(r->trace_id, trace, 16);
	memcpy(r->parent_span_id, span, 8);
	r->trace_flags = flags;
	r->traced = true;
}

bool request__set_tracestate(struct request *r, const char *v)
{
	size_t n = v ? strlen(v) : 0;

	if (!r->traced || !n)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < 0x20 || v[i] > 0x7e)
			return true; /* not a tracestate */
	}
	if (n > HTTP_TRACESTATE_KEEP) { /* a member cut: the list up to the one before it */
		n = HTTP_TRACESTATE_KEEP;
		while (n && v[n] != ',')
			n--;
	}
	while (n && (v[n - 1] == ',' || v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	return request__set_str(&r->tracestate, v, n);
}

bool request__set_path(struct request *r, const char *path)
{
	return request__set_str(&r->path, path, strlen(path));
}

/* "1.2.3.4:80" -> "1.2.3.4", "[::1]:80" -> "::1" (n bytes at most, with the NUL). */
static void host_of(const char *addr, char *out, size_t n)
{
	const char *end = strrchr(addr, ':');
	size_t len = end ? (size_t)(end - addr) : strlen(addr);

	if (addr[0] == '[' && len >= 2 && addr[len - 1] == ']') {
		addr++;
		len -= 2;
	}
	if (len >= n)
		len = n - 1;
	memcpy(out, addr, len);
	out[len] = 0;
}

static bool loopback(const char *host)
{
	return !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strncmp(host, "::ffff:127.", 11);
}

bool conn_addr__may_meet(uint32_t ns_a, uint32_t ns_b, const char *local, const char *peer)
{
	char l[REQ_IP_ADDR_MAX], p[REQ_IP_ADDR_MAX];

	if (!ns_a || !ns_b || ns_a == ns_b)
		return true;
	if (!strncmp(peer, "unix:", 5))
		return false;
	host_of(local, l, sizeof(l));
	host_of(peer, p, sizeof(p));
	return !loopback(p) && strcmp(l, p) != 0;
}

void request__set_addr(struct request *r, const struct conn_addr *a)
{
	memcpy(r->local, a->local, sizeof(r->local));
	memcpy(r->peer, a->peer, sizeof(r->peer));
	r->netns = a->netns;
	memcpy(r->nat_local, a->nat_local, sizeof(r->nat_local));
	memcpy(r->nat_peer, a->nat_peer, sizeof(r->nat_peer));
}

void request__free(struct request *r)
{
	if (!r)
		return;
	free(r->gaps_ns);
	free(r->event_tokens);
	free(r->engine_out_ts);
	free(r->conv);
	free(r->engine_out_tokens);
	if (*r->path)
		free((char *)r->path);
	if (*r->tracestate)
		free((char *)r->tracestate);
	if (*r->model)
		free((char *)r->model);
	if (*r->response_model)
		free((char *)r->response_model);
	attribution__free(r->attr);
	free(r);
}

void request__token(struct request *r, uint64_t ts)
{
	if (r->token_events) {
		if (!array__reserve((void **)&r->gaps_ns, &r->gaps_cap, r->token_events,
				    sizeof(*r->gaps_ns))) {
			request__error(r, "out_of_memory");
			r->lossy = true;
			return;
		}
		/* Events of one stream are delivered in order; a clock step back reads as 0. */
		r->gaps_ns[r->token_events - 1] = ts > r->last_token_ns ? ts - r->last_token_ns : 0;
	} else {
		r->first_token_ns = ts;
		if (r->on_first_token)
			r->on_first_token(r->hook_ctx, r);
	}
	r->last_token_ns = ts;
	r->token_events++;
}

void request__event_tokens(struct request *r, uint64_t so_far)
{
	size_t had = r->event_tokens_cap;

	if (!r->token_events || !so_far || so_far > UINT32_MAX)
		return;
	if (!array__reserve((void **)&r->event_tokens, &r->event_tokens_cap, r->token_events,
			    sizeof(*r->event_tokens))) {
		free(r->event_tokens); /* the counts are a help, not a need: none is used */
		r->event_tokens = NULL;
		r->event_tokens_cap = 0;
		return;
	}
	/* the events before that stated none */
	memset(r->event_tokens + had, 0, (r->event_tokens_cap - had) * sizeof(*r->event_tokens));
	r->event_tokens[r->token_events - 1] = (uint32_t)so_far;
}

void request__set_user_agent(struct request *r, const char *value)
{
	const unsigned char *v = (const unsigned char *)value;
	size_t i = 0;

	for (; v[i] && i < sizeof(r->user_agent) - 1; i++)
		r->user_agent[i] = v[i] < 0x20 || v[i] >= 0x7f ? '?' : v[i];
	r->user_agent[i] = 0;
}

bool request__called_tool(const struct request *r)
{
	return r->tool_called || !strcmp(r->finish_reason, "tool_calls") ||
	       !strcmp(r->finish_reason, "function_call") || !strcmp(r->finish_reason, "tool_use");
}

void request__error(struct request *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

const char *cache_regime__name(enum cache_regime c)
{
	static const char *const names[CACHE__COUNT] = {
		[CACHE_UNKNOWN] = "unknown", [CACHE_MISS] = "miss", [CACHE_PARTIAL] = "partial",
		[CACHE_HIT] = "hit",
	};

	return c < CACHE__COUNT ? names[c] : "unknown";
}

/* Some cached tokens of a prompt whose size is not known (or smaller than them: two sources
 * disagreeing) are no share: unknown, not a guess between hit and partial. */
static enum cache_regime cache_regime_of(const struct request *r)
{
	if (!r->cached_tokens.set)
		return CACHE_UNKNOWN;
	if (!r->cached_tokens.v)
		return CACHE_MISS;
	if (!r->input_tokens.set || r->cached_tokens.v > r->input_tokens.v)
		return CACHE_UNKNOWN;
	return (double)r->cached_tokens.v >= CACHE_HIT_SHARE * (double)r->input_tokens.v
		       ? CACHE_HIT
		       : CACHE_PARTIAL;
}

static double ns_ms(uint64_t a, uint64_t b)
{
	return (double)(b - a) / 1e6;
}

void request__metrics(const struct request *r, struct request_metrics *m)
{
	size_t ngaps = r->token_events ? r->token_events - 1 : 0;

	m->complete = r->response_done && !r->lossy;
	m->session = 0;
	m->session_call = 0;
	m->ttft_ms = m->tpot_ms = m->e2e_ms = NAN;
	m->itl_p50_ms = m->itl_p90_ms = m->itl_p99_ms = m->itl_max_ms = NAN;

	if (r->output_tokens.set) {
		m->output_tokens = r->output_tokens;
		m->output_tokens_estimated = false;
	} else {
		m->output_tokens.set = r->token_events > 0 || r->response_done;
		m->output_tokens.v = r->token_events;
		m->output_tokens_estimated = m->output_tokens.set;
	}
	m->cache_hit = r->cached_tokens.set ? r->cached_tokens.v > 0 : -1;
	m->cache = cache_regime_of(r);
	m->consumer = CONSUMER_UNKNOWN;
	m->consumer_evidence = EVIDENCE_NONE;
	m->tokens_per_s = m->reading_headroom = NAN;
	m->slo_met = -1;

	/* A request whose bytes were lost gets no latency figure rather than a wrong one. */
	if (r->lossy || !r->token_events || !r->start_ns)
		return;
	m->ttft_ms = ns_ms(r->start_ns, r->first_token_ns);
	m->e2e_ms = ns_ms(r->start_ns, r->last_token_ns);
	if (m->output_tokens.set && m->output_tokens.v > 1 && r->last_token_ns > r->first_token_ns) {
		m->tpot_ms = ns_ms(r->first_token_ns, r->last_token_ns) /
			     (double)(m->output_tokens.v - 1);
		m->tokens_per_s = 1e3 / m->tpot_ms;
	}
	if (ngaps) {
		uint64_t *tmp = malloc(ngaps * sizeof(*tmp));

		if (!tmp)
			return;
		memcpy(tmp, r->gaps_ns, ngaps * sizeof(*tmp));
		sort_ns(tmp, ngaps); /* once, for the four figures */
		m->itl_p50_ms = pct_sorted_ns_ms(tmp, ngaps, 50);
		m->itl_p90_ms = pct_sorted_ns_ms(tmp, ngaps, 90);
		m->itl_p99_ms = pct_sorted_ns_ms(tmp, ngaps, 99);
		m->itl_max_ms = pct_sorted_ns_ms(tmp, ngaps, 100);
		free(tmp);
	}
}

/* One count: the engine's fills it where the stream said none, else is kept beside it where
 * it differs. A count the stream set without naming its source is its usage's. */
static void adopt(struct opt_u64 *count, enum count_source *src, struct opt_u64 *beside,
		  bool known, uint64_t engine, enum count_source engine_src)
{
	if (count->set && *src == COUNT_NONE)
		*src = COUNT_USAGE;
	if (!known)
		return;
	if (!count->set) {
		count->set = true;
		count->v = engine;
		*src = engine_src;
	} else if (count->v != engine) {
		beside->set = true;
		beside->v = engine;
	}
}

void request__engine_counts(struct request *r)
{
	const struct attribution *a = r->attr;
	const struct attrib_wire *w = a ? &a->wire : NULL;

	if (a && a->ok && w->joined) {
		adopt(&r->input_tokens, &r->input_source, &r->engine_input, w->prompt_tokens >= 0,
		      (uint64_t)w->prompt_tokens, COUNT_ENGINE_WIRE);
		adopt(&r->cached_tokens, &r->cached_source, &r->engine_cached, w->cached_tokens >= 0,
		      (uint64_t)w->cached_tokens, COUNT_ENGINE_WIRE);
		adopt(&r->output_tokens, &r->output_source, &r->engine_output, w->output_steps > 0,
		      w->output_tokens, COUNT_ENGINE_WIRE);
	} else if (a && a->ok && a->by_sequence) {
		adopt(&r->input_tokens, &r->input_source, &r->engine_input, true,
		      (uint64_t)a->prompt_tokens + a->cached_tokens, COUNT_LLAMA_STEPS);
		adopt(&r->cached_tokens, &r->cached_source, &r->engine_cached, true,
		      a->cached_tokens, COUNT_LLAMA_STEPS);
		adopt(&r->output_tokens, &r->output_source, &r->engine_output, a->output_tokens > 0,
		      a->output_tokens, COUNT_LLAMA_STEPS);
	} else {
		adopt(&r->input_tokens, &r->input_source, &r->engine_input, false, 0, COUNT_NONE);
		adopt(&r->cached_tokens, &r->cached_source, &r->engine_cached, false, 0, COUNT_NONE);
		adopt(&r->output_tokens, &r->output_source, &r->engine_output, false, 0, COUNT_NONE);
	}
}
