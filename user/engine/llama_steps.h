/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The llama.cpp step source (engine/step.h): each TS_EV_LLAMA_STEP record (bpf/llama.bpf.c)
 * is one llama_decode or llama_encode call, its batch summed per sequence id. Its start and
 * end are the call's entry and return: exact, and seen by the host as they happen.
 */
#ifndef TS_LLAMA_STEPS_H
#define TS_LLAMA_STEPS_H

#include <stddef.h>

#include <linux/types.h>

#include "engine/step.h"
#include "tokenscope.h"

/* The step a record describes, into out (out->llama points at rec). Returns 0, or -1 for a
 * record whose size does not match its sequences (malformed: nothing is filled). */
int llama_steps__read(const struct ts_llama_step *rec, size_t size, struct engine_step *out);

/* "decode" or "encode". */
const char *llama_steps__call(const struct ts_llama_step *rec);

#endif
