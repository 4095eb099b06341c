// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "elfsym.h"
#include "tls.skel.h"

/* Delays after exec at which a process's mappings are looked at again (the loader maps
 * DT_NEEDED libraries within milliseconds; later ones come through dlopen events). */
static const uint64_t rescan_after_ns[] = { 5000000ull, 50000000ull, 500000000ull };
#define NRESCAN (sizeof(rescan_after_ns) / sizeof(rescan_after_ns[0]))

enum sym { SYM_READ, SYM_READ_EX, SYM_WRITE, SYM_WRITE_EX, SYM_WRITE_EX2, SYM_FREE, SYM__N };

static const char *const tls_syms[SYM__N] = {
	"SSL_read", "SSL_read_ex", "SSL_write", "SSL_write_ex", "SSL_write_ex2", "SSL_free",
};

struct seen_file {
	dev_t dev;
	ino_t ino;
};

struct rescan {
	pid_t pid;
	uint64_t due_ns;
	unsigned step;
};

struct attacher {
	struct tls_bpf *skel;
	int verbose;
	struct seen_file *seen; /* every file already examined, TLS or not */
	size_t nseen, seencap;
	struct bpf_link **links;
	size_t nlinks, linkcap;
	size_t tls_files;
	size_t failures;
	struct rescan *rescans;
	size_t nrescans, rescancap;
};

struct attacher *attacher__new(struct tls_bpf *skel, int verbose)
{
	struct attacher *a = calloc(1, sizeof(*a));

	if (a) {
		a->skel = skel;
		a->verbose = verbose;
	}
	return a;
}

void attacher__free(struct attacher *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nlinks; i++)
		bpf_link__destroy(a->links[i]);
	free(a->links);
	free(a->seen);
	free(a->rescans);
	free(a);
}

size_t attacher__tls_files(const struct attacher *a)
{
	return a->tls_files;
}

size_t attacher__failures(const struct attacher *a)
{
	return a->failures;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
	void *np;
	size_t ncap;

	if (need <= *cap)
		return true;
	ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * elem);
	if (!np)
		return false;
	*p = np;
	*cap = ncap;
	return true;
}

/* Returns true the first time a file is seen. */
static bool first_sight(struct attacher *a, const struct stat *st)
{
	for (size_t i = 0; i < a->nseen; i++) {
		if (a->seen[i].dev == st->st_dev && a->seen[i].ino == st->st_ino)
			return false;
	}
	if (!grow((void **)&a->seen, &a->seencap, a->nseen + 1, sizeof(*a->seen)))
		return false;
	a->seen[a->nseen++] = (struct seen_file){ st->st_dev, st->st_ino };
	return true;
}

static int attach_one(struct attacher *a, struct bpf_program *prog, bool ret, const char *path,
		      uint64_t off, const char *sym)
{
	struct bpf_link *l;

	if (!grow((void **)&a->links, &a->linkcap, a->nlinks + 1, sizeof(*a->links)))
		return -ENOMEM;
	l = bpf_program__attach_uprobe(prog, ret, -1, path, off);
	if (!l) {
		int err = -errno;

		a->failures++;
		fprintf(stderr, "tokenscope: cannot attach %s%s in %s: %s\n", ret ? "return of " : "",
			sym, path, strerror(-err));
		return err;
	}
	a->links[a->nlinks++] = l;
	return 0;
}

static void attach_tls(struct attacher *a, const char *path, const uint64_t off[SYM__N])
{
	struct tls_bpf *s = a->skel;
	struct {
		enum sym sym;
		struct bpf_program *enter, *exit;
	} plan[] = {
		{ SYM_READ, s->progs.ssl_read_enter, s->progs.ssl_read_exit },
		{ SYM_READ_EX, s->progs.ssl_read_ex_enter, s->progs.ssl_read_ex_exit },
		{ SYM_WRITE, s->progs.ssl_write_enter, s->progs.ssl_write_exit },
		{ SYM_WRITE_EX, s->progs.ssl_write_ex_enter, s->progs.ssl_write_ex_exit },
		/* the return of SSL_write_ex2 reads like SSL_write_ex's: same program */
		{ SYM_WRITE_EX2, s->progs.ssl_write_ex2_enter, s->progs.ssl_write_ex_exit },
		{ SYM_FREE, s->progs.ssl_free_enter, NULL },
	};
	int attached = 0;

	for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
		uint64_t o = off[plan[i].sym];

		if (!o)
			continue;
		/* Return probe first: an entry seen without its return would leave a stale call. */
		if (plan[i].exit && attach_one(a, plan[i].exit, true, path, o, tls_syms[plan[i].sym]))
			continue;
		if (attach_one(a, plan[i].enter, false, path, o, tls_syms[plan[i].sym]))
			continue;
		attached++;
	}
	if (attached) {
		a->tls_files++;
		if (a->verbose)
			fprintf(stderr, "tokenscope: TLS probes on %s (%d functions)\n", path, attached);
	}
}

/* Look at one file: TLS library? libc (dlopen)? Each file only once. */
static void examine(struct attacher *a, const char *path)
{
	static const char *const dl_syms[] = { "dlopen" };
	uint64_t off[SYM__N], dl_off[1];
	const char *base;
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode) || !first_sight(a, &st))
		return;
	if (elfsym__offsets(path, tls_syms, SYM__N, off) > 0 && off[SYM_READ] && off[SYM_WRITE])
		attach_tls(a, path, off);
	/* glibc 2.34+ has dlopen in libc itself; older ones in libdl. */
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if ((!strncmp(base, "libc.so", 7) || !strncmp(base, "libdl.so", 8)) &&
	    elfsym__offsets(path, dl_syms, 1, dl_off) > 0)
		attach_one(a, a->skel->progs.dlopen_exit, true, path, dl_off[0], "dlopen");
}

void attacher__scan_system(struct attacher *a)
{
	static const char *const paths[] = {
		"/lib/x86_64-linux-gnu/libssl.so.3",	 "/usr/lib/x86_64-linux-gnu/libssl.so.3",
		"/lib/x86_64-linux-gnu/libssl.so.1.1",	 "/usr/lib/x86_64-linux-gnu/libssl.so.1.1",
		"/usr/lib64/libssl.so.3",		 "/usr/lib/libssl.so.3",
		"/lib/x86_64-linux-gnu/libc.so.6",	 "/usr/lib/x86_64-linux-gnu/libc.so.6",
	};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		examine(a, paths[i]);
}

/* A path from /proc/PID/maps names a file in that process's mount namespace: reach it through
 * /proc/PID/root unless it is the same file as seen from here. */
static void examine_mapped(struct attacher *a, pid_t pid, const char *path)
{
	char rooted[PATH_MAX];
	struct stat here, there;

	if (snprintf(rooted, sizeof(rooted), "/proc/%d/root%s", pid, path) >= (int)sizeof(rooted))
		return;
	if (stat(rooted, &there))
		return;
	if (!stat(path, &here) && here.st_dev == there.st_dev && here.st_ino == there.st_ino)
		examine(a, path);
	else
		examine(a, rooted);
}

static void scan_one(struct attacher *a, pid_t pid)
{
	char fn[64], line[PATH_MAX + 256], exe[PATH_MAX];
	FILE *f;
	ssize_t n;

	/* The executable first: node and static builds carry OpenSSL inside. */
	snprintf(fn, sizeof(fn), "/proc/%d/exe", pid);
	n = readlink(fn, exe, sizeof(exe) - 1);
	if (n > 0 && exe[0] == '/') {
		exe[n] = 0;
		if (!strstr(exe, " (deleted)"))
			examine_mapped(a, pid, exe);
	}
	snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return; /* gone already, or not ours to read */
	while (fgets(line, sizeof(line), f)) {
		char perms[8], *path;
		size_t len;

		/* start-end perms offset dev inode path */
		if (sscanf(line, "%*s %7s", perms) != 1 || perms[2] != 'x')
			continue;
		path = strchr(line, '/');
		if (!path)
			continue;
		len = strlen(path);
		if (len && path[len - 1] == '\n')
			path[--len] = 0;
		if (strstr(path, " (deleted)"))
			continue;
		examine_mapped(a, pid, path);
	}
	fclose(f);
}

void attacher__scan_pid(struct attacher *a, pid_t pid)
{
	struct dirent *de;
	DIR *d;

	if (pid > 0) {
		scan_one(a, pid);
		return;
	}
	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (isdigit((unsigned char)de->d_name[0]))
			scan_one(a, (pid_t)atoi(de->d_name));
	}
	closedir(d);
}

void attacher__on_exec(struct attacher *a, pid_t pid, uint64_t now_ns)
{
	scan_one(a, pid);
	if (!grow((void **)&a->rescans, &a->rescancap, a->nrescans + 1, sizeof(*a->rescans)))
		return;
	a->rescans[a->nrescans++] = (struct rescan){ pid, now_ns + rescan_after_ns[0], 0 };
}

void attacher__tick(struct attacher *a, uint64_t now_ns)
{
	size_t i = 0;

	while (i < a->nrescans) {
		struct rescan *r = &a->rescans[i];

		if (r->due_ns > now_ns) {
			i++;
			continue;
		}
		scan_one(a, r->pid);
		if (++r->step < NRESCAN) {
			r->due_ns = now_ns + rescan_after_ns[r->step] - rescan_after_ns[r->step - 1];
			i++;
		} else {
			a->rescans[i] = a->rescans[--a->nrescans];
		}
	}
}
