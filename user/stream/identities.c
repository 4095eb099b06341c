// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Traced processes' containers and pods (identities.h). */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "stream/identities.h"

static struct ts_rec_proc_identity *of(const struct identities *t, uint32_t pid)
{
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i].hdr.pid == pid)
			return &t->v[i];
	}
	return NULL;
}

int identities__add(struct identities *t, struct ts_rec_proc_identity *id)
{
	struct ts_rec_proc_identity *to = of(t, id->hdr.pid);

	/* strings as they came, but NUL-terminated whatever the record says */
	id->container_id[sizeof(id->container_id) - 1] = 0;
	id->runtime[sizeof(id->runtime) - 1] = 0;
	id->pod_uid[sizeof(id->pod_uid) - 1] = 0;
	id->pod_name[sizeof(id->pod_name) - 1] = 0;
	id->k8s_namespace[sizeof(id->k8s_namespace) - 1] = 0;
	if (!to) {
		if (!array__reserve((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
			return -1;
		to = &t->v[t->n++];
	}
	*to = *id;
	return 0;
}

void identities__stamp(const struct identities *t, struct request *r)
{
	const struct ts_rec_proc_identity *id = of(t, r->pid);

	if (!id)
		return;
	memcpy(r->container_id, id->container_id, sizeof(r->container_id));
	memcpy(r->pod_uid, id->pod_uid, sizeof(r->pod_uid));
	memcpy(r->pod_name, id->pod_name, sizeof(r->pod_name));
	memcpy(r->k8s_namespace, id->k8s_namespace, sizeof(r->k8s_namespace));
}

void identities__exit(struct identities *t, uint32_t pid)
{
	struct ts_rec_proc_identity *id = of(t, pid);

	if (id) /* the last one takes its place */
		*id = t->v[--t->n];
}

void identities__free(struct identities *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}
