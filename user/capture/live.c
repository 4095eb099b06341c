// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The run (capture/live.h): the checks before anything is touched, set-up (the families
 * loaded and attached, the ring mapped, every library probed), intake (each record's copy
 * through the families' live-side work, the attacher and the pipeline) and the loop that
 * reads the ring and the kernel counters until told to stop.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/pidset.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "capture/attach.h"
#include "capture/cuda_names.h"
#include "capture/detacher.h"
#include "capture/families.h"
#include "capture/kernel.h"
#include "capture/live.h"
#include "capture/identity.h"
#include "capture/nat.h"
#include "capture/backlog.h"
#include "capture/proc_tree.h"
#include "capture/ring.h"
#include "capture/start_heap.h"
#include "capture/tracefs.h"

/* Longest wait for records while they come. Data records do not wake the reader
 * (ts_submit_flags in bpf/common.bpf.h): the ring is drained at least this often, and
 * whenever it passes an eighth full or a lifecycle record (exec, dlopen, exit) comes. Each
 * pass wakes both of the reader's threads, a context switch each; records carry the kernel's
 * times, so a later read changes no figure, only when a request's record is printed. */
#define DRAIN_MS 50
/* `tokenscope top`'s: its view moves with what was drained, and it redraws this often. */
#define POLL_MAX_MS 20
/* Longest wait once none came: the drain backs off to it (backlog.h), so that an idle tracer
 * wakes about 6 times a second; the first data records after a quiet spell wait up to this. */
#define IDLE_MAX_MS 160
#define STATS_INTERVAL_NS 1000000000ull /* kernel counters read, drops warned about */
#define CONSUMED_MARGIN_NS 1000000ull

/* Capability bits (linux/capability.h): CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON, to load;
 * the others for what a non-root tracer reads (docs/security.md). */
#define CAP_DAC_READ_SEARCH_BIT 2
#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39

struct live {
	const struct live_opts *o;
	struct pipeline *pl;
	struct attacher *att;
	struct nat *nat;		/* connections NAT changed: their conntrack entries */
	struct families fams;
	struct family_work work;	/* what the families' work on a record uses */
	struct ring ring;		/* the events ring buffer, mapped once (ring.h) */
	struct backlog *backlog;	/* its records, drained by a thread of their own */
	int counters_fd;		/* the kernel counters' map */
	int sock_states_fd;		/* the plaintext family's socket table; -1: none */
	uint64_t sock_evicted;		/* entries the kernel pushed out of it, found so far */
	uint64_t *cpu_vals;		/* one counter's value on each CPU (counter_total) */
	uint64_t reported_drops;      /* TS_CNT_DROPS at the last drop warning */
	uint64_t reported_drop_bytes; /* TS_CNT_DROP_BYTES at the last drop warning */
	uint64_t seen_drops;	      /* drops_now when the pipeline was last told */
	struct pidset known;		/* live processes whose tree was recorded */
	struct pidset excluded;		/* of them, those --namespace/--pod/--container leave out */
	/* The largest record taken (a socket piece with its addresses), and the room where one
	 * grows before the pipeline has it (a process's exit: on_event); the others are used
	 * where the backlog holds them. */
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

/* Is a process of this identity one the --namespace, --pod and --container filters keep? */
static bool identity_wanted(const struct live_opts *o, const struct ts_rec_proc_identity *id)
{
	if (o->k8s_namespace && strcmp(o->k8s_namespace, id->k8s_namespace))
		return false;
	if (o->pod && strcmp(o->pod, id->pod_name))
		return false;
	return !o->container ||
	       (id->container_id[0] && !strncmp(o->container, id->container_id, strlen(o->container)));
}

static void snapshot_maps(void *ctx, uint32_t pid)
{
	cuda_names__snapshot(ctx, pid);
}

/* ---- checks before anything is touched ---- */

/* The process's effective capabilities (0 when unknown). */
static unsigned long long effective_caps(void)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	}
	fclose(f);
	return eff;
}

/* Root, or CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN also does). */
static bool privileged(void)
{
	unsigned long long eff = effective_caps();

	if (geteuid() == 0)
		return true;
	return (eff & (1ull << CAP_SYS_ADMIN_BIT)) ||
	       ((eff & (1ull << CAP_BPF_BIT)) && (eff & (1ull << CAP_PERFMON_BIT)));
}

/* A tracer with some capabilities, not all: one line for each missing one that costs it part
 * of its view, naming it and what goes (docs/security.md; make kernels runs one as nobody
 * with exactly the documented set). */
static void say_missing_capabilities(const struct live_opts *o)
{
	unsigned long long eff = effective_caps();
	bool tracefs = !access("/sys/kernel/tracing/events", X_OK) ||
		       !access("/sys/kernel/debug/tracing/events", X_OK);

	if (!(eff & (1ull << CAP_SYS_PTRACE_BIT)))
		fprintf(stderr, "tokenscope: warning: without CAP_SYS_PTRACE, other users' processes' "
				"maps and executables cannot be read: what only they map is not probed\n");
	if (o->no_plaintext)
		return;
	if (!(eff & (1ull << CAP_SYS_ADMIN_BIT)) && !tracefs)
		fprintf(stderr, "tokenscope: warning: without CAP_SYS_ADMIN, and no tracefs mounted "
				"(/sys/kernel/tracing), the syscall tracepoints cannot be found: no "
				"plaintext capture (mount tracefs, or grant CAP_SYS_ADMIN)\n");
	if (!(eff & (1ull << CAP_DAC_READ_SEARCH_BIT)) && geteuid() != 0)
		fprintf(stderr, "tokenscope: warning: without CAP_DAC_READ_SEARCH, tracefs's event ids "
				"(root's files) cannot be read: no plaintext capture\n");
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
	say_missing_capabilities(o);
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
 * The default room for records waiting to be read (-b): sized for a busy host, since what
 * overflows it is lost. A burst is bounded by how many CPUs produce records while the
 * pipeline is behind, so 32 MiB per CPU, within 8 and 256 MiB and at most 1/256 of the
 * memory, as the power of two at or below that. 2 CPUs and 24 GiB: 64 MiB (2 000 concurrent
 * streams on such a VM needed 64 to lose nothing; 8 lost 3 489 records). Most of it is the
 * reader's backlog (capture/backlog.h), in memory only while a burst lasts.
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

/* ---- intake ---- */

/* Files probed so far, every uprobe set. */
static size_t probed_files(const struct live *lv)
{
	return attacher__files(lv->att, "TLS") + attacher__files(lv->att, "Go TLS") +
	       attacher__files(lv->att, "CUDA") + attacher__files(lv->att, "llama.cpp");
}

static void on_event(void *ctx, void *data, size_t size)
{
	struct live *lv = ctx;
	struct ts_event_hdr *h = data;
	void *rec = data; /* the backlog's copy, the pipeline's to change in place (it masks
			     credentials), or lv->buf where the record grows */
	const struct record_kind *kind;

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
	if (h->type == TS_EV_EXIT && size == sizeof(struct ts_proc) &&
	    families__loaded(&lv->fams, "sock")) {
		/* the socket family sends the kernel's closes of the dead process's sockets */
		struct ts_exit *x = (void *)lv->buf;

		memcpy(lv->buf, data, size);
		rec = x;
		h = rec;
		x->hdr.size = size = sizeof(*x);
		x->flags = TS_EXIT_SOCKET_CLOSES;
		x->_pad = 0;
	}
	kind = record_kind__of(h->type);
	if (kind && (kind->flags & REC_PROCESS)) {
		if (proc_tree__note(&lv->known, lv->pl, h->pid)) {
			struct ts_rec_proc_identity id;

			identity__note(lv->pl, h->pid, &id); /* its container and pod, if any */
			if (!identity_wanted(lv->o, &id))
				pidset__add(&lv->excluded, h->pid);
		}
		/* a process the identity filters leave out: its bytes and steps go no further */
		if (lv->excluded.n && pidset__has(&lv->excluded, h->pid))
			return;
	}
	/* what needs the process's /proc first: a short program may be gone by the end of a
	 * probe attach */
	families__before(&lv->fams, &lv->work, rec, size);
	if (h->type == TS_EV_EXEC) {
		size_t probed = lv->o->verbose ? probed_files(lv) : 0;

		attacher__on_exec(lv->att, (pid_t)h->pid, clock__now_ns());
		/* -v: how soon a new program is probed, from its exec (CLOCK_MONOTONIC ns): make
		 * bench's exec section reads it, and the Go integration checks */
		if (lv->o->verbose && probed_files(lv) > probed)
			fprintf(stderr, "tokenscope: exec of %u at %llu: its new files probed %.3f ms "
					"after the exec\n",
				h->pid, (unsigned long long)h->ts_ns,
				(attacher__probed_ns(lv->att) - h->ts_ns) / 1e6);
	}
	else if (h->type == TS_EV_DLOPEN)
		attacher__scan_pid(lv->att, (pid_t)h->pid);
	else if (h->type == TS_EV_SOCK_NET || h->type == TS_EV_TLS_SOCK)
		nat__note(lv->nat, lv->pl, rec); /* its translation first, where NAT made one */
	pipeline__feed(lv->pl, rec, size);
	families__after(&lv->fams, &lv->work, rec);
	if (h->type == TS_EV_EXIT) {
		pidset__del(&lv->known, h->pid);
		pidset__del(&lv->excluded, h->pid);
	}
}

/* The per-CPU counters of all families (they share the maps object's: families.h), summed. */
/* Kernel counter k summed over the CPUs into *out; nonzero when it cannot be read. */
static int counter_total(struct live *lv, __u32 k, __u64 *out)
{
	int ncpu = libbpf_num_possible_cpus();

	*out = 0;
	if (ncpu <= 0 || (!lv->cpu_vals && !(lv->cpu_vals = calloc(ncpu, sizeof(uint64_t)))) ||
	    bpf_map_lookup_elem(lv->counters_fd, &k, lv->cpu_vals))
		return -1;
	for (int c = 0; c < ncpu; c++)
		*out += lv->cpu_vals[c];
	return 0;
}

/* The entries of a map, counted key by key; -1 when they cannot be. */
static long map_entries(int fd)
{
	__u64 key, next;
	long n = 0;
	int err = bpf_map_get_next_key(fd, NULL, &next);

	for (; !err; err = bpf_map_get_next_key(fd, &key, &next)) {
		key = next;
		n++;
	}
	return errno == ENOENT ? n : -1;
}

/*
 * The plaintext socket table's entries the kernel pushed out (it is an LRU) were never taken
 * out by their ends, so the kernel's counters cannot tell them: where the counters say the
 * table is full, its entries are counted, and what the kernel pushed out is counted as taken
 * out (the record says so, and a replay reads it the same).
 */
static void count_evicted(struct live *lv, __u64 c[TS_CNT__MAX])
{
	long n;

	c[TS_CNT_SOCK_STATES_REMOVED] += lv->sock_evicted;
	if (lv->sock_states_fd < 0 ||
	    c[TS_CNT_SOCK_STATES_ADDED] - c[TS_CNT_SOCK_STATES_REMOVED] + TS_SOCK_STATES_SLACK <
		    TS_SOCK_STATES_MAX)
		return;
	n = map_entries(lv->sock_states_fd);
	if (n >= 0 && c[TS_CNT_SOCK_STATES_ADDED] - c[TS_CNT_SOCK_STATES_REMOVED] > (__u64)n) {
		lv->sock_evicted += c[TS_CNT_SOCK_STATES_ADDED] - c[TS_CNT_SOCK_STATES_REMOVED] - n;
		c[TS_CNT_SOCK_STATES_REMOVED] = c[TS_CNT_SOCK_STATES_ADDED] - n;
	}
}

/* Every kernel counter; nonzero when none could be read (then no figure is replaced by 0). */
static int read_counters(struct live *lv, __u64 out[TS_CNT__MAX])
{
	bool any = false;

	for (__u32 k = 0; k < TS_CNT__MAX; k++)
		any |= !counter_total(lv, k, &out[k]);
	out[TS_CNT_PROBES_OFF] = lv->att ? attacher__probes_off(lv->att) : 0;
	if (any)
		count_evicted(lv, out);
	return any ? 0 : -1;
}

/* What the ring could not take so far (its records and the others): read between a batch's
 * mark and its take (feed_drained), so that the records made after drops come after the
 * counters that say so. A stream that then ends with no record of its own since the counters
 * were read ends as capture_loss (streams.h): its close can reach a full ring where its last
 * bytes did not. */
static __u64 drops_now(struct live *lv)
{
	__u64 records = 0, others = 0;

	counter_total(lv, TS_CNT_DROPS, &records);
	counter_total(lv, TS_CNT_OTHER_DROPS, &others);
	return records + others;
}

/* ---- the run ---- */

static int setup(struct live *lv)
{
	const struct live_opts *o = lv->o;
	struct bpf_map *events;
	bool forced_off;
	int pids_fd, err;
	/* -v: where the start's time goes (docs/performance.md, Start) */
	uint64_t t0 = clock__now_ns(), t_load, t_attach, t_ring;
	char loads[256];

	/* phase: open, set filters, load */
	start_heap__reserve();
	/* TOKENSCOPE_UPROBE_MULTI=0: perf-event uprobes, as on kernels before 6.6 (the tests
	 * run one tracer so) */
	forced_off = getenv("TOKENSCOPE_UPROBE_MULTI") &&
		     !strcmp(getenv("TOKENSCOPE_UPROBE_MULTI"), "0");
	lv->fams.uprobe_multi = !forced_off && attacher__uprobe_multi_works();
	if (o->verbose)
		fprintf(stderr, "tokenscope: uprobes as %s\n",
			lv->fams.uprobe_multi ? "uprobe_multi links"
			: forced_off	 ? "perf events (TOKENSCOPE_UPROBE_MULTI=0)"
					 : "perf events (this kernel has no uprobe_multi links)");
	err = families__load(&lv->fams, o);
	start_heap__release();
	if (err)
		return -1;
	t_load = clock__now_ns();
	pids_fd = bpf_map__fd(bpf_object__find_map_by_name(families__owner(&lv->fams), "pids"));
	for (int i = 0; i < o->npids; i++) {
		__u32 pid = (__u32)o->pids[i];
		__u8 one = 1;

		if (bpf_map_update_elem(pids_fd, &pid, &one, BPF_ANY)) {
			fprintf(stderr, "tokenscope: cannot filter on PID %d: %s\n", o->pids[i],
				strerror(errno));
			return -1;
		}
	}

	/* phase: lifecycle tracepoints first, so no exec slips between scan and attach */
	detacher__wait_for_earlier();
	err = families__attach_auto(&lv->fams);
	tracefs__release();
	if (err)
		return -1;
	t_attach = clock__now_ns();
	lv->att = attacher__new(o->verbose, lv->fams.uprobe_multi);
	lv->work = (struct family_work){ cuda_names__new(), lv->pl };
	lv->nat = nat__new();
	if (!lv->att || !lv->work.cuda_names || !lv->nat) {
		fprintf(stderr, "tokenscope: out of memory\n");
		return -1;
	}
	families__add_uprobe_sets(&lv->fams, lv->att);
	attacher__on_cuda(lv->att, snapshot_maps, lv->work.cuda_names);
	events = bpf_object__find_map_by_name(families__owner(&lv->fams), "events");
	lv->counters_fd =
		bpf_map__fd(bpf_object__find_map_by_name(families__owner(&lv->fams), "counters"));
	lv->sock_states_fd = families__map_fd(&lv->fams, "sock_states");
	err = ring__open(&lv->ring, bpf_map__fd(events), bpf_map__max_entries(events),
			 sizeof(lv->buf), NULL, NULL);
	if (err) {
		fprintf(stderr, "tokenscope: cannot map the ring buffer: %s\n", strerror(-err));
		return -1;
	}
	/* drained from now on, while the rest of the start runs: the ring is small */
	lv->backlog = backlog__new(&lv->ring,
				   (size_t)(o->ringbuf_mb - families__ring_mb(o->ringbuf_mb)) << 20);
	if (!lv->backlog || (err = backlog__start(lv->backlog, lv->o->poll ? POLL_MAX_MS : DRAIN_MS,
						       lv->o->poll ? POLL_MAX_MS : IDLE_MAX_MS))) {
		fprintf(stderr, "tokenscope: cannot start the ring buffer's reader: %s\n",
			strerror(lv->backlog ? -err : ENOMEM));
		return -1;
	}

	t_ring = clock__now_ns();

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
	if (o->verbose) {
		families__say_load_times(&lv->fams, loads, sizeof(loads));
		fprintf(stderr, "tokenscope: start: load %.0f ms (%s), tracepoints %.0f ms, ring and "
				"attacher %.0f ms, libraries and processes probed %.0f ms\n",
			(t_load - t0) / 1e6, loads, (t_attach - t_load) / 1e6, (t_ring - t_attach) / 1e6,
			(clock__now_ns() - t_ring) / 1e6);
	}
	return 0;
}

/* Read the kernel counters into the pipeline, as a record (recordings replay them at the same
 * point, and their time moves the pipeline's clock on when no traffic does); warn about new
 * drops. */
static void update_counters(struct live *lv)
{
	struct ts_rec_counters rc = { 0 };
	__u64 *c = rc.counters;

	if (read_counters(lv, c))
		return;
	rc.hdr.type = TS_REC_COUNTERS;
	rc.hdr.size = sizeof(rc);
	rc.hdr.ts_ns = clock__now_ns();
	pipeline__feed(lv->pl, &rc, sizeof(rc));
	if (c[TS_CNT_DROPS] > lv->reported_drops) {
		/* What the ring lacked in this interval, at least: the bytes it could not take. */
		uint64_t lost_mb = (c[TS_CNT_DROP_BYTES] - lv->reported_drop_bytes) >> 20;
		long want = lv->o->ringbuf_mb;

		while (want < 1024 && (uint64_t)want < (uint64_t)lv->o->ringbuf_mb + lost_mb + 1)
			want *= 2;
		if (want == lv->o->ringbuf_mb && want < 1024)
			want *= 2;
		fprintf(stderr, "tokenscope: WARNING: %llu events dropped (the ring buffer and its "
				"backlog, %ld MiB, full); affected requests are marked incomplete; try -b "
				"%ld or more\n",
			(unsigned long long)(c[TS_CNT_DROPS] - lv->reported_drops), lv->o->ringbuf_mb, want);
		lv->reported_drops = c[TS_CNT_DROPS];
		lv->reported_drop_bytes = c[TS_CNT_DROP_BYTES];
	}
}

/* How long the loop may sleep when no records come: the backlog's thread wakes it for
 * records, a signal for the end; else until the next counters, rescan or deadline. An idle
 * tracer that woke every POLL_MAX_MS spent 3 of its 6 ms of CPU a second here
 * (docs/performance.md).
 * `tokenscope top` reads its keys and redraws in between: POLL_MAX_MS at most there. */
static int wait_ms(const struct live *lv, uint64_t now, uint64_t next_stats, uint64_t deadline)
{
	uint64_t until = deadline && deadline < next_stats ? deadline : next_stats;
	uint64_t ms = until > now ? (until - now + 999999) / 1000000 : 0;

	if (lv->o->poll && ms > POLL_MAX_MS)
		ms = POLL_MAX_MS;
	return attacher__next_due_ms(lv->att, now, (int)(ms < 1000 ? ms : 1000));
}

/* The records drained so far, to the pipeline, after the counters when drops grew. The mark
 * comes before the counters are read and the take stops at it: a record drained after the
 * read (the backlog's thread drains meanwhile) could have been made after a drop the read did
 * not see, such as the close of a stream whose last bytes the full ring lost, which would end
 * that stream before the pipeline knew of the loss. *drained_ns: the mark's (backlog.h).
 * Returns the records handed over. */
static long feed_drained(struct live *lv, uint64_t *drained_ns)
{
	struct backlog_mark m;
	__u64 drops;

	backlog__mark(lv->backlog, &m);
	drops = drops_now(lv);
	if (drops > lv->seen_drops) {
		lv->seen_drops = drops;
		update_counters(lv);
	}
	if (drained_ns)
		*drained_ns = m.drained_ns;
	return backlog__take(lv->backlog, &m, on_event, lv);
}

static int consume(struct live *lv)
{
	uint64_t deadline = 0, next_stats = 0;

	if (lv->o->duration_s)
		deadline = clock__now_ns() + (uint64_t)lv->o->duration_s * 1000000000ull;
	while (!exiting) {
		uint64_t now = clock__now_ns(), consumed;
		int n = backlog__wait(lv->backlog, wait_ms(lv, now, next_stats, deadline));

		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "tokenscope: ring buffer poll failed: %s\n", strerror(-n));
			return -1;
		}
		/* what came, with or without a wake-up */
		feed_drained(lv, &consumed);
		now = clock__now_ns();
		attacher__tick(lv->att, now);
		if (now >= next_stats) {
			next_stats = now + STATS_INTERVAL_NS;
			update_counters(lv);
			if (lv->o->tick)
				lv->o->tick(lv->o->started_ctx);
		}
		if (deadline && now >= deadline)
			break;
		/* a record is committed within microseconds of its time: one of 1 ms ago is read */
		if (lv->o->poll && consumed > CONSUMED_MARGIN_NS &&
		    lv->o->poll(lv->o->started_ctx, consumed - CONSUMED_MARGIN_NS))
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
	const char *sock;
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
	sock = families__loaded(&lv->fams, "sock");
	fprintf(stderr, "tokenscope: tracing TLS in %zu files and %zu Go programs, CUDA in %zu "
			"files%s%s%s%s. Hit Ctrl-C to end.\n",
		attacher__files(lv->att, "TLS"), attacher__files(lv->att, "Go TLS"),
		attacher__files(lv->att, "CUDA"),
		sock ? ", " : "", sock ? sock : "",
		o->npids || o->comm || o->nports ? " (filtered)" : "",
		attacher__probes_off(lv->att) ? " (partial)" : "");

	/* phase: consume events until told to stop */
	if (consume(lv))
		goto cleanup;

	/* phase: drain, then close what is still open */
	backlog__stop(lv->backlog); /* the ring is this thread's now */
	while (backlog__pass(lv->backlog) + feed_drained(lv, NULL) > 0)
		;
	if (o->verbose)
		fprintf(stderr, "tokenscope: the reader's backlog held %.1f MiB at most\n",
			backlog__peak(lv->backlog) / 1048576.0);
	end_ns = clock__now_ns();
	feed_final_counters(lv, end_ns);
	pipeline__finish(pl, end_ns);
	err = 0;

cleanup:
	backlog__stop(lv->backlog); /* no thread of this process runs past here */
	/* nothing attached (setup failed early): nothing to leave to a child */
	detacher = lv->fams.nlinks || lv->att ? detacher__start() : -1;
	backlog__free(lv->backlog);
	ring__close(&lv->ring);
	attacher__free(lv->att);
	nat__free(lv->nat);
	cuda_names__free(lv->work.cuda_names);
	families__destroy(&lv->fams);
	if (detacher >= 0)
		close(detacher); /* this process holds no probe now: the child may drop them */
	free(lv->cpu_vals);
	pidset__free(&lv->known);
	pidset__free(&lv->excluded);
	free(lv);
	return err;
}
