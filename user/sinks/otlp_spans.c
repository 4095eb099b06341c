// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp's building blocks (otlp_state.h): ids, attributes, resources, a span's encoding, its
 * trace's sampling, and the spans out to the exporter. Field numbers: the OpenTelemetry protos
 * (opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
 * resource/v1/resource.proto, common/v1/common.proto). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/pbwrite.h"
#include "base/version.h"
#include "sinks/otlp_state.h"

/* ExportTraceServiceRequest, ResourceSpans, ScopeSpans, InstrumentationScope */
#define F_RESOURCE_SPANS 1
#define F_RS_RESOURCE 1
#define F_RS_SCOPE_SPANS 2
#define F_SS_SCOPE 1
#define F_SS_SPANS 2
#define F_SCOPE_NAME 1
#define F_SCOPE_VERSION 2
/* KeyValue, AnyValue, ArrayValue */
#define F_KV_KEY 1
#define F_KV_VALUE 2
#define F_ANY_STRING 1
#define F_ANY_BOOL 2
#define F_ANY_INT 3
#define F_ANY_DOUBLE 4
#define F_ANY_ARRAY 5
#define F_ARRAY_VALUES 1

/* ---- ids ---- */

/* splitmix64: ids unique within a run (a random seed) and spread */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Id n of what, len bytes (otlp_state.h's ID_ names the n). */
void otlp__id(const struct otlp *o, uint64_t what, uint64_t n, uint8_t *out, size_t len)
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

void otlp__attr_str(struct pbw *w, uint32_t field, const char *k, const char *v)
{
	if (!v || !*v)
		return;
	kv_begin(w, field, k);
	pbw__string(w, F_ANY_STRING, v);
	kv_end(w);
}

void otlp__attr_int(struct pbw *w, uint32_t field, const char *k, int64_t v)
{
	kv_begin(w, field, k);
	pbw__uint(w, F_ANY_INT, (uint64_t)v);
	kv_end(w);
}

void otlp__attr_double(struct pbw *w, uint32_t field, const char *k, double v)
{
	if (isnan(v))
		return;
	kv_begin(w, field, k);
	pbw__double(w, F_ANY_DOUBLE, v);
	kv_end(w);
}

void otlp__attr_bool(struct pbw *w, uint32_t field, const char *k, bool v)
{
	kv_begin(w, field, k);
	pbw__uint(w, F_ANY_BOOL, v);
	kv_end(w);
}

/* An array of one string (finish_reasons) */
void otlp__attr_strings(struct pbw *w, uint32_t field, const char *k, const char *v)
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

void otlp__attr_u64(struct pbw *w, const char *k, const struct opt_u64 *v)
{
	if (v->set)
		otlp__attr_int(w, F_SPAN_ATTRIBUTES, k, (int64_t)v->v);
}

/* ---- spans ---- */

uint64_t otlp__unix_ns(const struct otlp *o, uint64_t mono)
{
	return (uint64_t)((int64_t)mono + o->offset);
}

void otlp__resource(struct otlp *o, uint32_t pid, const char *comm, const struct request *r,
		    struct buf *out)
{
	struct pbw *w = &o->w;
	char copy[1024], *save = NULL;

	pbw__reset(w);
	otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "service.name", o->service ? o->service : comm);
	otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "host.name", o->host);
	otlp__attr_int(w, F_RESOURCE_ATTRIBUTES, "process.pid", pid);
	otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "process.executable.name", comm);
	if (r) {
		otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "container.id", r->container_id);
		otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.pod.name", r->pod_name);
		otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.pod.uid", r->pod_uid);
		otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, "k8s.namespace.name", r->k8s_namespace);
	}
	snprintf(copy, sizeof(copy), "%s", o->res_attrs ? o->res_attrs : "");
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (eq && eq != kv) {
			*eq = 0;
			otlp__attr_str(w, F_RESOURCE_ATTRIBUTES, kv, eq + 1);
		}
	}
	buf__reset(out);
	if (!w->failed)
		buf__add(out, w->b.p, w->b.len, SIZE_MAX);
}

struct spans *otlp__spans_new(void)
{
	return calloc(1, sizeof(struct spans));
}

struct draft *otlp__draft(struct spans *s)
{
	struct draft *d = &s->d[s->n++];

	buf__reset(&d->rest);
	d->has_parent = false;
	return d;
}

void otlp__keep(struct otlp *o, struct draft *d)
{
	if (!o->w.failed)
		buf__add(&d->rest, o->w.b.p, o->w.b.len, SIZE_MAX);
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
		if (s->tracestate)
			pbw__string(w, F_SPAN_TRACE_STATE, s->tracestate);
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
	free(s->tracestate);
	free(s);
}

void otlp__emit(struct otlp *o, struct spans *s)
{
	if (s->sampled)
		send_spans(o, s);
	else
		o->unsampled += s->n;
	spans_free(s);
}

/* --otlp-sample: a trace tokenscope starts is kept when its id's last 56 bits, read as a
 * number, fall below the ratio of 2^56 (the W3C random trace id's bits; the rule of
 * OpenTelemetry's TraceIdRatioBased sampler), so every span of one trace is kept alike. */
bool otlp__sampled_root(const struct otlp *o, const uint8_t trace[16])
{
	uint64_t v = 0;

	if (o->sample >= 1)
		return true;
	for (int i = 9; i < 16; i++)
		v = v << 8 | trace[i];
	return (double)v < o->sample * 72057594037927936.0; /* 2^56 */
}

void otlp__root(struct otlp *o, struct spans *s)
{
	otlp__id(o, s->request_id, ID_TRACE, s->trace, 16);
	s->sampled = otlp__sampled_root(o, s->trace);
}

