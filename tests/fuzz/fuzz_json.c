// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* user/json.c against jansson on the same bytes: a difference in what is accepted, or in a
 * value read, aborts (the comparison is tests/unit/test_json.c's). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "json.h"

static struct jdoc doc;

static bool same(json_t *j, const struct jval *v)
{
	const char *key;
	json_t *jv;

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
		return v->kind == J_REAL && v->d == json_real_value(j);
	case JSON_STRING:
		return v->kind == J_STRING && v->n == json_string_length(j) &&
		       !memcmp(v->s, json_string_value(j), v->n) && !v->s[v->n];
	case JSON_ARRAY: {
		const struct jval *e;
		size_t k;

		if (v->kind != J_ARRAY || v->n != json_array_size(j))
			return false;
		jv_array_foreach(v, k, e) {
			if (!same(json_array_get(j, k), e))
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

			if (!mine || !same(jv, mine))
				return false;
		}
		for (uint32_t i = 0; i < v->n; i++) {
			if (!json_object_get(j, m->s))
				return false;
			m = m + 1 + m[1].skip;
		}
		return true;
	}
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	const struct jval *v = jdoc__parse(&doc, (const char *)data, size);

	if (!!j != !!v || (j && !same(j, v)))
		abort();
	json_decref(j);
	return 0;
}
