// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* vLLM V1's engine-core wire (engine/vllm_wire.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "proto/msgpack.h"
#include "engine/vllm_wire.h"
#include "engine/vllm_wire_state.h"

/*
 * What the wire may say, checked before anything is kept: any process may write to an
 * engine's socket, and a value past these is counted malformed, its message dropped. Engine
 * indices are data-parallel ranks; request counts are a scheduler's queues; counts of steps,
 * tokens and prefix-cache queries stay where a double is exact; times are time.monotonic()
 * seconds (mono_ns).
 */
#define ENGINE_INDEX_MAX 65535
#define SCHED_REQS_MAX 10000000
#define COUNT_MAX 9007199254740992.0 /* 2^53 */
#define MONO_S_MAX 1e10

/* Request types of the input socket (vllm/v1/engine/__init__.py, EngineCoreRequestType). */
enum { REQ_ADD = 0, REQ_ABORT = 1, REQ_START_DP_WAVE = 2, REQ_UTILITY = 3 };
/* EngineCoreEventType */
enum { EV_QUEUED = 1, EV_SCHEDULED = 2, EV_PREEMPTED = 3 };

/*
 * EngineCoreOutput's field orders, by release. msgspec writes an array-like struct with all of
 * its fields (omit_defaults does not drop them), so an array's length names its layout.
 * request_id (0) and new_token_ids (1) never moved; fields were inserted mid-struct since.
 * An entry is used only where the fields it names have the types they must have.
 */
const struct vllm_layout vllm_layouts[] = {
	/* +finish_reason, stop_reason, events (2025-02-26) */
	{ "v0.8.0-v0.8.4 (2025-03)", 7, 4, 6, -1 },
	/* +kv_transfer_params */
	{ "v0.8.5 (2025-04)", 8, 4, 6, -1 },
	/* +num_cached_tokens (2025-05-23) */
	{ "v0.9.0 (2025-05)", 9, 4, 6, 8 },
	/* +pooling_output at 4 (2025-06) */
	{ "v0.9.1-v0.10.1 (2025-06 to 2025-08)", 10, 5, 7, 9 },
	/* +trace_headers at 9 (2025-09) */
	{ "v0.10.2-v0.11.0 (2025-09)", 11, 5, 7, 10 },
	/* +num_nans_in_logits last */
	{ "v0.11.1-v0.13 (2025-10 to 2025-12)", 12, 5, 7, 10 },
	/* prefill_stats at 10 in num_cached_tokens' place (2026-04-14), or (a 13-field build of
	 * 2026-01) num_cached_tokens still there: told apart by the field's type */
	{ "v0.20-v0.21 (2026-04 on)", 13, 5, 7, 10 },
	/* +num_external_computed_tokens, routed_experts (2026-01/02) */
	{ "v0.14-v0.19 (2026-01 to 2026-04)", 14, 5, 7, 10 },
};
const size_t vllm_nlayouts = sizeof(vllm_layouts) / sizeof(vllm_layouts[0]);

struct vllm_wire *vllm_wire__new(engine_sched_fn on_sched, void *ctx)
{
	struct vllm_wire *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->on_sched = on_sched;
	w->ctx = ctx;
	return w;
}

void vllm_wire__free(struct vllm_wire *w)
{
	if (!w)
		return;
	while (w->oldest) {
		struct vw_req *q = w->oldest;

		w->oldest = q->newer;
		free(q->out_ts);
		free(q->out_tokens);
		free(q);
	}
	free(w);
}

bool vllm_wire__seen(const struct vllm_wire *w)
{
	return w->n.output_messages || w->n.adds;
}

const struct vllm_wire_counts *vllm_wire__counts(const struct vllm_wire *w)
{
	return &w->n;
}

/* ---- decoding ---- */

static uint64_t mono_ns(double seconds)
{
	return seconds > 0 && seconds < MONO_S_MAX ? (uint64_t)llround(seconds * 1e9) : 0;
}

/* A time on the wire: 0 (none given) or time.monotonic() seconds; NaN, negative and far
 * future are not times. */
static bool time_ok(double seconds)
{
	return seconds >= 0 && seconds < MONO_S_MAX;
}

/* A count on the wire, as an integer or a float. */
static bool count_ok(double v)
{
	return v >= 0 && v <= COUNT_MAX;
}

/* One EngineCoreEvent {type, timestamp}, at *p. */
static int read_event(struct vllm_wire *w, struct vw_req *q, const uint8_t **p, const uint8_t *end)
{
	struct mp_obj o, k, v;
	int64_t type = 0;
	double t = 0;

	if (mp__next(p, end, &o) || o.type != MP_MAP)
		return -1;
	for (uint32_t i = 0; i < o.len; i++) {
		if (mp__next(p, end, &k))
			return -1;
		if (k.type == MP_STR && (mp__str_is(&k, "type") || mp__str_is(&k, "timestamp"))) {
			if (mp__next(p, end, &v))
				return -1;
			if (mp__str_is(&k, "type") ? !mp__int(&v, &type) : !mp__number(&v, &t))
				return -1;
			if (!time_ok(t))
				return -1;
		} else if (mp__skip(p, end)) {
			return -1;
		}
	}
	w->n.events++;
	q->events = true;
	switch (type) {
	case EV_QUEUED:
		if (!q->queued_ns)
			q->queued_ns = mono_ns(t);
		break;
	case EV_SCHEDULED:
		if (q->preempted_at) {
			uint64_t s = mono_ns(t);

			q->preempted_ns += s > q->preempted_at ? s - q->preempted_at : 0;
			q->preempted_at = 0;
		}
		/* the step that began the prefill the first output came from: the last SCHEDULED
		 * before it (a preemption before the first token starts the prefill again) */
		if (!q->first_output_ns)
			q->scheduled_ns = mono_ns(t);
		break;
	case EV_PREEMPTED:
		q->preemptions++;
		q->preempted_at = mono_ns(t);
		break;
	}
	return 0;
}

/* The value of key name in the map at *p (a number); *p moves past the map. */
static int map_number(const uint8_t **p, const uint8_t *end, const char *name, double *out,
		      bool *found)
{
	struct mp_obj o, k, v;

	*found = false;
	if (mp__next(p, end, &o) || o.type != MP_MAP)
		return -1;
	for (uint32_t i = 0; i < o.len; i++) {
		if (mp__next(p, end, &k))
			return -1;
		if (k.type == MP_STR && mp__str_is(&k, name)) {
			if (mp__next(p, end, &v))
				return -1;
			*found = mp__number(&v, out);
		} else if (mp__skip(p, end)) {
			return -1;
		}
	}
	return 0;
}

static const struct vllm_layout *layout_of(uint32_t fields)
{
	for (size_t i = 0; i < vllm_nlayouts; i++) {
		if (vllm_layouts[i].fields == fields)
			return &vllm_layouts[i];
	}
	return NULL;
}

static void note_unknown(struct vllm_wire *w, uint32_t fields)
{
	w->n.unknown_layout++;
	for (size_t i = 0; i < 4; i++) {
		if (w->n.unknown_fields[i] == fields)
			return;
		if (!w->n.unknown_fields[i]) {
			w->n.unknown_fields[i] = fields;
			return;
		}
	}
}

/* An unknown layout's events, by their shape: the field (of n, from p) that is an array of
 * maps whose first key is "type"; nothing else in EngineCoreOutput has that shape. */
static const uint8_t *events_by_shape(const uint8_t *p, const uint8_t *end, uint32_t n)
{
	struct mp_obj o, k;

	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *f = p, *e;

		if (mp__next(&f, end, &o) == 0 && o.type == MP_ARRAY && o.len) {
			e = f;
			if (mp__next(&e, end, &k) == 0 && k.type == MP_MAP && k.len >= 2 &&
			    mp__next(&e, end, &k) == 0 && mp__str_is(&k, "type"))
				return p;
		}
		if (mp__skip(&p, end))
			return NULL;
	}
	return NULL;
}

/* The cached-tokens field at p: num_cached_tokens (an integer, on every output, its value
 * fixed from the first) or prefill_stats (a map, on the first output only); nil on the
 * others. Anything else does not fit the layout. */
static int read_cached(const uint8_t *p, const uint8_t *end, int64_t *n, bool *fits)
{
	const uint8_t *c = p;
	struct mp_obj o;
	double v;
	bool found;

	if (mp__next(&c, end, &o))
		return -1;
	if (o.type == MP_MAP) {
		c = p;
		if (map_number(&c, end, "num_cached_tokens", &v, &found) == 0 && found) {
			if (!count_ok(v))
				return -1;
			*n = (int64_t)v;
		}
	} else if (o.type == MP_UINT || o.type == MP_INT) {
		if (!mp__int(&o, n) || *n < 0)
			return -1;
	} else if (o.type != MP_NIL) {
		*fits = false;
	}
	return 0;
}

/* The time and token count of output q->steps (before it is counted), where kept: past
 * VW_OUTPUTS_KEPT, or without memory (counted), the request's outputs are cut and none is
 * used. */
static void keep_output(struct vllm_wire *w, struct vw_req *q, uint64_t ts, uint32_t tokens)
{
	if (q->out_cut)
		return;
	if (q->steps >= q->out_cap) {
		uint32_t cap = q->out_cap ? q->out_cap * 2 : 64;
		uint64_t *t;
		uint32_t *n;

		if (cap > VW_OUTPUTS_KEPT) {
			q->out_cut = true;
			return;
		}
		t = realloc(q->out_ts, cap * sizeof(*t));
		if (t)
			q->out_ts = t;
		n = t ? realloc(q->out_tokens, cap * sizeof(*n)) : NULL;
		if (n)
			q->out_tokens = n;
		if (!t || !n) {
			w->n.no_memory++;
			q->out_cut = true;
			return;
		}
		q->out_cap = cap;
	}
	q->out_ts[q->steps] = ts;
	q->out_tokens[q->steps] = tokens;
}

/*
 * One EngineCoreOutput at *p, from an outputs message of engine time ts (seen at seen_ns).
 * The layout's fields are read into a scratch copy first, and kept only when each has the
 * type it must have: an array of another release's order is never read as this one.
 */
static int read_output(struct vllm_wire *w, const uint8_t **p, const uint8_t *end, uint64_t ts,
		       uint64_t seen_ns, uint32_t writer)
{
	struct mp_obj arr, id, toks, o;
	const struct vllm_layout *lay;
	const uint8_t *events = NULL, *cached = NULL, *start, *fields;
	int64_t finish = -1, ncached = -1;
	struct vw_req *q;
	bool fits = true;

	if (mp__next(p, end, &arr) || arr.type != MP_ARRAY || arr.len < 2)
		return -1;
	if (mp__next(p, end, &id) || id.type != MP_STR || mp__next(p, end, &toks))
		return -1;
	if (toks.type == MP_ARRAY) {
		for (uint32_t i = 0; i < toks.len; i++) {
			if (mp__skip(p, end))
				return -1;
		}
	} else if (toks.type != MP_NIL && toks.type != MP_BIN && toks.type != MP_EXT) {
		return -1;
	}
	lay = layout_of(arr.len);
	fields = *p;
	for (uint32_t i = 2; i < arr.len; i++) {
		start = *p;
		if (lay && (int)i == lay->events) {
			events = start;
		} else if (lay && (int)i == lay->finish) {
			if (mp__next(p, end, &o))
				return -1;
			if (o.type != MP_NIL && (!mp__int(&o, &finish) || finish < 0 || finish > 15))
				fits = false;
			continue;
		} else if (lay && (int)i == lay->cached) {
			cached = start;
		}
		if (mp__skip(p, end))
			return -1;
	}
	/* the events field: nil or an array of maps */
	if (events) {
		const uint8_t *e = events;

		if (mp__next(&e, end, &o) || (o.type != MP_NIL && o.type != MP_ARRAY))
			fits = false;
	}
	if (cached && read_cached(cached, end, &ncached, &fits))
		return -1;
	if (!lay || !fits) {
		note_unknown(w, arr.len);
		lay = NULL;
		events = events_by_shape(fields, end, arr.len - 2);
	}
	w->n.outputs++;
	q = vw_table__get(w, id.p, id.len, seen_ns);
	if (!q)
		return 0;
	if (lay)
		q->layout = lay->releases;
	if (writer)
		q->engine_pid = writer;
	/* Events first: QUEUED and SCHEDULED come with the first token they led to. */
	if (events) {
		const uint8_t *e = events;

		if (mp__next(&e, end, &o) == 0 && o.type == MP_ARRAY) {
			for (uint32_t i = 0; i < o.len; i++) {
				if (read_event(w, q, &e, end))
					return -1;
			}
		}
	}
	if (toks.type == MP_ARRAY && toks.len) {
		if (!q->first_output_ns)
			q->first_output_ns = ts;
		keep_output(w, q, ts, toks.len);
		q->steps++;
		q->tokens += toks.len;
	}
	if (ncached >= 0 && q->cached_tokens < 0)
		q->cached_tokens = ncached;
	if (lay && finish >= 0) {
		q->finish_reason = (int)finish;
		q->finished = true;
	}
	return 0;
}

/* SchedulerStats: a map of named fields. */
static int read_sched(const uint8_t **p, const uint8_t *end, struct engine_sched *s)
{
	struct mp_obj o, k, v;
	int64_t iv;
	double d;

	if (mp__next(p, end, &o) || o.type != MP_MAP)
		return -1;
	s->kv_cache_usage = NAN;
	for (uint32_t i = 0; i < o.len; i++) {
		if (mp__next(p, end, &k))
			return -1;
		if (k.type != MP_STR) {
			if (mp__skip(p, end))
				return -1;
			continue;
		}
		if (mp__str_is(&k, "prefix_cache_stats")) {
			const uint8_t *m = *p;
			bool found;

			if (map_number(&m, end, "queries", &d, &found) == 0 && found) {
				if (!count_ok(d))
					return -1;
				s->prefix_queries = (uint64_t)d;
			}
			m = *p;
			if (map_number(&m, end, "hits", &d, &found) == 0 && found) {
				if (!count_ok(d))
					return -1;
				s->prefix_hits = (uint64_t)d;
			}
			if (mp__skip(p, end))
				return -1;
			continue;
		}
		if (mp__next(p, end, &v))
			return -1;
		if (v.type == MP_ARRAY || v.type == MP_MAP) {
			/* a nested value: skip its elements (the header was read) */
			uint32_t n = v.type == MP_MAP ? 2 * v.len : v.len;

			for (uint32_t j = 0; j < n; j++) {
				if (mp__skip(p, end))
					return -1;
			}
			continue;
		}
		if (mp__str_is(&k, "num_running_reqs") && mp__int(&v, &iv)) {
			if (iv < 0 || iv > SCHED_REQS_MAX)
				return -1;
			s->running = (uint64_t)iv;
		} else if (mp__str_is(&k, "num_waiting_reqs") && mp__int(&v, &iv)) {
			if (iv < 0 || iv > SCHED_REQS_MAX)
				return -1;
			s->waiting = (uint64_t)iv;
		} else if (mp__str_is(&k, "step_counter") && mp__int(&v, &iv)) {
			if (!count_ok((double)iv))
				return -1;
			s->step_counter = (uint64_t)iv;
		} else if ((mp__str_is(&k, "kv_cache_usage") || mp__str_is(&k, "gpu_cache_usage")) &&
			   mp__number(&v, &d)) {
			if (!(d >= 0 && d <= 1)) /* a fraction of the cache's blocks */
				return -1;
			s->kv_cache_usage = d;
		}
	}
	return 0;
}

static void alias(struct vllm_wire *w, uint32_t from, uint32_t to, const char *comm)
{
	for (size_t i = 0; i < w->nalias; i++) {
		if (w->alias[i].from == from || w->alias[i].to == from)
			return;
	}
	if (w->nalias == sizeof(w->alias) / sizeof(w->alias[0]))
		return;
	w->alias[w->nalias].from = from;
	w->alias[w->nalias].to = to;
	memcpy(w->alias[w->nalias].comm, comm, sizeof(w->alias[0].comm)); /* a seen[] comm */
	w->nalias++;
}

/* Was this outputs message read already (the other end's copy)? Remembers it if not. */
static bool seen_before(struct vllm_wire *w, uint32_t engine, uint64_t ts, uint32_t pid,
			const char *comm)
{
	for (size_t i = 0; i < w->nseen; i++) {
		if (w->seen[i].engine == engine && w->seen[i].ts == ts) {
			if (w->seen[i].pid != pid)
				alias(w, pid, w->seen[i].pid, w->seen[i].comm);
			return true;
		}
	}
	snprintf(w->seen[w->seen_next].comm, sizeof(w->seen[0].comm), "%s", comm ? comm : "");
	w->seen[w->seen_next].engine = engine;
	w->seen[w->seen_next].pid = pid;
	w->seen[w->seen_next].ts = ts;
	w->seen_next = (w->seen_next + 1) % SEEN_OUTPUTS;
	if (w->nseen < SEEN_OUTPUTS)
		w->nseen++;
	return false;
}

/* EngineCoreOutputs: engine_index, outputs, scheduler_stats, timestamp, ... (the envelope
 * has kept these four first since 2025-03-27). */
static int read_outputs(struct vllm_wire *w, uint32_t pid, const char *comm, bool is_write,
			const uint8_t *p, const uint8_t *end, uint64_t seen_ns)
{
	struct mp_obj arr, o;
	const uint8_t *outs, *stats, *e;
	int64_t engine = 0;
	double t = 0;
	uint64_t ts;
	struct engine_sched s = { .wire = VLLM_WIRE_NAME, .pid = pid, .comm = comm };

	if (mp__next(&p, end, &arr) || arr.type != MP_ARRAY || arr.len < 4)
		return -1;
	if (mp__next(&p, end, &o) || !mp__int(&o, &engine) || engine < 0 ||
	    engine > ENGINE_INDEX_MAX)
		return -1;
	outs = p;
	if (mp__skip(&p, end))
		return -1;
	stats = p;
	if (mp__skip(&p, end) || mp__next(&p, end, &o) || !mp__number(&o, &t) || !time_ok(t))
		return -1;
	ts = mono_ns(t);
	if (seen_before(w, (uint32_t)engine, ts, pid, comm)) {
		w->n.duplicates++;
		return 0;
	}
	w->n.output_messages++;
	e = outs;
	if (mp__next(&e, end, &o) || (o.type != MP_ARRAY && o.type != MP_NIL))
		return -1;
	for (uint32_t i = 0; o.type == MP_ARRAY && i < o.len; i++) {
		if (read_output(w, &e, end, ts ? ts : seen_ns, seen_ns, is_write ? pid : 0))
			return -1;
	}
	e = stats;
	if (mp__next(&e, end, &o))
		return -1;
	if (o.type == MP_MAP) {
		e = stats;
		if (read_sched(&e, end, &s))
			return -1;
		s.engine_index = (uint32_t)engine;
		for (size_t i = 0; i < w->nalias; i++) {
			if (w->alias[i].from == pid) {
				s.pid = w->alias[i].to;
				s.comm = w->alias[i].comm[0] ? w->alias[i].comm : comm;
			}
		}
		s.ts = ts ? ts : seen_ns;
		w->n.sched_stats++;
		if (w->on_sched)
			w->on_sched(w->ctx, &s);
	}
	return 0;
}

/* ADD: EngineCoreRequest. Its prompt_token_ids are at 1 (at 2 in releases that sent the
 * prompt's text at 1); external_req_id only in the layout that has it (20 fields, 2026). */
static int read_add(struct vllm_wire *w, const uint8_t *p, const uint8_t *end, uint64_t seen_ns,
		    uint32_t writer)
{
	struct mp_obj arr, id, o;
	struct vw_req *q;
	int64_t prompt = -1;
	const uint8_t *ext = NULL;

	if (mp__next(&p, end, &arr) || arr.type != MP_ARRAY || arr.len < 2)
		return -1;
	if (mp__next(&p, end, &id) || id.type != MP_STR)
		return -1;
	for (uint32_t i = 1; i < arr.len; i++) {
		const uint8_t *f = p;

		if (mp__next(&f, end, &o))
			return -1;
		if (prompt < 0 && i <= 2 && o.type == MP_ARRAY)
			prompt = o.len;
		if (arr.len == 20 && i == 16 && o.type == MP_STR)
			ext = p;
		if (mp__skip(&p, end))
			return -1;
	}
	q = vw_table__find(w, id.p, id.len);
	if (q && q->added) {
		/* the other end's copy: the front end's, where this one is its write; the send's
		 * time, the earlier of the two */
		w->n.duplicates++;
		if (writer)
			q->frontend_pid = writer;
		if (seen_ns < q->add_ns)
			q->add_ns = seen_ns;
		return 0;
	}
	w->n.adds++;
	q = vw_table__get(w, id.p, id.len, seen_ns);
	if (!q)
		return 0;
	q->added = true;
	q->add_ns = seen_ns;
	q->frontend_pid = writer;
	q->prompt_tokens = prompt;
	if (ext) {
		mp__next(&ext, end, &o);
		snprintf(q->external, sizeof(q->external), "%.*s", (int)o.len, (const char *)o.p);
		vw_table__index_keys(w, q, true);
	}
	return 0;
}

/* ABORT: a list of request ids. */
static int read_abort(struct vllm_wire *w, const uint8_t *p, const uint8_t *end, uint64_t seen_ns)
{
	struct mp_obj arr, id;
	struct vw_req *q;

	bool news = false;

	if (mp__next(&p, end, &arr) || arr.type != MP_ARRAY)
		return -1;
	for (uint32_t i = 0; i < arr.len; i++) {
		if (mp__next(&p, end, &id) || id.type != MP_STR)
			return -1;
		q = vw_table__find(w, id.p, id.len);
		if (q) {
			news |= !q->aborted;
			q->aborted = true;
			q->touched_ns = seen_ns > q->touched_ns ? seen_ns : q->touched_ns;
		}
	}
	w->n.aborts += news; /* the other end's copy aborts nothing new */
	return 0;
}

void vllm_wire__message(struct vllm_wire *w, uint32_t pid, const char *comm, bool is_write,
			const struct zmtp_message *m)
{
	const struct zmtp_frame *f;
	const uint8_t *p, *end;
	int rc = 0;

	if (!m->nframes)
		return;
	f = &m->frames[0];
	p = f->data;
	end = f->data + (f->cut ? ZMTP_FRAME_KEEP : f->len);
	w->n.messages++;
	if (f->len == 1 && m->nframes >= 2 && p[0] <= REQ_UTILITY) {
		const struct zmtp_frame *body = &m->frames[1];

		if (body->cut) {
			w->n.malformed++;
			return;
		}
		switch (p[0]) {
		case REQ_ADD:
			rc = read_add(w, body->data, body->data + body->len, m->end_ns,
				      is_write ? pid : 0);
			break;
		case REQ_ABORT:
			rc = read_abort(w, body->data, body->data + body->len, m->end_ns);
			break;
		default: /* START_DP_WAVE, UTILITY (v0.8.0: 0x02) */
			w->n.utility++;
			break;
		}
	} else if (f->len && ((p[0] & 0xf0) == 0x90 || p[0] == 0xdc || p[0] == 0xdd)) {
		if (f->cut) {
			w->n.malformed++;
			return;
		}
		rc = read_outputs(w, pid, comm, is_write, p, end, m->end_ns);
	} else {
		w->n.messages--;
		w->n.not_engine++;
		return;
	}
	if (rc)
		w->n.malformed++;
}

static bool array_head(uint8_t b)
{
	return (b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd;
}

bool vllm_wire__looks_like_frames(const uint8_t *d, size_t n)
{
	size_t body;

	if (n < 5)
		return false;
	/* [type byte] (MORE, size 1, ADD..UTILITY), then the body's frame: an array */
	if (d[0] == 0x01 && d[1] == 0x01 && d[2] <= REQ_UTILITY && d[3] <= 0x03) {
		body = d[3] & 0x02 ? 12 : 5; /* past the body frame's flags and size */
		return n > body && array_head(d[body]);
	}
	/* EngineCoreOutputs: an array of at least 4 whose engine_index is a small integer and
	 * whose outputs are an array or nil; its frame short or long */
	if (d[0] <= 0x01)
		body = 2;
	else if (d[0] <= 0x03 && n >= 9 && !d[1] && !d[2] && !d[3] && !d[4])
		body = 9;
	else
		return false;
	return n > body + 2 && d[body] >= 0x94 && (d[body] & 0xf0) == 0x90 && d[body + 1] < 0x80 &&
	       (array_head(d[body + 2]) || d[body + 2] == 0xc0);
}
