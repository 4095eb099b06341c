// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The state helpers every attribution file uses (engine/attrib_state.h): below the four
 * question files, so that their calls run one way (attrib.c -> serving, align, prefill,
 * seqs -> here).
 */
#include <stdlib.h>

#include "base/buf.h"
#include "engine/attrib_state.h"

struct step_proc *attrib_proc_of(struct attrib *a, uint32_t pid, bool create)
{
	for (size_t i = 0; i < a->nprocs; i++) {
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	}
	if (!create || !array__reserve((void **)&a->procs, &a->capprocs, a->nprocs + 1,
				       sizeof(*a->procs)))
		return NULL;
	a->procs[a->nprocs] = (struct step_proc){ .pid = pid };
	return &a->procs[a->nprocs++];
}

bool attrib_is_client(const struct attrib *a, uint32_t pid)
{
	for (size_t i = 0; i < a->nclients; i++) {
		if (a->clients[i] == pid)
			return true;
	}
	return false;
}

void attrib_close_gap(struct attribution *at, struct attrib_gap *gp, uint64_t busy_ns)
{
	gp->decode_ns = busy_ns < gp->gap_ns ? busy_ns : gp->gap_ns;
	if (gp->interference_ns > gp->decode_ns)
		gp->interference_ns = gp->decode_ns;
	gp->host_ns = gp->gap_ns - gp->decode_ns;
	at->decode_ns += gp->decode_ns;
	at->host_ns += gp->host_ns;
	at->interference_ns += gp->interference_ns;
	at->steps += gp->steps;
}

int attrib_add_interferer(struct attribution *at, uint64_t id)
{
	size_t i;

	for (i = 0; i < at->ninterfered_by; i++) {
		if (at->interfered_by[i] == id)
			return 0;
	}
	uint64_t *np = realloc(at->interfered_by, (at->ninterfered_by + 1) * sizeof(*np));

	if (!np)
		return -1;
	at->interfered_by = np;
	np[at->ninterfered_by++] = id;
	return 0;
}

bool attrib_proc_may_name(const struct step_proc *p, uint64_t key)
{
	if (p->models_many)
		return true;
	for (uint32_t i = 0; i < p->nmodels; i++) {
		if (p->models[i] == key)
			return true;
	}
	return false;
}

size_t attrib_first_tokens_from(const struct attrib *a, uint64_t t)
{
	size_t lo = 0, hi = a->nfts;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->fts[mid].ft < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
