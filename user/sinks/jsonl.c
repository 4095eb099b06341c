// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "llm/session.h"
#include "engine/attrib.h"
#include "sinks/jsonl.h"
#include "sinks/steps.h"

struct jsonl {
	struct outfile *out;
	bool gaps; /* --gaps: each gap's steps in the request record */
};

struct jsonl *jsonl__new(struct outfile *out, bool gaps)
{
	struct jsonl *j = calloc(1, sizeof(*j));

	if (j)
		*j = (struct jsonl){ out, gaps };
	return j;
}

void jsonl__free(struct jsonl *j)
{
	free(j);
}

static json_t *num_or_null(double v)
{
	return isnan(v) ? json_null() : json_real(round(v * 1000.0) / 1000.0);
}

static json_t *count_or_null(struct opt_u64 v)
{
	return v.set ? json_integer((json_int_t)v.v) : json_null();
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *ms(uint64_t ns)
{
	return json_real((double)ns / 1e6);
}

static json_t *ms_or_null(bool known, uint64_t ns)
{
	return known ? ms(ns) : json_null();
}

/* What an engine wire said of the request (engine/engine_wire.h). */
static json_t *engine_wire_json(const struct attrib_wire *w)
{
	json_t *o = json_object();

	json_object_set_new(o, "engine_requests", json_integer(w->engine_requests));
	json_object_set_new(o, "layout", str_or_null(w->layout));
	json_object_set_new(o, "times", json_string(w->events ? "events" : "messages"));
	json_object_set_new(o, "queued_ns", w->queued_ns ? json_integer((json_int_t)w->queued_ns)
							 : json_null());
	json_object_set_new(o, "scheduled_ns",
			    w->scheduled_ns ? json_integer((json_int_t)w->scheduled_ns) : json_null());
	json_object_set_new(o, "first_output_ns",
			    w->first_output_ns ? json_integer((json_int_t)w->first_output_ns)
					       : json_null());
	if (!w->events)
		json_object_set_new(o, "engine_ms", ms(w->engine_ns));
	/* PREEMPTED is an event: unknown without them */
	json_object_set_new(o, "preemptions", w->events ? json_integer(w->preemptions) : json_null());
	json_object_set_new(o, "preempted_ms", ms_or_null(w->events, w->preempted_ns));
	json_object_set_new(o, "prompt_tokens",
			    w->prompt_tokens >= 0 ? json_integer(w->prompt_tokens) : json_null());
	json_object_set_new(o, "cached_tokens",
			    w->cached_tokens >= 0 ? json_integer(w->cached_tokens) : json_null());
	json_object_set_new(o, "output_steps", json_integer(w->output_steps));
	json_object_set_new(o, "output_tokens", json_integer((json_int_t)w->output_tokens));
	json_object_set_new(o, "finish_reason", str_or_null(w->finish_reason));
	if (w->cuda) { /* CUDA steps split it too: theirs, and how far from the engine's */
		json_object_set_new(o, "cuda_queue_ms", ms(w->cuda_queue_ns));
		json_object_set_new(o, "cuda_prefill_ms", ms(w->cuda_prefill_ns));
		if (w->events) { /* the engine's minus CUDA's */
			json_object_set_new(o, "cuda_queue_apart_ms",
					    json_real(((double)w->queue_ns - (double)w->cuda_queue_ns) / 1e6));
			json_object_set_new(o, "cuda_prefill_apart_ms",
					    json_real(((double)w->prefill_ns - (double)w->cuda_prefill_ns) /
						      1e6));
		}
	}
	return o;
}

static json_t *attribution_json(const struct attribution *a, bool gaps)
{
	json_t *o = json_object(), *v;
	struct ttft_split sp;

	attribution__ttft_split(a, &sp);
	v = json_array();
	for (uint32_t i = 0; i < a->nengine_pids; i++)
		json_array_append_new(v, json_integer(a->engine_pids[i]));
	json_object_set_new(o, "engine_pids", v);
	json_object_set_new(o, "source", json_string(sp.source_name));
	json_object_set_new(o, "queue_ms", ms_or_null(sp.queue_apart, sp.queue_ns));
	if (sp.wire) {
		json_object_set_new(o, "frontend_ms", ms(sp.frontend_ns));
		json_object_set_new(o, "engine_queue_ms", ms_or_null(sp.engine_events,
								     sp.engine_queue_ns));
	}
	json_object_set_new(o, "queue_busy_ms", ms(sp.queue_busy_ns));
	json_object_set_new(o, "queue_idle_ms", ms(sp.queue_idle_ns));
	json_object_set_new(o, "prefill_ms", ms_or_null(sp.queue_apart, sp.prefill_ns));
	json_object_set_new(o, "prefill_steps", json_integer(sp.prefill_steps));
	json_object_set_new(o, "emit_ms", ms(sp.emit_ns));
	json_object_set_new(o, "prefill_start_ns", json_integer((json_int_t)a->prefill_start_ns));
	json_object_set_new(o, "decode_ms", ms(a->decode_ns));
	json_object_set_new(o, "host_ms", ms(a->host_ns));
	json_object_set_new(o, "interference_ms", ms(a->interference_ns));
	v = json_array();
	for (size_t i = 0; i < a->ninterfered_by; i++)
		json_array_append_new(v, json_integer((json_int_t)a->interfered_by[i]));
	json_object_set_new(o, "interfered_by", v);
	json_object_set_new(o, "steps", json_integer(a->steps));
	v = json_array();
	for (uint32_t bit = 1; bit <= EST_SEQUENCE; bit <<= 1) {
		if (a->estimated & bit)
			json_array_append_new(v, json_string(attribution__estimate_name(bit)));
	}
	json_object_set_new(o, "estimated", v);
	if (a->wire.joined)
		json_object_set_new(o, "engine_wire", engine_wire_json(&a->wire));
	if (a->by_sequence) {
		char hex[32];

		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)a->context);
		json_object_set_new(o, "context", json_string(hex));
		json_object_set_new(o, "sequence", json_integer(a->seq));
		/* what named it: the server's own timings, or the run's fit to the stream */
		json_object_set_new(o, "sequence_from",
				    json_string(a->by_timings ? "server_timings" : "fit"));
		json_object_set_new(o, "cached_tokens", json_integer(a->cached_tokens));
		json_object_set_new(o, "prompt_tokens_computed", json_integer(a->prompt_tokens));
		json_object_set_new(o, "prefill_chunks", json_integer(a->prefill_chunks));
		json_object_set_new(o, "context_shifts", json_integer(a->context_shifts));
		json_object_set_new(o, "shift_ms", ms(a->shift_ns));
		if (a->usage_mismatch)
			json_object_set_new(o, "usage_mismatch",
					    json_pack("{s:I, s:I}", "reported", (json_int_t)a->usage_reported,
						      "evaluated", (json_int_t)a->usage_evaluated));
		if (a->drafted)
			json_object_set_new(
				o, "speculative",
				json_pack("{s:I, s:I, s:I, s:f, s:I, s:o}", "verify_steps",
					  (json_int_t)a->verify_steps, "drafted", (json_int_t)a->drafted,
					  "accepted", (json_int_t)a->accepted, "acceptance",
					  (double)a->accepted / (double)a->drafted, "draft_steps",
					  (json_int_t)a->draft_steps, "draft_ms", ms(a->draft_ns)));
	}
	if (gaps) {
		v = json_array();
		for (size_t i = 0; i < a->ngaps; i++) {
			const struct attrib_gap *g = &a->gaps[i];
			json_t *go = json_object();

			json_object_set_new(go, "gap_ms", ms(g->gap_ns));
			json_object_set_new(go, "steps", json_integer(g->steps));
			json_object_set_new(go, "decode_ms", ms(g->decode_ns));
			json_object_set_new(go, "host_ms", ms(g->host_ns));
			json_object_set_new(go, "interference_ms", ms(g->interference_ns));
			json_object_set_new(go, "interfered", json_boolean(g->interfered));
			if (a->by_sequence) {
				json_object_set_new(go, "context_shift",
						    json_boolean(g->context_shift));
				json_object_set_new(go, "shift_ms", ms(g->shift_ns));
				if (g->verify) {
					json_object_set_new(go, "drafted", json_integer(g->drafted));
					json_object_set_new(go, "accepted", json_integer(g->accepted));
				}
			}
			json_object_set_new(go, "step_start_ns",
					    json_integer((json_int_t)g->producer_start_ns));
			json_object_set_new(go, "step_inferred", json_boolean(g->step_inferred));
			json_array_append_new(v, go);
		}
		json_object_set_new(o, "gaps", v);
	}
	return o;
}

/* The two runs an ambiguous request fits alike: each sequence and its context. */
static json_t *candidates_json(const struct attribution *a)
{
	json_t *v = json_array();

	for (size_t i = 0; i < 2; i++) {
		char hex[32];

		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)a->candidates[i].context);
		json_array_append_new(v, json_pack("{s:s, s:i}", "context", hex, "sequence",
						    a->candidates[i].seq));
	}
	return v;
}

static json_t *source_or_null(enum count_source s)
{
	const char *name = count_source__name(s);

	return name ? json_string(name) : json_null();
}

/* Where each of the record's token counts came from. */
static json_t *token_sources_json(const struct request *r, const struct request_metrics *m)
{
	enum count_source out = r->output_source;

	if (m->output_tokens.set && m->output_tokens_estimated)
		out = COUNT_TOKEN_EVENTS;
	return json_pack("{s:o, s:o, s:o}", "input_tokens", source_or_null(r->input_source),
			 "cached_tokens", source_or_null(r->cached_source), "output_tokens",
			 source_or_null(out));
}

/* The engine's own counts where the stream's said otherwise (only those that differ). */
static json_t *engine_tokens_json(const struct request *r)
{
	json_t *o = json_object();

	if (r->engine_input.set)
		json_object_set_new(o, "input_tokens", json_integer((json_int_t)r->engine_input.v));
	if (r->engine_cached.set)
		json_object_set_new(o, "cached_tokens", json_integer((json_int_t)r->engine_cached.v));
	if (r->engine_output.set)
		json_object_set_new(o, "output_tokens", json_integer((json_int_t)r->engine_output.v));
	return o;
}

/* The server's own figures for the request, as it stated them. */
static json_t *server_timings_json(const struct server_timings *t)
{
	json_t *o = json_object();

	json_object_set_new(o, "prompt_evaluated", count_or_null(t->evaluated));
	json_object_set_new(o, "prompt_cached", count_or_null(t->cached));
	json_object_set_new(o, "predicted", count_or_null(t->predicted));
	json_object_set_new(o, "prompt_ms", t->prompt_ns ? ms(t->prompt_ns) : json_null());
	json_object_set_new(o, "predicted_ms", t->predicted_ns ? ms(t->predicted_ns) : json_null());
	return o;
}

/* The judgement (llm/judge.h): who reads it, the stream against reading, its SLOs. */
static void judgement_json(json_t *o, const struct request *r, const struct request_metrics *m)
{
	json_object_set_new(o, "user_agent", str_or_null(r->user_agent));
	json_object_set_new(o, "consumer", json_string(consumer__name(m->consumer)));
	json_object_set_new(o, "consumer_evidence",
			    m->consumer_evidence ? json_string(consumer_evidence__name(m->consumer_evidence))
						: json_null());
	json_object_set_new(o, "tokens_per_s", num_or_null(m->tokens_per_s));
	json_object_set_new(o, "reading_headroom", num_or_null(m->reading_headroom));
	json_object_set_new(o, "slo_met", m->slo_met < 0 ? json_null() : json_boolean(m->slo_met));
}

static char *request_json(const struct request *r, const struct request_metrics *mp, bool gaps)
{
	const struct request_metrics m = *mp;
	json_t *o = json_object(), *itl = json_object();
	char *s;

	json_object_set_new(o, "type", json_string("request"));
	json_object_set_new(o, "id", json_integer((json_int_t)r->id));
	json_object_set_new(o, "pid", json_integer(r->pid));
	json_object_set_new(o, "comm", json_string(r->comm));
	json_object_set_new(o, "role", json_string(role__name(r->role)));
	json_object_set_new(o, "transport", str_or_null(r->transport));
	json_object_set_new(o, "local", str_or_null(r->local));
	json_object_set_new(o, "peer", str_or_null(r->peer));
	if (r->peer_pid) /* a Unix socket's other end: its process */
		json_object_set_new(o, "peer_pid", json_integer(r->peer_pid));
	/* the socket's network namespace, and its ends as the far side sees them where NAT
	 * changed the connection (a Service address) */
	json_object_set_new(o, "netns", r->netns ? json_integer(r->netns) : json_null());
	if (r->nat_peer[0])
		json_object_set_new(o, "nat", json_pack("{s:s,s:s}", "local", r->nat_local, "peer",
							 r->nat_peer));
	else
		json_object_set_new(o, "nat", json_null());
	/* its process's container and pod (OpenTelemetry's resource attribute names) */
	json_object_set_new(o, "container_id", str_or_null(r->container_id));
	json_object_set_new(o, "k8s_pod_uid", str_or_null(r->pod_uid));
	json_object_set_new(o, "k8s_pod_name", str_or_null(r->pod_name));
	json_object_set_new(o, "k8s_namespace_name", str_or_null(r->k8s_namespace));
	json_object_set_new(o, "api", json_string(api__name(r->api)));
	json_object_set_new(o, "model", str_or_null(request__model(r)));
	json_object_set_new(o, "response_model", str_or_null(r->response_model));
	json_object_set_new(o, "method", str_or_null(r->method));
	json_object_set_new(o, "path", str_or_null(r->path));
	json_object_set_new(o, "http_version", json_string(r->http_version == 2 ? "2" : "1.1"));
	json_object_set_new(o, "stream_id",
			    r->http_version == 2 ? json_integer(r->stream_id) : json_null());
	json_object_set_new(o, "headers_partial", json_boolean(r->headers_partial));
	json_object_set_new(o, "grpc_status",
			    r->grpc_status >= 0 ? json_integer(r->grpc_status) : json_null());
	json_object_set_new(o, "status", r->status ? json_integer(r->status) : json_null());
	json_object_set_new(o, "stream", r->stream < 0 ? json_null() : json_boolean(r->stream));
	json_object_set_new(o, "start_ns", json_integer((json_int_t)r->start_ns));
	json_object_set_new(o, "response_ns",
			    r->response_ns ? json_integer((json_int_t)r->response_ns) : json_null());
	json_object_set_new(o, "first_token_ns",
			    r->first_token_ns ? json_integer((json_int_t)r->first_token_ns) : json_null());
	json_object_set_new(o, "end_ns", r->end_ns ? json_integer((json_int_t)r->end_ns) : json_null());
	json_object_set_new(o, "ttft_ms", num_or_null(m.ttft_ms));
	json_object_set_new(o, "tpot_ms", num_or_null(m.tpot_ms));
	json_object_set_new(o, "e2e_ms", num_or_null(m.e2e_ms));
	json_object_set_new(o, "duration_ms",
			    r->end_ns && r->start_ns && !r->lossy
				    ? num_or_null((double)(r->end_ns - r->start_ns) / 1e6)
				    : json_null());
	json_object_set_new(itl, "p50", num_or_null(m.itl_p50_ms));
	json_object_set_new(itl, "p90", num_or_null(m.itl_p90_ms));
	json_object_set_new(itl, "p99", num_or_null(m.itl_p99_ms));
	json_object_set_new(itl, "max", num_or_null(m.itl_max_ms));
	json_object_set_new(o, "itl_ms", itl);
	json_object_set_new(o, "token_events", json_integer((json_int_t)r->token_events));
	json_object_set_new(o, "output_tokens", count_or_null(m.output_tokens));
	json_object_set_new(o, "output_tokens_estimated",
			    m.output_tokens.set ? json_boolean(m.output_tokens_estimated) : json_null());
	json_object_set_new(o, "input_tokens", count_or_null(r->input_tokens));
	json_object_set_new(o, "cached_tokens", count_or_null(r->cached_tokens));
	json_object_set_new(o, "token_sources", token_sources_json(r, &m));
	if (r->engine_input.set || r->engine_cached.set || r->engine_output.set)
		json_object_set_new(o, "engine_tokens", engine_tokens_json(r));
	if (r->timings.evaluated.set || r->timings.predicted.set)
		json_object_set_new(o, "server_timings", server_timings_json(&r->timings));
	json_object_set_new(o, "cache_hit", m.cache_hit < 0 ? json_null() : json_boolean(m.cache_hit));
	json_object_set_new(o, "cache_regime", json_string(cache_regime__name(m.cache)));
	json_object_set_new(o, "finish_reason", str_or_null(r->finish_reason));
	json_object_set_new(o, "response_id", str_or_null(r->response_id));
	json_object_set_new(o, "engine_request_id",
			    r->attr && r->attr->wire.joined ? json_string(r->attr->wire.engine_request_id)
							    : json_null());
	json_object_set_new(o, "complete", json_boolean(m.complete));
	json_object_set_new(o, "error", str_or_null(r->error));
	judgement_json(o, r, &m);
	if (r->role == ROLE_CLIENT) {
		json_object_set_new(o, "server_id",
				    r->server_id ? json_integer((json_int_t)r->server_id) : json_null());
		json_object_set_new(o, "upstream_ms",
				    r->upstream_set ? json_real((double)r->upstream_ns / 1e6) : json_null());
	}
	if (r->role == ROLE_SERVER) {
		bool ok = r->attr && r->attr->ok;

		json_object_set_new(o, "attribution", ok ? attribution_json(r->attr, gaps) : json_null());
		json_object_set_new(o, "attribution_error",
				    ok ? json_null()
				       : json_string(r->attr ? r->attr->error : "no engine steps were seen"));
		if (r->attr && r->attr->ambiguous)
			json_object_set_new(o, "attribution_candidates", candidates_json(r->attr));
	}
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	return s;
}

char *jsonl__request_json(const struct request *r, const struct request_metrics *m)
{
	return request_json(r, m, false);
}

/* One JSON Lines record, whole (outfile.h: a failed write is said once and counted); takes s.
 * A record that could not be built (out of memory) is counted as not written too. */
static void write_line(struct outfile *o, char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!s) {
		outfile__no_memory(o);
		return;
	}
	s[n] = '\n'; /* the NUL's place: the record is its bytes, newline included */
	outfile__record(o, s, n + 1, true);
	free(s);
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	struct jsonl *j = self;

	write_line(j->out, request_json(r, m, j->gaps));
}

static void on_step(void *self, const struct engine_step *s)
{
	struct jsonl *j = self;

	if (s->cuda || s->llama)
		write_line(j->out, steps__json(s));
}

/* An engine's scheduler stats, one step's, off its engine wire (engine/engine_wire.h). */
static void on_sched(void *self, const struct engine_sched *s)
{
	struct jsonl *j = self;
	json_t *o = json_object();
	char *line, type[64];

	snprintf(type, sizeof(type), "%s_step", s->wire); /* vllm_step */
	json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "pid", json_integer(s->pid));
	json_object_set_new(o, "comm", str_or_null(s->comm));
	json_object_set_new(o, "engine_index", json_integer(s->engine_index));
	json_object_set_new(o, "ts_ns", json_integer((json_int_t)s->ts));
	json_object_set_new(o, "step_counter", json_integer((json_int_t)s->step_counter));
	json_object_set_new(o, "running", json_integer((json_int_t)s->running));
	json_object_set_new(o, "waiting", json_integer((json_int_t)s->waiting));
	json_object_set_new(o, "kv_cache_usage",
			    isnan(s->kv_cache_usage) ? json_null() : json_real(s->kv_cache_usage));
	json_object_set_new(o, "prefix_cache_queries", json_integer((json_int_t)s->prefix_queries));
	json_object_set_new(o, "prefix_cache_hits", json_integer((json_int_t)s->prefix_hits));
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(o);
	write_line(j->out, line);
}

/* A client's chained calls (llm/session.h): what its wall time was made of. */
static void on_session(void *self, const struct session *s)
{
	struct jsonl *j = self;
	json_t *o = json_object(), *ids = json_array(), *by = json_object();
	struct session_times t;
	char *line;

	session__times(s, &t);
	json_object_set_new(o, "type", json_string("session"));
	json_object_set_new(o, "id", json_integer((json_int_t)s->id));
	json_object_set_new(o, "pid", json_integer(s->pid));
	json_object_set_new(o, "comm", json_string(s->comm));
	json_object_set_new(o, "role", json_string(role__name(s->role)));
	json_object_set_new(o, "client", json_string(s->client));
	json_object_set_new(o, "model", str_or_null(s->model));
	json_object_set_new(o, "consumer", json_string(consumer__name(s->consumer)));
	json_object_set_new(o, "requests", json_integer((json_int_t)s->ncalls));
	for (size_t i = 0; i < s->ncalls; i++)
		json_array_append_new(ids, json_integer((json_int_t)s->calls[i].id));
	json_object_set_new(o, "request_ids", ids);
	json_object_set_new(o, "start_ns", json_integer((json_int_t)s->calls[0].start_ns));
	json_object_set_new(o, "total_ms", json_real((double)t.total_ns / 1e6));
	json_object_set_new(o, "model_ms", json_real((double)t.model_ns / 1e6));
	json_object_set_new(o, "ttft_ms", json_real((double)t.ttft_ns / 1e6));
	json_object_set_new(o, "streaming_ms", json_real((double)t.streaming_ns / 1e6));
	json_object_set_new(o, "between_ms", json_real((double)t.between_ns / 1e6));
	json_object_set_new(o, "model_share",
			    t.total_ns ? json_real((double)t.model_ns / (double)t.total_ns) : json_null());
	json_object_set_new(o, "slowest", json_pack("{s:I,s:f}", "request_id",
						    (json_int_t)t.slowest->id, "duration_ms",
						    (double)(t.slowest->end_ns - t.slowest->start_ns) / 1e6));
	for (int c = 0; c < CHAIN__COUNT; c++)
		json_object_set_new(by, session_chain__name((enum session_chain)c),
				    json_integer((json_int_t)s->chained[c]));
	json_object_set_new(o, "chained_by", by);
	json_object_set_new(o, "ended", json_string(session_end__name(s->end)));
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	write_line(j->out, line);
}

const struct sink_ops jsonl_sink = { .name = "jsonl", .on_request = on_request, .on_step = on_step,
				     .on_sched = on_sched, .on_session = on_session };
