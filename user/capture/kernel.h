/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the running kernel has, asked before the probe families load so that each loads the
 * programs this kernel takes (docs/kernels.md): its BTF (read once, until kernel__forget),
 * libbpf's feature probes.
 */
#ifndef TS_KERNEL_H
#define TS_KERNEL_H

#include <stdbool.h>

struct bpf_object;

/* Below what every family needs (the ring buffer: 5.8): true, after one line naming what is
 * missing. */
bool kernel__below_floor(void);
/* Whether the families' legacy builds are the ones to load (TS_LEGACY, bpf/common.bpf.h):
 * the kernel has no bpf_loop (before 5.17), or TOKENSCOPE_LEGACY=1 asks for them. */
bool kernel__legacy(void);
/* Whether the kernel's BTF has the kfunc name. */
bool kernel__has_kfunc(const char *name);
/* Each tp_btf program of obj on a tracepoint this kernel has, by an older name where it has
 * that (io_uring_submit_sqe before 6.4); one it has under no name is not loaded, and said in
 * a line naming family. */
void kernel__fit_tracepoints(const char *family, struct bpf_object *obj);
/* The BTF read for these questions, freed. */
void kernel__forget(void);

#endif
