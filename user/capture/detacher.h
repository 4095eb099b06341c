/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Taking probes off is slow in the kernel (RCU grace periods, one probe after another for
 * perf-event probes), and nothing the user waits for needs it done: a child process,
 * tokenscope-det, holds the links after tokenscope has ended and drops them on its own. A
 * run started while an earlier one's child still works waits for it.
 */
#ifndef TS_DETACHER_H
#define TS_DETACHER_H

/* Waits (at most 30 s, said on stderr) while an earlier run's detacher removes its probes:
 * a process of this executable and this user named tokenscope-det (another user's process
 * of that name delays nothing). */
void detacher__wait_for_earlier(void);
/* Forks the detacher; it starts once the returned pipe's write end is closed, after this
 * process dropped its own references. -1: no child (the caller's closes detach). */
int detacher__start(void);

#endif
