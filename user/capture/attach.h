/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding files to put uprobes on, and attaching them (the table of uprobe sets is in
 * attach.c): the system's libssl, every file mapped by a running process that exports
 * SSL_read/SSL_write (libssl or a binary that embeds OpenSSL, like node) or CUDA runtime/driver
 * entry points (libcudart, the copies PyTorch wheels carry, libcuda.so.1, binaries with cudart
 * linked in), and later the executables and libraries of new processes (exec) and of dlopen.
 * Each file is probed once (device + inode), by path, so every process that maps it is covered.
 */
#ifndef TS_ATTACH_H
#define TS_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_object;
struct attacher;

typedef void (*attacher_cuda_fn)(void *ctx, uint32_t pid);

/*
 * uprobe_multi links (Linux 6.6+) attach and detach without the kernel's event_mutex, and
 * detach in parallel: 48 of them came off in 74 ms from threads, against 2.6 s one at a time
 * and 5.3 s as perf-event uprobes (docs/decisions/performance-log.md).
 * Debian 12's libbpf cannot make them: attach.c creates them with the bpf syscall. Their
 * programs must be loaded for them, so: ask the kernel first (no change when it says no),
 * then prepare each family's object before it is loaded, then attacher__new(.., true).
 */
bool attacher__uprobe_multi_works(void);
void attacher__prepare_uprobe_multi(struct bpf_object *obj);
struct attacher *attacher__new(int verbose, bool uprobe_multi);
void attacher__free(struct attacher *a);
/* A loaded probe family ("tls", "cuda"): the uprobe sets whose programs it holds attach from
 * now on. A family never added (it failed to load) is not probed. */
void attacher__add_family(struct attacher *a, const char *family, struct bpf_object *obj);
/* Called whenever a scan finds a process that maps a CUDA runtime or driver. */
void attacher__on_cuda(struct attacher *a, attacher_cuda_fn fn, void *ctx);
/* The system's libssl and libc (for dlopen) at their usual paths. */
void attacher__scan_system(struct attacher *a);
/* Every mapped executable file of pid (pid 0: every process). */
void attacher__scan_pid(struct attacher *a, pid_t pid);
/* A process exec'd: probe its executable now and rescan its mappings shortly after, while
 * the dynamic loader maps its libraries. */
void attacher__on_exec(struct attacher *a, pid_t pid, uint64_t now_ns);
/* Milliseconds until the next rescan is due (at most max_ms): the poll timeout. */
int attacher__next_due_ms(const struct attacher *a, uint64_t now_ns, int max_ms);
/* Run the rescans that are due. */
void attacher__tick(struct attacher *a, uint64_t now_ns);
/* Files that got a uprobe set ("TLS", "CUDA", "dlopen"). */
size_t attacher__files(const struct attacher *a, const char *set);
/* Probes that could not be attached, after retries (each one warned about). */
size_t attacher__probes_off(const struct attacher *a);
/* When a file last got a uprobe set (CLOCK_MONOTONIC ns; 0: never): -v says how soon after
 * its exec a new program was probed. */
uint64_t attacher__probed_ns(const struct attacher *a);

#endif
