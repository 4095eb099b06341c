/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A kernel's preemption model, read from the texts that say it: whether a task can be
 * preempted inside a syscall by a task that syscall woke. The plaintext family stamps a
 * write at its return where it cannot (user/capture/kernel.c, bpf/sock.bpf.c): under none,
 * voluntary and lazy, a woken reader runs at the writer's return to user space at the
 * earliest, after the write's exit tracepoint. Under full (and PREEMPT_RT) it runs at once,
 * and the write needs its entry's time.
 */
#ifndef TS_PREEMPT_H
#define TS_PREEMPT_H

#include <stdbool.h>

/* The model ("none", "voluntary", "lazy", "full" or "rt"), from the first text that names
 * one, any of which may be NULL:
 * - debugfs: /sys/kernel/debug/sched/preempt, the current one in parentheses
 *   ("none voluntary (full) lazy"; changed at run time by writing there);
 * - cmdline: /proc/cmdline, its last preempt= (PREEMPT_DYNAMIC's boot choice: ignored
 *   where config says the kernel has no PREEMPT_DYNAMIC; with no config, only full counts);
 * - config: the kernel's .config (/proc/config.gz, /boot/config-RELEASE), its built model.
 * NULL when none does. */
const char *preempt__model(const char *debugfs, const char *cmdline, const char *config);
/* Whether a task woken by a syscall may run before that syscall returns, on the waker's CPU:
 * true for full and rt, and for an unknown model (NULL). */
bool preempt__inside_syscalls(const char *model);

#endif
