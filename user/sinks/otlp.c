// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp: requests as OpenTelemetry spans (otlp.h; docs/otlp.md). Field numbers: the
 * OpenTelemetry protos (opentelemetry/proto/collector/trace/v1/trace_service.proto,
 * trace/v1/trace.proto, resource/v1/resource.proto, common/v1/common.proto). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/pbwrite.h"
#include "base/version.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "sinks/otlp.h"

/* ExportTraceServiceRequest, ResourceSpans, ScopeSpans, InstrumentationScope */
#define F_RESOURCE_SPANS 1
#define F_RS_RESOURCE 1
#define F_RS_SCOPE_SPANS 2
#define F_SS_SCOPE 1
#define F_SS_SPANS 2
#define F_SCOPE_NAME 1
#define F_SCOPE_VERSION 2
/* Resource, KeyValue, AnyValue, ArrayValue */
#define F_RESOURCE_ATTRIBUTES 1
#define F_KV_KEY 1
#define F_KV_VALUE 2
#define F_ANY_STRING 1
#define F_ANY_BOOL 2
#define F_ANY_INT 3
#define F_ANY_DOUBLE 4
#define F_ANY_ARRAY 5
#define F_ARRAY_VALUES 1
/* Span, Status */
#define F_SPAN_TRACE_ID 1
#define F_SPAN_SPAN_ID 2
#define F_SPAN_PARENT_SPAN_ID 4
#define F_SPAN_NAME 5
#define F_SPAN_KIND 6
#define F_SPAN_START 7
#define F_SPAN_END 8
#define F_SPAN_ATTRIBUTES 9
#define F_SPAN_STATUS 15
#define F_STATUS_MESSAGE 2
#define F_STATUS_CODE 3
enum { KIND_INTERNAL = 1, KIND_SERVER = 2, KIND_CLIENT = 3 };
enum { STATUS_OK = 1, STATUS_ERROR = 2 };

#define SPANS_MAX 6 /* a request and its phases */
#define HELD_MAX 4096 /* server requests waiting for their client */

/* One span, but for its trace id (the request's, known at the end). */
struct draft {
	uint8_t id[8], parent[8];
	bool has_parent;
	struct buf rest; /* the Span's other fields, encoded */
};

/* A request's spans, ready but for their trace. */
struct spans {
	uint64_t request_id, end_ns;
	uint8_t trace[16];
	struct buf resource; /* its Resource, encoded */
	struct draft d[SPANS_MAX];
	size_t n;
};

struct otlp {
	otlp_send_fn send;
	void *send_ctx;
	int64_t offset; /* realtime - monotonic */
	uint64_t offset_err;
	uint64_t seed;
	const char *service;	/* OTEL_SERVICE_NAME (NULL: the process's command) */
	const char *res_attrs;	/* OTEL_RESOURCE_ATTRIBUTES */
	char host[256];
	struct spans *held[HELD_MAX]; /* servers without a trace of their own, oldest first */
	size_t nheld;
	struct pbw w;
};

/* ---- ids ---- */

/* splitmix64: ids unique within a run (a random seed) and spread */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Id n of request what (n: its spans 0 to SPANS_MAX - 1, TRACE_OF its trace), len bytes. */
#define TRACE_OF 0xff
static void id_of(const struct otlp *o, uint64_t what, uint64_t n, uint8_t *out, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(o->seed ^ mix(what ^ (n << 56 | (uint64_t)i << 48)));

		memcpy(out + i, &v, len - i < 8 ? len - i : 8);
	}
	out[0] |= 1; /* never all zero */
}

/* ---- attributes ---- */

/* A KeyValue as field `field`: its key, then its AnyValue, whose one field the caller writes
 * between kv_begin and kv_end. */
static void kv_begin(struct pbw *w, uint32_t field, const char *k)
{
	pbw__begin(w, field);
	pbw__string(w, F_KV_KEY, k);
	pbw__begin(w, F_KV_VALUE);
}

static void kv_end(struct pbw *w)
{
	pbw__end(w);
	pbw__end(w);
}

static void attr_str(struct pbw *w, uint32_t field, const char *k, const char *v)
{
	if (!v || !*v)
		return;
	kv_begin(w, field, k);
	pbw__string(w, F_ANY_STRING, v);
	kv_end(w);
}

static void attr_int(struct pbw *w, uint32_t field, const char *k, int64_t v)
{
	kv_begin(w, field, k);
	pbw__uint(w, F_ANY_INT, (uint64_t)v);
	kv_end(w);
}

static void attr_double(struct pbw *w, uint32_t field, const char *k, double v)
{
	if (isnan(v))
		return;
	kv_begin(w, field, k);
	pbw__double(w, F_ANY_DOUBLE, v);
	kv_end(w);
}

static void attr_bool(struct pbw *w, uint32_t field, const char *k, bool v)
{
	kv_begin(w, field, k);
	pbw__uint(w, F_ANY_BOOL, v);
	kv_end(w);
}

/* An array of one string (finish_reasons) */
static void attr_strings(struct pbw *w, uint32_t field, const char *k, const char *v)
{
	if (!v || !*v)
		return;
	kv_begin(w, field, k);
	pbw__begin(w, F_ANY_ARRAY);
	pbw__begin(w, F_ARRAY_VALUES);
	pbw__string(w, F_ANY_STRING, v);
	pbw__end(w);
	pbw__end(w);
	kv_end(w);
}

static void attr_u64(struct pbw *w, const char *k, const struct opt_u64 *v)
{
	if (v->set)
		attr_int(w, F_SPAN_ATTRIBUTES, k, (int64_t)v->v);
}

/* ---- a request's spans ---- */

static uint64_t unix_ns(const struct otlp *o, uint64_t mono)
{
	return (uint64_t)((int64_t)mono + o->offset);
}

static void resource(struct otlp *o, const struct request *r, struct buf *out)
{
	struct pbw *w = &o->w;
	char copy[1024], *save = NULL;

	pbw__reset(w);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "service.name", o->service ? o->service : r->comm);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "host.name", o->host);
	attr_int(w, F_RESOURCE_ATTRIBUTES, "process.pid", r->pid);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "process.executable.name", r->comm);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "container.id", r->container_id);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.pod.name", r->pod_name);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.pod.uid", r->pod_uid);
	attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.namespace.name", r->k8s_namespace);
	snprintf(copy, sizeof(copy), "%s", o->res_attrs ? o->res_attrs : "");
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (eq && eq != kv) {
			*eq = 0;
			attr_str(w, F_RESOURCE_ATTRIBUTES, kv, eq + 1);
		}
	}
	buf__reset(out);
	if (!w->failed)
		buf__add(out, w->b.p, w->b.len, SIZE_MAX);
}

static struct draft *draft(struct spans *s)
{
	struct draft *d = &s->d[s->n++];

	buf__reset(&d->rest);
	d->has_parent = false;
	return d;
}

static void keep(struct otlp *o, struct draft *d)
{
	if (!o->w.failed)
		buf__add(&d->rest, o->w.b.p, o->w.b.len, SIZE_MAX);
}

/* The request's own span: GenAI names (docs/otlp.md says which are tokenscope's own). */
static void request_span(struct otlp *o, const struct request *r, const struct request_metrics *m,
			 struct spans *s)
{
	struct pbw *w = &o->w;
	struct draft *d = draft(s);
	const char *op = api__otel_operation(r->api), *model = request__model(r);
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	char name[256];

	id_of(o, r->id, 0, d->id, 8);
	if (r->traced) {
		memcpy(d->parent, r->parent_span_id, 8);
		d->has_parent = true;
	}
	pbw__reset(w);
	snprintf(name, sizeof(name), "%s%s%s", *op ? op : "http", model && *model ? " " : "",
		 model ? model : "");
	pbw__string(w, F_SPAN_NAME, name);
	pbw__uint(w, F_SPAN_KIND, r->role == ROLE_SERVER ? KIND_SERVER : KIND_CLIENT);
	pbw__fixed64(w, F_SPAN_START, unix_ns(o, r->start_ns));
	pbw__fixed64(w, F_SPAN_END, unix_ns(o, end > r->start_ns ? end : r->start_ns));
	attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.operation.name", op);
	attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.provider.name", api__otel_provider(r->api));
	attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.request.model", model);
	attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.response.model", r->response_model);
	attr_u64(w, "gen_ai.usage.input_tokens", &r->input_tokens);
	if (!m->output_tokens_estimated) /* the usage the response reported, not events counted */
		attr_u64(w, "gen_ai.usage.output_tokens", &m->output_tokens);
	attr_u64(w, "gen_ai.usage.cache_read.input_tokens", &r->cached_tokens);
	attr_strings(w, F_SPAN_ATTRIBUTES, "gen_ai.response.finish_reasons", r->finish_reason);
	attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.response.id", r->response_id);
	if (r->stream >= 0)
		attr_bool(w, F_SPAN_ATTRIBUTES, "gen_ai.request.stream", r->stream);
	attr_double(w, F_SPAN_ATTRIBUTES, "gen_ai.response.time_to_first_chunk", m->ttft_ms / 1e3);
	attr_str(w, F_SPAN_ATTRIBUTES, "http.request.method", r->method);
	attr_str(w, F_SPAN_ATTRIBUTES, "url.path", r->path);
	if (r->status)
		attr_int(w, F_SPAN_ATTRIBUTES, "http.response.status_code", r->status);
	attr_str(w, F_SPAN_ATTRIBUTES, "network.protocol.version", r->http_version == 2 ? "2" : "1.1");
	attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.request_id", (int64_t)r->id);
	attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.ttft_ms", m->ttft_ms);
	attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.tpot_ms", m->tpot_ms);
	attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.token_events", (int64_t)r->token_events);
	attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.clock_error_ns", (int64_t)o->offset_err);
	/* the judgement (llm/judge.h): who reads it, against reading, its SLOs */
	attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.cache_regime", cache_regime__name(m->cache));
	attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.consumer", consumer__name(m->consumer));
	if (m->consumer_evidence)
		attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.consumer_evidence",
			 consumer_evidence__name(m->consumer_evidence));
	attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.reading_headroom", m->reading_headroom);
	if (m->slo_met >= 0)
		attr_bool(w, F_SPAN_ATTRIBUTES, "tokenscope.slo_met", m->slo_met);
	if (!m->complete || r->error[0]) {
		pbw__begin(w, F_SPAN_STATUS);
		pbw__string(w, F_STATUS_MESSAGE, r->error[0] ? r->error : "incomplete");
		pbw__uint(w, F_STATUS_CODE, STATUS_ERROR);
		pbw__end(w);
	}
	keep(o, d);
}

/* A server's TTFT split, as child spans in time order (attribution__ttft_split); the steps'
 * queue is one span, its busy and idle parts its attributes. */
static void phase_spans(struct otlp *o, const struct request *r, struct spans *s)
{
	struct pbw *w = &o->w;
	struct ttft_split sp;
	uint64_t at = r->start_ns;

	attribution__ttft_split(r->attr, &sp);
	for (size_t i = 0; i < sp.nparts && s->n < SPANS_MAX; i++) {
		const char *name = sp.parts[i].name;
		uint64_t ns = sp.parts[i].ns;
		struct draft *d;
		char full[64];

		if (sp.source == TTFT_STEPS && i == 1)
			continue; /* queue_idle: in the queue span */
		if (sp.source == TTFT_STEPS && i == 0) {
			name = "queue";
			ns = sp.queue_ns;
		}
		d = draft(s);
		id_of(o, r->id, s->n, d->id, 8);
		memcpy(d->parent, s->d[0].id, 8);
		d->has_parent = true;
		pbw__reset(w);
		snprintf(full, sizeof(full), "tokenscope.%s", name);
		pbw__string(w, F_SPAN_NAME, full);
		pbw__uint(w, F_SPAN_KIND, KIND_INTERNAL);
		pbw__fixed64(w, F_SPAN_START, unix_ns(o, at));
		pbw__fixed64(w, F_SPAN_END, unix_ns(o, at + ns));
		attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.split_source", sp.source_name);
		if (sp.source == TTFT_STEPS && !strcmp(name, "queue")) {
			attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.queue_busy_ms",
				    sp.queue_busy_ns / 1e6);
			attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.queue_idle_ms",
				    sp.queue_idle_ns / 1e6);
		}
		if (!strcmp(name, "prefill"))
			attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.prefill_steps", sp.prefill_steps);
		keep(o, d);
		at += ns;
	}
}

/* The spans into the exporter: one ResourceSpans. */
static void send_spans(struct otlp *o, struct spans *s)
{
	struct pbw *w = &o->w;

	pbw__reset(w);
	pbw__begin(w, F_RESOURCE_SPANS);
	pbw__begin(w, F_RS_RESOURCE);
	pbw__raw(w, s->resource.p, s->resource.len);
	pbw__end(w);
	pbw__begin(w, F_RS_SCOPE_SPANS);
	pbw__begin(w, F_SS_SCOPE);
	pbw__string(w, F_SCOPE_NAME, "tokenscope");
	pbw__string(w, F_SCOPE_VERSION, TS_VERSION);
	pbw__end(w);
	for (size_t i = 0; i < s->n; i++) {
		pbw__begin(w, F_SS_SPANS);
		pbw__bytes(w, F_SPAN_TRACE_ID, s->trace, 16);
		pbw__bytes(w, F_SPAN_SPAN_ID, s->d[i].id, 8);
		if (s->d[i].has_parent)
			pbw__bytes(w, F_SPAN_PARENT_SPAN_ID, s->d[i].parent, 8);
		pbw__raw(w, s->d[i].rest.p, s->d[i].rest.len);
		pbw__end(w);
	}
	pbw__end(w);
	pbw__end(w);
	if (!w->failed)
		o->send(o->send_ctx, w->b.p, w->b.len, s->n);
}

static void spans_free(struct spans *s)
{
	if (!s)
		return;
	buf__free(&s->resource);
	for (size_t i = 0; i < SPANS_MAX; i++)
		buf__free(&s->d[i].rest);
	free(s);
}

/* Held servers whose client did not come within OTLP_HOLD_NS of now: out as they are. */
static void release(struct otlp *o, uint64_t now, bool all)
{
	size_t kept = 0;

	for (size_t i = 0; i < o->nheld; i++) {
		struct spans *s = o->held[i];

		if (all || s->end_ns + OTLP_HOLD_NS < now) {
			send_spans(o, s);
			spans_free(s);
		} else {
			o->held[kept++] = s;
		}
	}
	o->nheld = kept;
}

/* A client joined to a held server: the server's spans into the client's trace, its own
 * span the client's child. */
static void adopt(struct otlp *o, const struct request *client, const struct spans *c)
{
	for (size_t i = 0; i < o->nheld; i++) {
		struct spans *s = o->held[i];

		if (s->request_id != client->server_id)
			continue;
		memcpy(s->trace, c->trace, 16);
		memcpy(s->d[0].parent, c->d[0].id, 8);
		s->d[0].has_parent = true;
		send_spans(o, s);
		spans_free(s);
		memmove(&o->held[i], &o->held[i + 1], (o->nheld - i - 1) * sizeof(*o->held));
		o->nheld--;
		return;
	}
}

void otlp__request(struct otlp *o, const struct request *r, const struct request_metrics *m)
{
	struct spans *s = calloc(1, sizeof(*s));
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;

	if (!s)
		return;
	s->request_id = r->id;
	s->end_ns = end > r->start_ns ? end : r->start_ns;
	if (r->traced)
		memcpy(s->trace, r->trace_id, 16);
	else
		id_of(o, r->id, TRACE_OF, s->trace, 16); /* a trace it starts */
	resource(o, r, &s->resource);
	request_span(o, r, m, s);
	if (r->role == ROLE_SERVER && r->attr && r->attr->ok)
		phase_spans(o, r, s);
	release(o, s->end_ns, false);
	if (r->role == ROLE_CLIENT && r->server_id && !r->traced)
		adopt(o, r, s);
	if (r->role == ROLE_SERVER && !r->traced) {
		if (o->nheld == HELD_MAX)
			release(o, 0, true);
		o->held[o->nheld++] = s;
		return;
	}
	send_spans(o, s);
	spans_free(s);
}

void otlp__flush(struct otlp *o)
{
	release(o, 0, true);
}

struct otlp *otlp__new(otlp_send_fn send, void *ctx)
{
	struct otlp *o = calloc(1, sizeof(*o));
	struct timespec a, real, b;

	if (!o)
		return NULL;
	o->send = send;
	o->send_ctx = ctx;
	if (getrandom(&o->seed, sizeof(o->seed), 0) != sizeof(o->seed))
		o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	o->service = getenv("OTEL_SERVICE_NAME");
	if (o->service && !*o->service)
		o->service = NULL;
	o->res_attrs = getenv("OTEL_RESOURCE_ATTRIBUTES");
	gethostname(o->host, sizeof(o->host) - 1);
	/* live: the offset bracketed by two monotonic reads */
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &b);
	{
		int64_t ma = a.tv_sec * 1000000000ll + a.tv_nsec;
		int64_t mb = b.tv_sec * 1000000000ll + b.tv_nsec;
		int64_t rn = real.tv_sec * 1000000000ll + real.tv_nsec;

		otlp__set_clock(o, rn - (ma + mb) / 2, (uint64_t)(mb - ma) / 2);
	}
	return o;
}

void otlp__set_clock(struct otlp *o, int64_t real_minus_mono, uint64_t err_ns)
{
	o->offset = real_minus_mono;
	o->offset_err = err_ns;
}

uint64_t otlp__clock_error_ns(const struct otlp *o)
{
	return o->offset_err;
}

void otlp__free(struct otlp *o)
{
	if (!o)
		return;
	release(o, 0, true);
	pbw__free(&o->w);
	free(o);
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	otlp__request(self, r, m);
}

static int finish(void *self, const struct health *h)
{
	(void)h;
	otlp__flush(self);
	return 0;
}

const struct sink_ops otlp_sink = { .name = "otlp", .on_request = on_request, .finish = finish };
