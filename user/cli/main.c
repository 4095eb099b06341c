// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tokenscope: passive eBPF tracer for LLM streaming latency.
 *
 *   tokenscope [options]             trace live (root, or CAP_BPF + CAP_PERFMON)
 *   tokenscope report FILE [options] replay a recording through the same pipeline
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "out/exporter.h"
#include "out/metrics.h"
#include "out/report.h"
#include "capture/live.h"
#include "tokenscope.h"

#define MAX_PIDS 64
#define MAX_PORTS 64

enum {
	OPT_PORT = 256,
	OPT_NO_PLAINTEXT,
	OPT_ENGINE,
	OPT_GAPS,
	OPT_METRICS,
	OPT_METRICS_FILE,
	OPT_METRICS_MAX_SERIES,
};
#define MAX_ENGINES 16
#define TS_VERSION "0.1.0"

struct options {
	pid_t pids[MAX_PIDS];
	int npids;
	const char *comm;
	uint16_t ports[MAX_PORTS];
	int nports;
	bool no_plaintext;
	const char *jsonl_path;
	const char *record_path;
	const char *replay_path;
	long duration_s;
	long ringbuf_mb;
	bool quiet;
	int verbose;
	const char *engines[MAX_ENGINES]; /* --engine HTTP_PID=GPU_PID[,GPU_PID...] */
	int nengines;
	bool gaps;
	const char *metrics_addr;  /* --metrics [ADDR:]PORT */
	const char *metrics_file;  /* --metrics-file FILE */
	long metrics_max_series;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: tokenscope [OPTIONS]              trace LLM API calls live\n"
		"       tokenscope report FILE [OPTIONS]  replay a recording (FILE - : standard input)\n"
		"\n"
		"Measures TTFT, TPOT, inter-token gaps, end-to-end time, token usage and prompt-cache\n"
		"hits of every streamed LLM API call that a process makes or serves, over OpenSSL or\n"
		"plain HTTP on TCP.\n"
		"\n"
		"  -p, --pid PID         trace only this process (repeatable)\n"
		"  -c, --comm NAME       trace only processes with this command name\n"
		"      --port PORT       plaintext TCP: only sockets with this local or peer port\n"
		"                        (repeatable)\n"
		"      --no-plaintext    no plaintext TCP capture: TLS (and CUDA) only\n"
		"      --engine HTTP_PID=GPU_PID[,GPU_PID...]\n"
		"                        the GPU processes serving an HTTP server's requests (found\n"
		"                        through the process tree when not given; repeatable)\n"
		"      --gaps            request records list each token gap's steps\n"
		"      --metrics [ADDR:]PORT  serve Prometheus metrics at http://ADDR:PORT/metrics\n"
		"                        (ADDR 127.0.0.1 unless given; OpenTelemetry GenAI names)\n"
		"      --metrics-file FILE  write the metrics exposition to FILE at the end\n"
		"      --metrics-max-series N  label sets per metric family (default 1000); more\n"
		"                        are folded into gen_ai_request_model=\"other\"\n"
		"  -o, --output FILE     write one JSON object per request (JSON Lines, mode 0600)\n"
		"  -r, --record FILE     record the event stream for `tokenscope report` (holds\n"
		"                        decrypted prompts and completions; credentials masked)\n"
		"  -d, --duration SECS   stop after SECS seconds\n"
		"  -b, --ringbuf-mb MB   ring buffer size, a power of two (default: 32 per CPU, 8 to\n"
		"                        256, at most 1/256 of the memory)\n"
		"  -q, --quiet           no per-request lines, only the summary\n"
		"  -v, --verbose         which files were probed (repeat for libbpf debug output)\n"
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

static const struct option longopts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "comm", required_argument, NULL, 'c' },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "no-plaintext", no_argument, NULL, OPT_NO_PLAINTEXT },
	{ "engine", required_argument, NULL, OPT_ENGINE },
	{ "gaps", no_argument, NULL, OPT_GAPS },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
	{ "metrics-max-series", required_argument, NULL, OPT_METRICS_MAX_SERIES },
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

/* The options of attribution and metrics outputs. */
static int parse_output_option(int c, const char *arg, struct options *o)
{
	char addr[64];
	unsigned port;
	long v;

	switch (c) {
	case OPT_ENGINE:
		if (o->nengines == MAX_ENGINES) {
			fprintf(stderr, "tokenscope: at most %d --engine\n", MAX_ENGINES);
			return -1;
		}
		o->engines[o->nengines++] = arg;
		return 0;
	case OPT_GAPS:
		o->gaps = true;
		return 0;
	case OPT_METRICS:
		if (exporter__parse(arg, addr, sizeof(addr), &port)) {
			fprintf(stderr, "tokenscope: --metrics wants [ADDR:]PORT (IPv4), not '%s'\n", arg);
			return -1;
		}
		o->metrics_addr = arg;
		return 0;
	case OPT_METRICS_FILE:
		o->metrics_file = arg;
		return 0;
	case OPT_METRICS_MAX_SERIES:
		if (parse_long(arg, 1, 1000000, &v)) {
			fprintf(stderr, "tokenscope: invalid --metrics-max-series '%s'\n", arg);
			return -1;
		}
		o->metrics_max_series = v;
		return 0;
	}
	return -1;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	int c;
	long v;

	o->ringbuf_mb = live__default_ringbuf_mb();
	if (argc > 1 && !strcmp(argv[1], "report")) {
		if (argc < 3 || (argv[2][0] == '-' && argv[2][1])) {
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
		case OPT_PORT:
			if (parse_long(optarg, 1, 65535, &v) || o->nports == MAX_PORTS) {
				fprintf(stderr, "tokenscope: invalid port '%s'\n", optarg);
				return -1;
			}
			o->ports[o->nports++] = (uint16_t)v;
			break;
		case OPT_NO_PLAINTEXT:
			o->no_plaintext = true;
			break;
		case OPT_ENGINE:
		case OPT_GAPS:
		case OPT_METRICS:
		case OPT_METRICS_FILE:
		case OPT_METRICS_MAX_SERIES:
			if (parse_output_option(c, optarg, o))
				return -1;
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
	if (o->replay_path &&
	    (o->npids || o->comm || o->record_path || o->duration_s || o->nports || o->no_plaintext ||
	     o->metrics_addr)) {
		fprintf(stderr, "tokenscope: report takes only -o, -q, -v, --engine, --gaps and "
				"--metrics-file\n");
		return -1;
	}
	return 0;
}

/* What the run writes, and the moment it may start writing it. */
struct outputs {
	const struct options *o;
	struct outfile jsonl_file, rec_file;
	struct pipeline *pl;
	struct recording *rec;
	bool started;
	struct metrics *metrics;
	struct exporter *exporter;
	struct buf expo; /* the last exposition */
};

/* --metrics: the capture loop renders, about once a second, what scrapes then serve. */
static void publish_metrics(void *ctx)
{
	struct outputs *out = ctx;

	if (out->exporter && !metrics__render(out->metrics, pipeline__health(out->pl), &out->expo))
		exporter__publish(out->exporter, out->expo.p ? out->expo.p : "", out->expo.len);
}

/* --metrics-file: one exposition at the end. */
static int write_metrics_file(struct outputs *out)
{
	const char *path = out->o->metrics_file;
	struct outfile f = { .fd = -1 };

	if (metrics__render(out->metrics, pipeline__health(out->pl), &out->expo) ||
	    outfile__open(&f, path) || outfile__start(&f)) {
		fprintf(stderr, "tokenscope: cannot write %s\n", path);
		outfile__close(&f);
		return -1;
	}
	/* one record: a scraper reading the file (node_exporter's textfile collector) finds a
	 * whole exposition or an empty file, never half of one */
	outfile__record(&f, out->expo.p ? out->expo.p : "", out->expo.len, true);
	return outfile__close(&f);
}

/* The run has started (probes attached, or the recording's header read): only now are the
 * previous outputs emptied. */
static int start_outputs(void *ctx)
{
	struct outputs *out = ctx;
	const char *path = out->o->jsonl_path;

	out->started = true;
	if (outfile__start(&out->jsonl_file))
		goto fail;
	path = out->o->record_path;
	if (out->rec_file.fd >= 0) {
		if (outfile__start(&out->rec_file))
			goto fail;
		out->rec = recording__create(&out->rec_file);
		if (!out->rec)
			return -1; /* said by outfile */
		pipeline__set_recording(out->pl, out->rec);
	}
	return 0;
fail:
	fprintf(stderr, "tokenscope: cannot write %s: %s\n", path, strerror(errno));
	return -1;
}

static int replay_record(void *ctx, void *rec, size_t size)
{
	struct outputs *out = ctx;

	pipeline__feed(out->pl, rec, size);
	return 0;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct outputs out = { .o = &o, .jsonl_file.fd = -1, .rec_file.fd = -1 };
	struct live_opts lo;
	struct report *rp = NULL;
	int err = 1;

	if (parse_args(argc, argv, &o))
		return 1;
	lo = (struct live_opts){ .pids = o.pids, .npids = o.npids, .comm = o.comm,
				 .ports = o.ports, .nports = o.nports,
				 .no_plaintext = o.no_plaintext, .ringbuf_mb = o.ringbuf_mb,
				 .duration_s = o.duration_s, .verbose = o.verbose,
				 .started = start_outputs, .started_ctx = &out,
				 .tick = publish_metrics };
	/* Everything that can refuse a live run is checked before any output file is touched;
	 * the files are opened (and checked) now, and emptied only once the run has started. */
	if (!o.replay_path && live__check(&lo))
		return 1;
	if (o.jsonl_path && outfile__open(&out.jsonl_file, o.jsonl_path))
		return 1;
	if (o.record_path && outfile__open(&out.rec_file, o.record_path))
		goto cleanup;
	rp = report__new(o.quiet ? NULL : stdout, out.jsonl_file.fd >= 0 ? &out.jsonl_file : NULL);
	out.pl = rp ? pipeline__new(report__request, report__step, rp) : NULL;
	if (!out.pl) {
		fprintf(stderr, "tokenscope: out of memory\n");
		goto cleanup;
	}
	pipeline__set_exit_fn(out.pl, report__process_exit);
	report__set_gaps(rp, o.gaps);
	if (o.metrics_addr || o.metrics_file) {
		out.metrics = metrics__new((size_t)o.metrics_max_series);
		if (!out.metrics) {
			fprintf(stderr, "tokenscope: out of memory\n");
			goto cleanup;
		}
		report__set_metrics(rp, out.metrics);
	}
	if (o.metrics_addr) {
		out.exporter = exporter__start(o.metrics_addr);
		if (!out.exporter)
			goto cleanup;
		publish_metrics(&out);
	}
	report__set_attrib(rp, pipeline__attrib(out.pl));
	for (int i = 0; i < o.nengines; i++) {
		if (attrib__override(pipeline__attrib(out.pl), o.engines[i])) {
			fprintf(stderr, "tokenscope: invalid --engine '%s' (HTTP_PID=GPU_PID[,GPU_PID...], "
					"at most %d GPU processes)\n",
				o.engines[i], ATTRIB_MAX_PIDS);
			goto cleanup;
		}
	}

	if (o.replay_path) {
		if (recording__replay(o.replay_path, start_outputs, replay_record, &out))
			goto cleanup;
		pipeline__finish(out.pl, 0);
	} else if (live__run(&lo, out.pl)) {
		goto cleanup;
	}
	report__summary(rp, stdout, pipeline__health(out.pl));
	err = o.metrics_file && write_metrics_file(&out) ? 1 : 0;

cleanup:
	/* each output says itself how many records it could not write */
	if (out.started && (out.rec ? recording__close(out.rec) : outfile__close(&out.rec_file)))
		err = 1;
	exporter__stop(out.exporter);
	metrics__free(out.metrics);
	buf__free(&out.expo);
	pipeline__free(out.pl);
	report__free(rp);
	if (out.started && outfile__close(&out.jsonl_file))
		err = 1;
	if (!out.started) {
		/* the run never began: previous outputs are as they were, new ones are gone */
		outfile__abandon(&out.jsonl_file);
		outfile__abandon(&out.rec_file);
	}
	return err;
}
