// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The probe families and their builds (capture/families.h). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "stream/pipeline.h"
#include "capture/attach.h"
#include "capture/cuda_names.h"
#include "capture/families.h"
#include "capture/kernel.h"
#include "capture/tracefs.h"
#include "cuda.skel.h"
#include "cuda_legacy.skel.h"
#include "llama.skel.h"
#include "llama_legacy.skel.h"
#include "maps.skel.h"
#include "maps_legacy.skel.h"
#include "sock.skel.h"
#include "sock_core.skel.h"
#include "sock_legacy.skel.h"
#include "tls.skel.h"
#include "tls_legacy.skel.h"

/* A map that the first build loaded also has, by name (events, counters, pids, and what two
 * families share on purpose, like tls_calls), is created by it and reused by the others: one
 * map, whichever program writes it. The first is bpf/maps.bpf.c's, which has only them. */

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

SKELETON_GLUE(maps)
SKELETON_GLUE(maps_legacy)
SKELETON_GLUE(tls)
SKELETON_GLUE(cuda)
SKELETON_GLUE(sock)
SKELETON_GLUE(sock_core)
SKELETON_GLUE(llama)
SKELETON_GLUE(tls_legacy)
SKELETON_GLUE(cuda_legacy)
SKELETON_GLUE(sock_legacy)
SKELETON_GLUE(llama_legacy)

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
	void (*before)(const struct family_work *w, void *rec, size_t size);
	void (*after)(const struct family_work *w, const void *rec);
};

/* ---- CUDA: kernel names need the live process ---- */

static void feed_record(void *ctx, void *rec, size_t size)
{
	pipeline__feed(ctx, rec, size);
}

static bool cuda_names_read(const void *rec)
{
	const struct record_kind *k = record_kind__of(((const struct ts_event_hdr *)rec)->type);

	return k && (k->flags & REC_CUDA_NAMES);
}

static void cuda_before(const struct family_work *w, void *rec, size_t size)
{
	if (cuda_names_read(rec))
		cuda_names__before(w->cuda_names, rec, size, feed_record, w->pl);
}

static void cuda_after(const struct family_work *w, const void *rec)
{
	if (cuda_names_read(rec))
		cuda_names__after(w->cuda_names, rec);
}

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
 * a line here (FAMILY_BUILDS in families.h counts them); its uprobe sets (if any) in attach.c;
 * its record types in bpf/tokenscope.h and their row in stream/pipeline.c's record_kinds.
 * Tracepoint, tp_btf, fentry and fexit programs attach by themselves.
 * The first build loaded owns the shared maps: bpf/maps.bpf.c's, which has nothing else; it
 * loads alone, then every other build at once (open_families).
 */
static const struct probe_family families[] = {
	/* the shared maps: loaded first and alone, then the families at once */
	BUILD("maps", maps, "shared maps", false, default_wanted, NULL, NULL, NULL),
	BUILD("maps", maps_legacy, "shared maps (5.10)", false, legacy_wanted, NULL, NULL, NULL),
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

_Static_assert(sizeof(families) / sizeof(families[0]) == FAMILY_BUILDS,
	       "FAMILY_BUILDS (families.h) counts the rows of families[]");

static struct bpf_object *obj_of(const struct families *fs, size_t i)
{
	return fs->skel[i] ? families[i].object(fs->skel[i]) : NULL;
}

/* The object that holds the shared maps: the first family loaded (families[]). */
struct bpf_object *families__owner(const struct families *fs)
{
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (fs->skel[i])
			return obj_of(fs, i);
	}
	return NULL;
}

int families__map_fd(const struct families *fs, const char *name)
{
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		struct bpf_map *m = fs->skel[i] ? bpf_object__find_map_by_name(obj_of(fs, i), name)
						: NULL;

		if (m)
			return bpf_map__fd(m);
	}
	return -1;
}

const char *families__loaded(const struct families *fs, const char *name)
{
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (!strcmp(families[i].name, name) && fs->skel[i])
			return families[i].what;
	}
	return NULL;
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

/* TOKENSCOPE_VERIFIER_STATS=1 (make bench's start section): each program's verifier time and
 * instructions processed, said on stderr after its family's load (the table in
 * docs/performance.md, Start). The log buffers live as long as the process: a measuring run. */
#define STATS_LOG 65536

static void ask_verifier_stats(struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		char *buf = calloc(1, STATS_LOG);

		if (buf && bpf_program__autoload(prog)) {
			bpf_program__set_log_level(prog, 4); /* BPF_LOG_STATS */
			bpf_program__set_log_buf(prog, buf, STATS_LOG);
		}
	}
}

static void say_verifier_stats(const struct probe_family *f, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		size_t n;
		const char *log = bpf_program__log_buf(prog, &n);
		const char *t = log ? strstr(log, "verification time ") : NULL;
		const char *i = log ? strstr(log, "processed ") : NULL;
		unsigned long us = 0, insns = 0;

		if (!t || !i)
			continue;
		sscanf(t, "verification time %lu", &us);
		sscanf(i, "processed %lu", &insns);
		fprintf(stderr, "tokenscope: verifier: %s %s %lu us %lu insns\n", f->name,
			bpf_program__name(prog), us, insns);
	}
}

/*
 * The kernel's ring itself: small, so that the bytes a probe writes next are still in cache
 * (a 64 MiB ring cost a captured plaintext call about 300 ns more than a 4 MiB one here,
 * docs/performance.md). Its reader's thread drains it at an eighth full (ts_ring_wake), so
 * it holds the records of that thread's wake-up delay: 4 MiB, 4 more for each 16 CPUs past
 * the first 16, as a power of two, at most 32 and at most the whole room.
 */
long families__ring_mb(long room_mb)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN), want = 4 * (((ncpu > 0 ? ncpu : 1) + 15) / 16);
	long mb = 4;

	while (mb < want && mb < 32)
		mb *= 2;
	return mb < room_mb ? mb : room_mb;
}

/* Open, filter, size or share the maps (owner: the loaded build that holds them; NULL for
 * the first). Returns NULL with the failed step in *step. */
static void *prepare_family(const struct probe_family *f, const struct live_opts *o,
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
				     (__u32)families__ring_mb(o->ringbuf_mb) << 20))
		goto fail;
	*f->ring_wake(skel) = ((__u64)families__ring_mb(o->ringbuf_mb) << 20) / 8;
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
	if (getenv("TOKENSCOPE_VERIFIER_STATS"))
		ask_verifier_stats(obj);
	return skel;
fail:
	f->destroy(skel);
	return NULL;
}

#define LOAD_STEP "load (run with -vv for the verifier log)"

/* One build's load (the verifier's work), on a thread of its own. */
struct family_load {
	const struct probe_family *f;
	void *skel;
	pthread_t thread;
	bool started;
	int err;	 /* errno where the load failed, else 0 */
	uint64_t end_ns;
};

static void *load_family(void *arg)
{
	struct family_load *l = arg;

	errno = 0;
	l->err = l->f->load(l->skel) ? (errno ? errno : EINVAL) : 0;
	l->end_ns = clock__now_ns();
	if (getenv("TOKENSCOPE_VERIFIER_STATS"))
		say_verifier_stats(l->f, l->f->object(l->skel));
	return NULL;
}

/* A build that failed: said, and left out where it is optional. Returns -1 where it is not. */
static int family_failed(const struct probe_family *f, const char *step, int err)
{
	if (!f->optional) {
		fprintf(stderr, "tokenscope: cannot %s the %s probes: %s\n", step, f->what,
			strerror(err ? err : EINVAL));
		return -1;
	}
	fprintf(stderr, "tokenscope: %s probes unavailable (%s: %s); tracing without them\n",
		f->what, step, strerror(err ? err : EINVAL));
	return 0;
}

/*
 * Each wanted build opened and prepared in turn; the first (the owner of the shared maps)
 * loaded at once, for the others take its maps' fds; the others then loaded at the same time,
 * each on a thread: the verifier's work is most of the start (docs/performance.md, Start),
 * and each object's is its own. libbpf's one state shared across objects, its cache of kernel
 * feature probes, is filled idempotently (READ_ONCE/WRITE_ONCE), most of it by the first load.
 */
static int open_families(struct families *fs, const struct live_opts *o)
{
	struct family_load loads[FAMILY_BUILDS] = { 0 };
	int rc = 0;
	size_t i;

	for (i = 0; i < FAMILY_BUILDS && !rc; i++) {
		const struct probe_family *f = &families[i];
		struct bpf_object *owner = families__owner(fs);
		const char *step;
		void *skel;

		if (f->wanted && !f->wanted(o))
			continue;
		errno = 0;
		fs->load_ns[i] = clock__now_ns();
		skel = prepare_family(f, o, owner, fs->uprobe_multi, &step);
		if (!skel) {
			rc = family_failed(f, step, errno);
			continue;
		}
		loads[i] = (struct family_load){ .f = f, .skel = skel };
		if (owner) {
			loads[i].started = !pthread_create(&loads[i].thread, NULL, load_family,
							   &loads[i]);
			if (!loads[i].started) /* no thread: load it here */
				load_family(&loads[i]);
			continue;
		}
		load_family(&loads[i]);
		if (loads[i].err) {
			f->destroy(skel);
			loads[i].skel = NULL;
			rc = family_failed(f, LOAD_STEP, loads[i].err);
			continue;
		}
		fs->skel[i] = skel;
		fs->load_ns[i] = loads[i].end_ns - fs->load_ns[i];
	}
	for (i = 0; i < FAMILY_BUILDS; i++) {
		struct family_load *l = &loads[i];

		if (!l->skel || fs->skel[i])
			continue;
		if (l->started)
			pthread_join(l->thread, NULL);
		fs->load_ns[i] = l->end_ns - fs->load_ns[i];
		if (!l->err && !rc) {
			fs->skel[i] = l->skel;
			continue;
		}
		l->f->destroy(l->skel);
		if (l->err && family_failed(l->f, LOAD_STEP, l->err))
			rc = -1;
	}
	kernel__forget(); /* what the families needed to know of the kernel, known now */
	return rc;
}

/* Tracepoints and tp_btf programs attach by their section name; uprobes are attach.c's. */
int families__attach_auto(struct families *fs)
{
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		struct bpf_program *prog;

		if (!fs->skel[i])
			continue;
		bpf_object__for_each_program(prog, obj_of(fs, i)) {
			enum bpf_prog_type t = bpf_program__type(prog);
			size_t n = t == BPF_PROG_TYPE_TRACEPOINT ? tracefs__count(prog) : 1;

			if ((t != BPF_PROG_TYPE_TRACING && t != BPF_PROG_TYPE_TRACEPOINT) ||
			    !bpf_program__autoload(prog))
				continue;
			for (size_t k = 0; k < n; k++) {
				struct bpf_link *l;

				if (!array__reserve((void **)&fs->links, &fs->linkcap, fs->nlinks + 1,
						    sizeof(*fs->links))) {
					fprintf(stderr, "tokenscope: out of memory\n");
					return -1;
				}
				l = t == BPF_PROG_TYPE_TRACEPOINT ? tracefs__attach(prog, k)
								  : bpf_program__attach(prog);
				if (l) {
					fs->links[fs->nlinks++] = l;
					continue;
				}
				fprintf(stderr, "tokenscope: %scannot attach %s (%zu of %zu): %s\n",
					families[i].optional ? "warning: " : "",
					bpf_program__name(prog), k + 1, n, strerror(errno));
				if (!families[i].optional)
					return -1;
			}
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

int families__load(struct families *fs, const struct live_opts *o)
{
	if (open_families(fs, o))
		return -1;
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (fs->skel[i] && families[i].configure &&
		    families[i].configure(o, obj_of(fs, i))) {
			fprintf(stderr, "tokenscope: cannot configure the %s probes: %s\n",
				families[i].what, strerror(errno));
			return -1;
		}
	}
	return 0;
}

void families__say_load_times(const struct families *fs, char *out, size_t n)
{
	size_t o = 0;

	out[0] = 0;
	for (size_t i = 0; i < FAMILY_BUILDS && o < n; i++) {
		if (fs->skel[i])
			o += (size_t)snprintf(out + o, n - o, "%s%s %.0f ms", o ? ", " : "",
					      families[i].what, fs->load_ns[i] / 1e6);
	}
}

void families__add_uprobe_sets(const struct families *fs, struct attacher *att)
{
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (fs->skel[i])
			attacher__add_family(att, families[i].name, obj_of(fs, i));
	}
}

/* The records no hook reads (a stream's bytes, most of all records) pass without the loop. */
static bool stream_bytes(const void *rec)
{
	const struct record_kind *k = record_kind__of(((const struct ts_event_hdr *)rec)->type);

	return k && (k->flags & REC_STREAM_BYTES);
}

void families__before(const struct families *fs, const struct family_work *w, void *rec,
		      size_t size)
{
	if (stream_bytes(rec))
		return;
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (fs->skel[i] && families[i].before)
			families[i].before(w, rec, size);
	}
}

void families__after(const struct families *fs, const struct family_work *w, const void *rec)
{
	if (stream_bytes(rec))
		return;
	for (size_t i = 0; i < FAMILY_BUILDS; i++) {
		if (fs->skel[i] && families[i].after)
			families[i].after(w, rec);
	}
}

void families__destroy(struct families *fs)
{
	for (size_t i = 0; i < fs->nlinks; i++)
		bpf_link__destroy(fs->links[i]);
	free(fs->links);
	fs->links = NULL;
	fs->nlinks = fs->linkcap = 0;
	/* the later families hold references to the first one's maps: destroy them first */
	for (size_t i = FAMILY_BUILDS; i-- > 0;) {
		if (fs->skel[i])
			families[i].destroy(fs->skel[i]);
		fs->skel[i] = NULL;
	}
}
