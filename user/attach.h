/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Finding and probing TLS libraries: the system's libssl, every file mapped by a running
 * process that exports SSL_read/SSL_write (libssl or a binary that embeds OpenSSL, like node),
 * and later the executables and libraries of new processes (exec) and of dlopen. Each file is
 * probed once (device + inode), by path, so every process that maps it is covered.
 */
#ifndef TS_ATTACH_H
#define TS_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tls_bpf;
struct attacher;

struct attacher *attacher__new(struct tls_bpf *skel, int verbose);
void attacher__free(struct attacher *a);
/* The system's libssl and libc (for dlopen) at their usual paths. */
void attacher__scan_system(struct attacher *a);
/* Every mapped executable file of pid (pid 0: every process). */
void attacher__scan_pid(struct attacher *a, pid_t pid);
/* A process exec'd: probe its executable now and rescan its mappings shortly after, while
 * the dynamic loader maps its libraries. */
void attacher__on_exec(struct attacher *a, pid_t pid, uint64_t now_ns);
/* Run the rescans that are due. */
void attacher__tick(struct attacher *a, uint64_t now_ns);
/* Files with TLS probes attached. */
size_t attacher__tls_files(const struct attacher *a);
/* Probe attach failures (other than files without the symbols). */
size_t attacher__failures(const struct attacher *a);

#endif
