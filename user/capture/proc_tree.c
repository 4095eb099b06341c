// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A traced process's ancestry, for attribution (capture/proc_tree.h). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/pidset.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "capture/proc_tree.h"

/* pid's parent from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold anything,
 * so the fields are read after its last ')'). 0 when it is gone. */
static uint32_t parent_of(uint32_t pid)
{
	char path[64], buf[512], *p;
	unsigned ppid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %u", &ppid) != 1)
		return 0;
	return ppid;
}

/* live processes whose trees are kept; past this many, the set starts over */
#define KNOWN_PIDS 65536

bool proc_tree__note(struct pidset *known, struct pipeline *pl, uint32_t pid)
{
	struct ts_rec_proc_tree t = { 0 };

	if (!pid)
		return false;
	/* exits take processes out (a reused pid gets its new tree); processes whose exit was
	 * never reported must not hold memory forever */
	if (known->n >= KNOWN_PIDS)
		pidset__free(known);
	if (!pidset__add(known, pid))
		return false;
	for (uint32_t p = parent_of(pid); p && t.n < TS_REC_MAX_ANCESTORS; p = parent_of(p)) {
		t.ancestors[t.n++] = p;
		if (p == 1)
			break;
	}
	t.hdr.type = TS_REC_PROC_TREE;
	t.hdr.size = sizeof(t);
	t.hdr.ts_ns = clock__now_ns();
	t.hdr.pid = pid;
	pipeline__feed(pl, &t, sizeof(t));
	return true;
}

