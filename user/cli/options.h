/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The command line. One table in options.c lists every option: getopt_long's array, its
 * short-option string and the usage text are built from it, and README's option table is
 * checked against the usage (tests/check_options.py).
 */
#ifndef TS_OPTIONS_H
#define TS_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "llm/judge.h"

#define OPTIONS_MAX_PIDS 64
#define OPTIONS_MAX_PORTS 64
#define OPTIONS_MAX_ENGINES 16

struct options {
	pid_t pids[OPTIONS_MAX_PIDS];
	int npids;
	const char *comm;
	const char *k8s_namespace; /* --namespace: only processes of pods in it */
	const char *pod;	   /* --pod: only processes of the pod with this name */
	const char *container;	   /* --container: only processes whose container id begins so */
	uint16_t ports[OPTIONS_MAX_PORTS];
	int nports;
	bool no_plaintext;
	const char *jsonl_path;
	const char *record_path;
	const char *replay_path; /* `report FILE`, `top --replay FILE` */
	bool top;		 /* `tokenscope top`: the live view */
	double speed;		 /* top --replay: the recording's pace (1: as recorded) */
	long duration_s;
	long ringbuf_mb;
	bool quiet;
	int verbose;
	const char *engines[OPTIONS_MAX_ENGINES]; /* --engine HTTP_PID=ENGINE_PID[,ENGINE_PID...] */
	int nengines;
	bool gaps;
	const char *metrics_addr; /* --metrics [ADDR:]PORT */
	const char *metrics_file; /* --metrics-file FILE */
	long metrics_max_series;
	const char *perfetto_path; /* --perfetto FILE */
	const char *html_path;	   /* --html FILE */
	const char *otlp_url;	   /* --otlp URL ("env": the OTEL_ variables') */
	double otlp_sample;	   /* --otlp-sample (otlp_sample_set: given) */
	bool otlp_sample_set;
	bool otlp_steps;	   /* --otlp-steps */
	bool otlp_tokens;	   /* --otlp-tokens */
	long perfetto_max_mb;
	struct judge judge; /* --consumer, --slo, --reading-speed */
	long session_idle_s; /* --session-idle (0: llm/session.h's default) */
	double change_window_s; /* --change-window (0: sinks/summary.h's default) */
};

/* `tokenscope [report FILE | top] [OPTIONS]` into o. Returns 0; 1 when it printed the help or the
 * version (the run is over, successfully); -1 when the line is wrong (said on stderr). */
int options__parse(int argc, char **argv, struct options *o);

#endif
