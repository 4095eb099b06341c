/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The first record of a process is preceded by its ancestry (parent first, up to init), read
 * from /proc while the process lives, which attribution uses to find the GPU processes serving
 * an HTTP server (engine/attrib.h). It travels as a record (TS_REC_PROC_TREE), so replays
 * find it too.
 */
#ifndef TS_PROC_TREE_H
#define TS_PROC_TREE_H

#include <stdbool.h>
#include <stdint.h>

struct pidset;
struct pipeline;

/* pid's ancestry to pl, unless known holds pid (which it then does): whether it was new. An
 * exit takes pid out of known (pidset__del), so that a reused pid gets its new tree. */
bool proc_tree__note(struct pidset *known, struct pipeline *pl, uint32_t pid);

#endif
