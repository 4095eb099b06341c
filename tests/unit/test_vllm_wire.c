// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * vLLM's engine-core wire (engine/vllm_wire.c): messages written here byte by byte in the
 * layouts of three releases (msgpack as msgspec writes it), then a server request joined to
 * them by its response id, and its split checked to the nanosecond against the times put in.
 * Also: preemption, n>1 children, the other end's copy of a message, --disable-log-stats, a
 * layout no release wrote (counted, never misread), malformed input.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/attribution.h"
#include "llm/request.h"
#include "engine/vllm_wire.h"

/* ---- a msgpack writer, enough for these messages ---- */

struct mp {
	uint8_t b[8192];
	size_t n;
};

static void put(struct mp *m, const void *p, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void byte(struct mp *m, uint8_t v)
{
	put(m, &v, 1);
}

static void arr(struct mp *m, uint32_t n)
{
	if (n < 16) {
		byte(m, 0x90 | n);
	} else {
		byte(m, 0xdc);
		byte(m, n >> 8);
		byte(m, n & 0xff);
	}
}

static void map(struct mp *m, uint32_t n)
{
	byte(m, 0x80 | n);
}

static void nil(struct mp *m)
{
	byte(m, 0xc0);
}

static void uint_(struct mp *m, uint32_t v)
{
	if (v < 128) {
		byte(m, v);
	} else {
		byte(m, 0xce);
		for (int i = 3; i >= 0; i--)
			byte(m, v >> (8 * i));
	}
}

static void str(struct mp *m, const char *s)
{
	size_t n = strlen(s);

	assert_true(n < 32);
	byte(m, 0xa0 | n);
	put(m, s, n);
}

static void f64(struct mp *m, double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	byte(m, 0xcb);
	for (int i = 7; i >= 0; i--)
		byte(m, u >> (8 * i));
}

/* int 64 (0xd3) and uint 64 (0xcf), for values no encoder of the engine's would choose */
static void i64(struct mp *m, int64_t v, bool is_unsigned)
{
	byte(m, is_unsigned ? 0xcf : 0xd3);
	for (int i = 7; i >= 0; i--)
		byte(m, (uint64_t)v >> (8 * i));
}

static void event(struct mp *m, int type, uint64_t ns)
{
	map(m, 2);
	str(m, "type");
	uint_(m, type);
	str(m, "timestamp");
	f64(m, ns / 1e9);
}

/* ---- messages ---- */

/* A message as process pid wrote (is_write) or read it. */
static void send_as(struct vllm_wire *w, const struct mp *f0, const struct mp *f1, uint64_t ts,
		    uint32_t pid, bool is_write)
{
	struct zmtp_frame fr[2] = { { f0->b, f0->n, false }, { f1 ? f1->b : NULL, f1 ? f1->n : 0 } };
	struct zmtp_message msg = { fr, f1 ? 2 : 1, 0, ts, ts };

	vllm_wire__message(w, pid, "python3", is_write, &msg);
}

static void send(struct vllm_wire *w, const struct mp *f0, const struct mp *f1, uint64_t ts)
{
	send_as(w, f0, f1, ts, 100, false);
}

enum layout { V08 = 7, V010 = 10, V021 = 13 };

/* ADD, in the request layout of the release of that output layout. */
static void add(struct vllm_wire *w, enum layout l, const char *id, const char *external,
		unsigned prompt, uint64_t ts)
{
	struct mp type = { .n = 0 }, m = { .n = 0 };
	unsigned fields = l == V08 ? 10 : l == V010 ? 15 : 20;

	byte(&type, 0);
	arr(&m, fields);
	str(&m, id);
	if (l == V08)
		nil(&m); /* prompt: sent as None */
	arr(&m, prompt);
	for (unsigned i = 0; i < prompt; i++)
		uint_(&m, 1000 + i);
	for (unsigned i = l == V08 ? 3 : 2; i < fields; i++) {
		if (l == V021 && i == 16 && external)
			str(&m, external);
		else if (i == (l == V08 ? 8u : l == V010 ? 8u : 5u))
			f64(&m, 1.7e9); /* arrival_time: the wall clock */
		else
			nil(&m);
	}
	send(w, &type, &m, ts);
}

struct out {
	const char *id;
	unsigned tokens;
	int finish;	  /* -1: none */
	int cached;	  /* -1: not sent */
	int nev;
	int ev_type[4];
	uint64_t ev_ns[4];
};

static void output(struct mp *m, enum layout l, const struct out *o)
{
	arr(m, l);
	str(m, o->id);
	arr(m, o->tokens);
	for (unsigned i = 0; i < o->tokens; i++)
		uint_(m, 7);
	for (int i = 2; i < (int)l; i++) {
		int finish = l == V08 ? 4 : 5, events = l == V08 ? 6 : 7, cached = l == V010 ? 9 : 10;

		if (i == finish && o->finish >= 0) {
			uint_(m, o->finish);
		} else if (i == events && o->nev) {
			arr(m, o->nev);
			for (int e = 0; e < o->nev; e++)
				event(m, o->ev_type[e], o->ev_ns[e]);
		} else if (l == V010 && i == cached) {
			uint_(m, o->cached > 0 ? o->cached : 0);
		} else if (l == V021 && i == cached && o->cached >= 0) {
			map(m, 2); /* prefill_stats */
			str(m, "num_prompt_tokens");
			uint_(m, 64);
			str(m, "num_cached_tokens");
			uint_(m, o->cached);
		} else if (l == V021 && i == 12) {
			uint_(m, 0); /* num_nans_in_logits */
		} else {
			nil(m);
		}
	}
}

static void outputs(struct vllm_wire *w, enum layout l, uint64_t engine_ns, const struct out *o,
		    size_t n, bool stats, uint64_t seen)
{
	struct mp m = { .n = 0 };

	arr(&m, l == V08 ? 7 : 8);
	uint_(&m, 0); /* engine_index */
	arr(&m, n);
	for (size_t i = 0; i < n; i++)
		output(&m, l, &o[i]);
	if (stats) {
		map(&m, 5);
		str(&m, "num_running_reqs");
		uint_(&m, 3);
		str(&m, "num_waiting_reqs");
		uint_(&m, 2);
		str(&m, l == V08 ? "gpu_cache_usage" : "kv_cache_usage");
		f64(&m, 0.25);
		str(&m, "prefix_cache_stats");
		map(&m, 3);
		str(&m, "reset");
		byte(&m, 0xc2);
		str(&m, "queries");
		uint_(&m, 128);
		str(&m, "hits");
		uint_(&m, 32);
		str(&m, "step_counter");
		uint_(&m, 9);
	} else {
		nil(&m);
	}
	f64(&m, engine_ns / 1e9);
	for (int i = 4; i < (l == V08 ? 7 : 8); i++)
		nil(&m);
	send(w, &m, NULL, seen);
}

static struct engine_sched last_sched;
static int nsched;

static void on_sched(void *ctx, const struct engine_sched *s)
{
	(void)ctx;
	last_sched = *s;
	nsched++;
}

/* A server request of the API server, its response id rid. */
static struct request *server_request(const char *rid, uint64_t start, uint64_t first)
{
	struct request *r = request__new();

	assert_non_null(r);
	r->role = ROLE_SERVER;
	r->start_ns = start;
	r->first_token_ns = first;
	snprintf(r->response_id, sizeof(r->response_id), "%s", rid);
	return r;
}

#define S 1000000000ull
#define MS 1000000ull

/* The newest layout: ids {external}-{8 chars}, external_req_id, prefill_stats. */
static void test_newest_layout(void **state)
{
	struct vllm_wire *w = vllm_wire__new(on_sched, NULL);
	uint64_t t0 = 5000 * S, queued = t0 + 3 * MS, sched = t0 + 11 * MS, out1 = t0 + 40 * MS;
	struct out first = { "chatcmpl-abc-1a2b3c4d", 1, -1, 32, 2, { 1, 2 }, { queued, sched } };
	struct out more = { "chatcmpl-abc-1a2b3c4d", 1, -1, -1, 0, { 0 }, { 0 } };
	struct out last = { "chatcmpl-abc-1a2b3c4d", 1, 1, -1, 0, { 0 }, { 0 } };
	struct request *r;
	const struct attribution *a;

	(void)state;
	nsched = 0;
	add(w, V021, "chatcmpl-abc-1a2b3c4d", "chatcmpl-abc", 64, t0 + 2 * MS);
	outputs(w, V021, out1, &first, 1, true, out1 + 100000);
	outputs(w, V021, out1, &first, 1, true, out1 + 200000); /* the other end's copy */
	outputs(w, V021, out1 + 10 * MS, &more, 1, true, out1 + 10 * MS);
	outputs(w, V021, out1 + 20 * MS, &last, 1, false, out1 + 20 * MS);
	assert_int_equal(vllm_wire__counts(w)->duplicates, 1);
	assert_int_equal(vllm_wire__counts(w)->output_messages, 3);
	assert_int_equal(vllm_wire__counts(w)->unknown_layout, 0);
	assert_int_equal(nsched, 2);
	assert_int_equal(last_sched.running, 3);
	assert_int_equal(last_sched.waiting, 2);
	assert_int_equal(last_sched.prefix_queries, 128);
	assert_int_equal(last_sched.prefix_hits, 32);
	assert_true(last_sched.kv_cache_usage == 0.25);
	assert_string_equal(last_sched.wire, "vllm");
	/* the same, as the generic layers read it (engine/engine_wire.h) */
	{
		struct engine_wire_counts c;

		vllm_wire_ops.counts(w, &c);
		assert_int_equal(c.duplicates, 1);
		assert_int_equal(c.ndetail, 5);
		assert_string_equal(c.detail[0].name, "adds");
		assert_int_equal(c.detail[0].n, 1);
		assert_string_equal(c.detail[2].name, "outputs");
		assert_int_equal(c.detail[2].n, vllm_wire__counts(w)->outputs);
		assert_string_equal(c.note, "");
	}

	r = server_request("chatcmpl-abc", t0, out1 + 2 * MS);
	assert_true(vllm_wire_ops.attribute(w, r));
	a = r->attr;
	assert_true(a->ok);
	assert_true(a->wire.events);
	assert_string_equal(a->wire.name, "vllm");
	assert_string_equal(a->wire.engine_request_id, "chatcmpl-abc-1a2b3c4d");
	/* the engine's float seconds hold these to well under a microsecond */
	assert_true(llabs((long long)a->wire.frontend_ns - 3 * (long long)MS) < 1000);
	assert_true(llabs((long long)a->wire.engine_queue_ns - 8 * (long long)MS) < 1000);
	assert_true(llabs((long long)a->queue_ns - 11 * (long long)MS) < 1000);
	assert_true(llabs((long long)a->prefill_ns - 29 * (long long)MS) < 1000);
	assert_true(llabs((long long)a->emit_ns - 2 * (long long)MS) < 1000);
	assert_int_equal(a->wire.cached_tokens, 32);
	assert_int_equal(a->wire.prompt_tokens, 64);
	assert_int_equal(a->wire.output_steps, 3);
	assert_int_equal(a->wire.output_tokens, 3);
	assert_string_equal(a->wire.finish_reason, "length");
	assert_string_equal(a->wire.layout, "v0.20-v0.21 (2026-04 on)");
	assert_int_equal(a->estimated, 0);
	request__free(r);
	/* an id no engine request had */
	r = server_request("chatcmpl-zzz", t0, out1);
	assert_false(vllm_wire__attribute(w, r));
	assert_null(r->attr);
	request__free(r);
	vllm_wire__free(w);
}

/* Early 2025: the id is the response's; a preemption before the first token starts the
 * prefill again, and its time is counted. */
static void test_v08_preemption(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 7000 * S, q = t0 + 1 * MS, s1 = t0 + 2 * MS, p = t0 + 5 * MS, s2 = t0 + 9 * MS;
	uint64_t out1 = t0 + 30 * MS;
	struct out first = { "cmpl-xyz", 1, -1, -1, 4, { 1, 2, 3, 2 }, { q, s1, p, s2 } };
	struct out last = { "cmpl-xyz", 2, 0, -1, 0, { 0 }, { 0 } };
	struct request *r;
	const struct attribution *a;

	(void)state;
	add(w, V08, "cmpl-xyz", NULL, 20, t0);
	outputs(w, V08, out1, &first, 1, true, out1);
	outputs(w, V08, out1 + MS, &last, 1, false, out1 + MS);
	r = server_request("cmpl-xyz", t0, out1 + MS / 2);
	assert_true(vllm_wire__attribute(w, r));
	a = r->attr;
	assert_int_equal(a->wire.preemptions, 1);
	assert_true(llabs((long long)a->wire.preempted_ns - 4 * (long long)MS) < 1000);
	assert_true(llabs((long long)a->queue_ns - 9 * (long long)MS) < 1000); /* to s2 */
	assert_true(llabs((long long)a->prefill_ns - 21 * (long long)MS) < 1000);
	assert_int_equal(a->wire.cached_tokens, -1); /* this release did not send it */
	assert_string_equal(a->wire.finish_reason, "stop");
	assert_int_equal(a->wire.output_tokens, 3);
	assert_int_equal(a->wire.prompt_tokens, 20);
	request__free(r);
	vllm_wire__free(w);
}

/* Mid 2025: num_cached_tokens on every output; n=2 children of one API request. */
static void test_v010_children(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 9000 * S;
	struct out o[2] = {
		{ "1_cmpl-n2", 1, -1, 16, 2, { 1, 2 }, { t0 + 2 * MS, t0 + 4 * MS } },
		{ "0_cmpl-n2", 1, -1, 16, 2, { 1, 2 }, { t0 + 1 * MS, t0 + 3 * MS } },
	};
	struct request *r;

	(void)state;
	add(w, V010, "0_cmpl-n2", NULL, 40, t0);
	add(w, V010, "1_cmpl-n2", NULL, 40, t0);
	outputs(w, V010, t0 + 20 * MS, o, 2, false, t0 + 20 * MS);
	r = server_request("cmpl-n2", t0, t0 + 21 * MS);
	assert_true(vllm_wire__attribute(w, r));
	assert_int_equal(r->attr->wire.engine_requests, 2);
	assert_string_equal(r->attr->wire.engine_request_id, "0_cmpl-n2");
	assert_int_equal(r->attr->wire.cached_tokens, 16);
	assert_true(llabs((long long)r->attr->queue_ns - 3 * (long long)MS) < 1000);
	request__free(r);
	vllm_wire__free(w);
}

/* A field count no release wrote, and a known count whose fields have the wrong types: the
 * tokens and the events (by their shape) are read, the finish reason never. */
static void test_unknown_layout(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 11000 * S;
	struct mp m = { .n = 0 };
	struct request *r;

	(void)state;
	arr(&m, 8);
	uint_(&m, 0);
	arr(&m, 2);
	/* 15 fields: events at 3, an int at 4 that would be a finish reason elsewhere */
	arr(&m, 15);
	str(&m, "req-u");
	arr(&m, 1);
	uint_(&m, 5);
	nil(&m);
	arr(&m, 2);
	event(&m, 1, t0 + 1 * MS);
	event(&m, 2, t0 + 2 * MS);
	uint_(&m, 1);
	for (int i = 5; i < 15; i++)
		nil(&m);
	/* 10 fields (a known count) with a string where finish_reason must be */
	arr(&m, 10);
	str(&m, "req-v");
	arr(&m, 1);
	uint_(&m, 5);
	for (int i = 2; i < 10; i++) {
		if (i == 5)
			str(&m, "x");
		else
			nil(&m);
	}
	nil(&m);
	f64(&m, (t0 + 5 * MS) / 1e9);
	for (int i = 4; i < 8; i++)
		nil(&m);
	send(w, &m, NULL, t0 + 5 * MS);
	assert_int_equal(vllm_wire__counts(w)->unknown_layout, 2);
	assert_int_equal(vllm_wire__counts(w)->unknown_fields[0], 15);
	assert_int_equal(vllm_wire__counts(w)->unknown_fields[1], 10);
	r = server_request("req-u", t0, t0 + 6 * MS);
	assert_true(vllm_wire__attribute(w, r));
	assert_true(llabs((long long)r->attr->wire.engine_queue_ns - 1 * (long long)MS) < 1000);
	assert_string_equal(r->attr->wire.finish_reason, "");
	assert_null(r->attr->wire.layout);
	request__free(r);
	vllm_wire__free(w);
}

/* --disable-log-stats: no events; the ADD's capture time and the output's engine time. */
static void test_no_events(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 13000 * S;
	struct out o = { "chatcmpl-q", 1, 1, -1, 0, { 0 }, { 0 } };
	struct request *r;

	(void)state;
	add(w, V010, "chatcmpl-q", NULL, 8, t0 + 2 * MS);
	outputs(w, V010, t0 + 12 * MS, &o, 1, false, t0 + 12 * MS);
	r = server_request("chatcmpl-q", t0, t0 + 13 * MS);
	assert_true(vllm_wire__attribute(w, r));
	assert_false(r->attr->wire.events);
	assert_int_equal(r->attr->wire.frontend_ns, 2 * MS);
	assert_true(llabs((long long)r->attr->wire.engine_ns - 10 * (long long)MS) < 1000);
	request__free(r);
	vllm_wire__free(w);
}

/* The join's keys: an id of 2026 whose ADD was not seen (its "-" and 8 characters), an older
 * id that ends so itself (an X-Request-Id of that shape: joined as it is, and the shorter id's
 * own request, where there is one, keeps it), n>1 children of the former; one named by
 * none. */
static void test_join_keys(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 15000 * S;
	struct out o[5] = {
		{ "chatcmpl-new-0a1b2c3d", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 2 * MS } },
		{ "cmpl-old-12345678", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 3 * MS } },
		{ "0_cmpl-kids-deadbeef", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 4 * MS } },
		{ "1_cmpl-kids-deadbeef", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 5 * MS } },
		{ "cmpl-old", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 6 * MS } },
	};
	static const struct {
		const char *rid, *engine_id;
		unsigned n;
	} want[] = {
		{ "chatcmpl-new", "chatcmpl-new-0a1b2c3d", 1 },
		{ "cmpl-old-12345678", "cmpl-old-12345678", 1 },
		{ "cmpl-kids", "0_cmpl-kids-deadbeef", 2 },
		{ "cmpl-old", "cmpl-old", 1 },
	};
	struct request *r;

	(void)state;
	outputs(w, V021, t0 + 10 * MS, o, 5, false, t0 + 10 * MS);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		r = server_request(want[i].rid, t0, t0 + 11 * MS);
		assert_true(vllm_wire__attribute(w, r));
		assert_string_equal(r->attr->wire.engine_request_id, want[i].engine_id);
		assert_int_equal(r->attr->wire.engine_requests, want[i].n);
		request__free(r);
	}
	r = server_request("cmpl-none", t0, t0 + 11 * MS); /* no engine request is this one's */
	assert_false(vllm_wire__attribute(w, r));
	request__free(r);
	vllm_wire__free(w);
}

/* More engine requests than the table keeps: the oldest go, counted; the newest still join. */
static void test_table_limit(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	struct out o = { NULL, 1, -1, -1, 0, { 0 }, { 0 } };
	char id[32];
	struct request *r;

	(void)state;
	for (unsigned i = 0; i < 70000; i++) {
		snprintf(id, sizeof(id), "cmpl-%u", i);
		o.id = id;
		outputs(w, V08, (20000 + i) * MS, &o, 1, false, (20000 + i) * MS);
	}
	assert_int_equal(vllm_wire__counts(w)->evicted, 70000 - 65536);
	r = server_request("cmpl-69999", 0, UINT64_MAX / 2);
	assert_true(vllm_wire__attribute(w, r));
	request__free(r);
	r = server_request("cmpl-0", 0, UINT64_MAX / 2);
	assert_false(vllm_wire__attribute(w, r));
	request__free(r);
	vllm_wire__free(w);
}

/* Engine times outside the request (another clock: a container's time namespace): joined,
 * but they split nothing, and a CUDA split stands as it was. */
static void test_clock_outside(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 40000 * S;
	struct out o = { "cmpl-clk", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 2 * MS } };
	struct request *r;

	(void)state;
	outputs(w, V08, t0 + 5 * MS, &o, 1, false, t0 + 5 * MS);
	r = server_request("cmpl-clk", t0 + 100 * S, t0 + 100 * S + 7 * MS); /* later clock */
	r->attr = calloc(1, sizeof(*r->attr));
	assert_non_null(r->attr);
	r->attr->ok = true; /* as CUDA steps split it */
	r->attr->queue_ns = 3 * MS;
	r->attr->prefill_ns = 2 * MS;
	assert_true(vllm_wire__attribute(w, r));
	assert_true(r->attr->wire.joined);
	assert_false(r->attr->wire.split);
	assert_int_equal(r->attr->queue_ns, 3 * MS);
	assert_int_equal(r->attr->prefill_ns, 2 * MS);
	request__free(r);
	/* and without a CUDA split: not attributed, and why */
	r = server_request("cmpl-clk", t0 + 100 * S, t0 + 100 * S + 7 * MS);
	assert_true(vllm_wire__attribute(w, r));
	assert_false(r->attr->ok);
	assert_string_equal(r->attr->error, "engine_wire: the engine's times fall outside the request");
	request__free(r);
	vllm_wire__free(w);
}

/* The API server wrote the ADD: only its own server records are joined, not a proxy's in
 * front of it (which carry the same response id). */
static void test_front_end_only(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	uint64_t t0 = 30000 * S;
	struct mp type = { .n = 0 }, m = { .n = 0 };
	struct out o = { "cmpl-px", 1, 1, -1, 2, { 1, 2 }, { t0 + MS, t0 + 2 * MS } };
	struct request *r;

	(void)state;
	byte(&type, 0);
	arr(&m, 10);
	str(&m, "cmpl-px");
	nil(&m);
	arr(&m, 0);
	for (int i = 3; i < 10; i++)
		nil(&m);
	send_as(w, &type, &m, t0, 4242, true);
	send_as(w, &type, &m, t0 + 1000, 77, false); /* the engine's copy */
	outputs(w, V08, t0 + 5 * MS, &o, 1, false, t0 + 5 * MS);
	r = server_request("cmpl-px", t0 - MS, t0 + 6 * MS);
	r->pid = 99; /* nginx, say */
	assert_false(vllm_wire__attribute(w, r));
	r->pid = 4242;
	assert_true(vllm_wire__attribute(w, r));
	assert_int_equal(vllm_wire__counts(w)->adds, 1);
	assert_int_equal(vllm_wire__counts(w)->duplicates, 1);
	request__free(r);
	vllm_wire__free(w);
}

static void test_malformed_and_shapes(void **state)
{
	struct vllm_wire *w = vllm_wire__new(NULL, NULL);
	struct mp m = { .n = 0 }, t = { .n = 0 };
	static const uint8_t out_short[] = { 0x00, 0x40, 0x98, 0x00, 0x91, 0x9d };
	static const uint8_t out_long[] = { 0x02, 0, 0, 0, 0, 0, 0, 0x10, 0, 0x98, 0x01, 0xdc };
	static const uint8_t add_frames[] = { 0x01, 0x01, 0x00, 0x00, 0x40, 0x94 };
	static const uint8_t add_long[] = { 0x01, 0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0x01, 0x00,
					    0xdc };
	static const uint8_t http[] = "POST /v1/chat";

	(void)state;
	arr(&m, 8);
	uint_(&m, 0);
	arr(&m, 3); /* promises three outputs, has none */
	send(w, &m, NULL, 1);
	byte(&t, 0);
	m.n = 0;
	arr(&m, 20);
	str(&m, "cut");
	send(w, &t, &m, 2);
	assert_int_equal(vllm_wire__counts(w)->malformed, 2);
	m.n = 0;
	str(&m, "hello");
	send(w, &m, NULL, 3);
	assert_int_equal(vllm_wire__counts(w)->not_engine, 1);
	assert_true(vllm_wire__looks_like_frames(out_short, sizeof(out_short)));
	assert_true(vllm_wire__looks_like_frames(out_long, sizeof(out_long)));
	assert_true(vllm_wire__looks_like_frames(add_frames, sizeof(add_frames)));
	assert_true(vllm_wire__looks_like_frames(add_long, sizeof(add_long)));
	assert_false(vllm_wire__looks_like_frames(http, sizeof(http) - 1));
	/* an id with a NUL in it (the fuzzer's find): kept, found and let go by all its bytes */
	m.n = 0;
	arr(&m, 8);
	uint_(&m, 0);
	arr(&m, 1);
	arr(&m, 7);
	byte(&m, 0xa3);
	put(&m, "a\0b", 3);
	arr(&m, 0);
	for (int i = 2; i < 7; i++)
		nil(&m);
	nil(&m);
	f64(&m, 1.0);
	for (int i = 4; i < 8; i++)
		nil(&m);
	send(w, &m, NULL, 4);
	assert_int_equal(vllm_wire__counts(w)->outputs, 1);
	vllm_wire__prune(w, UINT64_MAX / 2);
	vllm_wire__free(w);
}

/* An outputs message from engine `engine` at `t` seconds: its scheduler stats name one field
 * with a value written by put_value, and an event of time `ev_t` on one request. */
struct hostile {
	const char *field; /* in the stats; NULL: none */
	int kind;	   /* 0 int, 1 uint 64, 2 double */
	double d;
	int64_t i;
	int64_t engine;
	double t, ev_t;
};

static void send_hostile(struct vllm_wire *w, const struct hostile *h, uint64_t seen)
{
	struct mp m = { .n = 0 };

	arr(&m, 8);
	i64(&m, h->engine, h->engine > INT32_MAX);
	arr(&m, 1);
	arr(&m, 7); /* an output of a request with one event and no tokens */
	str(&m, "req-hostile");
	arr(&m, 0);
	for (int i = 2; i < 7; i++) {
		if (i == 4) {
			arr(&m, 1);
			map(&m, 2);
			str(&m, "type");
			uint_(&m, 1);
			str(&m, "timestamp");
			f64(&m, h->ev_t);
		} else {
			nil(&m);
		}
	}
	map(&m, 2);
	str(&m, "num_running_reqs");
	uint_(&m, 3);
	str(&m, h->field ? h->field : "num_waiting_reqs");
	if (!h->field)
		uint_(&m, 2);
	else if (h->kind == 2)
		f64(&m, h->d);
	else
		i64(&m, h->i, h->kind == 1);
	f64(&m, h->t);
	for (int i = 4; i < 8; i++)
		nil(&m);
	send(w, &m, NULL, seen);
}

/*
 * Any process may write to an engine's socket: values no engine sends (a negative count, a
 * cache use past 1 or NaN, a count past 2^53, an engine index past 65535, a time that is
 * negative, NaN or centuries on) make their message malformed, counted, and nothing of it
 * reaches the gauges. A message of sane values after them is read.
 */
static void test_hostile_values(void **state)
{
	static const struct hostile bad[] = {
		{ "kv_cache_usage", 2, -5, 0, 0, 101, 100 },
		{ "kv_cache_usage", 2, 2.5, 0, 0, 102, 100 },
		{ "kv_cache_usage", 2, 1e308, 0, 0, 103, 100 },
		{ "kv_cache_usage", 2, NAN, 0, 0, 104, 100 },
		{ "num_running_reqs", 0, 0, -1, 0, 105, 100 },
		{ "num_waiting_reqs", 1, 0, (int64_t)1 << 40, 0, 106, 100 },
		{ "step_counter", 0, 0, -7, 0, 107, 100 },
		{ "step_counter", 1, 0, INT64_MAX, 0, 108, 100 },
		{ NULL, 0, 0, 0, ((int64_t)1 << 32) + 5, 109, 100 },
		{ NULL, 0, 0, 0, 0, -9.2e9, 100 },
		{ NULL, 0, 0, 0, 0, NAN, 100 },
		{ NULL, 0, 0, 0, 0, 1e300, 100 },
		{ NULL, 0, 0, 0, 0, 110, -1 },
		{ NULL, 0, 0, 0, 0, 111, INFINITY },
	};
	struct vllm_wire *w = vllm_wire__new(on_sched, NULL);
	size_t i;

	(void)state;
	nsched = 0; /* each message of its own time: none is a copy of another */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		send_hostile(w, &bad[i], 1000 + i);
		assert_int_equal(vllm_wire__counts(w)->malformed, i + 1);
		assert_int_equal(nsched, 0);
	}
	send_hostile(w, &(struct hostile){ "kv_cache_usage", 2, 0.5, 0, 7, 200, 199 }, 2000);
	assert_int_equal(vllm_wire__counts(w)->malformed, i);
	assert_int_equal(nsched, 1);
	assert_int_equal(last_sched.engine_index, 7);
	assert_int_equal(last_sched.running, 3);
	assert_float_equal(last_sched.kv_cache_usage, 0.5, 0);
	assert_int_equal(last_sched.ts, 200 * 1000000000ull);
	vllm_wire__free(w);
}

/* Every engine wire is a whole row: each call the generic layers make is there, its names
 * are its own, and the table fits the pipeline's room for it. */
static void test_engine_wire_rows(void **state)
{
	(void)state;
	assert_true(engine_nwires >= 1 && engine_nwires <= ENGINE_WIRES_MAX);
	for (size_t i = 0; i < engine_nwires; i++) {
		const struct engine_wire_ops *o = engine_wires[i];

		assert_non_null(o->name);
		assert_non_null(o->title);
		assert_true(o->new && o->free && o->attribute && o->first_output && o->outputs &&
			    o->prune && o->counts && (o->zmtp_message || !o->looks_like_frames));
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(o->name, engine_wires[j]->name);
	}
	assert_ptr_equal(engine_wires[0], &vllm_wire_ops);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_newest_layout),
		cmocka_unit_test(test_engine_wire_rows),
		cmocka_unit_test(test_v08_preemption),
		cmocka_unit_test(test_v010_children),
		cmocka_unit_test(test_unknown_layout),
		cmocka_unit_test(test_no_events),
		cmocka_unit_test(test_join_keys),
		cmocka_unit_test(test_table_limit),
		cmocka_unit_test(test_front_end_only),
		cmocka_unit_test(test_clock_outside),
		cmocka_unit_test(test_malformed_and_shapes),
		cmocka_unit_test(test_hostile_values),
	};

	return cmocka_run_group_tests_name("vllm_wire", tests, NULL, NULL);
}
