// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* user/llm/json.c against jansson on the same bytes: a difference in what is accepted, or in a
 * value read, aborts (tests/unit/json_oracle.h compares). */
#include <jansson.h>
#include <stdlib.h>

#include "../unit/json_oracle.h"
#include "fuzz.h"
#include "llm/json.h"

static struct jdoc doc, recent; /* recent keeps its parses (jdoc__keep_recent) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	const struct jval *v = jdoc__parse(&doc, (const char *)data, size);

	if (!!j != !!v || (j && !json_same(j, v)))
		abort();
	if (!recent.recent && !jdoc__keep_recent(&recent))
		abort();
	for (int k = 0; k < 2; k++) { /* the second from what it kept */
		v = jdoc__parse(&recent, (const char *)data, size);
		if (!!j != !!v || (j && !json_same(j, v)))
			abort();
	}
	json_decref(j);
	return 0;
}
