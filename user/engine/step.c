// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "engine/step.h"

enum step_kind step__kind(const struct engine_step *s)
{
	bool prompt = false, decode = false, chunk = false;

	if (s->embeddings)
		return STEP_KIND_EMBED;
	if (!s->nseqs)
		return STEP_KIND_UNKNOWN;
	for (uint32_t i = 0; i < s->nseqs; i++) {
		const struct step_seq *q = &s->seqs[i];

		if (q->tokens == 1 && q->outputs == 1)
			decode = true;
		else if (q->outputs)
			prompt = true;
		else
			chunk = true;
	}
	if (decode && (prompt || chunk))
		return STEP_KIND_MIXED;
	if (decode)
		return STEP_KIND_DECODE;
	return prompt ? STEP_KIND_PREFILL : STEP_KIND_CHUNK;
}

const char *step_kind__name(enum step_kind k)
{
	static const char *const names[] = { "unknown", "decode", "prefill", "chunk", "mixed", "embed" };

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "unknown";
}
