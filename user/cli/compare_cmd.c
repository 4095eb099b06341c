// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tokenscope compare BEFORE AFTER [--json]`: why TTFT changed (llm/compare.h). Each file is
 * a run's JSON Lines (-o) or its recording (-r), which is replayed through the pipeline into
 * the same JSON Lines first, in memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/outfile.h"
#include "llm/compare.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "sinks/jsonl.h"
#include "sinks/sink.h"
#include "cli/compare_cmd.h"

static const char usage_text[] =
	"Usage: tokenscope compare BEFORE AFTER [--json]\n"
	"\n"
	"Why TTFT changed between two runs: per group (process, role, API, model), the change in\n"
	"TTFT p50 and p99 split into queueing, prefill (longer prompts, fewer cached tokens, a\n"
	"slower engine) and emit and network, with a cause (capacity, prompt, cache, engine,\n"
	"network, or none within the runs' noise) and the evidence; one verdict line at the end.\n"
	"BEFORE and AFTER are JSON Lines (-o) or recordings (-r). --json: the same as one JSON\n"
	"document. Exit status: 0, 1 when an input could not be read (docs/judgements.md).\n";

struct replay {
	struct pipeline *pl;
	struct outfile *out;
};

static int replay_ready(void *ctx, const struct ts_rec_file_header *h)
{
	struct replay *r = ctx;

	(void)h;
	return outfile__start(r->out);
}

static int replay_record(void *ctx, void *rec, size_t size)
{
	struct replay *r = ctx;

	pipeline__feed(r->pl, rec, size);
	return 0;
}

/* A recording's requests and steps as its JSON Lines, into a file in memory: a stream to read
 * them from, or NULL having said why. */
static FILE *replayed(const char *path)
{
	struct outfile out = { .path = path, .fd = memfd_create("tokenscope-compare", 0) };
	struct sinks sinks = { 0 };
	struct jsonl *j = NULL;
	struct replay r = { .out = &out };
	FILE *f = NULL;
	int fd;

	if (out.fd < 0) {
		fprintf(stderr, "tokenscope: compare: %s\n", strerror(errno));
		return NULL;
	}
	if (!(j = jsonl__new(&out, false)) || sinks__add(&sinks, &jsonl_sink, j) ||
	    !(r.pl = pipeline__new(sinks__request, sinks__step, &sinks))) {
		fprintf(stderr, "tokenscope: compare: out of memory\n");
		goto done;
	}
	pipeline__set_exit_fn(r.pl, sinks__exit);
	pipeline__set_sched_fn(r.pl, sinks__sched);
	pipeline__set_session_fn(r.pl, sinks__session);
	if (recording__replay(path, replay_ready, replay_record, &r))
		goto done;
	pipeline__finish(r.pl, 0);
	if (sinks__finish(&sinks, pipeline__health(r.pl)) || outfile__flush(&out))
		goto done;
	fd = dup(out.fd);
	if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0 || !(f = fdopen(fd, "r"))) {
		fprintf(stderr, "tokenscope: compare: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
	}
done:
	pipeline__free(r.pl);
	jsonl__free(j);
	outfile__close(&out);
	return f;
}

/* One side's records: 0, or -1 having said why. */
static int load(struct compare *c, enum cmp_side side, const char *path)
{
	char magic[8] = { 0 }, *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "tokenscope: compare: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fread(magic, 1, sizeof(magic), f) == sizeof(magic) &&
	    !memcmp(magic, TS_RECORDING_MAGIC, sizeof(magic))) {
		fclose(f);
		if (!(f = replayed(path)))
			return -1;
	} else {
		rewind(f);
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		if (n == 1 && line[0] == '\n')
			continue;
		compare__line(c, side, line, (size_t)n);
	}
	free(line);
	fclose(f);
	if (compare__bad(c, side))
		fprintf(stderr, "tokenscope: compare: %s: %llu lines are not JSON objects (left out)\n",
			path, (unsigned long long)compare__bad(c, side));
	if (!compare__requests(c, side)) {
		fprintf(stderr, "tokenscope: compare: %s: no request records\n", path);
		return -1;
	}
	return 0;
}

int compare_cmd__main(int argc, char **argv)
{
	const char *paths[2] = { NULL, NULL };
	bool json = false;
	int npaths = 0, rc = 0;
	enum cmp_cause cause;
	struct compare *c;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "tokenscope: compare: unknown option %s\n%s", argv[i], usage_text);
			return 2;
		} else if (npaths < 2) {
			paths[npaths++] = argv[i];
		} else {
			fprintf(stderr, "tokenscope: compare takes two files\n%s", usage_text);
			return 2;
		}
	}
	if (npaths != 2) {
		fprintf(stderr, "tokenscope: compare takes two files\n%s", usage_text);
		return 2;
	}
	c = compare__new();
	if (!c) {
		fprintf(stderr, "tokenscope: out of memory\n");
		return 1;
	}
	if (load(c, CMP_BEFORE, paths[0]) || load(c, CMP_AFTER, paths[1]))
		rc = 1;
	else if (compare__report(c, stdout, json, &cause))
		rc = 1, fprintf(stderr, "tokenscope: compare: out of memory\n");
	compare__free(c);
	return rc;
}
