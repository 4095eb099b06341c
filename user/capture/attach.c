// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/text.h"
#include "capture/attach.h"
#include "capture/elfsym.h"
#include "capture/gobin.h"
#include "capture/kernel.h"
#include "capture/llama_layout.h"
#include "capture/procmaps.h"
#include "capture/ssl_inner.h"
#include "capture/uprobe_sets.h"

/* Delays after exec at which a process's mappings are looked at again (the loader maps
 * DT_NEEDED libraries within milliseconds; later ones come through dlopen events). */
static const uint64_t rescan_after_ns[] = { 5000000ull, 50000000ull, 500000000ull };
#define NRESCAN (sizeof(rescan_after_ns) / sizeof(rescan_after_ns[0]))

/* The sets, by their place (uprobe_sets.h). */
static const struct uprobe_set *const sets = uprobe_sets;

#define MAX_SYMS UPROBE_SETS_MAX_SYMS

struct seen_file {
	dev_t dev;
	ino_t ino;
	unsigned sets; /* bit per uprobe set it got */
};

/* A file as a process's maps name it (their device and inode), once examined: later
 * processes that map it need no stat of it (a forked client maps a dozen files, and dlopens
 * make its maps be read again). */
struct mapped_file {
	uint64_t dev, ino;
	unsigned sets;
};

struct rescan {
	pid_t pid;
	uint64_t due_ns;
	unsigned step;
};

struct attacher {
	struct bpf_object *objs[SET__N]; /* per set, its family's object (NULL: not loaded) */
	size_t files[SET__N];		 /* files that got each set */
	attacher_cuda_fn on_cuda;	 /* a process maps a CUDA file */
	void *on_cuda_ctx;
	unsigned last_sets; /* examine(): the sets the file just looked at has */
	int verbose;
	struct seen_file *seen; /* every file already examined, probed or not */
	size_t nseen, seencap;
	struct mapped_file *mapped; /* of them, those a maps line named, by its dev and inode */
	size_t nmapped, mappedcap;
	char maps_buf[1 << 16];	    /* scan_one's stdio buffer for /proc/PID/maps */
	bool maps_query;	    /* the kernel answers PROCMAP_QUERY (procmaps.h) */
	struct bpf_link **links; /* perf-event uprobes (libbpf's) */
	size_t nlinks, linkcap;
	bool uprobe_multi;	 /* else perf-event uprobes */
	int *multi_fds;		 /* uprobe_multi links */
	size_t nmulti, multicap;
	struct rescan *rescans;
	size_t nrescans, rescancap;
	size_t probes_off; /* probes that stayed unattached after their retries */
	uint64_t probed_ns; /* when a file last got a set */
};

/* Not in Debian 12's UAPI headers (linux/bpf.h of 6.1): from the kernel's. */
#define TS_BPF_TRACE_UPROBE_MULTI 48
#define TS_BPF_F_UPROBE_MULTI_RETURN 1u

/* BPF_LINK_CREATE's attributes for a uprobe_multi link (union bpf_attr, link_create). */
struct uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
	__u32 _pad;
};

/* A uprobe_multi link of prog on one function of path (pid 0: every process). */
static int link_uprobe_multi(int prog_fd, bool ret, const char *path, uint64_t off,
			     uint64_t cookie)
{
	struct uprobe_multi_attr attr = {
		.prog_fd = (__u32)prog_fd,
		.attach_type = TS_BPF_TRACE_UPROBE_MULTI,
		.path = (__u64)(uintptr_t)path,
		.offsets = (__u64)(uintptr_t)&off,
		.cookies = cookie ? (__u64)(uintptr_t)&cookie : 0,
		.cnt = 1,
		.multi_flags = ret ? TS_BPF_F_UPROBE_MULTI_RETURN : 0,
	};

	return (int)syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

bool attacher__uprobe_multi_works(void)
{
	static const struct bpf_insn ret0[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = TS_BPF_TRACE_UPROBE_MULTI);
	static const char *const here[] = { "attacher__uprobe_multi_works" };
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	uint64_t off = 0;
	int prog, link;

	/* A kernel that loads such a program but cannot link it would fail every probe: link it
	 * too, on this very function (an empty program; closed before this returns). */
	if (n <= 0)
		return false;
	self[n] = 0;
	if (elfsym__offsets(self, here, 1, &off) != 1)
		return false;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ts_multi_probe", "Dual BSD/GPL", ret0, 2, &opts);
	if (prog < 0)
		return false;
	link = link_uprobe_multi(prog, false, self, off, 0);
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}

void attacher__prepare_uprobe_multi(struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strcmp(sec, "uprobe") || !strcmp(sec, "uretprobe"))
			bpf_program__set_expected_attach_type(prog, TS_BPF_TRACE_UPROBE_MULTI);
	}
}

struct attacher *attacher__new(int verbose, bool uprobe_multi)
{
	struct attacher *a = calloc(1, sizeof(*a));

	if (a) {
		a->verbose = verbose;
		a->uprobe_multi = uprobe_multi;
		/* TOKENSCOPE_MAPS_TEXT=1: maps read as text, as before 6.11 (the kernel matrix's
		 * kernels are all older: they read the text) */
		a->maps_query = !(getenv("TOKENSCOPE_MAPS_TEXT") &&
				  !strcmp(getenv("TOKENSCOPE_MAPS_TEXT"), "1"));
	}
	return a;
}

void attacher__add_family(struct attacher *a, const char *family, struct bpf_object *obj)
{
	for (size_t i = 0; i < SET__N; i++) {
		if (!strcmp(sets[i].family, family))
			a->objs[i] = obj;
	}
}

void attacher__free(struct attacher *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nlinks; i++)
		bpf_link__destroy(a->links[i]);
	free(a->links);
	for (size_t i = 0; i < a->nmulti; i++)
		close(a->multi_fds[i]);
	free(a->multi_fds);
	free(a->seen);
	free(a->mapped);
	free(a->rescans);
	free(a);
}

size_t attacher__files(const struct attacher *a, const char *set)
{
	for (size_t i = 0; i < SET__N; i++) {
		if (!strcmp(sets[i].name, set))
			return a->files[i];
	}
	return 0;
}

void attacher__on_cuda(struct attacher *a, attacher_cuda_fn fn, void *ctx)
{
	a->on_cuda = fn;
	a->on_cuda_ctx = ctx;
}

/* A file examined before (its sets in a->last_sets). */
static bool seen_before(struct attacher *a, const struct stat *st)
{
	for (size_t i = 0; i < a->nseen; i++) {
		if (a->seen[i].dev == st->st_dev && a->seen[i].ino == st->st_ino) {
			a->last_sets = a->seen[i].sets;
			return true;
		}
	}
	return false;
}

/* Returns true the first time a file is seen; a->last_sets tells what it got. */
static bool first_sight(struct attacher *a, const struct stat *st)
{
	if (seen_before(a, st))
		return false;
	a->last_sets = 0;
	if (!array__reserve((void **)&a->seen, &a->seencap, a->nseen + 1, sizeof(*a->seen)))
		return false;
	a->seen[a->nseen++] = (struct seen_file){ st->st_dev, st->st_ino, 0 };
	return true;
}

#define ATTACH_TRIES 4
#define ATTACH_RETRY_US 10000 /* doubled after each try */

/* Attaching can fail for a moment (another instance registering or removing a probe on the
 * same function): try again before giving up. A missing function or memory is not retried. */
static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return 0;
}

/* One try: stored in a's links on success; -errno on failure. */
static int attach_once(struct attacher *a, struct bpf_program *prog, bool ret, const char *path,
		       uint64_t off, uint64_t cookie)
{
	struct bpf_link *l;
	int fd;

	if (a->uprobe_multi) {
		if (!array__reserve((void **)&a->multi_fds, &a->multicap, a->nmulti + 1,
				    sizeof(*a->multi_fds)))
			return -ENOMEM;
		fd = link_uprobe_multi(bpf_program__fd(prog), ret, path, off, cookie);
		if (fd < 0)
			return -errno;
		a->multi_fds[a->nmulti++] = fd;
		return 0;
	}
	if (!array__reserve((void **)&a->links, &a->linkcap, a->nlinks + 1, sizeof(*a->links)))
		return -ENOMEM;
	if (cookie) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret, .bpf_cookie = cookie);

		l = bpf_program__attach_uprobe_opts(prog, -1, path, off, &opts);
	} else {
		l = bpf_program__attach_uprobe(prog, ret, -1, path, off);
	}
	if (!l)
		return -errno;
	a->links[a->nlinks++] = l;
	return 0;
}

static int attach_retrying(struct attacher *a, struct bpf_program *prog, bool ret,
			   const char *path, uint64_t off, uint64_t cookie)
{
	/* libbpf's own line per failed try is left out: attach_one says it once, better */
	libbpf_print_fn_t print = a->verbose > 1 ? NULL : libbpf_set_print(libbpf_quiet);
	int err = 0;

	for (int i = 0; i < ATTACH_TRIES; i++) {
		err = attach_once(a, prog, ret, path, off, cookie);
		if (!err || err == -ENOENT || err == -ENOMEM)
			break;
		usleep(ATTACH_RETRY_US << i);
	}
	if (a->verbose <= 1)
		libbpf_set_print(print);
	return err;
}

static int attach_one(struct attacher *a, struct bpf_object *obj, const char *prog_name, bool ret,
		      const char *path, uint64_t off, uint64_t cookie, const char *sym)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, prog_name);
	int err;

	if (!prog) {
		fprintf(stderr, "tokenscope: no BPF program %s for %s\n", prog_name, sym);
		return -ENOENT;
	}
	err = attach_retrying(a, prog, ret, path, off, cookie);
	if (err) {
		char safe[TEXT_SAFE_MAX(PATH_MAX)];

		/* The kernel refuses a second uprobe on an address another one holds with a
		 * different ref_ctr_offset (bcc's sslsniff registers them so) with EINVAL. */
		a->probes_off++;
		fprintf(stderr, "tokenscope: warning: %s in %s stays unprobed (%s probe: %s)%s; its "
				"calls there are not seen\n",
			sym, text__safe(safe, sizeof(safe), path), ret ? "return" : "entry",
			strerror(-err),
			err == -EINVAL ? ": another tracer may hold this function with a uprobe of "
					 "another ref_ctr_offset (bcc's sslsniff does; see dmesg)"
				       : "");
		return err;
	}
	return 0;
}

uint64_t attacher__probed_ns(const struct attacher *a)
{
	return a->probed_ns;
}

size_t attacher__probes_off(const struct attacher *a)
{
	return a->probes_off;
}

/* OpenSSL's places (off) with each direction moved to its inner function where ssl_inner.h
 * finds it. Written to moved. */
static const uint64_t *tls_places(const struct attacher *a, const char *path,
				  const uint64_t *off, uint64_t *moved)
{
	_Static_assert(TLS_READ == 0 && TLS_READ_EX == 1 && TLS_WRITE == 2 && TLS_WRITE_EX == 3,
		       "ssl_inner__move's order");
	char safe[TEXT_SAFE_MAX(PATH_MAX)];
	unsigned dirs;

	memcpy(moved, off, sets[SET_TLS].n * sizeof(*off));
	dirs = ssl_inner__move(path, moved);
	for (int d = 0; a->verbose && d < 2; d++) {
		size_t ex = d ? TLS_WRITE_EX : TLS_READ_EX;

		if (dirs & 1u << d)
			fprintf(stderr, "tokenscope: %s: %s and %s probed where both go, +0x%" PRIx64
					" (one trap a call)\n",
				text__safe(safe, sizeof(safe), path), sets[SET_TLS].probes[ex - 1].sym,
				sets[SET_TLS].probes[ex].sym, moved[ex]);
	}
	return moved;
}

/* Every probe of the set whose function the file has. */
static void attach_set(struct attacher *a, size_t set, const char *path, const uint64_t *off)
{
	const struct uprobe_set *us = &sets[set];
	int attached = 0;
	uint64_t embeddings = 0; /* llama.cpp: the embeddings flag's offset in the context, + 1 */
	uint64_t tls_off[MAX_SYMS];

	if (set == SET_TLS)
		off = tls_places(a, path, off, tls_off);

	/* Cookies came with Linux 5.15; the legacy build (before 5.17) reads none */
	if (set == SET_LLAMA && !kernel__legacy()) {
		uint32_t at = llama_layout__embeddings_offset(path, off[LLAMA_SET_EMBEDDINGS],
							      off[LLAMA_MEMBER_SET_EMBEDDINGS]);

		embeddings = at ? (uint64_t)at + 1 : 0;
		if (a->verbose && off[LLAMA_DECODE]) {
			char safe[TEXT_SAFE_MAX(PATH_MAX)];

			if (at)
				fprintf(stderr, "tokenscope: %s: a context's embeddings flag at +%u\n",
					text__safe(safe, sizeof(safe), path), at);
			else
				fprintf(stderr, "tokenscope: %s: no setter says where a context's "
						"embeddings flag is\n",
					text__safe(safe, sizeof(safe), path));
		}
	}
	for (size_t i = 0; i < us->n; i++) {
		const struct uprobe_spec *p = &us->probes[i];
		uint64_t cookie = set == SET_LLAMA && (i == LLAMA_DECODE || i == LLAMA_ENCODE)
					  ? embeddings
					  : 0;

		if (!off[i] || (!p->enter && !p->ret))
			continue;
		/* Return probe first: an entry seen without its return would leave a stale call. */
		if (p->ret && attach_one(a, a->objs[set], p->ret, true, path, off[i], 0, p->sym))
			continue;
		if (p->enter &&
		    attach_one(a, a->objs[set], p->enter, false, path, off[i], cookie, p->sym))
			continue;
		attached++;
	}
	if (!attached)
		return;
	a->files[set]++;
	a->seen[a->nseen - 1].sets |= 1u << set;
	a->last_sets |= 1u << set;
	a->probed_ns = clock__now_ns();
	if (a->verbose && set != SET_DLOPEN) {
		char safe[TEXT_SAFE_MAX(PATH_MAX)];

		fprintf(stderr, "tokenscope: %s probes on %s (%d functions)\n", us->name,
			text__safe(safe, sizeof(safe), path), attached);
	}
}

/* A Go program's crypto/tls (*Conn).Read or Write: a probe on each RET, then one past its
 * stack check (gobin.h: once a call; never a uretprobe: bpf/tls.bpf.c says why). Returns 1
 * when all are on. */
static int attach_go_func(struct attacher *a, const char *path, const struct gobin_func *f,
			  const char *enter, const char *ret, const char *sym)
{
	struct bpf_object *obj = a->objs[SET_GO_TLS];

	/* the returns first: an entry seen without its return would leave a stale call */
	for (size_t i = 0; i < f->nrets; i++) {
		if (attach_one(a, obj, ret, false, path, f->rets[i], 0, sym))
			return 0; /* a return unprobed: the entry stays off, no call is left open */
	}
	return !attach_one(a, obj, enter, false, path, f->body, 0, sym);
}

/* A Go executable: its crypto/tls, where it links it. */
static void examine_go(struct attacher *a, const char *path)
{
	char why[256], safe[TEXT_SAFE_MAX(PATH_MAX)], safe_why[TEXT_SAFE_MAX(256)];
	struct gobin g;
	int err = gobin__inspect(path, &g, why, sizeof(why)), attached;

	if (err == -ENOEXEC || err == -ENOENT) /* not Go, or no TLS in it: nothing to say */
		return;
	if (err) {
		fprintf(stderr, "tokenscope: warning: %s: %s; its TLS is not traced\n",
			text__safe(safe, sizeof(safe), path), text__safe(safe_why, sizeof(safe_why), why));
		return;
	}
	attached = attach_go_func(a, path, &g.read, "go_tls_read_enter", "go_tls_read_ret",
				  "crypto/tls.(*Conn).Read") +
		   attach_go_func(a, path, &g.write, "go_tls_write_enter", "go_tls_write_ret",
				  "crypto/tls.(*Conn).Write");
	if (!attached)
		return;
	a->probed_ns = clock__now_ns();
	a->files[SET_GO_TLS]++;
	a->seen[a->nseen - 1].sets |= 1u << SET_GO_TLS;
	a->last_sets |= 1u << SET_GO_TLS;
	if (a->verbose)
		fprintf(stderr, "tokenscope: Go TLS probes on %s (%s%s, %zu + %zu returns)\n",
			text__safe(safe, sizeof(safe), path), g.version,
			g.has_symtab ? "" : ", stripped", g.read.nrets, g.write.nrets);
}

/* Whether a set's symbols that are read, not probed (llama.cpp's setters, for where a context
 * keeps its embeddings flag), were all found: a library may export its C calls and keep its
 * C++ ones in .symtab alone. */
static bool read_symbols_found(size_t set, const uint64_t *off)
{
	for (size_t i = 0; i < sets[set].n; i++) {
		if (!sets[set].probes[i].enter && !sets[set].probes[i].ret && !off[i])
			return false;
	}
	return true;
}

/* The sets a file's symbols (off, from first[set] on for each) make it want, attached: a set
 * of which some symbol was found, and whose wants() agrees; from the exported symbols alone
 * (exported_only), only a set whose read symbols are all there. Those attached are taken out
 * of *wanting. */
static void attach_wanted(struct attacher *a, const char *path, const uint64_t *off,
			  const size_t first[], unsigned *wanting, bool exported_only)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t set = 0; set < SET__N; set++) {
		bool found = false;

		for (size_t i = 0; (*wanting & 1u << set) && i < sets[set].n; i++)
			found |= off[first[set] + i] != 0;
		if (!found || (exported_only && !read_symbols_found(set, off + first[set])))
			continue;
		if (sets[set].wants(base, off + first[set])) {
			attach_set(a, set, path, off + first[set]);
			*wanting &= ~(1u << set);
		}
	}
}

/*
 * Look at one file, once: does it export what any uprobe set probes? A program's first
 * requests wait for this (a never-seen program is examined at its exec): the exported symbols
 * are looked up first, through the file's hash table, and what they find is attached at once;
 * only the sets still wanting are looked for among all symbols, a scan of milliseconds on a
 * large binary (node: 109 000 symbols, 6 ms, for CUDA and llama.cpp names it does not have).
 */
static void examine(struct attacher *a, const char *path)
{
	const char *names[MAX_SYMS];
	uint64_t off[MAX_SYMS];
	size_t n = 0, first[SET__N];
	unsigned wanting = 0;
	struct stat st;

	if (stat(path, &st) || !S_ISREG(st.st_mode) || !first_sight(a, &st))
		return;
	for (size_t set = 0; set < SET__N; set++) {
		first[set] = n;
		if (a->objs[set] && sets[set].n)
			wanting |= 1u << set;
		for (size_t i = 0; a->objs[set] && i < sets[set].n; i++)
			names[n++] = sets[set].probes[i].sym;
	}
	if (a->objs[SET_GO_TLS])
		examine_go(a, path);
	if (elfsym__dynamic_offsets(path, names, n, off) < 0)
		return; /* not an ELF file */
	attach_wanted(a, path, off, first, &wanting, true);
	if (wanting && elfsym__static_offsets(path, names, n, off) > 0)
		attach_wanted(a, path, off, first, &wanting, false);
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
static bool examine_mapped(struct attacher *a, pid_t pid, const char *path)
{
	char rooted[PATH_MAX];
	struct stat here, there;

	if (snprintf(rooted, sizeof(rooted), "/proc/%d/root%s", pid, path) >= (int)sizeof(rooted))
		return false;
	if (stat(rooted, &there))
		return false;
	if (!stat(path, &here) && here.st_dev == there.st_dev && here.st_ino == there.st_ino)
		examine(a, path);
	else
		examine(a, rooted);
	return true;
}

/* A maps line's file examined before: its sets in a->last_sets. */
static bool mapped_before(struct attacher *a, const struct maps_entry *e)
{
	for (size_t i = 0; i < a->nmapped; i++) {
		if (a->mapped[i].ino == e->ino && a->mapped[i].dev == e->dev) {
			a->last_sets = a->mapped[i].sets;
			return true;
		}
	}
	return false;
}

/* A mapped file not examined before (e: its maps line or query): examined, and remembered by
 * the device and inode its maps name. */
static void note_mapped(struct attacher *a, pid_t pid, const struct maps_entry *e,
			const char *path)
{
	if (examine_mapped(a, pid, path) &&
	    array__reserve((void **)&a->mapped, &a->mappedcap, a->nmapped + 1, sizeof(*a->mapped)))
		a->mapped[a->nmapped++] = (struct mapped_file){ e->dev, e->ino, a->last_sets };
}

static void scan_one(struct attacher *a, pid_t pid)
{
	char fn[64], line[PATH_MAX + 256], exe[PATH_MAX];
	struct maps_entry e;
	struct stat st;
	bool cuda = false, queried = false;
	int fd, got = 0;
	FILE *f;
	ssize_t n;

	a->last_sets = 0;
	/* The executable first: node and static builds carry OpenSSL inside. One stat where it
	 * was examined before. */
	snprintf(fn, sizeof(fn), "/proc/%d/exe", pid);
	if (!stat(fn, &st) && seen_before(a, &st)) {
		/* a->last_sets: its sets */
	} else if ((n = readlink(fn, exe, sizeof(exe) - 1)) > 0 && exe[0] == '/') {
		exe[n] = 0;
		if (!strstr(exe, " (deleted)"))
			examine_mapped(a, pid, exe);
	}
	cuda = a->last_sets & (1u << SET_CUDA);
	snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
	fd = open(fn, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* gone already, or not ours to read */
	/* Linux 6.11 on: its executable file mappings alone, a name read only for a new file */
	for (uint64_t from = 0; a->maps_query && (got = procmaps__next_exec(fd, &from, &e)) > 0;) {
		a->last_sets = 0;
		if (!mapped_before(a, &e) && !procmaps__name(fd, e.start, line, sizeof(line)) &&
		    line[0] == '/' && !strstr(line, " (deleted)"))
			note_mapped(a, pid, &e, line);
		cuda |= a->last_sets & (1u << SET_CUDA);
		queried = true;
	}
	if (a->maps_query && got < 0 && !queried && (errno == ENOTTY || errno == EINVAL))
		a->maps_query = false; /* an older kernel: its maps' text from now on */
	if (a->maps_query || !(f = fdopen(fd, "re"))) {
		close(fd);
		goto done;
	}
	/* the whole file in a read or two (a 4 KiB buffer took a dozen for a Python process) */
	setvbuf(f, a->maps_buf, _IOFBF, sizeof(a->maps_buf));
	while (fgets(line, sizeof(line), f)) {
		if (procmaps__parse(line, &e) || !procmaps__is_exec_file(&e))
			continue;
		a->last_sets = 0;
		if (!mapped_before(a, &e))
			note_mapped(a, pid, &e, e.path);
		cuda |= a->last_sets & (1u << SET_CUDA);
	}
	fclose(f);
done:
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
	if (!array__reserve((void **)&a->rescans, &a->rescancap, a->nrescans + 1,
			    sizeof(*a->rescans)))
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
