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

/*
 * Ancestries read lately, by pid: a fork-per-request client's children share their parent's,
 * which is then read once, not once a child (a dozen /proc reads each, most of what a
 * short-lived process cost the tracer: docs/performance.md). Kept CHAIN_TTL_NS: a pid reused
 * or a process reparented within it is not seen (its chain is a moment old).
 */
#define CHAINS 256
#define CHAIN_TTL_NS (1000000000ull)

struct chain {
	uint32_t pid, n;
	uint64_t read_ns;
	uint32_t up[TS_REC_MAX_ANCESTORS]; /* parent first */
};

static struct chain chains[CHAINS];

/* pid's ancestors into up (parent first, up to init, at most max): n. */
static uint32_t ancestry(uint32_t pid, uint32_t *up, uint32_t max, uint64_t now, int depth)
{
	struct chain *c = &chains[pid % CHAINS];
	uint32_t n = 0, p;

	if (c->pid == pid && now - c->read_ns < CHAIN_TTL_NS) {
		n = c->n < max ? c->n : max;
		memcpy(up, c->up, n * sizeof(*up));
		return n;
	}
	p = parent_of(pid);
	if (p && max) {
		up[n++] = p;
		/* the parent's own chain: cached in turn, for its other children */
		if (p != 1 && depth < TS_REC_MAX_ANCESTORS)
			n += ancestry(p, up + 1, max - 1, now, depth + 1);
	}
	*c = (struct chain){ .pid = pid, .n = n, .read_ns = now };
	memcpy(c->up, up, n * sizeof(*up));
	return n;
}

bool proc_tree__note(struct pidset *known, struct pipeline *pl, uint32_t pid)
{
	struct ts_rec_proc_tree t = { 0 };
	uint64_t now;

	if (!pid)
		return false;
	/* exits take processes out (a reused pid gets its new tree); processes whose exit was
	 * never reported must not hold memory forever */
	if (known->n >= KNOWN_PIDS)
		pidset__free(known);
	if (!pidset__add(known, pid))
		return false;
	/* read only for a process first seen: every data record comes here, and the clock
	 * (kvm-clock through the vDSO) was a sixth of the reader's time (docs/performance.md) */
	now = clock__now_ns();
	chains[pid % CHAINS].pid = 0; /* a process first seen: its own chain read afresh */
	t.n = ancestry(pid, t.ancestors, TS_REC_MAX_ANCESTORS, now, 0);
	t.hdr.type = TS_REC_PROC_TREE;
	t.hdr.size = sizeof(t);
	t.hdr.ts_ns = now;
	t.hdr.pid = pid;
	pipeline__feed(pl, &t, sizeof(t));
	return true;
}
