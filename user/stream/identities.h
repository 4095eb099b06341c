/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Traced processes in a container or pod, and which (TS_REC_PROC_IDENTITY records, from
 * capture/identity.c): kept until the process exits, stamped on each of its requests. A short
 * array: one entry per traced process that has one.
 */
#ifndef TS_IDENTITIES_H
#define TS_IDENTITIES_H

#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"
#include "stream/recording.h"

struct identities {
	struct ts_rec_proc_identity *v;
	size_t n, cap;
};

/* A process's identity record (its strings made NUL-terminated in place); a reused pid's new
 * process replaces the old one's. -1 without memory. */
int identities__add(struct identities *t, struct ts_rec_proc_identity *id);
/* The request's process's container and pod, where it has one. */
void identities__stamp(const struct identities *t, struct request *r);
/* The process exited: its entry goes. */
void identities__exit(struct identities *t, uint32_t pid);
void identities__free(struct identities *t);

#endif
