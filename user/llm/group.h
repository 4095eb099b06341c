/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every output groups requests by: the command, the role, the API and the model (and the
 * pod, for processes in one: capture/identity.h), from
 * however many processes (a fork-per-request client, cron jobs, CLI calls: a group per
 * process would grow without bound). The summary, the HTML report, `top` and the metrics'
 * labels all take the key and the model rule from here.
 */
#ifndef TS_GROUP_H
#define TS_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "base/pidset.h"
#include "llm/request.h"

/* The model a request is grouped and labelled by: as the request named it, else as its
 * response did ("" for neither). */
const char *request__model(const struct request *r);
/* "NAMESPACE/NAME" of the pod of the request's process ("-" for a part unknown), "" for a
 * process in no pod: what groups split by, and outputs name. */
void request__pod(const struct request *r, char *out, size_t n);

struct request_group {
	char comm[TS_COMM_LEN];
	enum role role;
	enum api api;
	char model[REQ_MODEL_MAX];
	char pod[144];	    /* "NAMESPACE/NAME" of its processes' pod ("" when none) */
	uint32_t pid;	    /* the first process */
	uint64_t npids;	    /* processes seen */
	struct pidset live; /* those not known to have exited */
};

/* "PID", or "N pids" when the group has seen several processes. */
void request_group__who(const struct request_group *g, char *buf, size_t n);
/* Count the request's process in its group. A pid seen again after its exit was reported is
 * a new process (pids are reused). */
void request_group__add_process(struct request_group *g, uint32_t pid);

/*
 * Groups of their own at most: past them a request of a new key goes to its process's group
 * of model "other", and past REQUEST_GROUPS_FOLDED of those to the one of process "other"
 * too. The model is whatever a client names, so any number of names costs the same: memory,
 * the time to find a group (a hash index), and every output's length.
 */
#define REQUEST_GROUPS_MAX 1024
#define REQUEST_GROUPS_FOLDED 256
#define REQUEST_GROUPS_INDEX 4096 /* slots of the index, a power of 2 past twice the groups */

/* An output's groups, in the order they first appeared. Each is an output's own struct of
 * `size` bytes whose first member is a struct request_group. */
struct request_groups {
	void **v;
	size_t n, cap, size;
	uint32_t index[REQUEST_GROUPS_INDEX]; /* by key hash, open addressing: 1 + the group's
						 place in v; 0: empty */
	uint64_t folded;		      /* requests put in a folded group */
};

void request_groups__init(struct request_groups *t, size_t size);
/* The request's group, made when new (zeroed past its key, pid its first process), folded
 * past REQUEST_GROUPS_MAX: NULL without memory. Its process is not counted
 * (request_group__add_process). */
void *request_groups__of(struct request_groups *t, const struct request *r);
/* A process exited: no group keeps it as living. */
void request_groups__process_exit(struct request_groups *t, uint32_t pid);
/* Frees every group, after free_own(group) where given (the output's own parts). */
void request_groups__free(struct request_groups *t, void (*free_own)(void *group));

#endif
