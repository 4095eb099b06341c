// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "elfsym.h"
#include "cuda.skel.h"
#include "tls.skel.h"

/* Delays after exec at which a process's mappings are looked at again (the loader maps
 * DT_NEEDED libraries within milliseconds; later ones come through dlopen events). */
static const uint64_t rescan_after_ns[] = { 5000000ull, 50000000ull, 500000000ull };
#define NRESCAN (sizeof(rescan_after_ns) / sizeof(rescan_after_ns[0]))

enum sym { SYM_READ, SYM_READ_EX, SYM_WRITE, SYM_WRITE_EX, SYM_WRITE_EX2, SYM_FREE, SYM__N };

static const char *const tls_syms[SYM__N] = {
	"SSL_read", "SSL_read_ex", "SSL_write", "SSL_write_ex", "SSL_write_ex2", "SSL_free",
};

/* CUDA entry points: symbol, entry program, return program (NULL: entry only). Every
 * variant that exists in a file is probed; missing ones are skipped. */
struct cuda_probe {
	const char *sym;
	size_t enter; /* offsetof(struct cuda_bpf, progs.X) */
	size_t ret;
};

#define P(x) offsetof(struct cuda_bpf, progs.x)
static const struct cuda_probe cuda_probes[] = {
	/* runtime: libcudart, or a binary with cudart linked in */
	{ "cudaLaunchKernel", P(cuda_launch), 0 },
	{ "cudaLaunchKernel_ptsz", P(cuda_launch_ptsz), 0 },
	{ "cudaLaunchCooperativeKernel", P(cuda_launch), 0 },
	{ "cudaLaunchCooperativeKernel_ptsz", P(cuda_launch_ptsz), 0 },
	{ "cudaLaunchKernelExC", P(cuda_launch_ex), 0 },
	{ "cudaLaunchKernelExC_ptsz", P(cuda_launch_ex_ptsz), 0 },
	{ "cudaGraphLaunch", P(cuda_graph), 0 },
	{ "cudaGraphLaunch_ptsz", P(cuda_graph_ptsz), 0 },
	{ "cudaMemcpyAsync", P(cuda_copy_async), 0 },
	{ "cudaMemcpyAsync_ptsz", P(cuda_copy_async_ptsz), 0 },
	{ "cudaEventRecord", P(cuda_record), 0 },
	{ "cudaEventRecord_ptsz", P(cuda_record_ptsz), 0 },
	{ "cudaEventRecordWithFlags", P(cuda_record), 0 },
	{ "cudaEventRecordWithFlags_ptsz", P(cuda_record_ptsz), 0 },
	{ "cudaStreamWaitEvent", P(cuda_wait), 0 },
	{ "cudaStreamWaitEvent_ptsz", P(cuda_wait_ptsz), 0 },
	{ "cudaStreamSynchronize", P(cuda_stream_sync), P(cuda_ret) },
	{ "cudaStreamSynchronize_ptsz", P(cuda_stream_sync_ptsz), P(cuda_ret) },
	{ "cudaStreamQuery", P(cuda_stream_query), P(cuda_ret) },
	{ "cudaStreamQuery_ptsz", P(cuda_stream_query_ptsz), P(cuda_ret) },
	{ "cudaEventSynchronize", P(cuda_event_sync), P(cuda_ret) },
	{ "cudaEventQuery", P(cuda_event_query), P(cuda_ret) },
	{ "cudaDeviceSynchronize", P(cuda_device_sync), P(cuda_ret) },
	{ "cudaMemcpy", P(cuda_copy), P(cuda_ret) },
	{ "cudaMemcpy_ptds", P(cuda_copy_ptds), P(cuda_ret) },
	{ "cudaStreamBeginCapture", P(capture_begin), 0 },
	{ "cudaStreamBeginCapture_ptsz", P(capture_begin_ptsz), 0 },
	{ "cudaStreamEndCapture", P(capture_end), 0 },
	{ "cudaStreamEndCapture_ptsz", P(capture_end_ptsz), 0 },
	/* driver: libcuda.so.1 */
	{ "cuLaunchKernel", P(cu_launch), 0 },
	{ "cuLaunchKernel_ptsz", P(cu_launch_ptsz), 0 },
	{ "cuLaunchCooperativeKernel", P(cu_launch), 0 },
	{ "cuLaunchCooperativeKernel_ptsz", P(cu_launch_ptsz), 0 },
	{ "cuLaunchKernelEx", P(cu_launch_ex), 0 },
	{ "cuLaunchKernelEx_ptsz", P(cu_launch_ex_ptsz), 0 },
	{ "cuGraphLaunch", P(cu_graph), 0 },
	{ "cuGraphLaunch_ptsz", P(cu_graph_ptsz), 0 },
	{ "cuMemcpyDtoHAsync_v2", P(cu_copy_async), 0 },
	{ "cuMemcpyDtoHAsync_v2_ptsz", P(cu_copy_async_ptsz), 0 },
	{ "cuMemcpyAsync", P(cu_copy_async), 0 },
	{ "cuMemcpyAsync_ptsz", P(cu_copy_async_ptsz), 0 },
	{ "cuEventRecord", P(cu_record), 0 },
	{ "cuEventRecord_ptsz", P(cu_record_ptsz), 0 },
	{ "cuEventRecordWithFlags", P(cu_record), 0 },
	{ "cuEventRecordWithFlags_ptsz", P(cu_record_ptsz), 0 },
	{ "cuStreamWaitEvent", P(cu_wait), 0 },
	{ "cuStreamWaitEvent_ptsz", P(cu_wait_ptsz), 0 },
	{ "cuStreamSynchronize", P(cu_stream_sync), P(cu_ret) },
	{ "cuStreamSynchronize_ptsz", P(cu_stream_sync_ptsz), P(cu_ret) },
	{ "cuStreamQuery", P(cu_stream_query), P(cu_ret) },
	{ "cuStreamQuery_ptsz", P(cu_stream_query_ptsz), P(cu_ret) },
	{ "cuEventSynchronize", P(cu_event_sync), P(cu_ret) },
	{ "cuEventQuery", P(cu_event_query), P(cu_ret) },
	{ "cuCtxSynchronize", P(cu_ctx_sync), P(cu_ret) },
	{ "cuMemcpyDtoH_v2", P(cu_copy), P(cu_ret) },
	{ "cuMemcpyDtoH_v2_ptds", P(cu_copy_ptds), P(cu_ret) },
	{ "cuStreamBeginCapture", P(capture_begin), 0 },
	{ "cuStreamBeginCapture_v2", P(capture_begin), 0 },
	{ "cuStreamBeginCapture_ptsz", P(capture_begin_ptsz), 0 },
	{ "cuStreamBeginCapture_v2_ptsz", P(capture_begin_ptsz), 0 },
	{ "cuStreamEndCapture", P(capture_end), 0 },
	{ "cuStreamEndCapture_ptsz", P(capture_end_ptsz), 0 },
	{ "cuModuleGetFunction", P(cu_get_function), P(cu_get_function_ret) },
	{ "cuLibraryGetKernel", P(cu_get_function), P(cu_get_function_ret) },
	{ "cuKernelGetFunction", P(cu_kernel_get_function), P(cu_get_function_ret) },
};
#undef P
#define NCUDA (sizeof(cuda_probes) / sizeof(cuda_probes[0]))

struct seen_file {
	dev_t dev;
	ino_t ino;
	bool cuda; /* it got CUDA probes */
};

struct rescan {
	pid_t pid;
	uint64_t due_ns;
	unsigned step;
};

struct attacher {
	struct tls_bpf *skel;
	struct cuda_bpf *cuda; /* NULL: no GPU probes */
	size_t cuda_files;
	attacher_cuda_fn on_cuda; /* a process maps a CUDA file */
	void *on_cuda_ctx;
	bool last_was_cuda;	  /* examine(): the file just looked at is a CUDA one */
	int verbose;
	struct seen_file *seen; /* every file already examined, TLS or not */
	size_t nseen, seencap;
	struct bpf_link **links;
	size_t nlinks, linkcap;
	size_t tls_files;
	struct rescan *rescans;
	size_t nrescans, rescancap;
};

struct attacher *attacher__new(struct tls_bpf *skel, struct cuda_bpf *cuda, int verbose)
{
	struct attacher *a = calloc(1, sizeof(*a));

	if (a) {
		a->skel = skel;
		a->cuda = cuda;
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

void attacher__on_cuda(struct attacher *a, attacher_cuda_fn fn, void *ctx)
{
	a->on_cuda = fn;
	a->on_cuda_ctx = ctx;
}

size_t attacher__cuda_files(const struct attacher *a)
{
	return a->cuda_files;
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

/* Returns true the first time a file is seen; a->last_was_cuda tells what it was. */
static bool first_sight(struct attacher *a, const struct stat *st)
{
	for (size_t i = 0; i < a->nseen; i++) {
		if (a->seen[i].dev == st->st_dev && a->seen[i].ino == st->st_ino) {
			a->last_was_cuda = a->seen[i].cuda;
			return false;
		}
	}
	a->last_was_cuda = false;
	if (!grow((void **)&a->seen, &a->seencap, a->nseen + 1, sizeof(*a->seen)))
		return false;
	a->seen[a->nseen++] = (struct seen_file){ st->st_dev, st->st_ino, false };
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

static struct bpf_program *cuda_prog(struct attacher *a, size_t off)
{
	return *(struct bpf_program **)((char *)a->cuda + off);
}

/* A CUDA runtime or driver: every entry point it has. */
static void attach_cuda(struct attacher *a, const char *path, const uint64_t off[NCUDA])
{
	int attached = 0;

	for (size_t i = 0; i < NCUDA; i++) {
		const struct cuda_probe *p = &cuda_probes[i];

		if (!off[i])
			continue;
		if (p->ret && attach_one(a, cuda_prog(a, p->ret), true, path, off[i], p->sym))
			continue;
		if (attach_one(a, cuda_prog(a, p->enter), false, path, off[i], p->sym))
			continue;
		attached++;
	}
	if (attached) {
		a->cuda_files++;
		a->seen[a->nseen - 1].cuda = a->last_was_cuda = true;
		if (a->verbose)
			fprintf(stderr, "tokenscope: CUDA probes on %s (%d functions)\n", path, attached);
	}
}

/* Look at one file, once: TLS library? CUDA runtime or driver? libc (dlopen)? */
static void examine(struct attacher *a, const char *path)
{
	const char *names[SYM__N + 1 + NCUDA];
	uint64_t off[SYM__N + 1 + NCUDA];
	size_t n = 0, dl, cuda0;
	const char *base;
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode) || !first_sight(a, &st))
		return;
	for (size_t i = 0; i < SYM__N; i++)
		names[n++] = tls_syms[i];
	dl = n;
	names[n++] = "dlopen";
	cuda0 = n;
	for (size_t i = 0; a->cuda && i < NCUDA; i++)
		names[n++] = cuda_probes[i].sym;
	if (elfsym__offsets(path, names, n, off) <= 0)
		return;
	if (off[SYM_READ] && off[SYM_WRITE])
		attach_tls(a, path, off);
	/* glibc 2.34+ has dlopen in libc itself; older ones in libdl. */
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if ((!strncmp(base, "libc.so", 7) || !strncmp(base, "libdl.so", 8)) && off[dl])
		attach_one(a, a->skel->progs.dlopen_exit, true, path, off[dl], "dlopen");
	if (a->cuda)
		attach_cuda(a, path, off + cuda0);
}

void attacher__scan_system(struct attacher *a)
{
	static const char *const patterns[] = {
		"/lib/x86_64-linux-gnu/libssl.so.3",	 "/usr/lib/x86_64-linux-gnu/libssl.so.3",
		"/lib/x86_64-linux-gnu/libssl.so.1.1",	 "/usr/lib/x86_64-linux-gnu/libssl.so.1.1",
		"/usr/lib64/libssl.so.3",		 "/usr/lib/libssl.so.3",
		"/lib/x86_64-linux-gnu/libc.so.6",	 "/usr/lib/x86_64-linux-gnu/libc.so.6",
		/* the CUDA driver and toolkit runtimes where installers put them */
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",	 "/usr/local/cuda*/lib64/libcudart.so.*",
		"/usr/local/cuda*/targets/x86_64-linux/lib/libcudart.so.*",
	};

	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		glob_t g;

		if (glob(patterns[i], 0, NULL, &g))
			continue;
		for (size_t k = 0; k < g.gl_pathc; k++)
			examine(a, g.gl_pathv[k]);
		globfree(&g);
	}
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
	bool cuda = false;
	FILE *f;
	ssize_t n;

	a->last_was_cuda = false;
	/* The executable first: node and static builds carry OpenSSL inside. */
	snprintf(fn, sizeof(fn), "/proc/%d/exe", pid);
	n = readlink(fn, exe, sizeof(exe) - 1);
	if (n > 0 && exe[0] == '/') {
		exe[n] = 0;
		if (!strstr(exe, " (deleted)"))
			examine_mapped(a, pid, exe);
	}
	cuda = a->last_was_cuda;
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
		a->last_was_cuda = false;
		examine_mapped(a, pid, path);
		cuda |= a->last_was_cuda;
	}
	fclose(f);
	if (cuda && a->on_cuda)
		a->on_cuda(a->on_cuda_ctx, pid);
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

int attacher__next_due_ms(const struct attacher *a, uint64_t now_ns, int max_ms)
{
	uint64_t best = (uint64_t)max_ms * 1000000ull;

	for (size_t i = 0; i < a->nrescans; i++) {
		uint64_t d = a->rescans[i].due_ns > now_ns ? a->rescans[i].due_ns - now_ns : 0;

		if (d < best)
			best = d;
	}
	return (int)((best + 999999) / 1000000);
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
