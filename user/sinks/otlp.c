// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp: requests as OpenTelemetry spans (otlp.h; docs/otlp.md): a request's span and its
 * phases, the trace each joins, servers held for their clients, and the sink. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "sinks/otlp.h"
#include "sinks/otlp_state.h"

/* Span.Event, Status */
#define F_SPAN_EVENTS 11
#define F_SPAN_DROPPED_EVENTS 12
#define F_EVENT_TIME 1
#define F_EVENT_NAME 2
#define F_EVENT_ATTRIBUTES 3
#define TOKEN_EVENTS_MAX 128 /* a span's events (the SDKs' default limit); more are counted */
#define F_STATUS_MESSAGE 2
#define F_STATUS_CODE 3
enum { STATUS_OK = 1, STATUS_ERROR = 2 };

/* --otlp-tokens: each token event a span event at its time, the first TOKEN_EVENTS_MAX. */
static void token_events(struct otlp *o, const struct request *r)
{
	struct pbw *w = &o->w;
	uint64_t at = r->first_token_ns;

	if (!r->token_events || !at)
		return;
	for (uint32_t i = 0; i < r->token_events && i < TOKEN_EVENTS_MAX; i++) {
		if (i)
			at += r->gaps_ns ? r->gaps_ns[i - 1] : 0;
		pbw__begin(w, F_SPAN_EVENTS);
		pbw__fixed64(w, F_EVENT_TIME, otlp__unix_ns(o, at));
		pbw__string(w, F_EVENT_NAME, "tokenscope.token");
		otlp__attr_int(w, F_EVENT_ATTRIBUTES, "tokenscope.token_event", i);
		pbw__end(w);
	}
	if (r->token_events > TOKEN_EVENTS_MAX)
		pbw__uint(w, F_SPAN_DROPPED_EVENTS, r->token_events - TOKEN_EVENTS_MAX);
}

/* The request's own span: GenAI names (docs/otlp.md says which are tokenscope's own). */
static void request_span(struct otlp *o, const struct request *r, const struct request_metrics *m,
			 struct spans *s)
{
	struct pbw *w = &o->w;
	struct draft *d = otlp__draft(s);
	const char *op = api__otel_operation(r->api), *model = request__model(r);
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	char name[256];

	otlp__id(o, r->id, 0, d->id, 8);
	if (r->traced) {
		memcpy(d->parent, r->parent_span_id, 8);
		d->has_parent = true;
	}
	pbw__reset(w);
	snprintf(name, sizeof(name), "%s%s%s", *op ? op : "http", model && *model ? " " : "",
		 model ? model : "");
	pbw__string(w, F_SPAN_NAME, name);
	pbw__uint(w, F_SPAN_KIND, r->role == ROLE_SERVER ? KIND_SERVER : KIND_CLIENT);
	pbw__fixed64(w, F_SPAN_START, otlp__unix_ns(o, r->start_ns));
	pbw__fixed64(w, F_SPAN_END, otlp__unix_ns(o, end > r->start_ns ? end : r->start_ns));
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.operation.name", op);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.provider.name", api__otel_provider(r->api));
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.request.model", model);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.response.model", r->response_model);
	otlp__attr_u64(w, "gen_ai.usage.input_tokens", &r->input_tokens);
	if (!m->output_tokens_estimated) /* the usage the response reported, not events counted */
		otlp__attr_u64(w, "gen_ai.usage.output_tokens", &m->output_tokens);
	otlp__attr_u64(w, "gen_ai.usage.cache_read.input_tokens", &r->cached_tokens);
	otlp__attr_strings(w, F_SPAN_ATTRIBUTES, "gen_ai.response.finish_reasons", r->finish_reason);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.response.id", r->response_id);
	if (r->stream >= 0)
		otlp__attr_bool(w, F_SPAN_ATTRIBUTES, "gen_ai.request.stream", r->stream);
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "gen_ai.response.time_to_first_chunk", m->ttft_ms / 1e3);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "http.request.method", r->method);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "url.path", r->path);
	if (r->status)
		otlp__attr_int(w, F_SPAN_ATTRIBUTES, "http.response.status_code", r->status);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "network.protocol.version", r->http_version == 2 ? "2" : "1.1");
	otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.request_id", (int64_t)r->id);
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.ttft_ms", m->ttft_ms);
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.tpot_ms", m->tpot_ms);
	otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.token_events", (int64_t)r->token_events);
	otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.clock_error_ns", (int64_t)o->offset_err);
	/* the judgement (llm/judge.h): who reads it, against reading, its SLOs */
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.cache_regime", cache_regime__name(m->cache));
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.consumer", consumer__name(m->consumer));
	if (m->consumer_evidence)
		otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.consumer_evidence",
			 consumer_evidence__name(m->consumer_evidence));
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.reading_headroom", m->reading_headroom);
	if (m->slo_met >= 0)
		otlp__attr_bool(w, F_SPAN_ATTRIBUTES, "tokenscope.slo_met", m->slo_met);
	if (o->steps)
		otlp__step_links(o, r);
	if (o->tokens)
		token_events(o, r);
	if (!m->complete || r->error[0]) {
		pbw__begin(w, F_SPAN_STATUS);
		pbw__string(w, F_STATUS_MESSAGE, r->error[0] ? r->error : "incomplete");
		pbw__uint(w, F_STATUS_CODE, STATUS_ERROR);
		pbw__end(w);
	}
	otlp__keep(o, d);
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
		d = otlp__draft(s);
		otlp__id(o, r->id, s->n - 1, d->id, 8);
		memcpy(d->parent, s->d[0].id, 8);
		d->has_parent = true;
		pbw__reset(w);
		snprintf(full, sizeof(full), "tokenscope.%s", name);
		pbw__string(w, F_SPAN_NAME, full);
		pbw__uint(w, F_SPAN_KIND, KIND_INTERNAL);
		pbw__fixed64(w, F_SPAN_START, otlp__unix_ns(o, at));
		pbw__fixed64(w, F_SPAN_END, otlp__unix_ns(o, at + ns));
		otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.split_source", sp.source_name);
		if (sp.source == TTFT_STEPS && !strcmp(name, "queue")) {
			otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.queue_busy_ms",
				    sp.queue_busy_ns / 1e6);
			otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.queue_idle_ms",
				    sp.queue_idle_ns / 1e6);
		}
		if (!strcmp(name, "prefill"))
			otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.prefill_steps", sp.prefill_steps);
		otlp__keep(o, d);
		at += ns;
	}
}

/* ---- held: servers waiting for their clients, joined clients for their proxies ---- */

static struct spans *take(struct otlp *o, size_t i)
{
	struct spans *s = o->held[i];

	memmove(&o->held[i], &o->held[i + 1], (o->nheld - i - 1) * sizeof(*o->held));
	o->nheld--;
	return s;
}

/* s, a span of parent's trace: parent's request span its parent */
static void child_of(struct spans *s, const struct spans *parent)
{
	memcpy(s->trace, parent->trace, 16);
	s->sampled = parent->sampled;
	memcpy(s->d[0].parent, parent->d[0].id, 8);
	s->d[0].has_parent = true;
}

/* The held server record of a proxy that relayed inner on: inner's process, inner begun
 * inside it (the latest such). */
static struct spans *take_proxy(struct otlp *o, const struct spans *inner)
{
	size_t best = o->nheld;

	for (size_t i = 0; i < o->nheld; i++) {
		const struct spans *h = o->held[i];

		if (h->role == ROLE_SERVER && h->pid == inner->pid &&
		    h->start_ns <= inner->start_ns && inner->start_ns <= h->end_ns &&
		    (best == o->nheld || h->start_ns > o->held[best]->start_ns))
			best = i;
	}
	return best < o->nheld ? take(o, best) : NULL;
}

static int by_start(const void *a, const void *b)
{
	const struct spans *x = *(struct spans *const *)a, *y = *(struct spans *const *)b;

	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Server record sv and the clients tokenscope joined to it, out as one trace. The client
 * that began first (the person's or the program's, in front of any proxy) is its root, or a
 * call of its session; each later one (a proxy's call on) is the child of that proxy's server
 * record where it is held, else of the client before it; sv the last one's child. */
static void settle_group(struct otlp *o, struct spans *sv)
{
	struct spans *node[2 * GROUP_MAX + 1];
	struct spans *c[GROUP_MAX];
	size_t n = 0, nn = 0;
	bool first_held;

	for (size_t i = 0; i < o->nheld && n < GROUP_MAX;) {
		if (o->held[i]->role == ROLE_CLIENT && o->held[i]->server_id == sv->request_id)
			c[n++] = take(o, i);
		else
			i++;
	}
	if (!n) {
		if (!otlp__place(o, sv))
			otlp__emit(o, sv);
		return;
	}
	qsort(c, n, sizeof(*c), by_start);
	first_held = otlp__place(o, c[0]);
	node[nn++] = c[0];
	for (size_t k = 1; k < n; k++) {
		struct spans *proxy = take_proxy(o, c[k]);

		if (proxy)
			node[nn++] = proxy;
		node[nn++] = c[k];
	}
	node[nn++] = sv;
	for (size_t k = 1; k < nn; k++)
		child_of(node[k], node[k - 1]);
	for (size_t k = first_held ? 1 : 0; k < nn; k++)
		otlp__emit(o, node[k]);
}

/* Held item i out: with its group where it is a server's or a joined client's whose server
 * is held; else alone (a root, or its session's). */
static void settle(struct otlp *o, size_t i)
{
	struct spans *s = take(o, i);

	if (s->role == ROLE_CLIENT) {
		for (size_t j = 0; j < o->nheld; j++) {
			if (o->held[j]->role == ROLE_SERVER &&
			    o->held[j]->request_id == s->server_id) {
				struct spans *sv = take(o, j);

				o->held[o->nheld++] = s; /* back, for its group to take */
				settle_group(o, sv);
				return;
			}
		}
		if (!otlp__place(o, s))
			otlp__emit(o, s);
		return;
	}
	settle_group(o, s);
}

/* Held items whose hold (OTLP_HOLD_NS past their end) is over by handed_to, or all. */
static void release(struct otlp *o, uint64_t handed_to, bool all)
{
	for (size_t i = 0; i < o->nheld;) {
		if (all || o->held[i]->end_ns + OTLP_HOLD_NS < handed_to) {
			settle(o, i);
			i = 0; /* its group may have taken others */
		} else {
			i++;
		}
	}
}

void otlp__request(struct otlp *o, const struct request *r, const struct request_metrics *m)
{
	struct spans *s = otlp__spans_new();
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	bool held = false;

	if (!s)
		return;
	s->request_id = r->id;
	s->end_ns = end > r->start_ns ? end : r->start_ns;
	s->pid = r->pid;
	s->role = r->role;
	s->session = m->session;
	s->session_call = m->session_call;
	s->agent = m->consumer == CONSUMER_AGENT;
	s->start_ns = r->start_ns;
	s->server_id = r->role == ROLE_CLIENT ? r->server_id : 0;
	otlp__resource(o, r->pid, r->comm, r, &s->resource);
	request_span(o, r, m, s);
	if (r->role == ROLE_SERVER && r->attr && r->attr->ok)
		phase_spans(o, r, s);
	if (r->traced) { /* the header's trace, sampled as its flag says */
		memcpy(s->trace, r->trace_id, 16);
		s->sampled = r->trace_flags & 1;
		if (*r->tracestate)
			s->tracestate = strdup(r->tracestate);
	} else if (r->role == ROLE_SERVER || s->server_id) {
		/* a server waits for its clients, a joined client for its server's group */
		if (o->nheld == HELD_MAX)
			settle(o, 0);
		o->held[o->nheld++] = s;
		return;
	} else {
		held = otlp__place(o, s);
	}
	if (!held)
		otlp__emit(o, s);
}

void otlp__flush(struct otlp *o)
{
	release(o, 0, true);
	otlp__sessions_release(o, 0, 0, true);
}

struct otlp *otlp__new(otlp_send_fn send, void *ctx)
{
	struct otlp *o = calloc(1, sizeof(*o));
	struct timespec a, real, b;

	if (!o)
		return NULL;
	o->send = send;
	o->send_ctx = ctx;
	o->sample = 1;
	o->session_idle_ns = SESSION_IDLE_NS_DEFAULT;
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

void otlp__set_sample(struct otlp *o, double ratio)
{
	o->sample = ratio;
}

void otlp__set_steps(struct otlp *o, bool on)
{
	o->steps = on;
}

void otlp__set_tokens(struct otlp *o, bool on)
{
	o->tokens = on;
}

void otlp__set_session_idle(struct otlp *o, uint64_t idle_ns)
{
	o->session_idle_ns = idle_ns;
}

uint64_t otlp__clock_error_ns(const struct otlp *o)
{
	return o->offset_err;
}

uint64_t otlp__unsampled(const struct otlp *o)
{
	return o->unsampled;
}

void otlp__free(struct otlp *o)
{
	if (!o)
		return;
	otlp__flush(o);
	otlp__sessions_free(o);
	pbw__free(&o->w);
	free(o);
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	otlp__request(self, r, m);
}

static void on_step(void *self, const struct engine_step *st)
{
	otlp__step(self, st);
}

/* A session ended: its calls still held go out first, into it. */
static void on_session(void *self, const struct session *s)
{
	struct otlp *o = self;

	for (size_t i = 0; i < o->nheld;) {
		if (o->held[i]->session == s->key && o->held[i]->role == s->role) {
			settle(o, i);
			i = 0;
		} else {
			i++;
		}
	}
	otlp__session_end(o, s);
}

static void on_process_exit(void *self, uint32_t pid)
{
	otlp__sessions_release(self, 0, pid, false);
}

static void on_time(void *self, uint64_t handed_to)
{
	struct otlp *o = self;

	release(o, handed_to, false);
	otlp__sessions_release(o, handed_to, 0, false);
}

static int finish(void *self, const struct health *h)
{
	(void)h;
	otlp__flush(self);
	return 0;
}

const struct sink_ops otlp_sink = { .name = "otlp", .on_request = on_request, .on_step = on_step,
				    .on_session = on_session, .on_exit = on_process_exit,
				    .on_time = on_time, .finish = finish };
