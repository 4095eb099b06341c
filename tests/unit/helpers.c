#define _GNU_SOURCE
// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sinks/jsonl.h"
#include "stream/recording.h"
#include "helpers.h"

/* `make unit T=test_h2 CASE=test_goaway*`: only the cases whose name matches (cmocka's filter,
 * * and ? as wildcards); every test binary links this file. */
__attribute__((constructor)) static void case_filter(void)
{
	const char *c = getenv("TS_UNIT_CASE");

	if (c && *c)
		cmocka_set_test_filter(c);
}

static void collect(void *ctx, const struct request *req, const struct request_metrics *m)
{
	struct run *r = ctx;

	if (r->n >= 64)
		return;
	r->json[r->n] = jsonl__request_json(req, m);
	r->reqs[r->n] = *req;
	r->reqs[r->n].gaps_ns = NULL;
	r->reqs[r->n].conv = NULL;
	r->n++;
}

void run__init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->pl = pipeline__new(collect, NULL, r);
	assert_non_null(r->pl);
	r->pid = 100;
	r->ssl = 0xabc;
}

static uint64_t next_seq(struct run *r)
{
	for (size_t i = 0; i < 8; i++) {
		if (r->seqs[i][0] == r->ssl || !r->seqs[i][0]) {
			r->seqs[i][0] = r->ssl;
			return r->seqs[i][1]++;
		}
	}
	fail_msg("too many streams in one test run");
	return 0;
}

void script__add(struct script *sc, bool write, uint64_t ts, const char *fmt, ...)
{
	va_list ap;
	char *text;

	va_start(ap, fmt);
	assert_true(vasprintf(&text, fmt, ap) >= 0);
	va_end(ap);
	assert_true(sc->n < 128);
	sc->owned[sc->n] = text;
	sc->s[sc->n++] = (struct seg){ write, ts, text, strlen(text) };
}

void script__bytes(struct script *sc, bool write, uint64_t ts, const void *data, size_t len)
{
	char *copy = malloc(len + 1);

	assert_non_null(copy);
	memcpy(copy, data, len);
	assert_true(sc->n < 128);
	sc->owned[sc->n] = copy;
	sc->s[sc->n++] = (struct seg){ write, ts, copy, len };
}

void script__chunk(struct script *sc, uint64_t ts, const char *payload)
{
	script__add(sc, false, ts, "%zx\r\n%s\r\n", strlen(payload), payload);
}

void script__free(struct script *sc)
{
	for (size_t i = 0; i < sc->n; i++)
		free(sc->owned[i]);
	sc->n = 0;
}

void run__free(struct run *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->json[i]);
	pipeline__free(r->pl);
	free(r->tape[0]);
	free(r->tape[1]);
}

void run__data(struct run *r, bool write, uint64_t ts, const void *data, size_t len)
{
	size_t size = sizeof(struct ts_tls_data) + len;
	struct ts_tls_data *e = calloc(1, size);

	assert_non_null(e);
	e->hdr.type = TS_EV_TLS_DATA;
	e->hdr.size = (__u32)size;
	e->hdr.ts_ns = ts;
	e->hdr.pid = r->pid;
	e->hdr.tid = r->pid;
	strcpy(e->hdr.comm, "client");
	e->ssl = r->ssl;
	e->seq = next_seq(r);
	e->dir = write ? TS_DIR_WRITE : TS_DIR_READ;
	e->total_len = (__u32)len;
	e->len = (__u32)len;
	memcpy(e->data, data, len);
	assert_int_equal(pipeline__feed(r->pl, e, size), 0);
	if (r->ntape[write] + len > r->tapecap[write]) {
		size_t cap = r->tapecap[write] ? r->tapecap[write] : 4096;

		while (cap < r->ntape[write] + len)
			cap *= 2;
		r->tape[write] = realloc(r->tape[write], cap);
		assert_non_null(r->tape[write]);
		r->tapecap[write] = cap;
	}
	memcpy(r->tape[write] + r->ntape[write], e->data, len);
	r->ntape[write] += len;
	free(e);
}

void run__script(struct run *r, const struct seg *s, size_t n, enum split how, size_t k,
		 unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = s[i].len ? s[i].len : strlen(s[i].data), off = 0;

		while (off < len) {
			size_t piece = len - off;

			switch (how) {
			case SPLIT_WHOLE:
				break;
			case SPLIT_AT:
				if (off == 0 && k < len)
					piece = k;
				break;
			case SPLIT_BYTES:
				piece = 1;
				break;
			case SPLIT_RANDOM:
				seed = seed * 1103515245u + 12345u;
				piece = 1 + (seed >> 8) % (len - off);
				break;
			}
			run__data(r, s[i].write, s[i].ts, s[i].data + off, piece);
			off += piece;
		}
	}
}

void run__finish(struct run *r, uint64_t ts)
{
	pipeline__finish(r->pl, ts);
}

void run__tick(struct run *r, uint64_t ts)
{
	struct ts_rec_counters rc = { 0 };

	rc.hdr.type = TS_REC_COUNTERS;
	rc.hdr.size = sizeof(rc);
	rc.hdr.ts_ns = ts;
	assert_int_equal(pipeline__feed(r->pl, &rc, sizeof(rc)), 0);
}

static char *joined(struct run *r)
{
	size_t total = 1;
	char *out;

	for (size_t i = 0; i < r->n; i++)
		total += strlen(r->json[i]) + 1;
	out = calloc(1, total);
	assert_non_null(out);
	for (size_t i = 0; i < r->n; i++) {
		strcat(out, r->json[i]);
		strcat(out, "\n");
	}
	return out;
}

static char *one_run(const struct seg *s, size_t n, enum split how, size_t k, unsigned seed,
		     size_t *nreq)
{
	struct run r;
	char *out;

	run__init(&r);
	run__script(&r, s, n, how, k, seed);
	run__finish(&r, 999999 * MS);
	out = joined(&r);
	if (nreq)
		*nreq = r.n;
	run__free(&r);
	return out;
}

char *run_all_splits(const struct seg *s, size_t n, size_t *nreq)
{
	char *whole = one_run(s, n, SPLIT_WHOLE, 0, 0, nreq);
	size_t longest = 0;

	for (size_t i = 0; i < n; i++) {
		size_t len = s[i].len ? s[i].len : strlen(s[i].data);

		if (len > longest)
			longest = len;
	}
	for (size_t k = 1; k < longest; k++) {
		char *o = one_run(s, n, SPLIT_AT, k, 0, NULL);

		if (strcmp(o, whole))
			fail_msg("split at byte %zu changed the result:\n%s\nvs whole:\n%s", k, o, whole);
		free(o);
	}
	{
		char *o = one_run(s, n, SPLIT_BYTES, 0, 0, NULL);

		if (strcmp(o, whole))
			fail_msg("byte-by-byte feeding changed the result:\n%s\nvs whole:\n%s", o, whole);
		free(o);
	}
	for (unsigned seed = 1; seed <= 20; seed++) {
		char *o = one_run(s, n, SPLIT_RANDOM, 0, seed, NULL);

		if (strcmp(o, whole))
			fail_msg("random pieces (seed %u) changed the result:\n%s\nvs whole:\n%s", seed,
				 o, whole);
		free(o);
	}
	return whole;
}

static json_t *field(const char *json, const char *key, json_t **root)
{
	*root = json_loads(json, 0, NULL);
	assert_non_null(*root);
	return json_object_get(*root, key);
}

double json_num(const char *json, const char *key)
{
	json_t *root, *v = field(json, key, &root);
	double d = json_is_number(v) ? json_number_value(v) : NAN;

	json_decref(root);
	return d;
}

const char *json_str(const char *json, const char *key)
{
	static char buf[256];
	json_t *root, *v = field(json, key, &root);

	snprintf(buf, sizeof(buf), "%s", json_is_string(v) ? json_string_value(v) : "");
	json_decref(root);
	return buf;
}

int json_bool(const char *json, const char *key)
{
	json_t *root, *v = field(json, key, &root);
	int b = json_is_boolean(v) ? json_is_true(v) : -1;

	json_decref(root);
	return b;
}
