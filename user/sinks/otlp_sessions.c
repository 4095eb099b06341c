// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp: an agent session (llm/session.h) as the parent span of its calls that carry no
 * trace of their own (otlp_state.h; docs/otlp.md#agent-sessions).
 *
 * A call is exported when it ends, but a session is known only at its second call. So an
 * agent's first call (the one that opened a session) is held until a second call joins it
 * (then both go out, the session's span their parent, in the first call's trace) or until
 * its session cannot go on: its client idle past the session idle time, its process gone, or
 * the run's end (then it goes out alone, the root of its trace). A session that a call of
 * another consumer opened gains its span from its second call on; that first call stays the
 * root of a trace of its own. The session's span itself leaves when the session ends, from
 * its first call's start to its last call's end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/judge.h"
#include "sinks/otlp_state.h"

static struct otlp_session *find(struct otlp *o, uint64_t key, size_t *at)
{
	for (size_t i = 0; i < o->nsessions; i++) {
		if (o->sessions[i]->key == key) {
			if (at)
				*at = i;
			return o->sessions[i];
		}
	}
	return NULL;
}

static struct otlp_session *add(struct otlp *o, const struct spans *s)
{
	struct otlp_session *st;

	if (o->nsessions == OTLP_SESSIONS_MAX || !(st = calloc(1, sizeof(*st))))
		return NULL;
	st->key = s->session;
	st->pid = s->pid;
	buf__add(&st->resource, s->resource.p, s->resource.len, SIZE_MAX);
	otlp__id(o, st->key, ID_SESSION, st->span, 8);
	o->sessions[o->nsessions++] = st;
	return st;
}

static void drop(struct otlp *o, size_t at)
{
	struct otlp_session *st = o->sessions[at];

	memmove(&o->sessions[at], &o->sessions[at + 1],
		(o->nsessions - at - 1) * sizeof(*o->sessions));
	o->nsessions--;
	buf__free(&st->resource);
	free(st);
}

/* s, a call of the formed session st: its span the session's child, in its trace. */
static void join(struct otlp_session *st, struct spans *s)
{
	memcpy(s->trace, st->trace, 16);
	s->sampled = st->sampled;
	memcpy(s->d[0].parent, st->span, 8);
	s->d[0].has_parent = true;
	st->children++;
}

bool otlp__place(struct otlp *o, struct spans *s)
{
	struct otlp_session *st = s->session ? find(o, s->session, NULL) : NULL;

	if (!st && s->session && s->session_call == 0 && s->agent && (st = add(o, s))) {
		otlp__root(o, s); /* the session's trace, if it forms */
		memcpy(st->trace, s->trace, 16);
		st->sampled = s->sampled;
		st->first = s;
		return true;
	}
	if (!st && s->session && s->session_call > 0 && (st = add(o, s))) {
		otlp__id(o, st->key, ID_SESSION_TRACE, st->trace, 16);
		st->sampled = otlp__sampled_root(o, st->trace);
	}
	if (!st) {
		otlp__root(o, s);
		return false;
	}
	if (st->first == s)
		return true;
	st->formed = true;
	if (st->first) {
		join(st, st->first);
		otlp__emit(o, st->first);
		st->first = NULL;
	}
	join(st, s);
	return false;
}

/* The session's span: its calls' times, as the session record states them. */
static void session_span(struct otlp *o, struct otlp_session *st, const struct session *sess)
{
	struct spans *s = otlp__spans_new();
	struct session_times t;
	struct draft *d;
	struct pbw *w = &o->w;
	uint64_t start = sess->calls[0].start_ns;

	if (!s)
		return;
	session__times(sess, &t);
	memcpy(s->trace, st->trace, 16);
	s->sampled = st->sampled;
	buf__add(&s->resource, st->resource.p, st->resource.len, SIZE_MAX);
	d = otlp__draft(s);
	memcpy(d->id, st->span, 8);
	pbw__reset(w);
	pbw__string(w, F_SPAN_NAME, "tokenscope.session");
	pbw__uint(w, F_SPAN_KIND, KIND_INTERNAL);
	pbw__fixed64(w, F_SPAN_START, otlp__unix_ns(o, start));
	pbw__fixed64(w, F_SPAN_END, otlp__unix_ns(o, start + t.total_ns));
	otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.session.id", (int64_t)sess->id);
	otlp__attr_int(w, F_SPAN_ATTRIBUTES, "tokenscope.session.calls", (int64_t)sess->ncalls);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.consumer", consumer__name(sess->consumer));
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "gen_ai.request.model", sess->model);
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.session.model_ms", t.model_ns / 1e6);
	otlp__attr_double(w, F_SPAN_ATTRIBUTES, "tokenscope.session.between_ms",
			  t.between_ns / 1e6);
	otlp__attr_str(w, F_SPAN_ATTRIBUTES, "tokenscope.session.ended",
		       session_end__name(sess->end));
	otlp__keep(o, d);
	otlp__emit(o, s);
}

void otlp__session_end(struct otlp *o, const struct session *sess)
{
	size_t at;
	struct otlp_session *st;

	if (!(st = find(o, sess->key, &at)))
		return;
	if (st->first) /* no other call of it went through here: out alone */
		otlp__emit(o, st->first);
	if (st->children)
		session_span(o, st, sess);
	drop(o, at);
}

void otlp__sessions_release(struct otlp *o, uint64_t handed_to, uint32_t pid, bool all)
{
	for (size_t i = 0; i < o->nsessions;) {
		struct otlp_session *st = o->sessions[i];
		struct spans *f = st->first;
		bool out = f && (all || (pid && f->role == ROLE_CLIENT && f->pid == pid) ||
				 (handed_to && f->end_ns + o->session_idle_ns < handed_to));

		if (!out) {
			i++;
			continue;
		}
		st->first = NULL;
		otlp__emit(o, f);
		if (!st->formed)
			drop(o, i);
		else
			i++;
	}
}

void otlp__sessions_free(struct otlp *o)
{
	otlp__sessions_release(o, 0, 0, true);
	while (o->nsessions)
		drop(o, o->nsessions - 1);
}
