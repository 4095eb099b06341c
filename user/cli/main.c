// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tokenscope: passive eBPF tracer for LLM streaming latency.
 *
 *   tokenscope [options]             trace live (root, or CAP_BPF + CAP_PERFMON)
 *   tokenscope report FILE [options] replay a recording through the same pipeline
 *   tokenscope top [options]         trace live, in a full-screen view (cli/top_screen.h)
 *   tokenscope top --replay FILE     play a recording through that view
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "engine/attrib.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "sinks/exporter.h"
#include "sinks/html.h"
#include "sinks/jsonl.h"
#include "sinks/line.h"
#include "sinks/metrics.h"
#include "sinks/otlp.h"
#include "sinks/otlp_export.h"
#include "sinks/perfetto.h"
#include "sinks/sink.h"
#include "sinks/summary.h"
#include "sinks/top.h"
#include "capture/live.h"
#include "cli/compare_cmd.h"
#include "cli/options.h"
#include "cli/top_screen.h"
#include "tokenscope.h"

/* What the run writes, and the moment it may start writing it. */
struct outputs {
	const struct options *o;
	struct outfile jsonl_file, rec_file, perfetto_file;
	struct pipeline *pl;
	struct recording *rec;
	bool started;
	struct sinks sinks; /* what the pipeline hands requests, steps and exits to */
	struct jsonl *jsonl;
	struct summary *summary;
	struct metrics *metrics;
	struct exporter *exporter;
	struct buf expo; /* the last exposition */
	struct perfetto *perfetto;
	struct html *html;
	struct otlp *otlp;		 /* --otlp: the spans */
	struct otlp_export *otlp_export; /* and their sending side */
	bool otlp_stopped;
	struct top *top;	   /* `top`: its figures */
	struct top_screen *screen; /* and its terminal, once the run has started */
	bool quit;		   /* the user quit the view */
};

/* --otlp's counts into capture health, where the summary and /metrics say them. */
static void otlp_health(struct outputs *out)
{
	struct otlp_counts n;

	if (!out->otlp_export)
		return;
	otlp_export__counts(out->otlp_export, &n);
	pipeline__set_otlp_counts(out->pl, n.spans_sent, n.spans_dropped, n.retries, n.failures);
}

/* --metrics: the capture loop renders, about once a second, what scrapes then serve. */
static void publish_metrics(void *ctx)
{
	struct outputs *out = ctx;

	otlp_health(out);
	if (out->exporter && !metrics__render(out->metrics, pipeline__health(out->pl), &out->expo))
		exporter__publish(out->exporter, out->expo.p ? out->expo.p : "", out->expo.len);
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
	path = out->o->perfetto_path;
	if (out->perfetto_file.fd >= 0) {
		if (outfile__start(&out->perfetto_file))
			goto fail;
		out->perfetto = perfetto__new(&out->perfetto_file,
					      (uint64_t)out->o->perfetto_max_mb << 20);
		if (!out->perfetto || sinks__add(&out->sinks, &perfetto_sink, out->perfetto)) {
			fprintf(stderr, "tokenscope: out of memory\n");
			return -1;
		}
	}
	if (out->top) {
		out->screen = top_screen__start(out->top, out->pl,
						out->o->replay_path, out->o->speed);
		if (!out->screen)
			return -1; /* said by the screen */
	}
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

/* A replay: its spans' times from the recording's own clock pair. */
static int replay_ready(void *ctx, const struct ts_rec_file_header *h)
{
	struct outputs *out = ctx;

	if (out->otlp)
		otlp__set_clock(out->otlp, (int64_t)h->start_real_ns - (int64_t)h->start_mono_ns, 0);
	return start_outputs(ctx);
}

static int replay_record(void *ctx, void *rec, size_t size)
{
	struct outputs *out = ctx;
	const struct ts_event_hdr *h = rec;

	/* top --replay: each record at its time; the replay ends where the user quit */
	if (out->screen && h->ts_ns && top_screen__pace(out->screen, h->ts_ns)) {
		out->quit = true;
		return 1;
	}
	pipeline__feed(out->pl, rec, size);
	return 0;
}

/* top, live: the capture loop's wake-ups read the view's keys. */
static int poll_screen(void *ctx, uint64_t consumed_ns)
{
	struct outputs *out = ctx;

	return out->screen ? top_screen__poll(out->screen, consumed_ns) : 0;
}

/* The outputs the options ask for, as the pipeline's sinks (sinks/sink.h; the Perfetto
 * timeline joins when the run starts); the engines named on the command line. Returns 0, or
 * -1 having said why. */
static void send_spans(void *ctx, const void *part, size_t len, uint64_t nspans)
{
	otlp_export__send(ctx, part, len, nspans);
}

/* --otlp: its endpoint, its sending thread, its sink. */
static int wire_otlp(struct outputs *out)
{
	struct otlp_endpoint ep;
	char why[256];

	if (otlp_endpoint__parse(out->o->otlp_url, &ep, why, sizeof(why))) {
		fprintf(stderr, "tokenscope: --otlp: %s\n", why);
		return -1;
	}
	if (!(out->otlp_export = otlp_export__start(&ep)) ||
	    !(out->otlp = otlp__new(send_spans, out->otlp_export)) ||
	    sinks__add(&out->sinks, &otlp_sink, out->otlp)) {
		fprintf(stderr, "tokenscope: --otlp: out of memory, or no thread\n");
		return -1;
	}
	if (out->o->otlp_sample_set)
		otlp__set_sample(out->otlp, out->o->otlp_sample);
	otlp__set_steps(out->otlp, out->o->otlp_steps);
	otlp__set_tokens(out->otlp, out->o->otlp_tokens);
	if (out->o->session_idle_s)
		otlp__set_session_idle(out->otlp, (uint64_t)out->o->session_idle_s * 1000000000ull);
	return 0;
}

/* --otlp at the end: what is queued goes (within the endpoint's timeout, 5 s unless
 * OTEL_EXPORTER_OTLP_TIMEOUT says), and what was sent and lost is said. */
static void stop_otlp(struct outputs *out)
{
	struct otlp_counts n;

	if (!out->otlp_export || out->otlp_stopped)
		return;
	out->otlp_stopped = true;
	otlp__flush(out->otlp);
	otlp_export__stop(out->otlp_export);
	otlp_health(out);
	otlp_export__counts(out->otlp_export, &n);
	fprintf(stderr, "tokenscope: otlp: %llu spans sent in %llu posts, %llu dropped, %llu "
			"retries, %llu not sampled%s%s\n",
		(unsigned long long)n.spans_sent, (unsigned long long)n.posts,
		(unsigned long long)n.spans_dropped, (unsigned long long)n.retries,
		(unsigned long long)otlp__unsampled(out->otlp),
		n.last_error[0] ? "; last error: " : "", n.last_error);
}

static int wire_outputs(struct outputs *out)
{
	const struct options *o = out->o;
	struct sinks *s = &out->sinks;

	if (!o->quiet && !o->top && sinks__add(s, &line_sink, stdout))
		goto oom;
	if (out->jsonl_file.fd >= 0 &&
	    (!(out->jsonl = jsonl__new(&out->jsonl_file, o->gaps)) ||
	     sinks__add(s, &jsonl_sink, out->jsonl)))
		goto oom;
	/* the summary first of those that write at the end: it goes to the terminal */
	if (!(out->summary = summary__new(stdout, pipeline__attrib(out->pl), pipeline__judge(out->pl))) ||
	    sinks__add(s, &summary_sink, out->summary))
		goto oom;
	if ((o->metrics_addr || o->metrics_file) &&
	    (!(out->metrics = metrics__new((size_t)o->metrics_max_series, o->metrics_file)) ||
	     sinks__add(s, &metrics_sink, out->metrics)))
		goto oom;
	if (o->top && (!(out->top = top__new(0)) || sinks__add(s, &top_sink, out->top)))
		goto oom;
	if (o->change_window_s)
		summary__set_window(out->summary, (uint64_t)(o->change_window_s * 1e9));
	if (o->html_path &&
	    (!(out->html = html__new(o->html_path)) || sinks__add(s, &html_sink, out->html)))
		goto oom;
	if (out->html)
		html__set_judge(out->html, pipeline__judge(out->pl));
	if (o->otlp_url && wire_otlp(out))
		return -1;
	if (o->metrics_addr) {
		out->exporter = exporter__start(o->metrics_addr);
		if (!out->exporter)
			return -1; /* said by the exporter */
		publish_metrics(out);
	}
	for (int i = 0; i < o->nengines; i++) {
		if (attrib__override(pipeline__attrib(out->pl), o->engines[i])) {
			fprintf(stderr, "tokenscope: invalid --engine '%s' (HTTP_PID=ENGINE_PID[,ENGINE_PID...], "
					"at most %d engine processes)\n",
				o->engines[i], ATTRIB_MAX_PIDS);
			return -1;
		}
	}
	return 0;
oom:
	fprintf(stderr, "tokenscope: out of memory\n");
	return -1;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct outputs out = { .o = &o, .jsonl_file.fd = -1, .rec_file.fd = -1,
			       .perfetto_file.fd = -1 };
	struct live_opts lo;
	int err = 1;

	if (argc > 1 && !strcmp(argv[1], "compare"))
		return compare_cmd__main(argc - 1, argv + 1);
	switch (options__parse(argc, argv, &o)) {
	case 0:
		break;
	case 1:
		return 0; /* the help or the version */
	default:
		return 1;
	}
	lo = (struct live_opts){ .pids = o.pids, .npids = o.npids, .comm = o.comm,
				 .k8s_namespace = o.k8s_namespace, .pod = o.pod,
				 .container = o.container,
				 .ports = o.ports, .nports = o.nports,
				 .no_plaintext = o.no_plaintext, .ringbuf_mb = o.ringbuf_mb,
				 .duration_s = o.duration_s, .verbose = o.verbose,
				 .started = start_outputs, .started_ctx = &out,
				 .tick = publish_metrics, .poll = o.top ? poll_screen : NULL };
	/* Everything that can refuse a live run is checked before any output file is touched;
	 * the files are opened (and checked) now, and emptied only once the run has started. */
	if ((o.top && top_screen__check()) || (!o.replay_path && live__check(&lo)))
		return 1;
	if (o.jsonl_path && outfile__open(&out.jsonl_file, o.jsonl_path))
		return 1;
	if ((o.record_path && outfile__open(&out.rec_file, o.record_path)) ||
	    (o.perfetto_path && outfile__open(&out.perfetto_file, o.perfetto_path)))
		goto cleanup;
	out.pl = pipeline__new(sinks__request, sinks__step, &out.sinks);
	if (!out.pl) {
		fprintf(stderr, "tokenscope: out of memory\n");
		goto cleanup;
	}
	*pipeline__judge(out.pl) = o.judge;
	if (o.session_idle_s)
		sessions__set_idle(pipeline__sessions(out.pl), (uint64_t)o.session_idle_s * 1000000000ull);
	pipeline__set_exit_fn(out.pl, sinks__exit);
	pipeline__set_sched_fn(out.pl, sinks__sched);
	pipeline__set_session_fn(out.pl, sinks__session);
	pipeline__set_time_fn(out.pl, sinks__time);
	if (wire_outputs(&out))
		goto cleanup;
	if (o.replay_path) {
		if (recording__replay(o.replay_path, replay_ready, replay_record, &out))
			goto cleanup;
		pipeline__finish(out.pl, 0);
		if (out.screen && !out.quit)
			top_screen__hold(out.screen);
	} else if (live__run(&lo, out.pl)) {
		goto cleanup;
	}
	/* the view gone first: the summary goes to the terminal as a non-top run's does */
	top_screen__stop(out.screen);
	out.screen = NULL;
	/* --otlp's last spans out (5 s at most), then the summary, --metrics-file, --html */
	stop_otlp(&out);
	err = sinks__finish(&out.sinks, pipeline__health(out.pl)) ? 1 : 0;

cleanup:
	top_screen__stop(out.screen); /* a run that failed: the terminal back, then why */
	/* each output says itself how many records it could not write */
	if (out.started && (out.rec ? recording__close(out.rec) : outfile__close(&out.rec_file)))
		err = 1;
	exporter__stop(out.exporter);
	stop_otlp(&out); /* a run that failed: nothing more is sent */
	buf__free(&out.expo);
	pipeline__free(out.pl);
	/* the outputs after what could still hand them a request */
	jsonl__free(out.jsonl);
	summary__free(out.summary);
	metrics__free(out.metrics);
	html__free(out.html);
	otlp__free(out.otlp);
	otlp_export__free(out.otlp_export);
	top__free(out.top);
	if (out.started && outfile__close(&out.jsonl_file))
		err = 1;
	if (perfetto__close(out.perfetto) ||
	    (out.started && outfile__close(&out.perfetto_file)))
		err = 1;
	if (!out.started) {
		/* the run never began: previous outputs are as they were, new ones are gone */
		outfile__abandon(&out.jsonl_file);
		outfile__abandon(&out.rec_file);
		outfile__abandon(&out.perfetto_file);
	}
	return err;
}
