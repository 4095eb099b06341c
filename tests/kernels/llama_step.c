// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * llama.cpp's own steps, for the kernel matrix: the prebuilt llama.cpp that node-llama-cpp
 * ships (its libllama and ggml CPU backends), driven from C so that a guest without node can
 * run it. A prompt of PROMPT tokens in one llama_decode, then DECODES steps of one token,
 * each sampled greedily from the last logits.
 *
 * usage: llama_step MODEL.gguf PROMPT DECODES [BACKENDS_DIR]
 * (BACKENDS_DIR: where the libggml-cpu-*.so are; by default beside the executable). With
 * LLAMA_STEP_WAIT=FILE in the environment it decodes nothing until FILE exists (at most 60 s):
 * a test's go-ahead once its tracer has probed the library.
 * prints one JSON line: {"steps": N, "prompt": PROMPT, "decodes": DECODES, "failed": F}
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"

int main(int argc, char **argv)
{
	struct llama_model_params mp;
	struct llama_context_params cp;
	struct llama_model *model;
	struct llama_context *ctx;
	llama_token toks[256];
	int prompt, decodes, steps = 0, failed = 0;

	if (argc < 4 || argc > 5 || (prompt = atoi(argv[2])) < 1 || prompt > 256 || (decodes = atoi(argv[3])) < 0) {
		fprintf(stderr, "usage: llama_step MODEL.gguf PROMPT(1-256) DECODES [BACKENDS_DIR]\n");
		return 2;
	}
	if (argc == 5) /* the CPU backend that fits this CPU, of those built */
		ggml_backend_load_all_from_path(argv[4]);
	else
		ggml_backend_load_all();
	llama_backend_init();
	mp = llama_model_default_params();
	model = llama_model_load_from_file(argv[1], mp);
	if (!model) {
		fprintf(stderr, "llama_step: cannot load %s\n", argv[1]);
		return 1;
	}
	cp = llama_context_default_params();
	cp.n_ctx = 512;
	cp.n_batch = 256;
	cp.n_threads = cp.n_threads_batch = 1;
	ctx = llama_init_from_model(model, cp);
	if (!ctx) {
		fprintf(stderr, "llama_step: no context\n");
		return 1;
	}
	for (int i = 0; getenv("LLAMA_STEP_WAIT") && access(getenv("LLAMA_STEP_WAIT"), F_OK); i++) {
		if (i == 6000) {
			fprintf(stderr, "llama_step: no go-ahead\n");
			return 1;
		}
		usleep(10000);
	}
	for (int i = 0; i < prompt; i++)
		toks[i] = 1 + i % 50;
	failed += llama_decode(ctx, llama_batch_get_one(toks, prompt)) != 0;
	steps++;
	for (int i = 0; i < decodes; i++) {
		const float *logits = llama_get_logits_ith(ctx, -1);
		int n = llama_vocab_n_tokens(llama_model_get_vocab(model)), best = 0;
		llama_token t;

		for (int k = 1; logits && k < n; k++)
			best = logits[k] > logits[best] ? k : best;
		t = best;
		failed += llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0;
		steps++;
	}
	printf("{\"steps\": %d, \"prompt\": %d, \"decodes\": %d, \"failed\": %d}\n", steps, prompt,
	       decodes, failed);
	llama_free(ctx);
	llama_model_free(model);
	return failed ? 1 : 0;
}
