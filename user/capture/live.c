// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/pidset.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "capture/attach.h"
#include "capture/cuda_names.h"
#include "capture/kernel.h"
#include "capture/live.h"
#include "capture/ring.h"
#include "capture/tracefs.h"
#include "cuda.skel.h"
#include "cuda_legacy.skel.h"
#include "llama.skel.h"
#include "llama_legacy.skel.h"
#include "sock.skel.h"
#include "sock_core.skel.h"
#include "sock_legacy.skel.h"
#include "tls.skel.h"
#include "tls_legacy.skel.h"

/* Longest wait for records. Data records do not wake the reader (ts_quiet in
 * bpf/common.bpf.h): the ring is drained at least this often, and whenever it passes an
 * eighth full or a lifecycle record comes. */
#define POLL_MAX_MS 20
#define STATS_INTERVAL_NS 1000000000ull /* kernel counters read, drops warned about */
#define CONSUMED_MARGIN_NS 1000000ull

/* Capability bits (linux/capability.h): CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON. */
#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39

/* A map that the first family also has, by name (events, counters, pids, and what two
 * families share on purpose, like tls_calls), is created by the first and reused by the
 * others: one map, whichever program writes it. */

/* ---- probe families: one BPF object each ---- */

/* What live capture needs from a generated skeleton, whatever its type. */
#define SKELETON_GLUE(x)                                                                      \
	static void *x##_open(void) { return x##_bpf__open(); }                                \
	static struct bpf_object *x##_object(void *s) { return ((struct x##_bpf *)s)->obj; }   \
	static struct ts_filter *x##_filter(void *s)                                           \
	{                                                                                     \
		return (struct ts_filter *)&((struct x##_bpf *)s)->rodata->ts_filter;           \
	}                                                                                     \
	static __u64 *x##_ring_wake(void *s)                                                  \
	{                                                                                     \
		return (__u64 *)&((struct x##_bpf *)s)->rodata->ts_ring_wake;                   \
	}                                                                                     \
	static int x##_load(void *s) { return x##_bpf__load(s); }                              \
	static void x##_destroy(void *s) { x##_bpf__destroy(s); }

SKELETON_GLUE(tls)
SKELETON_GLUE(cuda)
SKELETON_GLUE(sock)
SKELETON_GLUE(sock_core)
SKELETON_GLUE(llama)
SKELETON_GLUE(tls_legacy)
SKELETON_GLUE(cuda_legacy)
SKELETON_GLUE(sock_legacy)
SKELETON_GLUE(llama_legacy)

struct live;

struct probe_family {
	const char *name; /* as the uprobe sets in attach.c name it */
	const char *what; /* in messages */
	bool optional;	  /* failing to load costs this family's view, not the run */
	bool (*wanted)(const struct live_opts *o); /* NULL: always loaded */
	void *(*open)(void);
	struct bpf_object *(*object)(void *skel);
	struct ts_filter *(*filter)(void *skel);
	__u64 *(*ring_wake)(void *skel); /* common.bpf.h's ts_ring_wake */
	int (*load)(void *skel);
	void (*destroy)(void *skel);
	/* After load: fill the family's own maps from the options (may be NULL). */
	int (*configure)(const struct live_opts *o, struct bpf_object *obj);
	/* The family's live-side work on a record, before and after the pipeline (may be NULL):
	 * what needs the running process (its /proc), done before the process is gone. */
	void (*before)(struct live *lv, void *rec, size_t size);
	void (*after)(struct live *lv, const void *rec);
};

static void cuda_before(struct live *lv, void *rec, size_t size);
static void cuda_after(struct live *lv, const void *rec);
static int sock_ports(const struct live_opts *o, struct bpf_object *obj);

/* A family's build x (bpf/x.bpf.c, or one made again from it: sock_core, *_legacy), under the
 * family's name */
#define BUILD(name, x, what, optional, wanted, configure, before, after)                       \
	{ name, what, optional, wanted, x##_open, x##_object, x##_filter, x##_ring_wake, x##_load, \
	  x##_destroy, configure, before, after }

/* The plaintext family comes in two builds of bpf/sock.bpf.c: with bpf_rdonly_cast (Linux
 * 6.2 and later: a direct load a field) and, before it, with CO-RE reads (a helper call a
 * field; Debian 12's 6.1). Exactly one is wanted. */
static bool has_rdonly_cast(void)
{
	static int has = -1;
	const char *force = getenv("TOKENSCOPE_CORE_READS");

	/* TOKENSCOPE_CORE_READS=1: the CO-RE build here too, as on 6.1 (a test runs one so) */
	if (has < 0)
		has = !(force && !strcmp(force, "1")) && kernel__has_kfunc("bpf_rdonly_cast");
	return has;
}

static bool plaintext_wanted(const struct live_opts *o)
{
	return !o->no_plaintext && !kernel__legacy() && has_rdonly_cast();
}

static bool plaintext_core_wanted(const struct live_opts *o)
{
	return !o->no_plaintext && !kernel__legacy() && !has_rdonly_cast();
}

/* Every family has a legacy build, for kernels before 5.17 (kernel__legacy). */
static bool default_wanted(const struct live_opts *o)
{
	return !kernel__legacy();
}

static bool legacy_wanted(const struct live_opts *o)
{
	return kernel__legacy();
}

static bool plaintext_legacy_wanted(const struct live_opts *o)
{
	return !o->no_plaintext && kernel__legacy();
}

/*
 * A new probe family: its bpf/NAME.bpf.c (including common.bpf.h), a SKELETON_GLUE(NAME) and
 * a line here; its uprobe sets (if any) in attach.c; its record types in bpf/tokenscope.h and
 * their consumer in pipeline__feed. Tracepoint, tp_btf, fentry and fexit programs attach by
 * themselves.
 * The first family loaded owns the shared maps: TLS, not optional, in one of its builds.
 */
static const struct probe_family families[] = {
	BUILD("tls", tls, "TLS", false, default_wanted, NULL, NULL, NULL),
	BUILD("tls", tls_legacy, "TLS (5.10 programs)", false, legacy_wanted, NULL, NULL, NULL),
	BUILD("cuda", cuda, "CUDA", true, default_wanted, NULL, cuda_before, cuda_after),
	BUILD("cuda", cuda_legacy, "CUDA (5.10 programs)", true, legacy_wanted, NULL, cuda_before,
	      cuda_after),
	BUILD("sock", sock, "plaintext TCP", true, plaintext_wanted, sock_ports, NULL, NULL),
	/* the same family where the kernel has no bpf_rdonly_cast */
	BUILD("sock", sock_core, "plaintext TCP (CO-RE reads)", true, plaintext_core_wanted,
	      sock_ports, NULL, NULL),
	BUILD("sock", sock_legacy, "plaintext TCP (5.10 programs)", true, plaintext_legacy_wanted,
	      sock_ports, NULL, NULL),
	BUILD("llama", llama, "llama.cpp", true, default_wanted, NULL, NULL, NULL),
	BUILD("llama", llama_legacy, "llama.cpp (5.10 programs)", true, legacy_wanted, NULL, NULL,
	      NULL),
};

#define NFAMILIES (sizeof(families) / sizeof(families[0]))

struct live {
	const struct live_opts *o;
	struct pipeline *pl;
	struct attacher *att;
	struct cuda_names *cuda_names;
	void *skel[NFAMILIES];		/* NULL: the family is not loaded */
	bool uprobe_multi;		/* uprobes as uprobe_multi links (attach.h) */
	struct bpf_link **links;	/* auto-attached programs of every family */
	size_t nlinks, linkcap;
	struct ring ring;		/* the events ring buffer, mapped once (ring.h) */
	uint64_t reported_drop_bytes; /* TS_CNT_DROP_BYTES at the last drop warning */
	struct pidset known;		/* live processes whose tree was recorded */
	/* A writable copy of one record (credentials are masked in place): the largest data
	 * record, a socket piece with its addresses, fits. */
	uint8_t buf[(sizeof(struct ts_sock_data) > sizeof(struct ts_tls_data)
			     ? sizeof(struct ts_sock_data)
			     : sizeof(struct ts_tls_data)) +
		    TS_CHUNK_MAX];
};

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	if (exiting) /* a second Ctrl-C: leave now */
		_exit(130);
	exiting = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct bpf_object *obj_of(const struct live *lv, size_t i)
{
	return lv->skel[i] ? families[i].object(lv->skel[i]) : NULL;
}

/* The object that holds the shared maps: the first family loaded (families[]). */
static struct bpf_object *owner_obj(const struct live *lv)
{
	for (size_t i = 0; i < NFAMILIES; i++) {
		if (lv->skel[i])
			return obj_of(lv, i);
	}
	return NULL;
}

/* The loaded family of this name, NULL when none is (one name may have two builds: sock). */
static const struct probe_family *family_loaded(const struct live *lv, const char *name)
{
	for (size_t i = 0; i < NFAMILIES; i++) {
		if (!strcmp(families[i].name, name) && lv->skel[i])
			return &families[i];
	}
	return NULL;
}

/* ---- CUDA: kernel names need the live process ---- */

static void feed_record(void *ctx, void *rec, size_t size)
{
	pipeline__feed(ctx, rec, size);
}

static void cuda_before(struct live *lv, void *rec, size_t size)
{
	cuda_names__before(lv->cuda_names, rec, size, feed_record, lv->pl);
}

static void cuda_after(struct live *lv, const void *rec)
{
	cuda_names__after(lv->cuda_names, rec);
}

static void snapshot_maps(void *ctx, uint32_t pid)
{
	cuda_names__snapshot(ctx, pid);
}

/* ---- checks before anything is touched ---- */

/* Root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN also does). */
static bool privileged(void)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f;

	if (geteuid() == 0)
		return true;
	f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	}
	fclose(f);
	return (eff & (1ull << CAP_SYS_ADMIN_BIT)) ||
	       ((eff & (1ull << CAP_BPF_BIT)) && (eff & (1ull << CAP_PERFMON_BIT)));
}

int live__check(const struct live_opts *o)
{
	if (!privileged()) {
		fprintf(stderr, "tokenscope: needs root (or CAP_BPF and CAP_PERFMON) to load eBPF "
				"probes\n");
		return -1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, "tokenscope: this kernel has no BTF (/sys/kernel/btf/vmlinux); "
				"tokenscope needs CONFIG_DEBUG_INFO_BTF=y\n");
		return -1;
	}
	if (kernel__below_floor())
		return -1;
	for (int i = 0; i < o->npids; i++) {
		if (kill(o->pids[i], 0) && errno == ESRCH) {
			fprintf(stderr, "tokenscope: no process with PID %d\n", o->pids[i]);
			return -1;
		}
	}
	return 0;
}

/* ---- the ring buffer's size ---- */

#define RING_MB_PER_CPU 32
#define RING_MB_MIN 8
#define RING_MB_MAX 256
#define RING_RAM_SHARE 256 /* at most 1/256 of the memory */

/*
 * The default ring buffer: sized for a busy host, since what overflows it is lost. A burst
 * is bounded by how many CPUs produce records while the reader is descheduled, so 32 MiB per
 * CPU, within 8 and 256 MiB and at most 1/256 of the memory (it is locked kernel memory), as
 * the power of two at or below that. 2 CPUs and 24 GiB: 64 MiB (2 000 concurrent streams
 * on such a VM needed 64 to lose nothing; 8 lost 3 489 records).
 */
long live__default_ringbuf_mb(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE), want = RING_MB_PER_CPU * (ncpu > 0 ? ncpu : 1), mb = 1;

	if (pages > 0 && page > 0 && want > (long)((double)pages * page / RING_RAM_SHARE / (1 << 20)))
		want = (long)((double)pages * page / RING_RAM_SHARE / (1 << 20));
	if (want > RING_MB_MAX)
		want = RING_MB_MAX;
	while (mb * 2 <= want)
		mb *= 2;
	return mb < RING_MB_MIN ? RING_MB_MIN : mb;
}

/* ---- open, load, attach ---- */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return vfprintf(stderr, fmt, args);
}

static int libbpf_warnings(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return level <= LIBBPF_WARN ? vfprintf(stderr, fmt, args) : 0;
}

/* The same filter in every family: the -p and -c options. */
static void set_filter(struct ts_filter *f, const struct live_opts *o)
{
	f->self = (__u32)getpid();
	f->by_pid = o->npids > 0;
	f->by_port = o->nports > 0;
	if (o->comm) {
		f->by_comm = 1;
		strncpy(f->comm, o->comm, TS_COMM_LEN - 1);
	}
}

/* Open, filter, size or share the maps, load. Returns NULL with the failed step in *step. */
static void *open_family(const struct probe_family *f, const struct live_opts *o,
			 struct bpf_object *owner, bool uprobe_multi, const char **step)
{
	struct bpf_object *obj;
	struct bpf_map *map;
	void *skel;

	*step = "open";
	skel = f->open();
	if (!skel)
		return NULL;
	obj = f->object(skel);
	set_filter(f->filter(skel), o);
	*step = "size the ring buffer";
	if (bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "events"),
				     (__u32)o->ringbuf_mb << 20))
		goto fail;
	*f->ring_wake(skel) = ((__u64)o->ringbuf_mb << 20) / 8;
	bpf_object__for_each_map(map, obj) {
		struct bpf_map *shared;

		if (!owner || !(shared = bpf_object__find_map_by_name(owner, bpf_map__name(map))))
			continue;
		*step = bpf_map__name(map);
		if (bpf_map__reuse_fd(map, bpf_map__fd(shared)))
			goto fail;
	}
	if (uprobe_multi)
		attacher__prepare_uprobe_multi(obj);
	kernel__fit_tracepoints(f->what, obj);
	*step = "load (run with -vv for the verifier log)";
	if (f->load(skel))
		goto fail;
	return skel;
fail:
	f->destroy(skel);
	return NULL;
}

static int open_families(struct live *lv)
{
	size_t i;

	for (i = 0; i < NFAMILIES; i++) {
		const struct probe_family *f = &families[i];
		const char *step;

		if (f->wanted && !f->wanted(lv->o))
			continue;
		errno = 0;
		lv->skel[i] = open_family(f, lv->o, owner_obj(lv), lv->uprobe_multi, &step);
		if (lv->skel[i])
			continue;
		if (!f->optional) {
			fprintf(stderr, "tokenscope: cannot %s the %s probes: %s\n", step, f->what,
				strerror(errno ? errno : EINVAL));
			break;
		}
		fprintf(stderr, "tokenscope: %s probes unavailable (%s: %s); tracing without them\n",
			f->what, step, strerror(errno ? errno : EINVAL));
	}
	kernel__forget(); /* what the families needed to know of the kernel, known now */
	return i < NFAMILIES ? -1 : 0;
}

/* Tracepoints and tp_btf programs attach by their section name; uprobes are attach.c's. */
static int attach_auto(struct live *lv)
{
	for (size_t i = 0; i < NFAMILIES; i++) {
		struct bpf_program *prog;

		if (!lv->skel[i])
			continue;
		bpf_object__for_each_program(prog, obj_of(lv, i)) {
			enum bpf_prog_type t = bpf_program__type(prog);
			struct bpf_link *l;

			if ((t != BPF_PROG_TYPE_TRACING && t != BPF_PROG_TYPE_TRACEPOINT) ||
			    !bpf_program__autoload(prog))
				continue;
			if (!array__reserve((void **)&lv->links, &lv->linkcap, lv->nlinks + 1,
					    sizeof(*lv->links))) {
				fprintf(stderr, "tokenscope: out of memory\n");
				return -1;
			}
			l = t == BPF_PROG_TYPE_TRACEPOINT ? tracefs__attach(prog)
							  : bpf_program__attach(prog);
			if (l) {
				lv->links[lv->nlinks++] = l;
				continue;
			}
			fprintf(stderr, "tokenscope: %scannot attach %s: %s\n",
				families[i].optional ? "warning: " : "", bpf_program__name(prog),
				strerror(errno));
			if (!families[i].optional)
				return -1;
		}
	}
	return 0;
}

/* --port: the plaintext family captures only sockets with one of these local or peer ports. */
static int sock_ports(const struct live_opts *o, struct bpf_object *obj)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "sock_ports"));

	for (int i = 0; i < o->nports; i++) {
		__u16 port = o->ports[i];
		__u8 one = 1;

		if (bpf_map_update_elem(fd, &port, &one, BPF_ANY))
			return -1;
	}
	return 0;
}

/* ---- intake ---- */

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

#define KNOWN_PIDS 65536 /* live processes whose trees are kept; past this many, the set starts over */

/* The first record of a process is preceded by its ancestry, which attribution uses to find
 * the GPU processes serving an HTTP server (attrib.h). Recorded, so replays find them too. */
static void note_process(struct live *lv, uint32_t pid)
{
	struct ts_rec_proc_tree t = { 0 };

	if (!pid)
		return;
	/* exits take processes out (a reused pid gets its new tree); processes whose exit was
	 * never reported must not hold memory forever */
	if (lv->known.n >= KNOWN_PIDS)
		pidset__free(&lv->known);
	if (!pidset__add(&lv->known, pid))
		return;
	for (uint32_t p = parent_of(pid); p && t.n < TS_REC_MAX_ANCESTORS; p = parent_of(p)) {
		t.ancestors[t.n++] = p;
		if (p == 1)
			break;
	}
	t.hdr.type = TS_REC_PROC_TREE;
	t.hdr.size = sizeof(t);
	t.hdr.ts_ns = now_ns();
	t.hdr.pid = pid;
	pipeline__feed(lv->pl, &t, sizeof(t));
}

static void on_event(void *ctx, const void *data, size_t size)
{
	struct live *lv = ctx;
	const struct ts_event_hdr *h = (const void *)lv->buf;

	/* The ring buffer is mapped read-only and the pipeline masks credentials in place. */
	if (size < sizeof(*h)) {
		memcpy(lv->buf, data, size);
		pipeline__feed(lv->pl, lv->buf, size); /* counted as malformed */
		return;
	}
	if (size > sizeof(lv->buf)) { /* no such record: counted as malformed */
		memcpy(lv->buf, data, sizeof(*h));
		pipeline__feed(lv->pl, lv->buf, sizeof(*h));
		return;
	}
	memcpy(lv->buf, data, size);
	if (h->type == TS_EV_EXIT && size == sizeof(struct ts_proc) && family_loaded(lv, "sock")) {
		/* the socket family sends the kernel's closes of the dead process's sockets */
		struct ts_exit *x = (void *)lv->buf;

		x->hdr.size = size = sizeof(*x);
		x->flags = TS_EXIT_SOCKET_CLOSES;
		x->_pad = 0;
	}
	if (h->type == TS_EV_TLS_DATA || h->type == TS_EV_SOCK_DATA || h->type == TS_EV_GPU_MARK ||
	    h->type == TS_EV_LLAMA_STEP)
		note_process(lv, h->pid);
	/* what needs the process's /proc first: a short program may be gone by the end of a
	 * probe attach */
	for (size_t i = 0; i < NFAMILIES; i++) {
		if (lv->skel[i] && families[i].before)
			families[i].before(lv, lv->buf, size);
	}
	if (h->type == TS_EV_EXEC)
		attacher__on_exec(lv->att, (pid_t)h->pid, now_ns());
	else if (h->type == TS_EV_DLOPEN)
		attacher__scan_pid(lv->att, (pid_t)h->pid);
	pipeline__feed(lv->pl, lv->buf, size);
	for (size_t i = 0; i < NFAMILIES; i++) {
		if (lv->skel[i] && families[i].after)
			families[i].after(lv, lv->buf);
	}
	if (h->type == TS_EV_EXIT)
		pidset__del(&lv->known, h->pid);
}

/* The per-CPU counters of all families (they share the first one's map), summed. */
static int read_counters(struct live *lv, __u64 out[TS_CNT__MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	int fd = bpf_map__fd(bpf_object__find_map_by_name(owner_obj(lv), "counters"));
	uint64_t *vals;

	if (ncpu <= 0)
		return -1;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -1;
	for (__u32 k = 0; k < TS_CNT__MAX; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	free(vals);
	out[TS_CNT_PROBES_OFF] = lv->att ? attacher__probes_off(lv->att) : 0;
	return 0;
}

/* ---- the run ---- */

#define DETACHER_COMM "tokenscope-det"
#define DETACHER_WAIT_MAX_S 30

/* Is a detacher (below) of an earlier run still removing its probes? Zombies are done. */
static bool detacher_running(void)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir("/proc");

	while (d && !found && (de = readdir(d))) {
		char fn[300], stat[128], *close_paren;
		FILE *f;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(fn, sizeof(fn), "/proc/%s/stat", de->d_name);
		f = fopen(fn, "re");
		if (!f)
			continue;
		/* "PID (COMM) STATE ...": the comm may hold spaces and parentheses */
		if (fgets(stat, sizeof(stat), f) && (close_paren = strrchr(stat, ')')) &&
		    close_paren[1] == ' ' && close_paren[2] != 'Z') {
			*close_paren = 0;
			found = strchr(stat, '(') && !strcmp(strchr(stat, '(') + 1, DETACHER_COMM);
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * Perf-event probes (the syscall tracepoints; uprobes where uprobe_multi links are missing) go
 * on and come off one at a time under the kernel's event_mutex: attaching while an earlier run
 * still detaches would wait behind its detach, and libraries loaded meanwhile would be probed
 * late. A run started right after another waits for it, as it did when runs detached before
 * they ended.
 */
static void wait_for_detacher(void)
{
	uint64_t start = now_ns();

	if (!detacher_running())
		return;
	fprintf(stderr, "tokenscope: waiting for an earlier run to remove its probes\n");
	while (detacher_running()) {
		if (now_ns() - start > DETACHER_WAIT_MAX_S * 1000000000ull) {
			fprintf(stderr, "tokenscope: still removing after %d s; attaching now\n",
				DETACHER_WAIT_MAX_S);
			return;
		}
		usleep(20000);
	}
}

/* One link's release, in a thread of its own: grace periods wait side by side. */
static void *close_fd(void *fd)
{
	close((int)(intptr_t)fd);
	return NULL;
}

#define DETACH_THREADS 256

/*
 * Removing a probe makes the kernel wait for RCU grace periods: one after the other under its
 * global event_mutex for perf-event probes (syscall tracepoints: 73 ms each on this VM; perf
 * uprobes, where uprobe_multi links are missing: 111 ms each), side by side for uprobe_multi
 * links when they are dropped from threads of their own (48 in ~75 ms). Nothing the user waits
 * for needs it done: a child keeps the links (and the perf events under them) and drops them
 * after this process has ended; this process's own closes only drop references. The child
 * closes every other file first (outputs, the metrics socket), leaves the terminal's session,
 * and calls nothing that may lock after a fork. It starts once the parent has closed the
 * pipe whose write end this returns (-1: there is no child; the caller detaches).
 */
static int detach_in_background(void)
{
	char dents[4096], path[64], target[32], byte;
	int keep[DETACH_THREADS], nkeep = 0, dir, go[2];
	pthread_t threads[DETACH_THREADS];
	pthread_attr_t attr;
	pid_t pid;
	long n;

	if (pipe(go))
		return -1;
	pid = fork();
	if (pid != 0) {
		close(go[0]);
		if (pid > 0)
			return go[1];
		close(go[1]);
		return -1;
	}
	close(go[1]);
	setsid();
	prctl(PR_SET_NAME, DETACHER_COMM);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	while (dir >= 0 && (n = syscall(SYS_getdents64, dir, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n;) {
			struct {
				unsigned long long ino;
				long long off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(dents + off);
			int fd = atoi(de->name);
			ssize_t len;

			off += de->reclen;
			if (de->name[0] < '0' || de->name[0] > '9' || fd == dir || fd == go[0])
				continue;
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			len = readlink(path, target, sizeof(target) - 1);
			target[len > 0 ? len : 0] = 0;
			if (strcmp(target, "anon_inode:bpf_link") &&
			    strcmp(target, "anon_inode:[perf_event]"))
				close(fd);
			else if (nkeep < DETACH_THREADS)
				keep[nkeep++] = fd;
			/* past that many, the rest go as the child exits, one by one */
		}
	}
	/* The parent's references go first: a link released while the parent still held it
	 * would be released by the parent's close, where the user waits. */
	while (read(go[0], &byte, 1) < 0 && errno == EINTR)
		;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 0; i < nkeep; i++) {
		if (pthread_create(&threads[i], &attr, close_fd, (void *)(intptr_t)keep[i]))
			threads[i] = 0, close(keep[i]);
	}
	for (int i = 0; i < nkeep; i++) {
		if (threads[i])
			pthread_join(threads[i], NULL);
	}
	_exit(0);
}

static int setup(struct live *lv)
{
	const struct live_opts *o = lv->o;
	struct bpf_map *events;
	bool forced_off;
	int pids_fd, err;

	/* phase: open, set filters, load */
	/* TOKENSCOPE_UPROBE_MULTI=0: perf-event uprobes, as on kernels before 6.6 (the tests
	 * run one tracer so) */
	forced_off = getenv("TOKENSCOPE_UPROBE_MULTI") &&
		     !strcmp(getenv("TOKENSCOPE_UPROBE_MULTI"), "0");
	lv->uprobe_multi = !forced_off && attacher__uprobe_multi_works();
	if (o->verbose)
		fprintf(stderr, "tokenscope: uprobes as %s\n",
			lv->uprobe_multi ? "uprobe_multi links"
			: forced_off	 ? "perf events (TOKENSCOPE_UPROBE_MULTI=0)"
					 : "perf events (this kernel has no uprobe_multi links)");
	if (open_families(lv))
		return -1;
	pids_fd = bpf_map__fd(bpf_object__find_map_by_name(owner_obj(lv), "pids"));
	for (int i = 0; i < o->npids; i++) {
		__u32 pid = (__u32)o->pids[i];
		__u8 one = 1;

		if (bpf_map_update_elem(pids_fd, &pid, &one, BPF_ANY)) {
			fprintf(stderr, "tokenscope: cannot filter on PID %d: %s\n", o->pids[i],
				strerror(errno));
			return -1;
		}
	}

	for (size_t i = 0; i < NFAMILIES; i++) {
		if (lv->skel[i] && families[i].configure &&
		    families[i].configure(o, obj_of(lv, i))) {
			fprintf(stderr, "tokenscope: cannot configure the %s probes: %s\n",
				families[i].what, strerror(errno));
			return -1;
		}
	}

	/* phase: lifecycle tracepoints first, so no exec slips between scan and attach */
	wait_for_detacher();
	err = attach_auto(lv);
	tracefs__release();
	if (err)
		return -1;
	lv->att = attacher__new(o->verbose, lv->uprobe_multi);
	lv->cuda_names = cuda_names__new();
	if (!lv->att || !lv->cuda_names) {
		fprintf(stderr, "tokenscope: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < NFAMILIES; i++) {
		if (lv->skel[i])
			attacher__add_family(lv->att, families[i].name, obj_of(lv, i));
	}
	attacher__on_cuda(lv->att, snapshot_maps, lv->cuda_names);
	events = bpf_object__find_map_by_name(owner_obj(lv), "events");
	err = ring__open(&lv->ring, bpf_map__fd(events), bpf_map__max_entries(events),
			 sizeof(lv->buf), on_event, lv);
	if (err) {
		fprintf(stderr, "tokenscope: cannot map the ring buffer: %s\n", strerror(-err));
		return -1;
	}

	/* phase: find and probe every library */
	attacher__scan_system(lv->att);
	if (o->npids) {
		for (int i = 0; i < o->npids; i++)
			attacher__scan_pid(lv->att, o->pids[i]);
	} else {
		attacher__scan_pid(lv->att, 0);
	}
	if (!attacher__files(lv->att, "TLS") && !attacher__files(lv->att, "CUDA")) {
		fprintf(stderr, "tokenscope: no OpenSSL library found (no libssl.so.3/1.1 on this "
				"system and no running process maps a file exporting SSL_read)\n");
		return -1;
	}
	return 0;
}

/* Read the kernel counters into the pipeline, as a record (recordings replay them at the same
 * point, and their time moves the pipeline's clock on when no traffic does); warn about new
 * drops. */
static void update_counters(struct live *lv, uint64_t *reported_drops)
{
	struct ts_rec_counters rc = { 0 };
	__u64 *c = rc.counters;

	if (read_counters(lv, c))
		return;
	rc.hdr.type = TS_REC_COUNTERS;
	rc.hdr.size = sizeof(rc);
	rc.hdr.ts_ns = now_ns();
	pipeline__feed(lv->pl, &rc, sizeof(rc));
	if (c[TS_CNT_DROPS] > *reported_drops) {
		/* What the ring lacked in this interval, at least: the bytes it could not take. */
		uint64_t lost_mb = (c[TS_CNT_DROP_BYTES] - lv->reported_drop_bytes) >> 20;
		long want = lv->o->ringbuf_mb;

		while (want < 1024 && (uint64_t)want < (uint64_t)lv->o->ringbuf_mb + lost_mb + 1)
			want *= 2;
		if (want == lv->o->ringbuf_mb && want < 1024)
			want *= 2;
		fprintf(stderr, "tokenscope: WARNING: %llu events dropped (ring buffer of %ld MiB full); "
				"affected requests are marked incomplete; try -b %ld or more\n",
			(unsigned long long)(c[TS_CNT_DROPS] - *reported_drops), lv->o->ringbuf_mb, want);
		*reported_drops = c[TS_CNT_DROPS];
		lv->reported_drop_bytes = c[TS_CNT_DROP_BYTES];
	}
}

static int consume(struct live *lv)
{
	uint64_t reported_drops = 0, deadline = 0, next_stats = 0;

	if (lv->o->duration_s)
		deadline = now_ns() + (uint64_t)lv->o->duration_s * 1000000000ull;
	while (!exiting) {
		uint64_t now;
		long n = ring__poll(&lv->ring, attacher__next_due_ms(lv->att, now_ns(),
									 POLL_MAX_MS));
		uint64_t consumed = now_ns();

		if (n >= 0) /* what came without a wake-up */
			n = ring__consume(&lv->ring);
		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "tokenscope: ring buffer poll failed: %s\n", strerror(-n));
			return -1;
		}
		now = now_ns();
		attacher__tick(lv->att, now);
		if (now >= next_stats) {
			next_stats = now + STATS_INTERVAL_NS;
			update_counters(lv, &reported_drops);
			if (lv->o->tick)
				lv->o->tick(lv->o->started_ctx);
		}
		if (deadline && now >= deadline)
			break;
		/* a record is committed within microseconds of its time: one of 1 ms ago is read */
		if (lv->o->poll && lv->o->poll(lv->o->started_ctx, consumed - CONSUMED_MARGIN_NS))
			break;
	}
	return 0;
}

/* The counters at the end travel as a record, so that a replay ends as the capture did. */
static void feed_final_counters(struct live *lv, uint64_t end_ns)
{
	struct ts_rec_counters rc = { 0 };

	if (read_counters(lv, rc.counters))
		return;
	rc.hdr.type = TS_REC_COUNTERS;
	rc.hdr.size = sizeof(rc);
	rc.hdr.ts_ns = end_ns;
	pipeline__feed(lv->pl, &rc, sizeof(rc));
}

int live__run(const struct live_opts *o, struct pipeline *pl)
{
	struct live *lv = calloc(1, sizeof(*lv));
	uint64_t end_ns;
	int err = 1, detacher;

	if (!lv) {
		fprintf(stderr, "tokenscope: out of memory\n");
		return 1;
	}
	lv->o = o;
	lv->pl = pl;
	libbpf_set_print(o->verbose > 1 ? libbpf_print : libbpf_warnings);
	if (setup(lv))
		goto cleanup;

	if (o->started && o->started(o->started_ctx))
		goto cleanup;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (attacher__probes_off(lv->att))
		fprintf(stderr, "tokenscope: tracing is partial: %zu probe%s could not be attached "
				"(above)\n",
			attacher__probes_off(lv->att), attacher__probes_off(lv->att) == 1 ? "" : "s");
	fprintf(stderr, "tokenscope: tracing TLS in %zu files and %zu Go programs, CUDA in %zu "
			"files%s%s%s%s. Hit Ctrl-C to end.\n",
		attacher__files(lv->att, "TLS"), attacher__files(lv->att, "Go TLS"),
		attacher__files(lv->att, "CUDA"),
		family_loaded(lv, "sock") ? ", " : "",
		family_loaded(lv, "sock") ? family_loaded(lv, "sock")->what : "",
		o->npids || o->comm || o->nports ? " (filtered)" : "",
		attacher__probes_off(lv->att) ? " (partial)" : "");

	/* phase: consume events until told to stop */
	if (consume(lv))
		goto cleanup;

	/* phase: drain, then close what is still open */
	ring__consume(&lv->ring);
	end_ns = now_ns();
	feed_final_counters(lv, end_ns);
	pipeline__finish(pl, end_ns);
	err = 0;

cleanup:
	/* nothing attached (setup failed early): nothing to leave to a child */
	detacher = lv->nlinks || lv->att ? detach_in_background() : -1;
	ring__close(&lv->ring);
	attacher__free(lv->att);
	cuda_names__free(lv->cuda_names);
	for (size_t i = 0; i < lv->nlinks; i++)
		bpf_link__destroy(lv->links[i]);
	free(lv->links);
	/* the later families hold references to the first one's maps: destroy them first */
	for (size_t i = NFAMILIES; i-- > 0;) {
		if (lv->skel[i])
			families[i].destroy(lv->skel[i]);
	}
	if (detacher >= 0)
		close(detacher); /* this process holds no probe now: the child may drop them */
	pidset__free(&lv->known);
	free(lv);
	return err;
}
