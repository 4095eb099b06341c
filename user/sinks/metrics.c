// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Prometheus metrics (metrics.h; families in docs/metrics-export.md). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "llm/session.h"
#include "engine/attrib.h"
#include "engine/cuda_steps.h"
#include "sinks/metrics.h"

#define MAX_LABELS 13
#define EXPO_MAX (64u << 20) /* an exposition larger than this is cut (and fails the render) */
/* What the series may cost, all families together, in the exposition's bytes (an upper bound
 * per series, counted when it is made): past it new label sets fold into "other", so that any
 * number of model names keeps /metrics whole, well under EXPO_MAX, the "other" series
 * included (there is one per process, role and the like, not per model). */
#define EXPO_BUDGET (32u << 20)

#define N(a) (sizeof(a) / sizeof(*(a)))

#include "sinks/metrics_families.h"

struct series {
	char *values[MAX_LABELS];
	uint64_t *counts; /* per bucket, not cumulative; [nbounds] is the +Inf overflow */
	double sum;
	uint64_t count;
	struct series *next;
};

struct family {
	struct series *head, **tail;
	size_t n;
};

struct metrics {
	size_t max_series;
	size_t bytes;	 /* what the series made so far cost at most (series_cost) */
	uint64_t folded; /* samples put in gen_ai_request_model="other", or dropped */
	bool said;	 /* the first fold was said on stderr */
	const char *file; /* --metrics-file: written at the end (NULL: none) */
	struct family f[F__COUNT];
	/* an engine wire's scheduler, per process and engine index: the latest step's figures,
	 * and the prefix cache's per-step counts summed */
	struct sched_gauges {
		const char *wire; /* engine_wire_ops.name */
		uint32_t pid;
		char comm[TS_COMM_LEN];
		uint32_t engine;
		uint64_t running, waiting, steps, prefix_queries, prefix_hits;
		double kv_cache_usage; /* NAN: never sent */
	} sched[ENGINE_SCHED_MAX];
	size_t nsched;
	uint64_t sched_dropped; /* engines past ENGINE_SCHED_MAX: not shown */
};

struct metrics *metrics__new(size_t max_series, const char *file)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->file = file;
	m->max_series = max_series ? max_series : METRICS_MAX_SERIES_DEFAULT;
	for (size_t i = 0; i < F__COUNT; i++)
		m->f[i].tail = &m->f[i].head;
	return m;
}

static void series_free(struct series *s, size_t nlabels)
{
	for (size_t i = 0; i < nlabels; i++)
		free(s->values[i]);
	free(s->counts);
	free(s);
}

void metrics__free(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < F__COUNT; i++) {
		while (m->f[i].head) {
			struct series *s = m->f[i].head;

			m->f[i].head = s->next;
			series_free(s, defs[i].nlabels);
		}
	}
	free(m);
}

static struct series *find(struct family *f, const struct family_def *d, const char *const *v)
{
	for (struct series *s = f->head; s; s = s->next) {
		size_t i;

		for (i = 0; i < d->nlabels && !strcmp(s->values[i], v[i]); i++)
			;
		if (i == d->nlabels)
			return s;
	}
	return NULL;
}

static struct series *add(struct family *f, const struct family_def *d, const char *const *v)
{
	struct series *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->counts = calloc(d->nbounds + 1, sizeof(*s->counts));
	for (size_t i = 0; i < d->nlabels; i++)
		s->values[i] = strdup(v[i]);
	for (size_t i = 0; i < d->nlabels; i++) {
		if (!s->values[i] || !s->counts) {
			series_free(s, d->nlabels);
			return NULL;
		}
	}
	*f->tail = s;
	f->tail = &s->next;
	f->n++;
	return s;
}

/* The most a series of these label values adds to the exposition: each of its lines (a
 * bucket each, +Inf, _sum and _count; a counter's one) holds the name and a suffix, every
 * label escaped at worst (each byte two), an le bound and a value. */
static size_t series_cost(const struct family_def *d, const char *const *v)
{
	size_t line = strlen(d->name) + 64;

	for (size_t i = 0; i < d->nlabels; i++)
		line += strlen(label_names[d->labels[i]]) + 2 * strlen(v[i]) + 4;
	return line * (d->histogram ? d->nbounds + 3 : 1);
}

/* The series of these label values; past max_series in the family or EXPO_BUDGET in all,
 * the one whose models (and pod and container, where set) are "other" (NULL, counted, when the family has no model label or
 * memory ran out). Both models fold: a response's model follows its request's, and a folded
 * series that kept it would grow with every new name as much as an unfolded one. */
static struct series *series_of(struct metrics *m, enum fam_id id, const char **v)
{
	const struct family_def *d = &defs[id];
	struct family *f = &m->f[id];
	struct series *s = find(f, d, v);
	size_t cost;
	bool model = false;

	if (s)
		return s;
	cost = series_cost(d, v); /* a new series: what it will cost */
	if (f->n < m->max_series && m->bytes + cost <= EXPO_BUDGET) {
		s = add(f, d, v);
		m->bytes += s ? cost : 0;
		return s;
	}
	m->folded++;
	if (!m->said) {
		m->said = true;
		fprintf(stderr, "tokenscope: metrics: more label sets than --metrics-max-series (%zu "
				"a family) or %u MiB of exposition allow: new models are counted as "
				"gen_ai_request_model=\"other\" (tokenscope_metrics_series_dropped_total)\n",
			m->max_series, EXPO_BUDGET >> 20);
	}
	for (size_t i = 0; i < d->nlabels; i++) {
		if (d->labels[i] == L_REQUEST_MODEL || d->labels[i] == L_RESPONSE_MODEL) {
			v[i] = "other";
			model = true;
		}
		/* pods and containers come and go: they fold too */
		if ((d->labels[i] == L_K8S_POD || d->labels[i] == L_CONTAINER_ID) && v[i][0])
			v[i] = "other";
	}
	if (!model)
		return NULL;
	s = find(f, d, v);
	if (!s && (s = add(f, d, v)))
		m->bytes += series_cost(d, v);
	return s;
}

/* The family's label values in its order. */
static void in_order(const struct family_def *d, const struct label_values *lv,
		     const char *v[MAX_LABELS])
{
	for (size_t i = 0; i < d->nlabels; i++)
		v[i] = lv->v[d->labels[i]] ? lv->v[d->labels[i]] : "";
}

static void observe(struct metrics *m, enum fam_id id, const struct label_values *lv, double x)
{
	const struct family_def *d = &defs[id];
	const char *v[MAX_LABELS];
	struct series *s;
	size_t b;

	if (isnan(x) || x < 0)
		return;
	in_order(d, lv, v);
	s = series_of(m, id, v);
	if (!s)
		return;
	for (b = 0; b < d->nbounds && x > d->bounds[b]; b++)
		;
	s->counts[b]++;
	s->sum += d->histogram ? x : 0;
	s->count++;
}

static void count(struct metrics *m, enum fam_id id, const struct label_values *lv, uint64_t n)
{
	const char *v[MAX_LABELS];
	struct series *s;

	in_order(&defs[id], lv, v);
	s = series_of(m, id, v);

	if (s) {
		s->sum += (double)n;
		s->count += n;
	}
}

/* ---- label values of a request ---- */

/* "1.2.3.4:80" or "[::1]:80" -> address and port; "unix:PATH#INODE" -> the path, no port
 * (the inode names one connection: no label) */
static void split_addr(const char *a, char *host, size_t hn, char *port, size_t pn)
{
	const char *colon = strrchr(a, ':');

	host[0] = port[0] = 0;
	if (!strncmp(a, "unix:", 5)) {
		const char *hash = strrchr(a, '#');

		snprintf(host, hn, "%.*s", (int)((hash ? hash : a + strlen(a)) - a - 5), a + 5);
		return;
	}
	if (!colon)
		return;
	if (a[0] == '[' && colon > a + 1 && colon[-1] == ']')
		snprintf(host, hn, "%.*s", (int)(colon - a - 2), a + 1);
	else
		snprintf(host, hn, "%.*s", (int)(colon - a), a);
	snprintf(port, pn, "%s", colon + 1);
}

/* The part of an error that names its type: all of it, but for a gRPC error's message. */
static size_t error_type_len(const char *error)
{
	const char *msg = strstr(error, ": ");

	return msg ? (size_t)(msg - error) : strlen(error);
}

static const char *role_name(const struct request *r)
{
	return r->role == ROLE_SERVER ? "server" : "client";
}

/* A request's label values; host, port and error hold those the values point at. */
struct req_labels {
	char host[REQ_ADDR_MAX], port[8], error[REQ_ERROR_MAX + 8];
	struct label_values lv;
};

static void request_labels(struct req_labels *l, const struct request *r,
			   const struct request_metrics *rm)
{
	const char **v = l->lv.v;

	split_addr(r->role == ROLE_CLIENT ? r->peer : r->local, l->host, sizeof(l->host), l->port,
		   sizeof(l->port));
	if (r->status >= 400)
		snprintf(l->error, sizeof(l->error), "%d", r->status);
	else if (r->error[0])
		/* a gRPC error's message (after ": ") stays out of a label: one series per code */
		snprintf(l->error, sizeof(l->error), "%.*s", (int)error_type_len(r->error), r->error);
	else if (!rm->complete)
		snprintf(l->error, sizeof(l->error), "incomplete");
	else
		l->error[0] = 0;
	memset(&l->lv, 0, sizeof(l->lv));
	v[L_OPERATION] = api__otel_operation(r->api);
	v[L_PROVIDER] = api__otel_provider(r->api);
	v[L_REQUEST_MODEL] = request__model(r);
	v[L_RESPONSE_MODEL] = r->response_model;
	v[L_SERVER_ADDRESS] = l->host;
	v[L_SERVER_PORT] = l->port;
	v[L_ERROR_TYPE] = l->error;
	v[L_PROCESS] = r->comm;
	v[L_PROTOCOL_VERSION] = r->http_version == 2 ? "2" : "1.1";
	/* the process's pod and container ("" where it has none: no label, to Prometheus) */
	v[L_K8S_NAMESPACE] = r->k8s_namespace;
	v[L_K8S_POD] = r->pod_name;
	v[L_CONTAINER_ID] = r->container_id;
	v[L_ROLE] = role_name(r);
	v[L_CACHE] = cache_regime__name(rm->cache);
	v[L_CONSUMER] = consumer__name(rm->consumer);
	v[L_SLO] = rm->slo_met < 0 ? "none" : rm->slo_met ? "met" : "missed";
}

/* A server request's attribution: its TTFT split's parts, its gaps' causes, speculation. */
static void attributed(struct metrics *m, const struct attribution *a, struct label_values *lv)
{
	struct ttft_split sp;

	attribution__ttft_split(a, &sp);
	for (size_t i = 0; i < sp.nparts; i++) {
		lv->v[L_COMPONENT] = sp.parts[i].name;
		observe(m, F_TTFT_COMPONENT, lv, (double)sp.parts[i].ns / 1e9);
	}
	for (size_t g = 0; g < a->ngaps; g++) {
		const struct attrib_gap *gp = &a->gaps[g];

		lv->v[L_COMPONENT] = "decode";
		observe(m, F_GAP_COMPONENT, lv, (double)(gp->decode_ns - gp->interference_ns) / 1e9);
		lv->v[L_COMPONENT] = "interference";
		observe(m, F_GAP_COMPONENT, lv, (double)gp->interference_ns / 1e9);
		lv->v[L_COMPONENT] = "host";
		observe(m, F_GAP_COMPONENT, lv, (double)gp->host_ns / 1e9);
	}
	if (a->drafted) {
		observe(m, F_SPEC_ACCEPTANCE, lv, (double)a->accepted / (double)a->drafted);
		lv->v[L_KIND] = "drafted";
		count(m, F_SPEC_TOKENS, lv, a->drafted);
		lv->v[L_KIND] = "accepted";
		count(m, F_SPEC_TOKENS, lv, a->accepted);
	}
}

void metrics__request(struct metrics *m, const struct request *r, const struct request_metrics *rm)
{
	struct req_labels l;
	struct label_values *lv = &l.lv;
	bool server = r->role == ROLE_SERVER;

	request_labels(&l, r, rm);
	observe(m, server ? F_SERVER_DURATION : F_CLIENT_DURATION, lv, rm->e2e_ms / 1e3);
	observe(m, server ? F_SERVER_TTFT : F_CLIENT_TTFC, lv, rm->ttft_ms / 1e3);
	if (server) {
		observe(m, F_SERVER_TPOT, lv, rm->tpot_ms / 1e3);
	} else {
		for (uint64_t i = 0; !r->lossy && i + 1 < r->token_events; i++)
			observe(m, F_CLIENT_TPOC, lv, (double)r->gaps_ns[i] / 1e9);
		if (r->input_tokens.set) {
			lv->v[L_TOKEN_TYPE] = "input";
			observe(m, F_CLIENT_TOKENS, lv, (double)r->input_tokens.v);
		}
		if (rm->output_tokens.set && !rm->output_tokens_estimated) {
			lv->v[L_TOKEN_TYPE] = "output";
			observe(m, F_CLIENT_TOKENS, lv, (double)rm->output_tokens.v);
		}
	}
	observe(m, F_TTFT, lv, rm->ttft_ms / 1e3);
	for (uint64_t i = 0; !r->lossy && i + 1 < r->token_events; i++)
		observe(m, F_GAP, lv, (double)r->gaps_ns[i] / 1e9);
	count(m, F_JUDGED, lv, 1);
	if (r->input_tokens.set) {
		observe(m, F_PROMPT, lv, (double)r->input_tokens.v);
		if (r->cached_tokens.set && r->input_tokens.v && r->cached_tokens.v <= r->input_tokens.v)
			observe(m, F_CACHED_SHARE, lv,
				(double)r->cached_tokens.v / (double)r->input_tokens.v);
	}
	if (!isnan(rm->reading_headroom))
		observe(m, F_HEADROOM, lv, rm->reading_headroom);
	if (server && r->attr && r->attr->ok)
		attributed(m, r->attr, lv);
}

/* A step of an engine's own (not CUDA's): its families beside the GPU ones. */
static void engine_step(struct metrics *m, const struct engine_step *s)
{
	struct label_values lv = { .v = {
		[L_PROCESS] = s->comm, [L_SOURCE] = "llama.cpp", [L_MODEL] = s->model ? s->model : "",
		[L_KIND] = step_kind__name(step__kind(s)) } };

	if (s->failed) {
		lv.v[L_KIND] = "failed";
		count(m, F_ENGINE_FAILED, &lv, 1);
		return;
	}
	observe(m, F_ENGINE_STEP, &lv, (double)(s->end_ns - s->start_ns) / 1e9);
	count(m, F_ENGINE_STEPS, &lv, 1);
	count(m, F_ENGINE_TOKENS, &lv, s->tokens);
}

void metrics__step(struct metrics *m, const struct engine_step *s)
{
	struct label_values lv = { .v = { [L_PROCESS] = s->comm } };

	if (s->source != STEP_SOURCE_CUDA) {
		engine_step(m, s);
		return;
	}
	if (s->end_ns > s->start_ns)
		observe(m, F_STEP, &lv, (double)(s->end_ns - s->start_ns) / 1e9);
	count(m, F_STEPS, &lv, 1);
	if (s->cuda)
		count(m, F_LAUNCHES, &lv, (uint64_t)s->cuda->launches + s->cuda->graph_launches);
}

/* ---- the exposition ---- */

static int put(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int put(struct buf *out, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -1;
	return buf__add(out, tmp, (size_t)n, EXPO_MAX);
}

/* A label value as the text format wants it: \, " and newline escaped. */
static int put_value(struct buf *out, const char *s)
{
	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;

		if (esc ? buf__add(out, esc, 2, EXPO_MAX) : buf__add(out, s, 1, EXPO_MAX))
			return -1;
	}
	return 0;
}

/* {a="x",b="y"[,le="..."]} */
static int put_labels(struct buf *out, const struct family_def *d, const struct series *s,
		      const char *le)
{
	int err = buf__add(out, "{", 1, EXPO_MAX);

	for (size_t i = 0; i < d->nlabels; i++) {
		err |= put(out, "%s%s=\"", i ? "," : "", label_names[d->labels[i]]);
		err |= put_value(out, s->values[i]);
		err |= buf__add(out, "\"", 1, EXPO_MAX);
	}
	if (le)
		err |= put(out, "%sle=\"%s\"", d->nlabels ? "," : "", le);
	return err | buf__add(out, "}", 1, EXPO_MAX);
}

static int put_family(struct buf *out, const struct family_def *d, const struct family *f)
{
	int err = put(out, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
		      d->histogram ? "histogram" : "counter");

	for (const struct series *s = f->head; s; s = s->next) {
		uint64_t cum = 0;
		char le[32];

		if (!d->histogram) {
			err |= put(out, "%s", d->name);
			err |= put_labels(out, d, s, NULL);
			err |= put(out, " %llu\n", (unsigned long long)s->count);
			continue;
		}
		for (size_t b = 0; b <= d->nbounds; b++) {
			cum += s->counts[b];
			if (b < d->nbounds)
				snprintf(le, sizeof(le), "%.15g", d->bounds[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			err |= put(out, "%s_bucket", d->name);
			err |= put_labels(out, d, s, le);
			err |= put(out, " %llu\n", (unsigned long long)cum);
		}
		err |= put(out, "%s_sum", d->name);
		err |= put_labels(out, d, s, NULL);
		err |= put(out, " %.17g\n", s->sum);
		err |= put(out, "%s_count", d->name);
		err |= put_labels(out, d, s, NULL);
		err |= put(out, " %llu\n", (unsigned long long)s->count);
	}
	return err;
}

static int put_counter(struct buf *out, const char *name, const char *help, uint64_t v)
{
	return put(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
		   (unsigned long long)v);
}

static int put_health(struct buf *out, const struct health *h)
{
	int err = 0;

	err |= put_counter(out, "tokenscope_capture_events_total", "Data records consumed.",
			   h->events);
	err |= put_counter(out, "tokenscope_capture_bytes_total", "Payload bytes consumed.",
			   h->bytes);
	err |= put_counter(out, "tokenscope_capture_drops_total",
			   "Records the kernel could not put in the full ring buffer.",
			   h->bpf[TS_CNT_DROPS] + h->bpf[TS_CNT_OTHER_DROPS]);
	err |= put_counter(out, "tokenscope_capture_lost_pieces_total",
			   "Sequence gaps seen in streams (pieces lost).", h->lost_pieces);
	err |= put_counter(out, "tokenscope_capture_truncated_calls_total",
			   "Calls larger than the capture budget.", h->bpf[TS_CNT_TRUNCATED]);
	err |= put_counter(out, "tokenscope_capture_bad_records_total",
			   "Malformed records.", h->bad_events);
	if (h->otlp.on) {
		err |= put_counter(out, "tokenscope_otlp_spans_sent_total",
				   "Spans the OTLP collector took (--otlp).", h->otlp.spans_sent);
		err |= put_counter(out, "tokenscope_otlp_spans_dropped_total",
				   "Spans not delivered: the queue full, or the collector refused or "
				   "did not answer.", h->otlp.spans_dropped);
		err |= put_counter(out, "tokenscope_otlp_retries_total",
				   "Exports tried again (429, 5xx, no answer).", h->otlp.retries);
	}
	err |= put_counter(out, "tokenscope_gpu_marks_dropped_total",
			   "CUDA marks lost (ring buffer full).", h->bpf[TS_CNT_GPU_DROPS]);
	err |= put_counter(out, "tokenscope_engine_steps_dropped_total",
			   "llama.cpp steps lost (ring buffer full).", h->bpf[TS_CNT_LLAMA_DROPS]);
	err |= put(out, "# HELP tokenscope_unsupported_streams_total Streams or responses not "
			"measured, by kind.\n# TYPE tokenscope_unsupported_streams_total counter\n");
	err |= put(out, "tokenscope_unsupported_streams_total{kind=\"http2_unseen_start\"} %llu\n",
		   (unsigned long long)(h->h2.streams_unseen_start + h->h2.streams_untracked));
	err |= put(out, "tokenscope_unsupported_streams_total{kind=\"non_http\"} %llu\n",
		   (unsigned long long)h->streams_other);
	err |= put(out, "tokenscope_unsupported_streams_total{kind=\"malformed\"} %llu\n",
		   (unsigned long long)h->conn.malformed);
	err |= put(out, "tokenscope_unsupported_streams_total{kind=\"encoding\"} %llu\n",
		   (unsigned long long)h->conn.unsupported_encodings);
	err |= put_counter(out, "tokenscope_http2_connections_total", "HTTP/2 connections seen.",
			   h->h2.connections);
	err |= put_counter(out, "tokenscope_http2_streams_total",
			   "HTTP/2 streams measured (one request record each).", h->h2.streams);
	err |= put_counter(out, "tokenscope_http2_headers_partial_total",
			   "HTTP/2 requests whose headers were not all known (capture joined the "
			   "connection after its start).", h->h2.headers_partial);
	err |= put_counter(out, "tokenscope_http2_reset_streams_total",
			   "HTTP/2 streams ended by RST_STREAM before their end.", h->h2.reset_streams);
	err |= put_counter(out, "tokenscope_http2_frame_errors_total",
			   "HTTP/2 connections no longer read after a framing error.",
			   h->h2.frame_errors);
	err |= put_counter(out, "tokenscope_http2_hpack_errors_total",
			   "HTTP/2 header blocks that did not decode (that direction goes on partial).",
			   h->h2.hpack_errors);
	err |= put_counter(out, "tokenscope_requests_total", "LLM API requests reported.",
			   h->requests);
	err |= put_counter(out, "tokenscope_requests_incomplete_total",
			   "LLM API requests reported incomplete (capture loss, cut streams).",
			   h->requests_incomplete);
	return err;
}

static void on_sched(void *self, const struct engine_sched *s)
{
	struct metrics *m = self;
	struct sched_gauges *g = NULL;

	for (size_t i = 0; i < m->nsched && !g; i++) {
		if (m->sched[i].engine == s->engine_index && !strcmp(m->sched[i].comm, s->comm) &&
		    !strcmp(m->sched[i].wire, s->wire))
			g = &m->sched[i];
	}
	if (!g) {
		if (m->nsched == ENGINE_SCHED_MAX) {
			m->sched_dropped++;
			return;
		}
		g = &m->sched[m->nsched++];
		*g = (struct sched_gauges){ .wire = s->wire, .pid = s->pid,
					    .engine = s->engine_index };
		snprintf(g->comm, sizeof(g->comm), "%s", s->comm ? s->comm : "");
	}
	g->running = s->running;
	g->waiting = s->waiting;
	g->kv_cache_usage = s->kv_cache_usage;
	g->steps++;
	g->prefix_queries += s->prefix_queries;
	g->prefix_hits += s->prefix_hits;
}

/* A wire's scheduler gauges: one family a figure, named by the wire (tokenscope_vllm_...),
 * one series per process and engine index. */
static int put_sched_of(struct buf *out, const struct metrics *m, const struct engine_wire_ops *w)
{
	static const struct {
		const char *name, *type, *help; /* name's %s: the wire's name; help's: its title */
	} fams[] = {
		{ "tokenscope_%s_running_requests", "gauge",
		  "Requests the %s scheduler ran in its latest step (engine wire)." },
		{ "tokenscope_%s_waiting_requests", "gauge",
		  "Requests waiting in the %s scheduler's queue after its latest step." },
		{ "tokenscope_%s_kv_cache_usage_ratio", "gauge",
		  "The %s engine's KV cache in use, 0 to 1, after its latest step." },
		{ "tokenscope_%s_prefix_cache_queries_total", "counter",
		  "Prompt tokens the %s prefix cache was asked for (hit rate: hits / queries)." },
		{ "tokenscope_%s_prefix_cache_hits_total", "counter",
		  "Prompt tokens the %s prefix cache had." },
		{ "tokenscope_%s_steps_total", "counter",
		  "%s engine steps whose scheduler stats were read." },
	};
	char name[96], help[160];
	size_t n = 0;
	int err = 0;

	for (size_t i = 0; i < m->nsched; i++)
		n += !strcmp(m->sched[i].wire, w->name);
	for (size_t f = 0; n && f < N(fams); f++) {
		snprintf(name, sizeof(name), fams[f].name, w->name);
		snprintf(help, sizeof(help), fams[f].help, w->title);
		err |= put(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, fams[f].type);
		for (size_t i = 0; i < m->nsched; i++) {
			const struct sched_gauges *g = &m->sched[i];
			double v[] = { (double)g->running, (double)g->waiting, g->kv_cache_usage,
				       (double)g->prefix_queries, (double)g->prefix_hits,
				       (double)g->steps };

			if (strcmp(g->wire, w->name) || isnan(v[f]))
				continue;
			err |= put(out, "%s{process=\"", name);
			err |= put_value(out, g->comm);
			err |= put(out, "\",engine=\"%u\"} %.17g\n", g->engine, v[f]);
		}
	}
	return err;
}

static int put_sched(struct buf *out, const struct metrics *m)
{
	int err = 0;

	for (size_t i = 0; i < engine_nwires; i++)
		err |= put_sched_of(out, m, engine_wires[i]);
	return err;
}

int metrics__render(struct metrics *m, const struct health *h, struct buf *out)
{
	int err = 0;

	buf__reset(out);
	for (size_t i = 0; i < F__COUNT; i++)
		err |= put_family(out, &defs[i], &m->f[i]);
	err |= put_sched(out, m);
	if (h)
		err |= put_health(out, h);
	err |= put_counter(out, "tokenscope_metrics_series_dropped_total",
			   "Samples folded into gen_ai_request_model=\"other\" (or dropped) past "
			   "--metrics-max-series label sets in a family.",
			   m->folded);
	return err || out->overflow ? -1 : 0;
}

static void on_request(void *self, const struct request *r, const struct request_metrics *rm)
{
	metrics__request(self, r, rm);
}

static void on_step(void *self, const struct engine_step *s)
{
	metrics__step(self, s);
}

/* --metrics-file: one exposition at the end, whole. */
static int finish(void *self, const struct health *h)
{
	struct metrics *m = self;
	struct buf expo = { 0 };
	int err;

	if (!m->file)
		return 0;
	err = metrics__render(m, h, &expo);
	err = outfile__write_whole(m->file, err ? NULL : expo.p ? expo.p : "", expo.len);
	buf__free(&expo);
	return err;
}

/* An agent session (llm/session.h): its length, calls and share inside calls. */
static void on_session(void *self, const struct session *s)
{
	struct metrics *m = self;
	struct session_times t;
	struct label_values lv = { .v = { [L_PROCESS] = s->comm, [L_ROLE] = role__name(s->role),
					  [L_CONSUMER] = consumer__name(s->consumer) } };

	session__times(s, &t);
	observe(m, F_SESSION, &lv, (double)t.total_ns / 1e9);
	observe(m, F_SESSION_CALLS, &lv, (double)s->ncalls);
	if (t.total_ns)
		observe(m, F_SESSION_MODEL, &lv, (double)t.model_ns / (double)t.total_ns);
}

const struct sink_ops metrics_sink = { .name = "metrics", .on_request = on_request,
				       .on_step = on_step, .on_sched = on_sched,
				       .on_session = on_session, .finish = finish };
