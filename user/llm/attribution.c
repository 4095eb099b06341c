// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>

#include "llm/attribution.h"

static const char *const estimate_names[] = { "prefill_start", "gpu_done", "engine",
						      "token_steps", "sequence" };

const char *attribution__estimate_name(uint32_t bit)
{
	for (size_t i = 0; i < sizeof(estimate_names) / sizeof(*estimate_names); i++) {
		if (bit == 1u << i)
			return estimate_names[i];
	}
	return "?";
}

void attribution__free(struct attribution *a)
{
	if (!a)
		return;
	free(a->interfered_by);
	free(a->gaps);
	free(a);
}
