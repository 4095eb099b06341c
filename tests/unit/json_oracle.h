/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The ground truth user/llm/json.c is tested against: a value jansson read, compared with ours.
 * Shared by tests/unit/test_json.c and tests/fuzz/fuzz_json.c.
 */
#ifndef TS_JSON_ORACLE_H
#define TS_JSON_ORACLE_H

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "llm/json.h"

/* Are jansson's value j and ours v the same? */
static bool json_same(json_t *j, const struct jval *v)
{
	const char *key;
	json_t *jv;
	size_t i;

	switch (json_typeof(j)) {
	case JSON_NULL:
		return v->kind == J_NULL;
	case JSON_TRUE:
		return v->kind == J_TRUE;
	case JSON_FALSE:
		return v->kind == J_FALSE;
	case JSON_INTEGER:
		return v->kind == J_INT && v->i == json_integer_value(j);
	case JSON_REAL:
		return v->kind == J_REAL &&
		       (v->d == json_real_value(j) || (isnan(v->d) && isnan(json_real_value(j))));
	case JSON_STRING:
		return v->kind == J_STRING && v->n == json_string_length(j) &&
		       !memcmp(v->s, json_string_value(j), v->n) && !v->s[v->n];
	case JSON_ARRAY: {
		const struct jval *e;
		size_t k;

		if (v->kind != J_ARRAY || v->n != json_array_size(j))
			return false;
		jv_array_foreach(v, k, e) {
			if (!json_same(json_array_get(j, k), e))
				return false;
		}
		return true;
	}
	case JSON_OBJECT: {
		const struct jval *m = v + 1;

		if (v->kind != J_OBJECT)
			return false;
		json_object_foreach(j, key, jv) {
			const struct jval *mine = jv_get(v, key);

			if (!mine || !json_same(jv, mine))
				return false;
		}
		/* and no key of ours that jansson lacks */
		for (i = 0; i < v->n; i++) {
			if (!json_object_get(j, m->s))
				return false;
			m = m + 1 + m[1].skip;
		}
		return true;
	}
	}
	return false;
}

#endif
