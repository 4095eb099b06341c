// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "ksym.h"

/* libstdc++'s demangler (linked statically); C linkage by the Itanium ABI. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct entry {
	uint32_t pid;
	uint64_t addr;
};

/* A process's executable mappings, kept so that stubs can still be named after it exits
 * (short programs often finish before their first step's mark is read). */
struct snapshot {
	uint32_t pid;
	char *maps;
	struct snapshot *next;
};

#define MAX_SNAPSHOTS 1024 /* exec'd processes kept, newest first */

struct ksym {
	struct entry *seen;
	size_t n, cap;
	struct snapshot *snaps;
	size_t nsnaps;
};

struct ksym *ksym__new(void)
{
	return calloc(1, sizeof(struct ksym));
}

static void drop_snapshot(struct ksym *k, uint32_t pid)
{
	for (struct snapshot **l = &k->snaps; *l; l = &(*l)->next) {
		if ((*l)->pid == pid) {
			struct snapshot *s = *l;

			*l = s->next;
			free(s->maps);
			free(s);
			k->nsnaps--;
			return;
		}
	}
}

void ksym__free(struct ksym *k)
{
	if (!k)
		return;
	while (k->snaps)
		drop_snapshot(k, k->snaps->pid);
	free(k->seen);
	free(k);
}

void ksym__snapshot(struct ksym *k, uint32_t pid)
{
	char fn[64], line[PATH_MAX + 256];
	struct snapshot *s;
	size_t len = 0, cap = 0;
	char *text = NULL;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%u/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char perms[8];
		size_t n = strlen(line);

		if (sscanf(line, "%*s %7s", perms) != 1 || perms[2] != 'x' || !strchr(line, '/'))
			continue;
		if (len + n + 1 > cap) {
			char *nt = realloc(text, cap = (len + n + 1) * 2);

			if (!nt)
				break;
			text = nt;
		}
		memcpy(text + len, line, n + 1);
		len += n;
	}
	fclose(f);
	if (!text)
		return;
	drop_snapshot(k, pid);
	s = calloc(1, sizeof(*s));
	if (!s) {
		free(text);
		return;
	}
	s->pid = pid;
	s->maps = text;
	s->next = k->snaps;
	k->snaps = s;
	if (++k->nsnaps > MAX_SNAPSHOTS) {
		struct snapshot **l = &k->snaps;

		while ((*l)->next)
			l = &(*l)->next;
		drop_snapshot(k, (*l)->pid);
	}
}

bool ksym__known(const struct ksym *k, uint32_t pid, uint64_t addr)
{
	for (size_t i = 0; i < k->n; i++) {
		if (k->seen[i].pid == pid && k->seen[i].addr == addr)
			return true;
	}
	return false;
}

void ksym__forget(struct ksym *k, uint32_t pid)
{
	size_t w = 0;

	drop_snapshot(k, pid);
	for (size_t i = 0; i < k->n; i++) {
		if (k->seen[i].pid != pid)
			k->seen[w++] = k->seen[i];
	}
	k->n = w;
}

void ksym__demangle(const char *name, char *out, size_t n)
{
	int status = -1;
	char *d = name[0] == '_' && name[1] == 'Z' ? __cxa_demangle(name, NULL, NULL, &status) : NULL;

	snprintf(out, n, "%s", d && !status ? d : name);
	free(d);
}

/* One maps line: does it hold addr? Then the file and the offset in it. */
static int match_line(char *line, uint32_t pid, bool live, uint64_t addr, char *path,
		      size_t pathlen, uint64_t *file_off)
{
	uint64_t start, end, off;
	char *p;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64, &start, &end, &off) != 3 ||
	    addr < start || addr >= end || !(p = strchr(line, '/')))
		return -1;
	p[strcspn(p, "\n")] = 0;
	/* a live process's files are reached through its root (containers); a gone one's not */
	if (live)
		snprintf(path, pathlen, "/proc/%u/root%s", pid, p);
	else
		snprintf(path, pathlen, "%s", p);
	*file_off = addr - start + off;
	return 0;
}

/* Which file, at which file offset, holds addr in pid's address space: from the live maps
 * (live = true), or from the snapshot taken while the process ran. */
static int locate(struct ksym *k, uint32_t pid, uint64_t addr, bool live, char *path,
		  size_t pathlen, uint64_t *file_off)
{
	char fn[64], line[PATH_MAX + 256];
	int found = -1;
	FILE *f;

	if (live) {
		snprintf(fn, sizeof(fn), "/proc/%u/maps", pid);
		f = fopen(fn, "re");
		if (!f)
			return -1;
		while (found && fgets(line, sizeof(line), f))
			found = match_line(line, pid, true, addr, path, pathlen, file_off);
		fclose(f);
		return found;
	}
	for (struct snapshot *s = k->snaps; s; s = s->next) {
		char *text, *save = NULL, *l;

		if (s->pid != pid || !(text = strdup(s->maps)))
			continue;
		for (l = strtok_r(text, "\n", &save); l && found; l = strtok_r(NULL, "\n", &save))
			found = match_line(l, pid, false, addr, path, pathlen, file_off);
		free(text);
		break;
	}
	return found;
}

void ksym__name(struct ksym *k, uint32_t pid, uint64_t addr, char *out, size_t n)
{
	char path[PATH_MAX + 32], raw[8192];
	uint64_t off;

	out[0] = 0;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		struct entry *ns = realloc(k->seen, cap * sizeof(*ns));

		if (ns) {
			k->seen = ns;
			k->cap = cap;
		}
	}
	if (k->n < k->cap)
		k->seen[k->n++] = (struct entry){ pid, addr };
	/* The live process first; if it died meanwhile (its /proc/PID/root with it), the
	 * snapshot's mapping and the file by its own path. */
	if ((locate(k, pid, addr, true, path, sizeof(path), &off) ||
	     elfsym__name_at(path, off, raw, sizeof(raw))) &&
	    (locate(k, pid, addr, false, path, sizeof(path), &off) ||
	     elfsym__name_at(path, off, raw, sizeof(raw))))
		return;
	ksym__demangle(raw, out, n);
}
