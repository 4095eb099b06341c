/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a llama.cpp build keeps a context's embeddings flag (cparams.embeddings: the context
 * computes embeddings, not logits), read off the build's own setter. struct llama_context is
 * internal and its layout changes between releases; llama_set_embeddings (or, where that only
 * jumps to it, the member llama_context::set_embeddings) stores its bool argument into the
 * field, and the store's displacement from the context pointer is the field's offset. The
 * setter's code is decoded (capstone) following which registers hold the context pointer and
 * the argument, through copies and across the calls a setter makes (a log line), to the
 * first byte store of the one into the other. The step probe then reads that byte at every
 * llama_decode: an embedding step is told from a prompt exactly, whether the server made the
 * context for embeddings (node-llama-cpp) or switches it per batch (llama-server).
 */
#ifndef TS_LLAMA_LAYOUT_H
#define TS_LLAMA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* The offset in code[0..n) (a setter's first bytes): > 0, or 0 where the code does not say
 * (a jump elsewhere, no such store). */
uint32_t llama_layout__store_offset(const uint8_t *code, size_t n);

/* From the file at path, whose setters (elfsym__offsets' file offsets; 0: absent) are
 * c_setter (llama_set_embeddings) and member_setter (llama_context::set_embeddings): the
 * flag's offset, or 0 where neither says. */
uint32_t llama_layout__embeddings_offset(const char *path, uint64_t c_setter,
					 uint64_t member_setter);

#endif
