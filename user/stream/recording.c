// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stream/recording.h"

#define REC_MAX_SIZE (sizeof(struct ts_tls_data) + (1u << 20))

struct recording {
	struct outfile *out;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct recording *recording__create(struct outfile *out)
{
	struct ts_rec_file_header h = { 0 };
	struct recording *r;

	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->out = out;
	memcpy(h.magic, TS_RECORDING_MAGIC, sizeof(h.magic));
	h.version = TS_RECORDING_VERSION;
	h.header_size = sizeof(h);
	h.start_mono_ns = clock_ns(CLOCK_MONOTONIC);
	h.start_real_ns = clock_ns(CLOCK_REALTIME);
	h.chunk_max = TS_CHUNK_MAX;
	h.counters = TS_CNT__MAX;
	if (outfile__record(out, &h, sizeof(h), true)) {
		free(r);
		return NULL;
	}
	return r;
}

int recording__write(struct recording *r, const void *rec, size_t size)
{
	const struct ts_event_hdr *h = rec;

	/* A live run reads its counters each second: written out then, a tracer killed (-9)
	 * loses at most the last second of its recording. */
	return outfile__record(r->out, rec, size, h->type == TS_REC_COUNTERS);
}

int recording__close(struct recording *r)
{
	int err;

	if (!r)
		return 0;
	err = outfile__close(r->out);
	free(r);
	return err;
}

/* Skip n bytes of a stream (a pipe cannot seek). */
static bool skip(FILE *f, uint64_t n)
{
	char buf[256];

	while (n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		if (fread(buf, 1, k, f) != k)
			return false;
		n -= k;
	}
	return true;
}

int recording__replay(const char *path, recording_ready_fn ready, recording_fn fn, void *ctx)
{
	bool is_stdin = !strcmp(path, "-");
	FILE *f = is_stdin ? stdin : fopen(path, "rb");
	int err;

	struct stat st;

	if (!f) {
		fprintf(stderr, "tokenscope: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!is_stdin && !fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tokenscope: %s is a directory, not a recording (report wants the "
				"file -r wrote)\n", path);
		fclose(f);
		return -1;
	}
	err = recording__replay_stream(f, is_stdin ? "standard input" : path, ready, fn, ctx);
	if (!is_stdin)
		fclose(f);
	return err;
}

/* Read front to back, never seeking: a pipe, a FIFO or standard input works. */
int recording__replay_stream(FILE *f, const char *path, recording_ready_fn ready,
			     recording_fn fn, void *ctx)
{
	struct ts_rec_file_header h;
	struct ts_event_hdr eh;
	uint8_t *buf = NULL;
	uint64_t offset;
	int err = -1;

	if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, TS_RECORDING_MAGIC, 8)) {
		fprintf(stderr, "tokenscope: %s is not a tokenscope recording\n", path);
		goto out;
	}
	if (h.version != TS_RECORDING_VERSION) {
		fprintf(stderr, "tokenscope: %s: recording version %u is not supported (want %u)\n",
			path, h.version, TS_RECORDING_VERSION);
		goto out;
	}
	if (h.header_size < sizeof(h)) {
		fprintf(stderr, "tokenscope: %s: corrupt header: it says it is %u bytes long, but a "
				"version %u header has %zu\n",
			path, h.header_size, TS_RECORDING_VERSION, sizeof(h));
		goto out;
	}
	if (!skip(f, h.header_size - sizeof(h))) {
		fprintf(stderr, "tokenscope: %s: recording ends inside its header\n", path);
		goto out;
	}
	offset = h.header_size;
	buf = malloc(REC_MAX_SIZE);
	if (!buf || (ready && ready(ctx, &h)))
		goto out;
	for (;;) {
		size_t n = fread(&eh, 1, sizeof(eh), f);

		if (n == 0 && feof(f))
			break;
		if (n != sizeof(eh) || eh.size < sizeof(eh) || eh.size > REC_MAX_SIZE) {
			fprintf(stderr, "tokenscope: %s: truncated or corrupt record at offset %llu\n",
				path, (unsigned long long)offset);
			goto out;
		}
		memcpy(buf, &eh, sizeof(eh));
		if (fread(buf + sizeof(eh), 1, eh.size - sizeof(eh), f) != eh.size - sizeof(eh)) {
			fprintf(stderr, "tokenscope: %s: recording ends inside the record at offset "
					"%llu\n",
				path, (unsigned long long)offset);
			goto out;
		}
		offset += eh.size;
		if (fn(ctx, buf, eh.size))
			break;
	}
	err = 0;
out:
	free(buf);
	return err;
}
