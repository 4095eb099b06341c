// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <string.h>

#include "engine/llama_steps.h"

int llama_steps__read(const struct ts_llama_step *rec, size_t size, struct engine_step *out)
{
	size_t head = offsetof(struct ts_llama_step, seqs);

	if (size < head || rec->nseqs > TS_LLAMA_SEQS ||
	    size != head + rec->nseqs * sizeof(rec->seqs[0]) || rec->enter_ns > rec->hdr.ts_ns)
		return -1;
	*out = (struct engine_step){
		.source = STEP_SOURCE_LLAMA,
		.pid = rec->hdr.pid,
		.tid = rec->hdr.tid,
		.start_ns = rec->enter_ns,
		.end_ns = rec->hdr.ts_ns,
		.host_seen_ns = rec->hdr.ts_ns,
		.context = rec->ctx,
		.failed = rec->result != 0,
		.embeddings = (rec->flags & TS_LLAMA_EMBEDDINGS) != 0,
		.tokens = rec->n_tokens,
		.nseqs = rec->nseqs,
		.llama = rec,
	};
	memcpy(out->comm, rec->hdr.comm, sizeof(out->comm));
	for (uint32_t i = 0; i < rec->nseqs; i++) {
		const struct ts_llama_seq *q = &rec->seqs[i];

		out->seqs[i] = (struct step_seq){ q->seq, q->tokens, q->first_pos, q->last_pos,
						  q->outputs };
	}
	return 0;
}

const char *llama_steps__call(const struct ts_llama_step *rec)
{
	return rec->flags & TS_LLAMA_ENCODE ? "encode" : "decode";
}
