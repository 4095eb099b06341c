/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names of kernels launched through the CUDA runtime: the launch passes the host stub's
 * address, which the process's own ELF symbols name (e.g. _Z12prefill_attnPf, demangled to
 * prefill_attn(float*)). Live only: the executable's text mapping comes from the exec record
 * (so a program that has already exited when its records are read is named all the same),
 * libraries from /proc/PID/maps; the names then travel in the event stream as
 * TS_EV_GPU_KNAME records.
 */
#ifndef TS_CUDA_NAMES_H
#define TS_CUDA_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "tokenscope.h"

struct cuda_names;

struct cuda_names *cuda_names__new(void);
void cuda_names__free(struct cuda_names *k);
/* Already named (or tried) for this process? */
bool cuda_names__known(const struct cuda_names *k, uint32_t pid, uint64_t addr);
/* Name addr in pid's address space; "" when no symbol covers it. Remembered. */
void cuda_names__name(struct cuda_names *k, uint32_t pid, uint64_t addr, char *out, size_t n);
/* Keep pid's executable file mappings from /proc/PID/maps, to name its stubs after it exits
 * (the newest MAX_SNAPSHOTS processes). -1: nothing read (gone, or exited and not reaped). */
int cuda_names__snapshot(struct cuda_names *k, uint32_t pid);
/* A new program in pid (its exec record): what was kept of the earlier one is dropped, and the
 * record's text mapping kept if the file at its exec path is still the one it mapped.
 * -1: nothing kept. */
int cuda_names__snapshot_exec(struct cuda_names *k, const struct ts_exec *e);
/* The process is gone: its addresses mean nothing any more. */
void cuda_names__forget(struct cuda_names *k, uint32_t pid);
/* Demangle an Itanium C++ name; copies it unchanged when it is not one. */
void cuda_names__demangle(const char *name, char *out, size_t n);

/* The live side of the CUDA probe family's records, around the pipeline. Before: driver
 * names are demangled in place, exec'd processes' mappings kept, and each runtime stub a mark
 * carries gets a TS_EV_GPU_KNAME record, handed to feed ahead of the mark. After: an exited
 * process is forgotten. */
typedef void (*cuda_names_feed_fn)(void *ctx, void *rec, size_t size);
void cuda_names__before(struct cuda_names *k, void *rec, size_t size, cuda_names_feed_fn feed,
			void *ctx);
void cuda_names__after(struct cuda_names *k, const void *rec);

#endif
