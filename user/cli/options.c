// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The option table, and what is built from it (options.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "sinks/exporter.h"
#include "base/version.h"
#include "sinks/perfetto.h"
#include "capture/live.h"
#include "cli/options.h"
#include "tokenscope.h"


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

/* What each option does with its argument: 0, or -1 having said why. */

static int set_pid(struct options *o, const char *arg)
{
	long v;

	if (parse_long(arg, 1, INT_MAX, &v) || o->npids == OPTIONS_MAX_PIDS) {
		fprintf(stderr, "tokenscope: invalid PID '%s'\n", arg);
		return -1;
	}
	o->pids[o->npids++] = (pid_t)v;
	return 0;
}

static int set_comm(struct options *o, const char *arg)
{
	if (strlen(arg) >= TS_COMM_LEN) {
		fprintf(stderr, "tokenscope: command names are at most %d characters\n",
			TS_COMM_LEN - 1);
		return -1;
	}
	o->comm = arg;
	return 0;
}

static int set_port(struct options *o, const char *arg)
{
	long v;

	if (parse_long(arg, 1, 65535, &v) || o->nports == OPTIONS_MAX_PORTS) {
		fprintf(stderr, "tokenscope: invalid port '%s'\n", arg);
		return -1;
	}
	o->ports[o->nports++] = (uint16_t)v;
	return 0;
}

static int set_engine(struct options *o, const char *arg)
{
	if (o->nengines == OPTIONS_MAX_ENGINES) {
		fprintf(stderr, "tokenscope: at most %d --engine\n", OPTIONS_MAX_ENGINES);
		return -1;
	}
	o->engines[o->nengines++] = arg; /* checked by attrib__override */
	return 0;
}

static int set_metrics(struct options *o, const char *arg)
{
	char addr[64];
	unsigned port;

	if (exporter__parse(arg, addr, sizeof(addr), &port)) {
		fprintf(stderr, "tokenscope: --metrics wants [ADDR:]PORT (IPv4), not '%s'\n", arg);
		return -1;
	}
	o->metrics_addr = arg;
	return 0;
}

static int set_metrics_max_series(struct options *o, const char *arg)
{
	if (parse_long(arg, 1, 1000000, &o->metrics_max_series)) {
		fprintf(stderr, "tokenscope: invalid --metrics-max-series '%s'\n", arg);
		return -1;
	}
	return 0;
}

static int set_perfetto_max_mb(struct options *o, const char *arg)
{
	if (parse_long(arg, 1, 1 << 20, &o->perfetto_max_mb)) {
		fprintf(stderr, "tokenscope: invalid --perfetto-max-mb '%s'\n", arg);
		return -1;
	}
	return 0;
}

static int set_duration(struct options *o, const char *arg)
{
	if (parse_long(arg, 1, 365L * 86400, &o->duration_s)) {
		fprintf(stderr, "tokenscope: invalid duration '%s'\n", arg);
		return -1;
	}
	return 0;
}

static int set_ringbuf_mb(struct options *o, const char *arg)
{
	long v;

	if (parse_long(arg, 1, 1024, &v) || (v & (v - 1))) {
		fprintf(stderr, "tokenscope: -b (room for records) must be a power of two between 1 "
				"and 1024 MB\n");
		return -1;
	}
	o->ringbuf_mb = v;
	return 0;
}

static int set_speed(struct options *o, const char *arg)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.01 && v <= 10000)) {
		fprintf(stderr, "tokenscope: invalid --speed '%s' (from 0.01 to 10000)\n", arg);
		return -1;
	}
	o->speed = v;
	return 0;
}

static int set_replay(struct options *o, const char *arg)
{
	if (!strcmp(arg, "-")) { /* the view's keys come from standard input */
		fprintf(stderr, "tokenscope: top --replay wants a file, not standard input\n");
		return -1;
	}
	o->replay_path = arg;
	return 0;
}

/* The judgements' options: llm/judge.c reads and checks them. */
static int judged(int rc, const char *err)
{
	if (rc)
		fprintf(stderr, "tokenscope: %s\n", err);
	return rc;
}

static int set_consumer(struct options *o, const char *arg)
{
	char err[256];

	return judged(judge__add_rule(&o->judge, arg, err, sizeof(err)), err);
}

static int set_slo(struct options *o, const char *arg)
{
	char err[256];

	return judged(judge__add_slo(&o->judge, arg, err, sizeof(err)), err);
}

static int set_reading_speed(struct options *o, const char *arg)
{
	char err[256];

	return judged(judge__set_reading(&o->judge, arg, err, sizeof(err)), err);
}

static int set_session_idle(struct options *o, const char *arg)
{
	if (parse_long(arg, 1, 86400, &o->session_idle_s)) {
		fprintf(stderr, "tokenscope: invalid --session-idle '%s' (seconds, 1 to 86400)\n", arg);
		return -1;
	}
	return 0;
}

static int set_otlp_sample(struct options *o, const char *arg)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0 && v <= 1)) {
		fprintf(stderr, "tokenscope: invalid --otlp-sample '%s' (a ratio, 0 to 1)\n", arg);
		return -1;
	}
	o->otlp_sample = v;
	o->otlp_sample_set = true;
	return 0;
}

static int set_change_window(struct options *o, const char *arg)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.1 && v <= 86400)) {
		fprintf(stderr, "tokenscope: invalid --change-window '%s' (seconds, 0.1 to 86400)\n",
			arg);
		return -1;
	}
	o->change_window_s = v;
	return 0;
}

/* Options that only set a field. */
enum opt_kind {
	SET_FN,	  /* the option's own set() */
	SET_FLAG, /* bool at off = true */
	SET_PATH, /* const char * at off = arg */
	SET_COUNT, /* int at off += 1 */
	PRINT_HELP,
	PRINT_VERSION,
	PRINT_MAN,
};

struct opt_spec {
	const char *name; /* --name */
	char short_name;  /* -x, or 0 */
	const char *arg;  /* the argument in the usage; NULL: takes none */
	enum opt_kind kind;
	size_t off;
	int (*set)(struct options *o, const char *arg);
	bool in_report; /* taken by `report FILE` (and `top --replay`) too */
	const char *help; /* '\n' starts a continuation line */
	bool top_only;	/* `tokenscope top` only */
};

#define FN(f) SET_FN, 0, f
#define FIELD(kind, field) kind, offsetof(struct options, field), NULL

/* The options, in the usage's order. */
static const struct opt_spec specs[] = {
	{ "pid", 'p', "PID", FN(set_pid), false, "trace only this process (repeatable)" },
	{ "comm", 'c', "NAME", FN(set_comm), false,
	  "trace only processes with this command name" },
	{ "namespace", 0, "NS", FIELD(SET_PATH, k8s_namespace), false,
	  "only processes of pods in this Kubernetes namespace\n(from their service account)" },
	{ "pod", 0, "NAME", FIELD(SET_PATH, pod), false,
	  "only processes of the pod with this name (its hostname)" },
	{ "container", 0, "ID-PREFIX", FIELD(SET_PATH, container), false,
	  "only processes whose container id begins with ID-PREFIX" },
	{ "port", 0, "PORT", FN(set_port), false,
	  "plaintext TCP: only sockets with this local or peer port\n(repeatable; Unix sockets "
	  "have none)" },
	{ "no-plaintext", 0, NULL, FIELD(SET_FLAG, no_plaintext), false,
	  "no plaintext capture (TCP, Unix sockets): TLS (and CUDA)\nonly" },
	{ "engine", 0, "HTTP_PID=ENGINE_PID[,ENGINE_PID...]", FN(set_engine), true,
	  "the engine processes (CUDA, llama.cpp) serving an HTTP\nserver's requests (found "
	  "through the process tree when\nnot given; repeatable)" },
	{ "gaps", 0, NULL, FIELD(SET_FLAG, gaps), true, "request records list each token gap's steps" },
	{ "consumer", 0, "CONSUMER:KEY=GLOB", FN(set_consumer), true,
	  "requests whose process (comm), User-Agent (ua) or model\nmatches GLOB are read by "
	  "CONSUMER (interactive, agent,\nprogrammatic); first match wins (repeatable)" },
	{ "slo", 0, "CONSUMER:METRIC<=VALUE", FN(set_slo), true,
	  "an SLO (ttft, tpot, e2e; 500ms, 2s, or tpot<=reading)\nfor a consumer or all; "
	  "replaces its defaults (\"none\":\nno SLO; repeatable; docs/judgements.md)" },
	{ "reading-speed", 0, "TPS", FN(set_reading_speed), true,
	  "a person's reading speed, tokens a second (default 5.3)" },
	{ "session-idle", 0, "SECS", FN(set_session_idle), true,
	  "an agent session ends when its client has made no call\nfor SECS (default 60)" },
	{ "change-window", 0, "SECS", FN(set_change_window), true,
	  "the summary says why TTFT changed between the run's\nfirst and last SECS (default 60)" },
	{ "metrics", 0, "[ADDR:]PORT", FN(set_metrics), false,
	  "serve Prometheus metrics at http://ADDR:PORT/metrics\n(ADDR 127.0.0.1 unless given; "
	  "OpenTelemetry GenAI names)" },
	{ "metrics-file", 0, "FILE", FIELD(SET_PATH, metrics_file), true,
	  "write the metrics exposition to FILE at the end" },
	{ "metrics-max-series", 0, "N", FN(set_metrics_max_series), true,
	  "label sets per metric family (default 1000); more\nare folded into "
	  "gen_ai_request_model=\"other\"" },
	{ "otlp", 0, "URL", FIELD(SET_PATH, otlp_url), true,
	  "export each request as an OpenTelemetry span, its TTFT\nphases as children, over "
	  "OTLP/HTTP to URL (\"env\": the\nOTEL_EXPORTER_OTLP_* variables; docs/otlp.md)" },
	{ "otlp-sample", 0, "RATIO", FN(set_otlp_sample), true,
	  "--otlp: send this share of the traces tokenscope starts\n(default 1); a request's "
	  "own trace follows its header's\nsampled flag" },
	{ "otlp-steps", 0, NULL, FIELD(SET_FLAG, otlp_steps), true,
	  "--otlp: engine steps as spans, linked from the requests\nthey served" },
	{ "otlp-tokens", 0, NULL, FIELD(SET_FLAG, otlp_tokens), true,
	  "--otlp: each token event a span event (the first 128\nof a request)" },
	{ "perfetto", 0, "FILE", FIELD(SET_PATH, perfetto_path), true,
	  "write a Perfetto timeline of requests, tokens and engine\nsteps (ui.perfetto.dev)" },
	{ "perfetto-max-mb", 0, "MB", FN(set_perfetto_max_mb), true,
	  "cap the timeline at MB (default 512); packets past it\nare counted, not written" },
	{ "html", 0, "FILE", FIELD(SET_PATH, html_path), true,
	  "write a report to open in a browser at the end (one file,\nno script, nothing fetched)" },
	{ "output", 'o', "FILE", FIELD(SET_PATH, jsonl_path), true,
	  "write one JSON object per request (JSON Lines, mode 0600)" },
	{ "record", 'r', "FILE", FIELD(SET_PATH, record_path), false,
	  "record the event stream for `tokenscope report` (holds\ndecrypted prompts and "
	  "completions; credentials masked)" },
	{ "duration", 'd', "SECS", FN(set_duration), false, "stop after SECS seconds" },
	{ "ringbuf-mb", 'b', "MB", FN(set_ringbuf_mb), false,
	  "room for records waiting to be read, a power of two: the\nkernel's ring and the "
	  "reader's backlog (default: 32 per\nCPU, 8 to 256, at most 1/256 of the memory)" },
	{ "quiet", 'q', NULL, FIELD(SET_FLAG, quiet), true, "no per-request lines, only the summary" },
	{ "verbose", 'v', NULL, FIELD(SET_COUNT, verbose), true,
	  "which files were probed (repeat for libbpf debug output)" },
	{ "replay", 0, "FILE", FN(set_replay), true,
	  "top: play a recording through the view, at its own pace", true },
	{ "speed", 0, "X", FN(set_speed), true, "top --replay: X times as fast (default 1)", true },
	{ "help", 'h', NULL, PRINT_HELP, 0, NULL, true, "this help" },
	{ "version", 'V', NULL, PRINT_VERSION, 0, NULL, true, "the version" },
	{ "man", 0, NULL, PRINT_MAN, 0, NULL, true, "this help as a man page (roff, for man(1))" },
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

#define HELP_COLUMN 24

static void usage(FILE *f)
{
	fputs("Usage: tokenscope [OPTIONS]              trace LLM API calls live\n"
	      "       tokenscope report FILE [OPTIONS]  replay a recording (FILE - : standard input)\n"
	      "       tokenscope top [OPTIONS]          trace live, in a full-screen view\n"
	      "       tokenscope top --replay FILE [--speed X] [OPTIONS]\n"
	      "                                         play a recording through the view\n"
	      "       tokenscope compare BEFORE AFTER [--json]\n"
	      "                                         why TTFT changed between two runs\n"
	      "\n"
	      "Measures TTFT, TPOT, inter-token gaps, end-to-end time, token usage and prompt-cache\n"
	      "hits of every streamed LLM API call that a process makes or serves, over OpenSSL,\n"
	      "Go's crypto/tls, or plain HTTP on TCP and Unix sockets.\n"
	      "\n",
	      f);
	for (size_t i = 0; i < NSPECS; i++) {
		const struct opt_spec *s = &specs[i];
		char left[64];
		int n = snprintf(left, sizeof(left), "%c%c%c --%s%s%s", s->short_name ? '-' : ' ',
				 s->short_name ? s->short_name : ' ', s->short_name ? ',' : ' ',
				 s->name, s->arg ? " " : "", s->arg ? s->arg : "");

		/* the help beside the option where it fits, else below it */
		if (n <= HELP_COLUMN - 4)
			fprintf(f, "  %-*s", HELP_COLUMN - 2, left);
		else if (n <= 30)
			fprintf(f, "  %s  ", left);
		else
			fprintf(f, "  %s\n%*s", left, HELP_COLUMN, "");
		for (const char *h = s->help; *h;) {
			size_t len = strcspn(h, "\n");

			fprintf(f, "%.*s\n", (int)len, h);
			h += len;
			if (*h == '\n' && *++h)
				fprintf(f, "%*s", HELP_COLUMN, "");
		}
	}
}

/* Text for roff: a '-' as \-, a backslash as \e, a line that would start with '.' or '\''
 * kept from being read as a request (\&). */
static void roff(FILE *f, const char *s, size_t n)
{
	if (n && (s[0] == '.' || s[0] == '\''))
		fputs("\\&", f);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-')
			fputs("\\-", f);
		else if (s[i] == '\\')
			fputs("\\e", f);
		else
			fputc(s[i], f);
	}
}

/* tokenscope(1), in man(7), from the same table as the usage: it cannot drift from what the
 * binary accepts (`make man` writes it, and lints it with mandoc). */
static void man_page(FILE *f)
{
	fprintf(f, ".TH TOKENSCOPE 1 %s \"tokenscope %s\" \"User Commands\"\n"
		   ".SH NAME\n"
		   "tokenscope \\- passive eBPF tracer for LLM streaming latency\n"
		   ".SH SYNOPSIS\n"
		   ".B tokenscope\n[\\fIOPTIONS\\fR]\n.br\n"
		   ".B tokenscope report\n\\fIFILE\\fR [\\fIOPTIONS\\fR]\n.br\n"
		   ".B tokenscope top\n[\\fIOPTIONS\\fR]\n.br\n"
		   ".B tokenscope top \\-\\-replay\n\\fIFILE\\fR [\\fB\\-\\-speed\\fR "
		   "\\fIX\\fR] [\\fIOPTIONS\\fR]\n.br\n"
		   ".B tokenscope compare\n\\fIBEFORE\\fR \\fIAFTER\\fR [\\fB\\-\\-json\\fR]\n"
		   ".SH DESCRIPTION\n"
		   "tokenscope attaches eBPF probes to unmodified processes (uprobes on OpenSSL and on Go's\n"
		   "crypto/tls, syscall tracepoints on plain TCP and Unix sockets, uprobes on the CUDA\n"
		   "runtime and driver and on llama.cpp) and measures every streamed LLM API call that a\n"
		   "process makes or serves: time to the first content token (TTFT), time per output\n"
		   "token (TPOT), inter\\-token gaps, end\\-to\\-end time, token usage and prompt\\-cache\n"
		   "hits, with each server request's TTFT split into queueing, prefill and emit by the\n"
		   "engine steps that served it.\n"
		   ".PP\n"
		   "Live tracing needs root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF (Linux\n"
		   "5.10 or later).\n"
		   "\\fBreport\\fR replays a recording (\\fB\\-r\\fR) through the same pipeline and needs\n"
		   "no privilege; \\fBtop\\fR shows the same figures in a full\\-screen view.\n"
		   "\\fBcompare\\fR says why TTFT changed between two runs (their recordings or JSON\n"
		   "Lines), per group, with its evidence; \\fB\\-\\-json\\fR gives the same as data.\n"
		   ".SH OPTIONS\n",
		TS_VERSION_DATE, TS_VERSION);
	for (size_t i = 0; i < NSPECS; i++) {
		const struct opt_spec *s = &specs[i];

		fputs(".TP\n", f);
		if (s->short_name)
			fprintf(f, "\\fB\\-%c\\fR, ", s->short_name);
		fputs("\\fB\\-\\-", f);
		roff(f, s->name, strlen(s->name));
		fputs("\\fR", f);
		if (s->arg) {
			fputs(" \\fI", f);
			roff(f, s->arg, strlen(s->arg));
			fputs("\\fR", f);
		}
		fputc('\n', f);
		for (const char *h = s->help; *h;) {
			size_t len = strcspn(h, "\n");

			roff(f, h, len);
			fputc('\n', f);
			h += len;
			if (*h == '\n')
				h++;
		}
	}
	fputs(".SH EXIT STATUS\n"
	      "0 when the run ended as asked (Ctrl\\-C, SIGTERM, \\fB\\-d\\fR, the end of a recording);\n"
	      "1 when an option is wrong, it could not start, or an output could not be written\n"
	      "(one line on standard error says why).\n"
	      ".SH FILES\n"
	      "Outputs (\\fB\\-o\\fR, \\fB\\-r\\fR, \\fB\\-\\-html\\fR, \\fB\\-\\-perfetto\\fR, "
	      "\\fB\\-\\-metrics\\-file\\fR) are\n"
	      "created mode 0600 and never written through a symbolic link. A recording holds the\n"
	      "decrypted request and response bodies, credentials masked; no other output holds a\n"
	      "prompt, a completion or a credential.\n"
	      ".SH SEE ALSO\n"
	      ".BR bpftool (8)\n",
	      f);
}

/* What a replay (`report FILE`, `top --replay FILE`) takes, for its error line. */
static void say_report_options(bool top)
{
	fprintf(stderr, "tokenscope: %s takes only", top ? "top --replay" : "report");
	for (size_t i = 0, said = 0; i < NSPECS; i++) {
		if (specs[i].in_report && specs[i].kind != PRINT_HELP &&
		    specs[i].kind != PRINT_VERSION && (top || !specs[i].top_only))
			fprintf(stderr, "%s --%s", said++ ? "," : "", specs[i].name);
	}
	fprintf(stderr, "\n");
}

/* Does what the option says: 0, 1 (printed the help or the version), or -1. */
static int apply(const struct opt_spec *s, struct options *o, const char *arg,
		 const char **live_only)
{
	char *field = (char *)o + s->off;

	if (!s->in_report && !*live_only)
		*live_only = s->name;
	if (s->top_only && !o->top) {
		fprintf(stderr, "tokenscope: --%s is for `tokenscope top`\n", s->name);
		return -1;
	}
	switch (s->kind) {
	case SET_FN:
		return s->set(o, arg);
	case SET_FLAG:
		*(bool *)field = true;
		return 0;
	case SET_PATH:
		*(const char **)field = arg;
		return 0;
	case SET_COUNT:
		(*(int *)field)++;
		return 0;
	case PRINT_HELP:
		usage(stdout);
		return 1;
	case PRINT_VERSION:
		printf("tokenscope %s\n", TS_VERSION);
		return 1;
	case PRINT_MAN:
		man_page(stdout);
		return 1;
	}
	return -1;
}

/* The table index of -c; -1 when none ('?': getopt found no such option). */
static int spec_of_short(int c)
{
	for (size_t i = 0; i < NSPECS; i++) {
		if (specs[i].short_name == c)
			return (int)i;
	}
	return -1;
}

int options__parse(int argc, char **argv, struct options *o)
{
	struct option longopts[NSPECS + 1];
	char shorts[2 * NSPECS + 1], *sp = shorts;
	const char *live_only = NULL; /* the first option given that only live tracing takes */
	int c, idx, ret;

	o->ringbuf_mb = live__default_ringbuf_mb();
	judge__init(&o->judge);
	o->perfetto_max_mb = PERFETTO_DEFAULT_MAX_MB;
	if (argc > 1 && !strcmp(argv[1], "top")) {
		o->top = true;
		argv++;
		argc--;
	} else if (argc > 1 && !strcmp(argv[1], "report")) {
		if (argc < 3 || (argv[2][0] == '-' && argv[2][1])) {
			fprintf(stderr, "tokenscope: report needs a recording FILE\n");
			return -1;
		}
		o->replay_path = argv[2];
		argv += 2;
		argc -= 2;
	}
	/* getopt_long's array and short-option string, from the table: a long option's val is
	 * 256 + its index, a short one is its letter */
	for (size_t i = 0; i < NSPECS; i++) {
		longopts[i] = (struct option){ specs[i].name,
					       specs[i].arg ? required_argument : no_argument, NULL,
					       256 + (int)i };
		if (specs[i].short_name) {
			*sp++ = specs[i].short_name;
			if (specs[i].arg)
				*sp++ = ':';
		}
	}
	longopts[NSPECS] = (struct option){ 0 };
	*sp = 0;
	while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		idx = c >= 256 ? c - 256 : spec_of_short(c);
		if (idx < 0) { /* getopt said what was wrong */
			usage(stderr);
			return -1;
		}
		ret = apply(&specs[idx], o, optarg, &live_only);
		if (ret)
			return ret;
	}
	/* checked once all are read: `top -r F --replay R` is refused as `top --replay R -r F` */
	if (o->replay_path && live_only) {
		fprintf(stderr, "tokenscope: --%s is for live tracing\n", live_only);
		say_report_options(o->top);
		return -1;
	}
	if (o->speed && !(o->top && o->replay_path)) {
		fprintf(stderr, "tokenscope: --speed is for `tokenscope top --replay FILE`\n");
		return -1;
	}
	if (!o->speed)
		o->speed = 1;
	if (optind < argc) {
		fprintf(stderr, "tokenscope: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}
