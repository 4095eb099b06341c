/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which model each llama.cpp context is: the file its model was loaded from
 * (TS_EV_LLAMA_MODEL) and the contexts made of it (TS_EV_LLAMA_CONTEXT). A process that serves
 * two models (a draft and its target, chat and embeddings, two chat models) has a context of
 * each; its steps are then separate engines named by the model's file, and a request that
 * names a model (its body's "model", as servers name models by their files) is matched to
 * that model's contexts only.
 *
 * It also follows each context's sequences' positions: a step whose sequence begins below
 * the position it had reached says so (rewound_from), the cells past it having been removed
 * (a context shift, the next prompt on a sequence that kept less of its history, drafted
 * tokens rejected beyond the ones a verifying step expected).
 *
 * A model's name is its file's base name without ".gguf" (and without a split's
 * "-00001-of-00003"). A load or context made before tokenscope started is not known: such a
 * context's steps have no model name and any request may be matched to them.
 */
#ifndef TS_LLAMA_MODELS_H
#define TS_LLAMA_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "tokenscope.h"

#define LLAMA_MODEL_NAME_MAX 64

struct llama_models {
	struct llama_model_entry {
		uint32_t pid;
		bool is_context;
		uint64_t ptr;	/* the model's pointer (a model), or the context's (a context) */
		uint64_t model; /* a context's model (0: its making was not seen) */
		char name[LLAMA_MODEL_NAME_MAX]; /* a model's */
		/* a context's: the position each sequence reached (0: none yet) */
		int32_t next_pos[TS_LLAMA_SEQS];
	} *v;
	size_t n, cap;
};

void llama_models__free(struct llama_models *m);
int llama_models__model(struct llama_models *m, const struct ts_llama_model *rec);
int llama_models__context(struct llama_models *m, const struct ts_llama_context *rec);
/* The process is gone: what it held is let go. */
void llama_models__exit(struct llama_models *m, uint32_t pid);
/* The name of context ctx's model in process pid, or NULL where its making was not seen. */
const char *llama_models__name_of(const struct llama_models *m, uint32_t pid, uint64_t ctx);
struct engine_step;
/* Step s of its context (one that did work): each sequence that begins below the position
 * it had reached gets rewound_from; the positions it reaches are kept. -1 without memory. */
int llama_models__positions(struct llama_models *m, struct engine_step *s);

/* The key a model name is compared by, as a file or as a request names it: its base name
 * (after the last '/'), without ".gguf" or a split's suffix, case folded, hashed; 0 for none. */
uint64_t llama_model__key(const char *name);
/* Into out (LLAMA_MODEL_NAME_MAX): a path's model name (its base name, no ".gguf"). */
void llama_model__name(const char *path, char *out);

#endif
