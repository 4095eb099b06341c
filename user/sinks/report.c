// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/stats.h"
#include "base/text.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "engine/attrib.h"
#include "engine/cuda_steps.h"
#include "stream/h2conn.h"
#include "sinks/html.h"
#include "sinks/metrics.h"
#include "sinks/perfetto.h"
#include "sinks/report.h"
#include "sinks/steps.h"
#include "sinks/top.h"

/* One summary line: requests of one group (llm/group.h). */
struct group {
	struct request_group key; /* first: llm/group.h keeps the table */
	uint64_t n, incomplete;
	struct sample ttft, ttft_hit, ttft_miss, ttft_cache_unknown, tpot, itl, e2e, out_tokens;
	/* server role, attributed requests */
	struct sample queue, queue_busy, queue_idle, prefill, emit, prefill_steps;
	struct sample gap_decode, gap_host, gap_interference;
	uint64_t not_attributed;
	uint64_t usage_mismatch; /* split from a run its usage did not agree with */
	uint64_t context_shifts, shifted; /* gaps with a context shift, requests with one */
	struct ttft_split *splits; /* the first TAIL_MAX attributed requests, for the tail */
	size_t nsplits, capsplits;
	struct gap_split *gsplits; /* the first TAIL_MAX gaps of attributed requests */
	size_t ngsplits, capgsplits;
};

#define TAIL_MAX 262144

struct ttft_split {
	uint64_t ttft, busy, idle, prefill, emit;
};

struct gap_split {
	uint64_t gap, interference, shift, decode, host;
};

struct report {
	FILE *lines;
	struct outfile *jsonl;
	bool gaps; /* --gaps: each gap's steps in the request record */
	const struct attrib *attr;
	struct metrics *metrics;
	struct perfetto *perfetto;
	struct html *html;
	struct top *top;
	struct request_groups groups; /* struct group */
	struct step_summary *steps;
};

struct report *report__new(FILE *lines, struct outfile *jsonl)
{
	struct report *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return NULL;
	rp->lines = lines;
	rp->jsonl = jsonl;
	request_groups__init(&rp->groups, sizeof(struct group));
	rp->steps = step_summary__new();
	if (!rp->steps) {
		free(rp);
		return NULL;
	}
	return rp;
}

void report__set_gaps(struct report *rp, bool gaps)
{
	rp->gaps = gaps;
}

void report__set_metrics(struct report *rp, struct metrics *m)
{
	rp->metrics = m;
}

void report__set_perfetto(struct report *rp, struct perfetto *pf)
{
	rp->perfetto = pf;
}

void report__set_html(struct report *rp, struct html *h)
{
	rp->html = h;
}

void report__set_top(struct report *rp, struct top *t)
{
	rp->top = t;
}

void report__set_attrib(struct report *rp, const struct attrib *a)
{
	rp->attr = a;
}

static void group_free(void *group)
{
	struct group *g = group;

	sample__free(&g->queue);
	sample__free(&g->queue_busy);
	sample__free(&g->queue_idle);
	sample__free(&g->prefill);
	sample__free(&g->emit);
	sample__free(&g->prefill_steps);
	sample__free(&g->gap_decode);
	sample__free(&g->gap_host);
	sample__free(&g->gap_interference);
	free(g->splits);
	free(g->gsplits);
	struct sample *all[] = { &g->ttft, &g->ttft_hit, &g->ttft_miss, &g->ttft_cache_unknown,
				 &g->tpot, &g->itl, &g->e2e, &g->out_tokens };

	for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
		sample__free(all[i]);
}

void report__free(struct report *rp)
{
	if (!rp)
		return;
	step_summary__free(rp->steps);
	request_groups__free(&rp->groups, group_free);
	free(rp);
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

static char *request_json(const struct request *r, const struct request_metrics *mp, bool gaps);

static json_t *ms(uint64_t ns)
{
	return json_real((double)ns / 1e6);
}

static json_t *attribution_json(const struct attribution *a, bool gaps)
{
	json_t *o = json_object(), *v;

	v = json_array();
	for (uint32_t i = 0; i < a->nengine_pids; i++)
		json_array_append_new(v, json_integer(a->engine_pids[i]));
	json_object_set_new(o, "engine_pids", v);
	json_object_set_new(o, "queue_ms", ms(a->queue_ns));
	json_object_set_new(o, "queue_busy_ms", ms(a->queue_busy_ns));
	json_object_set_new(o, "queue_idle_ms", ms(a->queue_idle_ns));
	json_object_set_new(o, "prefill_ms", ms(a->prefill_ns));
	json_object_set_new(o, "prefill_steps", json_integer(a->prefill_steps));
	json_object_set_new(o, "emit_ms", ms(a->emit_ns));
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
	if (a->by_sequence) {
		char hex[32];

		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)a->context);
		json_object_set_new(o, "context", json_string(hex));
		json_object_set_new(o, "sequence", json_integer(a->seq));
		json_object_set_new(o, "cached_tokens", json_integer(a->cached_tokens));
		json_object_set_new(o, "prompt_tokens_computed", json_integer(a->prompt_tokens));
		json_object_set_new(o, "prefill_chunks", json_integer(a->prefill_chunks));
		json_object_set_new(o, "context_shifts", json_integer(a->context_shifts));
		json_object_set_new(o, "shift_ms", ms(a->shift_ns));
		if (a->usage_mismatch)
			json_object_set_new(o, "usage_mismatch",
					    json_pack("{s:I, s:I}", "reported", (json_int_t)a->usage_reported,
						      "evaluated", (json_int_t)a->usage_evaluated));
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
			}
			json_object_set_new(go, "step_start_ns",
					    json_integer((json_int_t)g->producer_start_ns));
			json_array_append_new(v, go);
		}
		json_object_set_new(o, "gaps", v);
	}
	return o;
}

char *report__request_json(const struct request *r, const struct request_metrics *mp)
{
	return request_json(r, mp, false);
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
	json_object_set_new(o, "cache_hit", m.cache_hit < 0 ? json_null() : json_boolean(m.cache_hit));
	json_object_set_new(o, "finish_reason", str_or_null(r->finish_reason));
	json_object_set_new(o, "complete", json_boolean(m.complete));
	json_object_set_new(o, "error", str_or_null(r->error));
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
	}
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	return s;
}

static struct group *group_of(struct report *rp, const struct request *r)
{
	struct group *g = request_groups__of(&rp->groups, r);

	if (g)
		request_group__add_process(&g->key, r->pid);
	return g;
}

void report__process_exit(void *ctx, uint32_t pid)
{
	struct report *rp = ctx;

	request_groups__process_exit(&rp->groups, pid);
	if (rp->top)
		top__process_exit(rp->top, pid);
}

static void fmt_ms(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1fms", v);
}

#define SAFE_MAX TEXT_SAFE_MAX(256)

static void print_line(FILE *f, const struct request *r, const struct request_metrics *m)
{
	char ttft[32], tpot[32], e2e[32], p99[32];
	char comm[TS_COMM_LEN * 8], model[SAFE_MAX], path[SAFE_MAX], error[SAFE_MAX];

	fmt_ms(ttft, sizeof(ttft), m->ttft_ms);
	fmt_ms(tpot, sizeof(tpot), m->tpot_ms);
	fmt_ms(e2e, sizeof(e2e), m->e2e_ms);
	fmt_ms(p99, sizeof(p99), m->itl_p99_ms);
	fprintf(f, "%-6s %s[%u] %s %s %s status=%d ttft=%s tpot=%s itl_p99=%s e2e=%s",
		role__name(r->role), text__safe(comm, sizeof(comm), r->comm), r->pid,
		api__name(r->api),
		*request__model(r) ? text__safe(model, sizeof(model), request__model(r)) : "-",
		text__safe(path, sizeof(path), r->path), r->status, ttft, tpot, p99, e2e);
	if (r->peer[0])
		fprintf(f, " peer=%s", r->peer);
	if (m->output_tokens.set)
		fprintf(f, " out=%llu%s", (unsigned long long)m->output_tokens.v,
			m->output_tokens_estimated ? "~" : "");
	if (r->input_tokens.set)
		fprintf(f, " in=%llu", (unsigned long long)r->input_tokens.v);
	if (r->cached_tokens.set)
		fprintf(f, " cached=%llu", (unsigned long long)r->cached_tokens.v);
	if (!m->complete)
		fprintf(f, " INCOMPLETE");
	if (r->error[0])
		fprintf(f, " error=%s", text__safe(error, sizeof(error), r->error));
	if (r->attr && r->attr->ok)
		fprintf(f, " [queue=%.1f (busy %.1f) prefill=%.1f/%u emit=%.1f | gaps: decode=%.1f "
			   "host=%.1f interference=%.1f]",
			r->attr->queue_ns / 1e6, r->attr->queue_busy_ns / 1e6, r->attr->prefill_ns / 1e6,
			r->attr->prefill_steps, r->attr->emit_ns / 1e6, r->attr->decode_ns / 1e6,
			r->attr->host_ns / 1e6, r->attr->interference_ns / 1e6);
	fputc('\n', f);
	fflush(f);
}

static void add_attribution(struct group *g, const struct request *r)
{
	const struct attribution *a = r->attr;

	if (!a || !a->ok) {
		g->not_attributed++;
		return;
	}
	g->usage_mismatch += a->usage_mismatch;
	g->context_shifts += a->context_shifts;
	g->shifted += a->context_shifts > 0;
	sample__add(&g->queue, a->queue_ns / 1e6);
	sample__add(&g->queue_busy, a->queue_busy_ns / 1e6);
	sample__add(&g->queue_idle, a->queue_idle_ns / 1e6);
	sample__add(&g->prefill, a->prefill_ns / 1e6);
	sample__add(&g->emit, a->emit_ns / 1e6);
	sample__add(&g->prefill_steps, a->prefill_steps);
	if (g->nsplits < TAIL_MAX &&
	    array__reserve((void **)&g->splits, &g->capsplits, g->nsplits + 1, sizeof(*g->splits)))
		g->splits[g->nsplits++] = (struct ttft_split){
			a->queue_ns + a->prefill_ns + a->emit_ns, a->queue_busy_ns, a->queue_idle_ns,
			a->prefill_ns, a->emit_ns,
		};
	for (size_t i = 0; i < a->ngaps; i++) {
		const struct attrib_gap *gp = &a->gaps[i];

		sample__add(&g->gap_decode, gp->decode_ns / 1e6);
		sample__add(&g->gap_host, gp->host_ns / 1e6);
		sample__add(&g->gap_interference, gp->interference_ns / 1e6);
		if (g->ngsplits < TAIL_MAX &&
		    array__reserve((void **)&g->gsplits, &g->capgsplits, g->ngsplits + 1,
				   sizeof(*g->gsplits)))
			g->gsplits[g->ngsplits++] = (struct gap_split){
				gp->gap_ns, gp->interference_ns, gp->shift_ns,
				gp->decode_ns - gp->interference_ns -
					(gp->shift_ns < gp->decode_ns - gp->interference_ns
						 ? gp->shift_ns
						 : gp->decode_ns - gp->interference_ns),
				gp->host_ns,
			};
	}
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

void report__request(void *ctx, const struct request *r, const struct request_metrics *mp)
{
	const struct request_metrics m = *mp;
	struct report *rp = ctx;
	struct group *g;

	if (rp->lines)
		print_line(rp->lines, r, &m);
	if (rp->metrics)
		metrics__request(rp->metrics, r, &m);
	if (rp->perfetto)
		perfetto__request(rp->perfetto, r, &m);
	if (rp->html)
		html__request(rp->html, r, &m);
	if (rp->top)
		top__request(rp->top, r, &m);
	if (rp->jsonl) {
		write_line(rp->jsonl, request_json(r, &m, rp->gaps));
	}
	g = group_of(rp, r);
	if (!g)
		return;
	g->n++;
	if (!m.complete)
		g->incomplete++;
	if (!isnan(m.ttft_ms)) {
		sample__add(&g->ttft, m.ttft_ms);
		sample__add(m.cache_hit > 0 ? &g->ttft_hit
			    : m.cache_hit == 0 ? &g->ttft_miss : &g->ttft_cache_unknown, m.ttft_ms);
	}
	if (!isnan(m.tpot_ms))
		sample__add(&g->tpot, m.tpot_ms);
	if (!isnan(m.e2e_ms))
		sample__add(&g->e2e, m.e2e_ms);
	if (!r->lossy) {
		for (uint64_t i = 0; i + 1 < r->token_events; i++)
			sample__add(&g->itl, (double)r->gaps_ns[i] / 1e6);
	}
	if (m.output_tokens.set)
		sample__add(&g->out_tokens, (double)m.output_tokens.v);
	if (r->role == ROLE_SERVER)
		add_attribution(g, r);
}

void report__step(void *ctx, const struct engine_step *s)
{
	struct report *rp = ctx;

	if (rp->metrics)
		metrics__step(rp->metrics, s);
	if (rp->jsonl && (s->cuda || s->llama))
		write_line(rp->jsonl, steps__json(s));
	if (rp->perfetto)
		perfetto__step(rp->perfetto, s);
	if (rp->html)
		html__step(rp->html, s);
	if (rp->top)
		top__step(rp->top, s);
	step_summary__add(rp->steps, s);
}

static int by_ttft(const void *x, const void *y)
{
	const struct ttft_split *a = x, *b = y;

	return a->ttft < b->ttft ? -1 : a->ttft > b->ttft;
}

static int by_gap(const void *x, const void *y)
{
	const struct gap_split *a = x, *b = y;

	return a->gap < b->gap ? -1 : a->gap > b->gap;
}

static double pct_of(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Where the time of the slowest tenth went: the requests (and gaps) above the p90. */
static void print_tail(FILE *out, struct group *g)
{
	if (g->nsplits) {
		size_t n = g->nsplits, from = (size_t)(n * 0.9);
		struct ttft_split sum = { 0 };

		qsort(g->splits, n, sizeof(*g->splits), by_ttft);
		for (size_t i = from; i < n; i++) {
			sum.ttft += g->splits[i].ttft;
			sum.busy += g->splits[i].busy;
			sum.idle += g->splits[i].idle;
			sum.prefill += g->splits[i].prefill;
			sum.emit += g->splits[i].emit;
		}
		fprintf(out, "    TTFT p99 %.2f ms: %.0f%% queued behind engine work, %.0f%% queued idle, "
			     "%.0f%% prefill, %.0f%% emit (the %zu requests above p90)\n",
			g->splits[(size_t)((n - 1) * 0.99)].ttft / 1e6, pct_of(sum.busy, sum.ttft),
			pct_of(sum.idle, sum.ttft), pct_of(sum.prefill, sum.ttft),
			pct_of(sum.emit, sum.ttft), n - from);
	}
	if (g->ngsplits) {
		size_t n = g->ngsplits, from = (size_t)(n * 0.9);
		struct gap_split sum = { 0 };

		qsort(g->gsplits, n, sizeof(*g->gsplits), by_gap);
		for (size_t i = from; i < n; i++) {
			sum.gap += g->gsplits[i].gap;
			sum.interference += g->gsplits[i].interference;
			sum.shift += g->gsplits[i].shift;
			sum.decode += g->gsplits[i].decode;
			sum.host += g->gsplits[i].host;
		}
		if (sum.shift) /* a share only where there was one: most engines never shift */
			fprintf(out, "    token gaps above p90: %.0f%% prefill interference, %.0f%% "
				     "context shift, %.0f%% decode, %.0f%% host (%zu gaps)\n",
				pct_of(sum.interference, sum.gap), pct_of(sum.shift, sum.gap),
				pct_of(sum.decode, sum.gap), pct_of(sum.host, sum.gap), n - from);
		else
			fprintf(out, "    token gaps above p90: %.0f%% prefill interference, %.0f%% "
				     "decode, %.0f%% host (%zu gaps)\n",
				pct_of(sum.interference, sum.gap), pct_of(sum.decode, sum.gap),
				pct_of(sum.host, sum.gap), n - from);
	}
}

/* A server group's TTFT and gap components, and the tail in words. */
/* Under a group: the HTTP/2 streams its processes opened past the per-connection cap, which
 * no group's figures hold (their requests were not read). */
static void print_untracked(FILE *out, const struct group *g, const struct health *h)
{
	for (size_t i = 0; i < h->h2.nuntracked_by; i++) {
		const struct h2_untracked *u = &h->h2.untracked_by[i];

		if (u->role == (int)g->key.role && !strcmp(u->comm, g->key.comm))
			fprintf(out, "    untracked      %llu HTTP/2 streams of this command's %s "
				     "connections, not in these figures (past %d open on one "
				     "connection)\n",
				(unsigned long long)u->n, role__name(g->key.role), H2_STREAMS_MAX);
	}
}

static void print_attribution(FILE *out, struct group *g)
{
	sample__print(out, "queue_ms", &g->queue);
	sample__print(out, "queue_busy_ms", &g->queue_busy);
	sample__print(out, "queue_idle_ms", &g->queue_idle);
	sample__print(out, "prefill_ms", &g->prefill);
	sample__print(out, "prefill_steps", &g->prefill_steps);
	sample__print(out, "emit_ms", &g->emit);
	sample__print(out, "gap_decode_ms", &g->gap_decode);
	sample__print(out, "gap_host_ms", &g->gap_host);
	sample__print(out, "gap_interf_ms", &g->gap_interference);
	print_tail(out, g);
	if (g->not_attributed)
		fprintf(out, "    not attributed: %llu (their records say why)\n",
			(unsigned long long)g->not_attributed);
	if (g->usage_mismatch)
		fprintf(out, "    usage mismatch: %llu (split from the engine's own prompt; the "
			     "server's usage counted another length: usage_mismatch in the records)\n",
			(unsigned long long)g->usage_mismatch);
	if (g->context_shifts)
		fprintf(out, "    context shifts: %llu in %llu requests (the sequence's positions went "
			     "back mid-stream: context_shift in the records' gaps)\n",
			(unsigned long long)g->context_shifts, (unsigned long long)g->shifted);
}

static void print_engine(void *ctx, const struct attrib_engine_stats *e)
{
	FILE *out = ctx;
	double span = (double)(e->last_ns - e->first_ns) / 1e9;

	fprintf(out, "engine pid%s", e->npids > 1 ? "s" : "");
	for (uint32_t i = 0; i < e->npids; i++)
		fprintf(out, "%c%u", i ? ',' : ' ', e->pids[i]);
	fprintf(out, ": steps=%llu (prefill %llu, decode %llu) steps/s=%.1f busy=%.0f%%%s\n",
		(unsigned long long)e->steps, (unsigned long long)e->prefill_steps,
		(unsigned long long)e->decode_steps, span > 0 ? (double)e->steps / span : 0.0,
		span > 0 ? 100.0 * (double)e->busy_ns / 1e9 / span : 0.0,
		e->chunked ? " chunked_prefill" : "");
}

/* The summary's http/2: line, when any HTTP/2 connection was seen. */
static void summary_http2(FILE *out, const struct health *h)
{
	if (!h->h2.connections)
		return;
	fprintf(out, "http/2: connections=%llu joined=%llu streams=%llu max_per_connection=%llu "
		     "max_concurrent=%llu headers_partial=%llu unseen_start=%llu untracked=%llu "
		     "reset=%llu goaway=%llu frame_errors=%llu hpack_errors=%llu\n",
		(unsigned long long)h->h2.connections, (unsigned long long)h->h2.joined,
		(unsigned long long)h->h2.streams,
		(unsigned long long)h->h2.max_streams_per_conn,
		(unsigned long long)h->h2.max_concurrent,
		(unsigned long long)h->h2.headers_partial,
		(unsigned long long)h->h2.streams_unseen_start,
		(unsigned long long)h->h2.streams_untracked,
		(unsigned long long)h->h2.reset_streams, (unsigned long long)h->h2.goaway,
		(unsigned long long)h->h2.frame_errors, (unsigned long long)h->h2.hpack_errors);
}

/* What the capture could not see or keep, said as warnings after the counters. */
static void print_capture_warnings(FILE *out, const struct health *h)
{
	if (h->bpf[TS_CNT_SEQ_UNLOCKED]) /* the legacy build's lock, waited for too long */
		fprintf(out, "WARNING: %llu call%s numbered %s pieces without the stream's lock "
			     "(Linux before 5.12): they may share numbers, and their streams read "
			     "out of order\n",
			(unsigned long long)h->bpf[TS_CNT_SEQ_UNLOCKED],
			h->bpf[TS_CNT_SEQ_UNLOCKED] == 1 ? "" : "s",
			h->bpf[TS_CNT_SEQ_UNLOCKED] == 1 ? "its" : "their");
	if (h->bpf[TS_CNT_PROBES_OFF])
		fprintf(out, "WARNING: %llu probe%s could not be attached: calls through %s were not "
			     "seen (tracing was partial)\n",
			(unsigned long long)h->bpf[TS_CNT_PROBES_OFF],
			h->bpf[TS_CNT_PROBES_OFF] == 1 ? "" : "s",
			h->bpf[TS_CNT_PROBES_OFF] == 1 ? "it" : "them");
	if (h->recording_errors)
		fprintf(out, "WARNING: %llu records could not be written to the recording\n",
			(unsigned long long)h->recording_errors);
	if (h->bpf[TS_CNT_DROPS] || h->lost_pieces || h->bpf[TS_CNT_TRUNCATED] || h->no_memory)
		fprintf(out, "WARNING: capture lost data; affected requests are marked incomplete "
			     "(raise -b to enlarge the ring buffer)\n");
}

void report__summary(struct report *rp, FILE *out, const struct health *h)
{
	fprintf(out, "\n=== tokenscope summary ===\n");
	if (!rp->groups.n && !step_summary__any(rp->steps))
		fprintf(out, "no LLM API requests or engine steps seen\n");
	for (size_t i = 0; i < rp->groups.n; i++) {
		struct group *g = rp->groups.v[i];
		const struct request_group *k = &g->key;
		char comm[TS_COMM_LEN * 8], model[SAFE_MAX], who[32];

		request_group__who(k, who, sizeof(who));
		fprintf(out, "%s[%s] %s %s model=%s requests=%llu incomplete=%llu\n",
			text__safe(comm, sizeof(comm), k->comm), who, role__name(k->role),
			api__name(k->api), k->model[0] ? text__safe(model, sizeof(model), k->model) : "-",
			(unsigned long long)g->n, (unsigned long long)g->incomplete);
		sample__print(out, "ttft_ms", &g->ttft);
		sample__print(out, "ttft_ms hit", &g->ttft_hit);
		sample__print(out, "ttft_ms miss", &g->ttft_miss);
		sample__print(out, "ttft_ms cache?", &g->ttft_cache_unknown);
		sample__print(out, "tpot_ms", &g->tpot);
		sample__print(out, "itl_ms", &g->itl);
		sample__print(out, "e2e_ms", &g->e2e);
		sample__print(out, "output_tokens", &g->out_tokens);
		print_untracked(out, g, h);
		if (k->role == ROLE_SERVER)
			print_attribution(out, g);
	}
	if (rp->attr)
		attrib__engines(rp->attr, print_engine, out);
	step_summary__print(rp->steps, out);
	if (h->gpu_marks)
		fprintf(out, "gpu: marks=%llu launches=%llu nested_deduped=%llu captured=%llu "
			     "steps=%llu unobserved=%llu drops=%llu streams_over_limit=%llu\n",
			(unsigned long long)h->gpu_marks, (unsigned long long)h->bpf[TS_CNT_GPU_LAUNCHES],
			(unsigned long long)h->bpf[TS_CNT_GPU_NESTED],
			(unsigned long long)h->bpf[TS_CNT_GPU_CAPTURED], (unsigned long long)h->gpu_steps,
			(unsigned long long)h->gpu_unobserved, (unsigned long long)h->bpf[TS_CNT_GPU_DROPS],
			(unsigned long long)h->bpf[TS_CNT_GPU_NO_SLOT]);
	if (h->bpf[TS_CNT_GPU_RUNTIME_UNKNOWN]) /* rare: said only when it happened */
		fprintf(out, "gpu: runtime_unknown=%llu (runtime calls whose code could not be "
			     "located: their driver calls may have counted twice)\n",
			(unsigned long long)h->bpf[TS_CNT_GPU_RUNTIME_UNKNOWN]);
	if (h->llama_steps || h->bpf[TS_CNT_LLAMA_DROPS])
		fprintf(out, "llama.cpp: steps=%llu failed=%llu nested_deduped=%llu drops=%llu\n",
			(unsigned long long)h->llama_steps, (unsigned long long)h->failed_steps,
			(unsigned long long)h->bpf[TS_CNT_LLAMA_NESTED],
			(unsigned long long)h->bpf[TS_CNT_LLAMA_DROPS]);
	fprintf(out,
		"capture: events=%llu bytes=%llu drops=%llu (%llu bytes) lost_pieces=%llu "
		"truncated_calls=%llu (%llu bytes) read_faults=%llu other_drops=%llu stale_calls=%llu "
		"bad_records=%llu no_memory=%llu aged_out=%llu\n",
		(unsigned long long)h->events, (unsigned long long)h->bytes,
		(unsigned long long)h->bpf[TS_CNT_DROPS], (unsigned long long)h->bpf[TS_CNT_DROP_BYTES],
		(unsigned long long)h->lost_pieces, (unsigned long long)h->bpf[TS_CNT_TRUNCATED],
		(unsigned long long)h->bpf[TS_CNT_TRUNCATED_BYTES],
		(unsigned long long)h->bpf[TS_CNT_READ_FAULTS],
		(unsigned long long)h->bpf[TS_CNT_OTHER_DROPS],
		(unsigned long long)h->bpf[TS_CNT_STALE_CALLS], (unsigned long long)h->bad_events,
		(unsigned long long)h->no_memory, (unsigned long long)h->streams_aged_out);
	fprintf(out,
		"streams: %llu (http/1.1 %llu, http/2 %llu, unsupported: non-http %llu; malformed %llu, "
		"unsupported encodings %llu, decode budget exceeded %llu) requests: %llu llm (%llu "
		"incomplete), %llu other http, %llu unpaired responses\n",
		(unsigned long long)h->streams, (unsigned long long)h->streams_http1,
		(unsigned long long)h->streams_http2, (unsigned long long)h->streams_other,
		(unsigned long long)h->streams_malformed, (unsigned long long)h->unsupported_encodings,
		(unsigned long long)h->decode_budget_exceeded, (unsigned long long)h->requests, (unsigned long long)h->requests_incomplete,
		(unsigned long long)h->other_http, (unsigned long long)h->unpaired_responses);
	summary_http2(out, h);
	if (h->bpf[TS_CNT_SOCK_TLS] || h->bpf[TS_CNT_SOCK_IGNORED] || h->sock_not_captured ||
	    h->bpf[TS_CNT_SOCK_PEEKS] || h->bpf[TS_CNT_SOCK_IO_URING])
		fprintf(out, "tcp: tls_sockets=%llu ignored_sockets=%llu peeks=%llu sendfile=%llu "
			     "splice=%llu io_uring=%llu not_captured=%llu\n",
			(unsigned long long)h->bpf[TS_CNT_SOCK_TLS],
			(unsigned long long)h->bpf[TS_CNT_SOCK_IGNORED],
			(unsigned long long)h->bpf[TS_CNT_SOCK_PEEKS],
			(unsigned long long)h->bpf[TS_CNT_SOCK_SENDFILE],
			(unsigned long long)h->bpf[TS_CNT_SOCK_SPLICE],
			(unsigned long long)h->bpf[TS_CNT_SOCK_IO_URING],
			(unsigned long long)h->sock_not_captured);
	print_capture_warnings(out, h);
	fflush(out);
}
