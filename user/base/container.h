/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a process's cgroup path says of its container and pod, by the container runtimes'
 * naming (no Kubernetes API): containerd `cri-containerd-<64 hex>.scope`, CRI-O
 * `crio-<64 hex>.scope`, Docker `docker-<64 hex>.scope`, Podman `libpod-<64 hex>.scope`, and
 * the cgroupfs driver's `/kubepods/<qos>/pod<uid>/<64 hex>` or `/docker/<64 hex>`; podman on
 * cgroupfs `/libpod_parent/[<64 hex pod id>/]libpod-<64 hex>`; containerd's ctr on cgroupfs
 * `/default/<id>` (its default namespace, the id it was given); the pod uid from the kubepods
 * slice (`kubepods-<qos>-pod<uid with _ for ->.slice`) or `pod<uid>`.
 */
#ifndef TS_CONTAINER_H
#define TS_CONTAINER_H

#include <stdbool.h>

#define CONTAINER_ID_LEN 64 /* hex digits */
#define POD_UID_LEN 36	    /* 8-4-4-4-12 */

struct container_ids {
	char container_id[CONTAINER_ID_LEN + 1]; /* "" when none */
	const char *runtime; /* "containerd", "cri-o", "docker", "podman", "cgroupfs"; NULL */
	/* container_id: 64 hex, but for ctr's, the id it was given (at most 64 characters) */
	char pod_uid[POD_UID_LEN + 1];		 /* "" when none */
	bool podman_pod; /* in a podman pod (its cgroup below the pod's, which names no uid) */
};

/* Reads path (a cgroup v2 path, "/kubepods.slice/..."), filling ids. Returns whether it named
 * a container or a pod. */
bool container__from_cgroup(const char *path, struct container_ids *ids);

#endif
