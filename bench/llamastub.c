// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What bench/llamabench.c calls: an exported llama_decode that does nothing. */
#include <stdint.h>

struct llama_batch {
	int32_t n_tokens;
	void *token, *embd, *pos, *n_seq_id, *seq_id, *logits;
};

__attribute__((noinline, visibility("default"))) int32_t llama_decode(void *ctx,
								       struct llama_batch batch)
{
	__asm__ volatile("" ::: "memory");
	return 0;
}
