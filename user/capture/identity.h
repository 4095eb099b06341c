/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A traced process's container and pod, passively, without the Kubernetes API: its cgroup
 * (/proc/PID/cgroup, cgroup v2's 0:: line, else a v1 line that names one) by the runtimes'
 * naming (base/container.h); inside its own root (/proc/PID/root, resolved there), its
 * service account's namespace; and, for a process in a pod, its HOSTNAME (/proc/PID/environ),
 * which Kubernetes sets to the pod's name unless the pod overrides its hostname. Read when
 * the process is first seen, and sent as a record (TS_REC_PROC_IDENTITY) before its first, so
 * that replays know it too. Nothing is sent for a process in no container or pod.
 */
#ifndef TS_IDENTITY_H
#define TS_IDENTITY_H

#include <stdint.h>

struct pipeline;

struct ts_rec_proc_identity;

/* pid's identity to pl, where it has one; into id too (all "" where none). */
void identity__note(struct pipeline *pl, uint32_t pid, struct ts_rec_proc_identity *id);

#endif
