/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names of kernels launched through the CUDA runtime: the launch passes the host stub's
 * address, which the process's own ELF symbols name (e.g. _Z12prefill_attnPf, demangled to
 * prefill_attn(float*)). Live only: it reads /proc/PID/maps while the process runs; the names
 * then travel in the event stream as TS_EV_GPU_KNAME records.
 */
#ifndef TS_KSYM_H
#define TS_KSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ksym;

struct ksym *ksym__new(void);
void ksym__free(struct ksym *k);
/* Already named (or tried) for this process? */
bool ksym__known(const struct ksym *k, uint32_t pid, uint64_t addr);
/* Name addr in pid's address space; "" when no symbol covers it. Remembered. */
void ksym__name(struct ksym *k, uint32_t pid, uint64_t addr, char *out, size_t n);
/* Keep pid's executable mappings, to name its stubs even after it exits (the newest
 * MAX_SNAPSHOTS processes). */
void ksym__snapshot(struct ksym *k, uint32_t pid);
/* The process is gone: its addresses mean nothing any more. */
void ksym__forget(struct ksym *k, uint32_t pid);
/* Demangle an Itanium C++ name; copies it unchanged when it is not one. */
void ksym__demangle(const char *name, char *out, size_t n);

#endif
