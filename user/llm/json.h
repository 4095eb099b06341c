/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A JSON reader for the replies' events: it accepts and rejects exactly what jansson's
 * json_loadb(buf, len, 0) does (an object or array at the top, strict UTF-8, no \u0000, no
 * lone surrogates, integers that fit 64 bits, reals that do not overflow, depth 2048; the last
 * of duplicate keys wins), and reads the values in place: one copy of the input, strings
 * decoded inside it, values in one array that is reused from parse to parse. jansson builds a
 * tree of allocated nodes and a hash table per object; an SSE event is read for two or three
 * of its fields. The equivalence is tested against jansson itself (tests/unit/test_json.c).
 */
#ifndef TS_JSON_H
#define TS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum jkind { J_NULL, J_FALSE, J_TRUE, J_INT, J_REAL, J_STRING, J_ARRAY, J_OBJECT };

/* A value. An array's elements, an object's keys and values in turn, follow it; skip is the
 * number of values from this one to its next sibling. */
struct jval {
	uint8_t kind;
	uint32_t n;    /* string: bytes (NUL-terminated as well); array, object: elements, members */
	uint32_t skip;
	union {
		const char *s;
		long long i;
		double d;
	};
};

struct jdoc_recent;

struct jdoc {
	char *text; /* the input's copy, its strings decoded in place */
	size_t textcap;
	struct jval *v;
	size_t nv, vcap;
	bool too_deep; /* the last parse failed at the depth limit, not on bad syntax */
	struct jdoc_recent *recent; /* jdoc__keep_recent's documents, else NULL */
	uint64_t recent_hits;	    /* parses answered from them */
};

/* The top value of buf, or NULL when jansson would refuse it (or memory ran out). What it
 * returns stays valid until the next parse or jdoc__free. */
const struct jval *jdoc__parse(struct jdoc *d, const char *buf, size_t len);
/*
 * From now on d keeps the documents of its recent parses of small inputs (an event's size),
 * and answers a parse of the very same bytes from them. Where both ends of a connection are
 * traced, or a relay passes a stream on, each event's bytes are read two to four times in
 * quick succession. false without memory (d then parses each time, as before).
 */
bool jdoc__keep_recent(struct jdoc *d);
void jdoc__free(struct jdoc *d);

static inline bool jv_is(const struct jval *v, enum jkind k)
{
	return v && v->kind == k;
}

/* o[key] for an object o (the last member of that name), else NULL. */
static inline const struct jval *jv_get(const struct jval *o, const char *key)
{
	const struct jval *found = NULL, *m;
	size_t klen;

	if (!jv_is(o, J_OBJECT))
		return NULL;
	klen = strlen(key);
	m = o + 1;
	for (uint32_t i = 0; i < o->n; i++) {
		const struct jval *val = m + 1;

		if (m->n == klen && !memcmp(m->s, key, klen))
			found = val;
		m = val + val->skip;
	}
	return found;
}

/* The elements of an array a, in order (none when a is not an array): i counts them. */
#define jv_array_foreach(a, i, e)                                                             \
	for ((i) = 0, (e) = jv_is((a), J_ARRAY) && (a)->n ? (a) + 1 : NULL; (e);                \
	     (e) = ++(i) < (a)->n ? (e) + (e)->skip : NULL)

static inline size_t jv_array_size(const struct jval *a)
{
	return jv_is(a, J_ARRAY) ? a->n : 0;
}

/* Whether v is the string s. */
static inline bool jv_str_is(const struct jval *v, const char *s)
{
	return jv_is(v, J_STRING) && !strcmp(v->s, s);
}

static inline const char *jv_str(const struct jval *v)
{
	return jv_is(v, J_STRING) ? v->s : NULL;
}

#endif
