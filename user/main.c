// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tokenscope: passive eBPF tracer for LLM streaming latency.
 *
 *   tokenscope [options]             trace live (root, or CAP_BPF + CAP_PERFMON)
 *   tokenscope report FILE [options] replay a recording through the same pipeline
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "pipeline.h"
#include "recording.h"
#include "report.h"
#include "cuda.skel.h"
#include "ksym.h"
#include "tls.skel.h"

#define MAX_PIDS 64
#define TS_VERSION "0.1.0"

struct options {
	pid_t pids[MAX_PIDS];
	int npids;
	const char *comm;
	const char *jsonl_path;
	const char *record_path;
	const char *replay_path;
	long duration_s;
	long ringbuf_mb;
	bool quiet;
	int verbose;
};

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	if (exiting) /* a second Ctrl-C: leave now */
		_exit(130);
	exiting = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: tokenscope [OPTIONS]              trace LLM API calls live\n"
		"       tokenscope report FILE [OPTIONS]  replay a recording\n"
		"\n"
		"Measures TTFT, TPOT, inter-token gaps, end-to-end time, token usage and prompt-cache\n"
		"hits of every streamed LLM API call that a process makes or serves over OpenSSL.\n"
		"\n"
		"  -p, --pid PID         trace only this process (repeatable)\n"
		"  -c, --comm NAME       trace only processes with this command name\n"
		"  -o, --output FILE     write one JSON object per request (JSON Lines, mode 0600)\n"
		"  -r, --record FILE     record the event stream for `tokenscope report` (holds\n"
		"                        decrypted prompts and completions; credentials masked)\n"
		"  -d, --duration SECS   stop after SECS seconds\n"
		"  -b, --ringbuf-mb MB   ring buffer size, a power of two (default 8)\n"
		"  -q, --quiet           no per-request lines, only the summary\n"
		"  -v, --verbose         more diagnostics (repeat for libbpf debug output)\n"
		"  -h, --help            this help\n"
		"  -V, --version\n");
}

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "comm", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ "record", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' },
		{ "ringbuf-mb", required_argument, NULL, 'b' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	int c;
	long v;

	o->ringbuf_mb = 8;
	if (argc > 1 && !strcmp(argv[1], "report")) {
		if (argc < 3 || argv[2][0] == '-') {
			fprintf(stderr, "tokenscope: report needs a recording FILE\n");
			return -1;
		}
		o->replay_path = argv[2];
		argv += 2;
		argc -= 2;
	}
	while ((c = getopt_long(argc, argv, "p:c:o:r:d:b:qvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_long(optarg, 1, INT_MAX, &v) || o->npids == MAX_PIDS) {
				fprintf(stderr, "tokenscope: invalid PID '%s'\n", optarg);
				return -1;
			}
			o->pids[o->npids++] = (pid_t)v;
			break;
		case 'c':
			if (strlen(optarg) >= TS_COMM_LEN) {
				fprintf(stderr, "tokenscope: command names are at most %d characters\n",
					TS_COMM_LEN - 1);
				return -1;
			}
			o->comm = optarg;
			break;
		case 'o':
			o->jsonl_path = optarg;
			break;
		case 'r':
			o->record_path = optarg;
			break;
		case 'd':
			if (parse_long(optarg, 1, 365L * 86400, &v)) {
				fprintf(stderr, "tokenscope: invalid duration '%s'\n", optarg);
				return -1;
			}
			o->duration_s = v;
			break;
		case 'b':
			if (parse_long(optarg, 1, 1024, &v) || (v & (v - 1))) {
				fprintf(stderr, "tokenscope: ring buffer size must be a power of two "
						"between 1 and 1024 MB\n");
				return -1;
			}
			o->ringbuf_mb = v;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("tokenscope %s\n", TS_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tokenscope: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->replay_path && (o->npids || o->comm || o->record_path || o->duration_s)) {
		fprintf(stderr, "tokenscope: report takes only -o, -q and -v\n");
		return -1;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static FILE *open_private(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f;

	if (fd < 0)
		return NULL;
	if (fchmod(fd, 0600) || !(f = fdopen(fd, "w"))) {
		close(fd);
		return NULL;
	}
	return f;
}

/* ---- replay ---- */

static int replay_record(void *ctx, void *rec, size_t size)
{
	pipeline__feed(ctx, rec, size);
	return 0;
}

/* ---- live ---- */

struct live {
	struct pipeline *pl;
	struct attacher *att;
	struct ksym *ksym;
	uint8_t buf[sizeof(struct ts_tls_data) + TS_CHUNK_MAX];
};

static void snapshot_maps(void *ctx, uint32_t pid)
{
	ksym__snapshot(ctx, pid);
}

/* Runtime launches name their kernel by host stub address: symbolize it while the process
 * lives, and put the name into the event stream (so recordings carry it). */
static void name_stubs(struct live *lv, const struct ts_gpu_mark *m)
{
	for (__u32 i = 0; i < m->work.nsamples && i < TS_KSAMPLES; i++) {
		const struct ts_kernel_sample *k = &m->work.k[i];
		struct ts_gpu_kname kn = { 0 };

		if (!(k->flags & TS_KS_STUB) || ksym__known(lv->ksym, m->hdr.pid, k->id))
			continue;
		kn.hdr.type = TS_EV_GPU_KNAME;
		kn.hdr.size = sizeof(kn);
		kn.hdr.ts_ns = m->hdr.ts_ns;
		kn.hdr.pid = m->hdr.pid;
		kn.hdr.tid = m->hdr.tid;
		memcpy(kn.hdr.comm, m->hdr.comm, sizeof(kn.hdr.comm));
		kn.id = k->id;
		kn.flags = TS_KS_STUB;
		ksym__name(lv->ksym, m->hdr.pid, k->id, kn.name, sizeof(kn.name));
		if (kn.name[0])
			pipeline__feed(lv->pl, &kn, sizeof(kn));
	}
}

/* The CUDA probes share the TLS object's ring buffer, counters and pid filter. A failure
 * here costs the GPU view, not the TLS one. */
static struct cuda_bpf *open_cuda(const struct options *o, struct tls_bpf *tls)
{
	struct cuda_bpf *c = cuda_bpf__open();

	if (!c)
		goto fail;
	c->rodata->filter_pids = o->npids > 0;
	if (o->comm) {
		c->rodata->filter_comm = true;
		strncpy((char *)c->rodata->target_comm, o->comm, TS_COMM_LEN - 1);
	}
	if (bpf_map__set_max_entries(c->maps.events, (__u32)o->ringbuf_mb << 20) ||
	    bpf_map__reuse_fd(c->maps.events, bpf_map__fd(tls->maps.events)) ||
	    bpf_map__reuse_fd(c->maps.counters, bpf_map__fd(tls->maps.counters)) ||
	    bpf_map__reuse_fd(c->maps.pids, bpf_map__fd(tls->maps.pids)) || cuda_bpf__load(c))
		goto fail;
	return c;
fail:
	fprintf(stderr, "tokenscope: CUDA probes unavailable (%s); tracing TLS only\n",
		strerror(errno));
	cuda_bpf__destroy(c);
	return NULL;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct live *lv = ctx;
	const struct ts_event_hdr *h = data;

	/* The ring buffer is mapped read-only and the pipeline masks credentials in place. */
	if (size > sizeof(lv->buf) || size < sizeof(*h))
		return pipeline__feed(lv->pl, data, size), 0;
	memcpy(lv->buf, data, size);
	if (h->type == TS_EV_GPU_KNAME && size >= sizeof(struct ts_gpu_kname)) {
		/* driver names come mangled: demangle here, so outputs and recordings are readable */
		struct ts_gpu_kname *kn = (struct ts_gpu_kname *)lv->buf;
		char raw[TS_KNAME_LEN + 1];

		memcpy(raw, kn->name, TS_KNAME_LEN);
		raw[TS_KNAME_LEN] = 0;
		ksym__demangle(raw, kn->name, sizeof(kn->name));
	}
	if (h->type == TS_EV_EXEC) {
		/* the executable's mapping, where nvcc-built programs keep their kernel stubs */
		ksym__snapshot(lv->ksym, h->pid);
		attacher__on_exec(lv->att, (pid_t)h->pid, now_ns());
	} else if (h->type == TS_EV_DLOPEN) {
		attacher__scan_pid(lv->att, (pid_t)h->pid);
	} else if (h->type == TS_EV_GPU_MARK && size >= sizeof(struct ts_gpu_mark)) {
		name_stubs(lv, data);
	}
	pipeline__feed(lv->pl, lv->buf, size);
	/* after the pipeline: a dying process's last steps may still need its names */
	if (h->type == TS_EV_EXIT)
		ksym__forget(lv->ksym, h->pid);
	return 0;
}

static int read_counters(struct tls_bpf *skel, __u64 out[TS_CNT__MAX])
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(skel->maps.counters);
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
	return 0;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return vfprintf(stderr, fmt, args);
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return 0;
}

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
	return (eff & (1ull << 21)) || ((eff & (1ull << 39)) && (eff & (1ull << 38)));
}

static int run_live(const struct options *o, struct pipeline *pl, struct recording *rec)
{
	struct ring_buffer *rb = NULL;
	struct tls_bpf *skel = NULL;
	struct cuda_bpf *cuda = NULL;
	struct bpf_link *tp_exec = NULL, *tp_exit = NULL, *tp_cuda_exit = NULL;
	struct live *lv = NULL;
	__u64 counters[TS_CNT__MAX] = { 0 };
	uint64_t reported_drops = 0, deadline = 0, next_stats = 0,
		 end_ns;
	int err = 1;

	if (!privileged()) {
		fprintf(stderr, "tokenscope: needs root (or CAP_BPF and CAP_PERFMON) to load eBPF "
				"probes\n");
		return 1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, "tokenscope: this kernel has no BTF (/sys/kernel/btf/vmlinux); "
				"tokenscope needs CONFIG_DEBUG_INFO_BTF=y\n");
		return 1;
	}
	libbpf_set_print(o->verbose > 1 ? libbpf_print : libbpf_quiet);

	/* phase: open, set filters, load */
	skel = tls_bpf__open();
	if (!skel) {
		fprintf(stderr, "tokenscope: cannot open BPF object: %s\n", strerror(errno));
		goto cleanup;
	}
	skel->rodata->filter_pids = o->npids > 0;
	if (o->comm) {
		skel->rodata->filter_comm = true;
		strncpy((char *)skel->rodata->target_comm, o->comm, TS_COMM_LEN - 1);
	}
	if (bpf_map__set_max_entries(skel->maps.events, (__u32)o->ringbuf_mb << 20)) {
		fprintf(stderr, "tokenscope: invalid ring buffer size\n");
		goto cleanup;
	}
	if (tls_bpf__load(skel)) {
		fprintf(stderr, "tokenscope: cannot load BPF programs: %s (run with -vv for the "
				"verifier log)\n", strerror(errno));
		goto cleanup;
	}
	cuda = open_cuda(o, skel);
	for (int i = 0; i < o->npids; i++) {
		__u32 pid = (__u32)o->pids[i];
		__u8 one = 1;

		if (kill(o->pids[i], 0) && errno == ESRCH) {
			fprintf(stderr, "tokenscope: no process with PID %d\n", o->pids[i]);
			goto cleanup;
		}
		bpf_map_update_elem(bpf_map__fd(skel->maps.pids), &pid, &one, BPF_ANY);
	}

	/* phase: lifecycle tracepoints first, so no exec slips between scan and attach */
	tp_exec = bpf_program__attach(skel->progs.handle_exec);
	tp_exit = bpf_program__attach(skel->progs.handle_exit);
	if (!tp_exec || !tp_exit) {
		fprintf(stderr, "tokenscope: cannot attach sched tracepoints: %s\n", strerror(errno));
		goto cleanup;
	}
	if (cuda && !(tp_cuda_exit = bpf_program__attach(cuda->progs.cuda_thread_exit)))
		fprintf(stderr, "tokenscope: warning: CUDA thread-exit cleanup not attached: %s\n",
			strerror(errno));

	lv = calloc(1, sizeof(*lv));
	if (!lv)
		goto cleanup;
	lv->pl = pl;
	lv->att = attacher__new(skel, cuda, o->verbose);
	lv->ksym = ksym__new();
	if (!lv->ksym)
		goto cleanup;
	attacher__on_cuda(lv->att, snapshot_maps, lv->ksym);
	if (!lv->att)
		goto cleanup;
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, lv, NULL);
	if (!rb) {
		fprintf(stderr, "tokenscope: cannot create ring buffer: %s\n", strerror(errno));
		goto cleanup;
	}

	/* phase: find and probe every TLS library */
	attacher__scan_system(lv->att);
	if (o->npids) {
		for (int i = 0; i < o->npids; i++)
			attacher__scan_pid(lv->att, o->pids[i]);
	} else {
		attacher__scan_pid(lv->att, 0);
	}
	if (!attacher__tls_files(lv->att) && !attacher__cuda_files(lv->att)) {
		fprintf(stderr, "tokenscope: no OpenSSL library found (no libssl.so.3/1.1 on this "
				"system and no running process maps a file exporting SSL_read)\n");
		goto cleanup;
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (o->duration_s)
		deadline = now_ns() + (uint64_t)o->duration_s * 1000000000ull;
	fprintf(stderr, "tokenscope: tracing TLS in %zu files, CUDA in %zu files%s. Hit Ctrl-C to "
			"end.\n",
		attacher__tls_files(lv->att), attacher__cuda_files(lv->att),
		o->npids || o->comm ? " (filtered)" : "");

	/* phase: consume events until told to stop */
	while (!exiting) {
		uint64_t now;
		int n = ring_buffer__poll(rb, attacher__next_due_ms(lv->att, now_ns(), 100));

		if (n < 0 && n != -EINTR) {
			fprintf(stderr, "tokenscope: ring buffer poll failed: %s\n", strerror(-n));
			break;
		}
		now = now_ns();
		attacher__tick(lv->att, now);
		if (now >= next_stats) {
			next_stats = now + 1000000000ull;
			if (!read_counters(skel, counters)) {
				pipeline__set_bpf_counters(pl, counters);
				if (counters[TS_CNT_DROPS] > reported_drops) {
					fprintf(stderr, "tokenscope: WARNING: %llu events dropped (ring "
							"buffer full); affected requests are marked "
							"incomplete\n",
						(unsigned long long)(counters[TS_CNT_DROPS] - reported_drops));
					reported_drops = counters[TS_CNT_DROPS];
				}
			}
		}
		if (deadline && now >= deadline)
			break;
	}

	/* phase: drain, then close what is still open */
	ring_buffer__consume(rb);
	end_ns = now_ns();
	if (!read_counters(skel, counters)) {
		pipeline__set_bpf_counters(pl, counters);
		if (rec) {
			struct ts_rec_counters rc = { 0 };

			rc.hdr.type = TS_REC_COUNTERS;
			rc.hdr.size = sizeof(rc);
			rc.hdr.ts_ns = end_ns; /* a replay ends where the capture ended */
			memcpy(rc.counters, counters, sizeof(rc.counters));
			recording__write(rec, &rc, sizeof(rc));
		}
	}
	pipeline__finish(pl, end_ns);
	err = 0;

cleanup:
	ring_buffer__free(rb);
	if (lv) {
		attacher__free(lv->att);
		ksym__free(lv->ksym);
	}
	free(lv);
	bpf_link__destroy(tp_exec);
	bpf_link__destroy(tp_exit);
	bpf_link__destroy(tp_cuda_exit);
	cuda_bpf__destroy(cuda);
	tls_bpf__destroy(skel);
	return err;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct recording *rec = NULL;
	struct pipeline *pl = NULL;
	struct report *rp = NULL;
	FILE *jsonl = NULL;
	int err = 1;

	if (parse_args(argc, argv, &o))
		return 1;
	if (o.jsonl_path && !(jsonl = open_private(o.jsonl_path))) {
		fprintf(stderr, "tokenscope: cannot create %s: %s\n", o.jsonl_path, strerror(errno));
		return 1;
	}
	rp = report__new(o.quiet ? NULL : stdout, jsonl);
	pl = rp ? pipeline__new(report__request, report__step, rp) : NULL;
	if (!pl)
		goto cleanup;

	if (o.replay_path) {
		if (recording__replay(o.replay_path, replay_record, pl))
			goto cleanup;
		pipeline__finish(pl, 0);
	} else {
		if (o.record_path) {
			rec = recording__create(o.record_path);
			if (!rec) {
				fprintf(stderr, "tokenscope: cannot create %s: %s\n", o.record_path,
					strerror(errno));
				goto cleanup;
			}
			pipeline__set_recording(pl, rec);
		}
		if (run_live(&o, pl, rec))
			goto cleanup;
	}
	report__summary(rp, stdout, pipeline__health(pl));
	err = 0;

cleanup:
	if (recording__close(rec)) {
		fprintf(stderr, "tokenscope: writing %s failed\n", o.record_path);
		err = 1;
	}
	pipeline__free(pl);
	report__free(rp);
	if (jsonl && fclose(jsonl)) {
		fprintf(stderr, "tokenscope: writing %s failed\n", o.jsonl_path);
		err = 1;
	}
	return err;
}
