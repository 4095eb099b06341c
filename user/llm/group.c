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
	*t = (struct request_groups){ .size = size };
}

void request__pod(const struct request *r, char *out, size_t n)
{
	if (r->pod_name[0] || r->k8s_namespace[0])
		snprintf(out, n, "%s/%s", r->k8s_namespace[0] ? r->k8s_namespace : "-",
			 r->pod_name[0] ? r->pod_name : "-");
	else
		out[0] = 0;
}

static bool same(const struct request_group *g, const struct request *r, const char *model,
		 const char *pod)
{
	return g->role == r->role && g->api == r->api && !strcmp(g->comm, r->comm) &&
	       !strcmp(g->model, model) && !strcmp(g->pod, pod);
}

void *request_groups__of(struct request_groups *t, const struct request *r)
{
	const char *model = request__model(r);
	struct request_group *g;
	char pod[sizeof(g->pod)];

	request__pod(r, pod, sizeof(pod));
	for (size_t i = 0; i < t->n; i++) {
		if (same(t->v[i], r, model, pod))
			return t->v[i];
	}
	if (!array__reserve((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return NULL;
	g = calloc(1, t->size);
	if (!g)
		return NULL;
	memcpy(g->comm, r->comm, sizeof(g->comm));
	g->role = r->role;
	g->api = r->api;
	snprintf(g->model, sizeof(g->model), "%s", model);
	memcpy(g->pod, pod, sizeof(g->pod));
	g->pid = r->pid;
	t->v[t->n++] = g;
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
