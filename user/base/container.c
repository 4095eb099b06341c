// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A cgroup path's container and pod (base/container.h). */
#include <ctype.h>
#include <string.h>

#include "base/container.h"

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	}
	return true;
}

/* A pod uid at s (its dashes '-', or '_' in systemd slice names): copied with '-'. */
static bool pod_uid_at(const char *s, char *out)
{
	static const int dash[] = { 8, 13, 18, 23 };
	size_t d = 0;

	for (size_t i = 0; i < POD_UID_LEN; i++) {
		char c = s[i];

		if (d < 4 && (int)i == dash[d]) {
			if (c != '-' && c != '_')
				return false;
			out[i] = '-';
			d++;
			continue;
		}
		if (!isxdigit((unsigned char)c))
			return false;
		out[i] = (char)tolower((unsigned char)c);
	}
	out[POD_UID_LEN] = 0;
	return true;
}

/* A containerd container id, the whole rest of the path: letters and digits in runs joined
 * by '.', '_' or '-' (containerd's identifier rule), at most CONTAINER_ID_LEN. */
static bool ctr_id(const char *s, struct container_ids *ids)
{
	size_t n = strlen(s);

	if (!n || n > CONTAINER_ID_LEN || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		bool sep = s[i] == '.' || s[i] == '_' || s[i] == '-';

		if (!isalnum((unsigned char)s[i]) && !(sep && isalnum((unsigned char)s[i + 1])))
			return false;
	}
	memcpy(ids->container_id, s, n);
	ids->container_id[n] = 0;
	ids->runtime = "containerd";
	return true;
}

bool container__from_cgroup(const char *path, struct container_ids *ids)
{
	static const struct {
		const char *prefix, *runtime;
	} scopes[] = {
		{ "cri-containerd-", "containerd" },
		{ "crio-", "cri-o" },
		{ "docker-", "docker" },
		{ "libpod-", "podman" },
	};
	const char *seg = path, *next, *prev = NULL;
	size_t prev_n = 0;

	memset(ids, 0, sizeof(*ids));
	/* each path segment, last wins: a container's scope is below its pod's slice */
	for (; seg && *seg; seg = next) {
		size_t n;
		const char *p;

		while (*seg == '/')
			seg++;
		next = strchr(seg, '/');
		n = next ? (size_t)(next - seg) : strlen(seg);
		/* kubepods-<qos>-pod<uid>.slice, kubepods-pod<uid>.slice (guaranteed), pod<uid> */
		p = NULL;
		if (n > 3 && !strncmp(seg, "pod", 3))
			p = seg + 3;
		else if (!strncmp(seg, "kubepods", 8))
			for (const char *q = seg; q + 4 <= seg + n; q++)
				if (!strncmp(q, "-pod", 4))
					p = q + 4;
		if (p && p + POD_UID_LEN <= seg + n && !pod_uid_at(p, ids->pod_uid))
			ids->pod_uid[0] = 0;
		/* <runtime>-<64 hex>.scope (systemd), <runtime>-<64 hex> (podman on cgroupfs) */
		for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
			size_t l = strlen(scopes[i].prefix);

			if ((n == l + CONTAINER_ID_LEN ||
			     (n == l + CONTAINER_ID_LEN + 6 &&
			      !strncmp(seg + l + CONTAINER_ID_LEN, ".scope", 6))) &&
			    !strncmp(seg, scopes[i].prefix, l) && hex_run(seg + l, CONTAINER_ID_LEN)) {
				memcpy(ids->container_id, seg + l, CONTAINER_ID_LEN);
				ids->container_id[CONTAINER_ID_LEN] = 0;
				ids->runtime = scopes[i].runtime;
			}
		}
		/* the cgroupfs driver: a bare 64-hex segment (below pod<uid>, or /docker/<id>); below
		 * podman's libpod_parent it is a podman pod's, not a container's */
		if (n == CONTAINER_ID_LEN && hex_run(seg, n)) {
			if (prev && prev_n == 13 && !strncmp(prev, "libpod_parent", 13)) {
				ids->podman_pod = true;
			} else {
				memcpy(ids->container_id, seg, n);
				ids->container_id[n] = 0;
				ids->runtime = "cgroupfs";
			}
		}
		/* containerd's ctr on cgroupfs: /<namespace>/<id>, its default namespace's */
		if (!prev && n == 7 && !strncmp(seg, "default", 7) && next && ctr_id(next + 1, ids))
			return true;
		prev = seg;
		prev_n = n;
	}
	return ids->container_id[0] || ids->pod_uid[0];
}
