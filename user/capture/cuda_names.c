// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE /* asprintf */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/buf.h"
#include "capture/cuda_names.h"
#include "capture/elfsym.h"
#include "capture/procmaps.h"

/* libstdc++'s demangler (linked statically); C linkage by the Itanium ABI. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct entry {
	uint32_t pid;
	uint64_t addr;
};

/*
 * What names a process's stubs after it is gone (short programs often finish before their
 * first step's mark is read). Two parts, because neither is enough alone:
 * - exec: the executable's text mapping from the exec record, with the file found by its
 *   inode. The kernel took it as the program started, so it is there however late the
 *   record is read: a process that has already exited, whose /proc/PID/maps still opens but
 *   is empty until it is reaped, is named all the same. nvcc-built programs keep their stubs
 *   in the executable.
 * - maps: /proc/PID/maps's executable file mappings when they could be read (libraries
 *   loaded since exec), paths as the process sees them.
 */
struct snapshot {
	uint32_t pid;
	char *exec;
	char *maps;
	struct snapshot *next;
};

#define MAX_SNAPSHOTS 1024 /* processes kept, newest first */

struct cuda_names {
	struct entry *seen;
	size_t n, cap;
	struct snapshot *snaps;
	size_t nsnaps;
};

static void forget_seen(struct cuda_names *k, uint32_t pid)
{
	size_t w = 0;

	for (size_t i = 0; i < k->n; i++) {
		if (k->seen[i].pid != pid)
			k->seen[w++] = k->seen[i];
	}
	k->n = w;
}

struct cuda_names *cuda_names__new(void)
{
	return calloc(1, sizeof(struct cuda_names));
}

static void drop_snapshot(struct cuda_names *k, uint32_t pid)
{
	for (struct snapshot **l = &k->snaps; *l; l = &(*l)->next) {
		if ((*l)->pid == pid) {
			struct snapshot *s = *l;

			*l = s->next;
			free(s->exec);
			free(s->maps);
			free(s);
			k->nsnaps--;
			return;
		}
	}
}

void cuda_names__free(struct cuda_names *k)
{
	if (!k)
		return;
	while (k->snaps)
		drop_snapshot(k, k->snaps->pid);
	free(k->seen);
	free(k);
}

static struct snapshot *find_snapshot(struct cuda_names *k, uint32_t pid)
{
	for (struct snapshot *s = k->snaps; s; s = s->next) {
		if (s->pid == pid)
			return s;
	}
	return NULL;
}

/* pid's snapshot, created (newest first; the oldest goes past MAX_SNAPSHOTS). */
static struct snapshot *get_snapshot(struct cuda_names *k, uint32_t pid)
{
	struct snapshot *s = find_snapshot(k, pid);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->pid = pid;
	s->next = k->snaps;
	k->snaps = s;
	if (++k->nsnaps > MAX_SNAPSHOTS) {
		struct snapshot **l = &k->snaps;

		while ((*l)->next)
			l = &(*l)->next;
		drop_snapshot(k, (*l)->pid);
	}
	return s;
}

int cuda_names__snapshot(struct cuda_names *k, uint32_t pid)
{
	char fn[64], line[PATH_MAX + 256];
	struct buf text = { 0 };
	struct snapshot *s;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%u/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct maps_entry e;
		size_t n = strlen(line);

		if (!n || line[n - 1] != '\n')
			continue; /* longer than PATH_MAX: no file we can open */
		if (procmaps__parse(line, &e) || !procmaps__is_exec_file(&e))
			continue;
		line[n - 1] = '\n'; /* parsing cut it */
		if (buf__add(&text, line, n, SIZE_MAX))
			break;
	}
	fclose(f);
	/* Empty: the process has exited and is not reaped yet (its memory is gone), or maps
	 * nothing; what the exec record gave is kept. */
	if (!text.p || text.overflow || !(s = get_snapshot(k, pid))) {
		buf__free(&text);
		return -1;
	}
	free(s->maps);
	s->maps = text.p;
	return 0;
}

/* Is the file at path the one the kernel mapped (device in the kernel's encoding)? */
static bool same_file(const char *path, uint32_t kdev, uint64_t ino)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == ino &&
	       major(st.st_dev) == kdev >> 20 && minor(st.st_dev) == (kdev & 0xfffff);
}

/* The exec record's text mapping as a maps line, its file's path in our namespace. */
static char *exec_line(const struct ts_exec *e)
{
	char given[TS_EXEC_PATH_LEN + 1], cand[2][PATH_MAX], real[PATH_MAX], *text;
	int ncand = 0;

	if (!e->text_start || e->text_end <= e->text_start)
		return NULL;
	memcpy(given, e->path, TS_EXEC_PATH_LEN);
	given[TS_EXEC_PATH_LEN] = 0;
	/* The path is in the process's mount namespace: its parent's root (a container's) first,
	 * then ours. The inode decides, never the name alone. */
	if (given[0] != '/')
		return NULL;
	snprintf(cand[ncand++], PATH_MAX, "/proc/%u/root%s", e->ppid, given);
	snprintf(cand[ncand++], PATH_MAX, "%s", given);
	for (int i = 0; i < ncand; i++) {
		if (!realpath(cand[i], real) || !same_file(real, e->dev, e->ino))
			continue;
		if (asprintf(&text, "%llx-%llx r-xp %llx 00:00 %llu %s\n",
			     (unsigned long long)e->text_start, (unsigned long long)e->text_end,
			     (unsigned long long)e->text_offset, (unsigned long long)e->ino,
			     real) < 0)
			return NULL;
		return text;
	}
	return NULL;
}

int cuda_names__snapshot_exec(struct cuda_names *k, const struct ts_exec *e)
{
	char *line = exec_line(e);
	struct snapshot *s;

	/* a new program: what was kept of the pid's earlier one means nothing now */
	drop_snapshot(k, e->hdr.pid);
	forget_seen(k, e->hdr.pid);
	if (!line || !(s = get_snapshot(k, e->hdr.pid))) {
		free(line);
		return -1;
	}
	s->exec = line;
	return 0;
}

bool cuda_names__known(const struct cuda_names *k, uint32_t pid, uint64_t addr)
{
	for (size_t i = 0; i < k->n; i++) {
		if (k->seen[i].pid == pid && k->seen[i].addr == addr)
			return true;
	}
	return false;
}

void cuda_names__forget(struct cuda_names *k, uint32_t pid)
{
	drop_snapshot(k, pid);
	forget_seen(k, pid);
}

void cuda_names__demangle(const char *name, char *out, size_t n)
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
	struct maps_entry e;

	if (procmaps__parse(line, &e) || !e.path || addr < e.start || addr >= e.end)
		return -1;
	/* a live process's files are reached through its root (containers); a gone one's not */
	if (live)
		snprintf(path, pathlen, "/proc/%u/root%s", pid, e.path);
	else
		snprintf(path, pathlen, "%s", e.path);
	*file_off = addr - e.start + e.offset;
	return 0;
}

/* The name of the symbol at addr in the first of text's maps lines that holds it. */
static int name_in(const char *text, uint32_t pid, bool live, uint64_t addr, char *raw,
		   size_t rawlen)
{
	char path[PATH_MAX + 32], *copy, *save = NULL, *l;
	uint64_t off;
	int found = -1;

	if (!text || !(copy = strdup(text)))
		return -1;
	for (l = strtok_r(copy, "\n", &save); l && found; l = strtok_r(NULL, "\n", &save))
		found = match_line(l, pid, live, addr, path, sizeof(path), &off);
	free(copy);
	return found ? -1 : elfsym__name_at(path, off, raw, rawlen);
}

/* The live process's mappings now; NULL when it is gone or its memory already is. */
static char *live_maps(uint32_t pid)
{
	char fn[64], line[PATH_MAX + 256];
	struct buf text = { 0 };
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%u/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (buf__add(&text, line, strlen(line), SIZE_MAX))
			break;
	}
	fclose(f);
	return text.p;
}

void cuda_names__name(struct cuda_names *k, uint32_t pid, uint64_t addr, char *out, size_t n)
{
	struct snapshot *s = find_snapshot(k, pid);
	char raw[8192], *live = NULL;
	bool found;

	out[0] = 0;
	if (array__reserve((void **)&k->seen, &k->cap, k->n + 1, sizeof(*k->seen)))
		k->seen[k->n++] = (struct entry){ pid, addr };
	/* The exec record's mapping first (the program as it started, whatever it is doing
	 * now); then the live process (libraries, through its root for containers); then what
	 * was read of it while it ran, by the files' own paths. */
	found = (s && !name_in(s->exec, pid, false, addr, raw, sizeof(raw))) ||
		!name_in(live = live_maps(pid), pid, true, addr, raw, sizeof(raw)) ||
		(s && !name_in(s->maps, pid, false, addr, raw, sizeof(raw)));
	free(live);
	if (!found)
		return;
	cuda_names__demangle(raw, out, n);
}

/* Runtime launches name their kernel by host stub address: symbolize it while the process
 * lives, and put the name into the event stream (so recordings carry it). */
static void name_stubs(struct cuda_names *k, const struct ts_gpu_mark *m, cuda_names_feed_fn feed,
		       void *ctx)
{
	for (__u32 i = 0; i < m->work.nsamples && i < TS_KSAMPLES; i++) {
		const struct ts_kernel_sample *s = &m->work.k[i];
		struct ts_gpu_kname kn = { 0 };

		if (!(s->flags & TS_KS_STUB) || cuda_names__known(k, m->hdr.pid, s->id))
			continue;
		kn.hdr = m->hdr;
		kn.hdr.type = TS_EV_GPU_KNAME;
		kn.hdr.size = sizeof(kn);
		kn.id = s->id;
		kn.flags = TS_KS_STUB;
		cuda_names__name(k, m->hdr.pid, s->id, kn.name, sizeof(kn.name));
		if (kn.name[0])
			feed(ctx, &kn, sizeof(kn));
	}
}

void cuda_names__before(struct cuda_names *k, void *rec, size_t size, cuda_names_feed_fn feed,
			void *ctx)
{
	const struct ts_event_hdr *h = rec;

	if (h->type == TS_EV_GPU_KNAME && size >= sizeof(struct ts_gpu_kname)) {
		/* driver names come mangled: demangle here, so outputs and recordings are readable */
		struct ts_gpu_kname *kn = rec;
		char raw[TS_KNAME_LEN + 1];

		memcpy(raw, kn->name, TS_KNAME_LEN);
		raw[TS_KNAME_LEN] = 0;
		cuda_names__demangle(raw, kn->name, sizeof(kn->name));
	} else if (h->type == TS_EV_EXEC) {
		/* the executable's mapping, where nvcc-built programs keep their kernel stubs, from
		 * the record (a new program: the pid's earlier one is forgotten); then whatever the
		 * process's maps still show */
		if (size >= sizeof(struct ts_exec))
			cuda_names__snapshot_exec(k, rec);
		else
			cuda_names__forget(k, h->pid);
		cuda_names__snapshot(k, h->pid);
	} else if (h->type == TS_EV_GPU_MARK && size >= sizeof(struct ts_gpu_mark)) {
		name_stubs(k, rec, feed, ctx);
	}
}

void cuda_names__after(struct cuda_names *k, const void *rec)
{
	const struct ts_event_hdr *h = rec;

	/* after the pipeline: a dying process's last steps may still need its names */
	if (h->type == TS_EV_EXIT)
		cuda_names__forget(k, h->pid);
}
