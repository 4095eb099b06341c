// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The llama.cpp step path for `make bench`: N calls of llama_decode with a real batch layout
 * into .output/libllamastub.so, a library that exports llama_decode and returns at once (the
 * probes' cost per call is then all there is to time). Timed with CLOCK_MONOTONIC:
 *   llamabench decode N    a decode step: 4 sequences, one token each, each with an output
 *   llamabench prefill N   a prefill step: 1 sequence, 512 prompt tokens, the last one output
 * Each first waits 300 ms (tracers attach to new processes' libraries meanwhile), calls 1000
 * times untimed, then prints nanoseconds per call.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct llama_batch {
	int32_t n_tokens;
	int32_t *token;
	float *embd;
	int32_t *pos;
	int32_t *n_seq_id;
	int32_t **seq_id;
	int8_t *logits;
};

int32_t llama_decode(void *ctx, struct llama_batch batch);

#define MAX_TOKENS 512

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static int32_t token[MAX_TOKENS], pos[MAX_TOKENS], nseq[MAX_TOKENS], ids[MAX_TOKENS];
	static int32_t *seq_id[MAX_TOKENS];
	static int8_t logits[MAX_TOKENS];
	long n = argc > 2 ? atol(argv[2]) : 0;
	struct timespec warm = { 0, 300000000 };
	struct llama_batch b = { 0, token, NULL, pos, nseq, seq_id, logits };
	bool prefill;
	double t0;

	if (argc < 3 || n <= 0 || (strcmp(argv[1], "decode") && strcmp(argv[1], "prefill"))) {
		fprintf(stderr, "usage: llamabench decode|prefill N\n");
		return 2;
	}
	prefill = !strcmp(argv[1], "prefill");
	b.n_tokens = prefill ? MAX_TOKENS : 4;
	for (int i = 0; i < b.n_tokens; i++) {
		ids[i] = prefill ? 0 : i;
		pos[i] = prefill ? i : 100;
		nseq[i] = 1;
		seq_id[i] = &ids[i];
		logits[i] = !prefill || i == b.n_tokens - 1;
	}
	nanosleep(&warm, NULL);
	for (int i = 0; i < 1000; i++)
		llama_decode((void *)0x1000, b);
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		llama_decode((void *)0x1000, b);
	printf("%.0f\n", (now_ns() - t0) / n);
	return 0;
}
