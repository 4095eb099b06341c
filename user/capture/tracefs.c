// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A tracepoint's id is in tracefs, at events/CATEGORY/NAME/id. Where tracefs is mounted
 * (/sys/kernel/tracing, or debugfs's tracing/) that is read. Where it is not, tokenscope
 * makes a tracefs mount attached nowhere (fsopen and fsmount, Linux 5.2) and opens its events
 * directory: nothing is written, so it works under a read-only root (the DaemonSet's), and the
 * mount table is as it was, even if tokenscope is killed. On a kernel without those calls it
 * mounts one in a fresh temporary directory, opens its events directory and detaches the
 * mount at once: the open directory keeps it readable for this process.
 */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capture/tracefs.h"

static int events_dir = -1;

/* A tracefs mount attached nowhere, its events directory opened; -1 with errno (ENOSYS: the
 * kernel has no fsopen). */
static int detached_events(void)
{
	int fs = (int)syscall(SYS_fsopen, "tracefs", FSOPEN_CLOEXEC), mnt, fd, err;

	if (fs < 0)
		return -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) ||
	    (mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0) {
		err = errno;
		close(fs);
		errno = err;
		return -1;
	}
	close(fs);
	fd = openat(mnt, "events", O_PATH | O_DIRECTORY | O_CLOEXEC);
	err = errno;
	close(mnt);
	errno = err;
	return fd;
}

static int open_events_dir(void)
{
	static const char *const mounted[] = { "/sys/kernel/tracing/events",
					       "/sys/kernel/debug/tracing/events" };
	char tmp[] = "/tmp/tokenscope-tracefs.XXXXXX";
	int fd, err;

	for (size_t i = 0; i < sizeof(mounted) / sizeof(mounted[0]); i++) {
		fd = open(mounted[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	fd = detached_events();
	if (fd >= 0 || errno != ENOSYS)
		return fd;
	if (!mkdtemp(tmp))
		return -1;
	if (mount("tracefs", tmp, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) {
		err = errno;
		rmdir(tmp);
		errno = err;
		return -1;
	}
	fd = openat(AT_FDCWD, tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	err = errno;
	umount2(tmp, MNT_DETACH);
	rmdir(tmp);
	if (fd < 0) {
		errno = err;
		return -1;
	}
	fd = openat(err = fd, "events", O_PATH | O_DIRECTORY | O_CLOEXEC);
	close(err);
	return fd;
}

static long tracepoint_id(const char *category, const char *name)
{
	char path[256], text[32];
	ssize_t n;
	int fd;

	if (events_dir < 0 && (events_dir = open_events_dir()) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s/id", category, name);
	fd = openat(events_dir, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0) {
		errno = EINVAL;
		return -1;
	}
	text[n] = 0;
	return strtol(text, NULL, 10);
}

int tracefs__nth(const char *sec, size_t k, char *category, size_t ncat, char *name,
		 size_t nname)
{
	const char *slash, *one, *end;

	/* "tracepoint/CATEGORY/NAME[,NAME...]" or "tp/CATEGORY/..." */
	sec = strchr(sec, '/');
	slash = sec ? strchr(sec + 1, '/') : NULL;
	if (!slash || (size_t)(slash - sec - 1) >= ncat) {
		errno = EINVAL;
		return -1;
	}
	snprintf(category, ncat, "%.*s", (int)(slash - sec - 1), sec + 1);
	for (one = slash + 1; k && one; k--) {
		one = strchr(one, ',');
		one = one ? one + 1 : NULL;
	}
	if (!one) {
		errno = ENOENT;
		return -1;
	}
	end = strchr(one, ',');
	if (!end)
		end = one + strlen(one);
	if (end == one || (size_t)(end - one) >= nname) {
		errno = EINVAL;
		return -1;
	}
	snprintf(name, nname, "%.*s", (int)(end - one), one);
	return 0;
}

struct bpf_link *tracefs__attach(struct bpf_program *prog, size_t k)
{
	char category[64], name[128];

	if (tracefs__nth(bpf_program__section_name(prog), k, category, sizeof(category), name,
			 sizeof(name)))
		return NULL;
	return tracefs__attach_to(prog, category, name);
}

size_t tracefs__count(const struct bpf_program *prog)
{
	size_t n = 1;

	for (const char *c = bpf_program__section_name(prog); *c; c++)
		n += *c == ',';
	return n;
}

struct bpf_link *tracefs__attach_to(struct bpf_program *prog, const char *category,
				    const char *name)
{
	struct perf_event_attr attr = { .type = PERF_TYPE_TRACEPOINT, .size = sizeof(attr) };
	struct bpf_link *link;
	long id;
	int pfd, err;

	id = tracepoint_id(category, name);
	if (id < 0)
		return NULL;
	attr.config = id;
	/* One event for the whole system: a BPF program on a tracepoint runs on every CPU. */
	pfd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return NULL;
	link = bpf_program__attach_perf_event(prog, pfd);
	if (!link) {
		err = errno;
		close(pfd);
		errno = err;
	}
	return link;
}

void tracefs__release(void)
{
	if (events_dir >= 0)
		close(events_dir);
	events_dir = -1;
}
