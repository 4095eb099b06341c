// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "llm/group.h"

const char *request__model(const struct request *r)
{
	return r->model[0] ? r->model : r->response_model;
}

void request_group__who(const struct request_group *g, char *buf, size_t n)
{
	if (g->npids > 1)
		snprintf(buf, n, "%llu pids", (unsigned long long)g->npids);
	else
		snprintf(buf, n, "%u", g->pid);
}

void request_group__add_process(struct request_group *g, uint32_t pid)
{
	if (pidset__add(&g->live, pid))
		g->npids++;
}

void request_groups__init(struct request_groups *t, size_t size)
{
	memset(t, 0, sizeof(*t));
	t->size = size;
}

void request__pod(const struct request *r, char *out, size_t n)
{
	if (r->pod_name[0] || r->k8s_namespace[0])
		snprintf(out, n, "%s/%s", r->k8s_namespace[0] ? r->k8s_namespace : "-",
			 r->pod_name[0] ? r->pod_name : "-");
	else
		out[0] = 0;
}

/* A group's key: the request's, or the folded one it takes past REQUEST_GROUPS_MAX. */
struct group_key {
	const char *comm, *model, *pod;
	enum role role;
	enum api api;
};

static bool same(const struct request_group *g, const struct group_key *k)
{
	return g->role == k->role && g->api == k->api && !strcmp(g->comm, k->comm) &&
	       !strcmp(g->model, k->model) && !strcmp(g->pod, k->pod);
}

/* FNV-1a over the key's strings (each with its NUL) and numbers. */
static uint32_t key_hash(const struct group_key *k)
{
	const char *parts[] = { k->comm, k->model, k->pod };
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < 3; i++) {
		const char *c = parts[i];

		do
			h = (h ^ (uint8_t)*c) * 16777619u;
		while (*c++);
	}
	h = (h ^ (uint32_t)k->role) * 16777619u;
	return (h ^ (uint32_t)k->api) * 16777619u;
}

/* The index slot of key k: its group's, or the empty one where it would go. */
static uint32_t *slot_of(struct request_groups *t, const struct group_key *k)
{
	uint32_t i = key_hash(k) & (REQUEST_GROUPS_INDEX - 1);

	while (t->index[i] && !same(t->v[t->index[i] - 1], k))
		i = (i + 1) & (REQUEST_GROUPS_INDEX - 1);
	return &t->index[i];
}

void *request_groups__of(struct request_groups *t, const struct request *r)
{
	struct group_key k = { r->comm, request__model(r), "", r->role, r->api };
	struct request_group *g;
	char pod[sizeof(g->pod)];
	uint32_t *slot;

	request__pod(r, pod, sizeof(pod));
	k.pod = pod;
	slot = slot_of(t, &k);
	if (!*slot && t->n >= REQUEST_GROUPS_MAX) {
		/* past the groups of their own: the model folds, and past those the process's
		 * name and pod too (a client names its model, and a host its processes) */
		k.model = "other";
		if (t->n >= REQUEST_GROUPS_MAX + REQUEST_GROUPS_FOLDED) {
			k.comm = "other";
			k.pod = "";
		}
		slot = slot_of(t, &k);
		t->folded++;
	}
	if (*slot)
		return t->v[*slot - 1];
	if (t->n >= REQUEST_GROUPS_INDEX / 2 ||
	    !array__reserve((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return NULL;
	g = calloc(1, t->size);
	if (!g)
		return NULL;
	snprintf(g->comm, sizeof(g->comm), "%s", k.comm);
	g->role = r->role;
	g->api = r->api;
	snprintf(g->model, sizeof(g->model), "%s", k.model);
	snprintf(g->pod, sizeof(g->pod), "%s", k.pod);
	g->pid = r->pid;
	t->v[t->n++] = g;
	*slot = (uint32_t)t->n;
	return g;
}

void request_groups__process_exit(struct request_groups *t, uint32_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		pidset__del(&((struct request_group *)t->v[i])->live, pid);
}

void request_groups__free(struct request_groups *t, void (*free_own)(void *group))
{
	for (size_t i = 0; i < t->n; i++) {
		if (free_own)
			free_own(t->v[i]);
		pidset__free(&((struct request_group *)t->v[i])->live);
		free(t->v[i]);
	}
	free(t->v);
	*t = (struct request_groups){ .size = t->size };
}
