// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A traced process's container and pod (capture/identity.h). */
#define _GNU_SOURCE /* explicit_bzero */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/container.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "capture/identity.h"

#define SA_NAMESPACE "var/run/secrets/kubernetes.io/serviceaccount/namespace"

/* The whole of a small /proc file into buf (NUL-terminated); its length, or -1. */
static ssize_t read_small(int dirfd, const char *path, char *buf, size_t cap, bool in_root)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	ssize_t n, got = 0;
	int fd = -1;

	if (in_root) {
		/* the container's own view: its symlinks (/var/run -> /run) resolved in its root,
		 * not ours */
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	} else {
		fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	while ((size_t)got < cap - 1 && (n = read(fd, buf + got, cap - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = 0;
	return got;
}

static const char *next_line(const char *line)
{
	const char *nl = strchr(line, '\n');

	return nl ? nl + 1 : NULL;
}

/* The cgroup path that names a container or pod: v2's "0::PATH" line, else the first v1 line
 * whose path does. */
static bool cgroup_ids(const char *text, struct container_ids *ids)
{
	const char *line = text;
	char path[512];

	for (int pass = 0; pass < 2; pass++) {
		for (line = text; line && *line; line = next_line(line)) {
			const char *p = strchr(line, ':'), *end;

			p = p ? strchr(p + 1, ':') : NULL;
			if (!p)
				continue;
			if (pass == 0 && strncmp(line, "0::", 3))
				continue;
			end = strchr(p + 1, '\n');
			snprintf(path, sizeof(path), "%.*s",
				 (int)(end ? (size_t)(end - p - 1) : strlen(p + 1)), p + 1);
			if (container__from_cgroup(path, ids))
				return true;
		}
	}
	return false;
}

/* HOSTNAME=... in an environ block (NUL-separated). */
static void hostname_of(const char *env, size_t n, char *out, size_t cap)
{
	for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
		if (!strncmp(env + i, "HOSTNAME=", 9)) {
			snprintf(out, cap, "%s", env + i + 9);
			return;
		}
	}
}

void identity__note(struct pipeline *pl, uint32_t pid, struct ts_rec_proc_identity *out)
{
	struct ts_rec_proc_identity id = { 0 };
	struct container_ids ids;
	char dir[64], buf[4096], env[16384];
	ssize_t n;
	int pfd, root;

	snprintf(dir, sizeof(dir), "/proc/%u", pid);
	*out = id;
	pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return;
	memset(&ids, 0, sizeof(ids));
	if (read_small(pfd, "cgroup", buf, sizeof(buf), false) > 0 && cgroup_ids(buf, &ids)) {
		snprintf(id.container_id, sizeof(id.container_id), "%s", ids.container_id);
		snprintf(id.runtime, sizeof(id.runtime), "%s", ids.runtime ? ids.runtime : "");
		snprintf(id.pod_uid, sizeof(id.pod_uid), "%s", ids.pod_uid);
	}
	root = openat(pfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0) {
		if (read_small(root, SA_NAMESPACE, buf, sizeof(buf), true) > 0) {
			buf[strcspn(buf, "\r\n")] = 0;
			snprintf(id.k8s_namespace, sizeof(id.k8s_namespace), "%.63s", buf);
		}
		close(root);
	}
	/* a pod's name, where the process is in one (Kubernetes and podman set HOSTNAME to it; a
	 * host process's is the host's); nothing else of its environment (credentials among it)
	 * outlives this */
	if (id.pod_uid[0] || id.k8s_namespace[0] || ids.podman_pod) {
		n = read_small(pfd, "environ", env, sizeof(env), false);
		if (n > 0)
			hostname_of(env, (size_t)n, id.pod_name, sizeof(id.pod_name));
		explicit_bzero(env, sizeof(env));
	}
	close(pfd);
	*out = id;
	if (!id.container_id[0] && !id.pod_uid[0] && !id.k8s_namespace[0])
		return;
	id.hdr.type = TS_REC_PROC_IDENTITY;
	id.hdr.size = sizeof(id);
	id.hdr.ts_ns = clock__now_ns();
	id.hdr.pid = pid;
	pipeline__feed(pl, &id, sizeof(id));
}
