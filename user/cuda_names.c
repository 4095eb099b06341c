// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE /* asprintf */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "elfsym.h"
#include "cuda_names.h"
#include "buf.h"
#include "procmaps.h"

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

struct cuda_names {
	struct entry *seen;
	size_t n, cap;
	struct snapshot *snaps;
	size_t nsnaps;
};

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

/* Keep text as pid's snapshot (newest first; the oldest goes past MAX_SNAPSHOTS). Takes text. */
static void keep_snapshot(struct cuda_names *k, uint32_t pid, char *text)
{
	struct snapshot *s;

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

int cuda_names__snapshot(struct cuda_names *k, uint32_t pid)
{
	char fn[64], line[PATH_MAX + 256];
	struct buf text = { 0 };
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
	if (!text.p || text.overflow) {
		buf__free(&text);
		return 0; /* read, but nothing worth keeping */
	}
	keep_snapshot(k, pid, text.p);
	return 0;
}

/* Is the file at path the one the kernel mapped (device in the kernel's encoding)? */
static bool same_file(const char *path, uint32_t kdev, uint64_t ino)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == ino &&
	       major(st.st_dev) == kdev >> 20 && minor(st.st_dev) == (kdev & 0xfffff);
}

int cuda_names__snapshot_exec(struct cuda_names *k, const struct ts_exec *e)
{
	char given[TS_EXEC_PATH_LEN + 1], cand[2][PATH_MAX], real[PATH_MAX], *text;
	int ncand = 0;

	if (!e->text_start || e->text_end <= e->text_start)
		return -1;
	memcpy(given, e->path, TS_EXEC_PATH_LEN);
	given[TS_EXEC_PATH_LEN] = 0;
	if (!given[0])
		return -1;
	/* The path is in the process's mount namespace: its parent's root (a container's) first,
	 * then ours. The inode decides, never the name alone. */
	if (given[0] != '/')
		return -1;
	snprintf(cand[ncand++], PATH_MAX, "/proc/%u/root%s", e->ppid, given);
	snprintf(cand[ncand++], PATH_MAX, "%s", given);
	for (int i = 0; i < ncand; i++) {
		if (!realpath(cand[i], real) || !same_file(real, e->dev, e->ino))
			continue;
		if (asprintf(&text, "%llx-%llx r-xp %llx 00:00 %llu %s\n",
			     (unsigned long long)e->text_start, (unsigned long long)e->text_end,
			     (unsigned long long)e->text_offset, (unsigned long long)e->ino,
			     real) < 0)
			return -1;
		keep_snapshot(k, e->hdr.pid, text);
		return 0;
	}
	return -1;
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
	size_t w = 0;

	drop_snapshot(k, pid);
	for (size_t i = 0; i < k->n; i++) {
		if (k->seen[i].pid != pid)
			k->seen[w++] = k->seen[i];
	}
	k->n = w;
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

/* Which file, at which file offset, holds addr in pid's address space: from the live maps
 * (live = true), or from the snapshot taken while the process ran. */
static int locate(struct cuda_names *k, uint32_t pid, uint64_t addr, bool live, char *path,
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

void cuda_names__name(struct cuda_names *k, uint32_t pid, uint64_t addr, char *out, size_t n)
{
	char path[PATH_MAX + 32], raw[8192];
	uint64_t off;

	out[0] = 0;
	if (array__reserve((void **)&k->seen, &k->cap, k->n + 1, sizeof(*k->seen)))
		k->seen[k->n++] = (struct entry){ pid, addr };
	/* The live process first; if it died meanwhile (its /proc/PID/root with it), the
	 * snapshot's mapping and the file by its own path. */
	if ((locate(k, pid, addr, true, path, sizeof(path), &off) ||
	     elfsym__name_at(path, off, raw, sizeof(raw))) &&
	    (locate(k, pid, addr, false, path, sizeof(path), &off) ||
	     elfsym__name_at(path, off, raw, sizeof(raw))))
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
		/* the executable's mapping, where nvcc-built programs keep their kernel stubs; from
		 * the record when the process is already gone */
		if (cuda_names__snapshot(k, h->pid) && size >= sizeof(struct ts_exec))
			cuda_names__snapshot_exec(k, rec);
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
