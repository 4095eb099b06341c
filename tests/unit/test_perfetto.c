// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Perfetto writer: whole packets only, under its size cap, and what it cut counted. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/outfile.h"
#include "sinks/perfetto.h"

#define MS 1000000ull

static void step(struct perfetto *pf, uint64_t start)
{
	struct engine_step s = { .source = STEP_SOURCE_LLAMA, .pid = 7, .comm = "node",
				 .start_ns = start, .end_ns = start + MS, .host_seen_ns = start + MS,
				 .context = 0xa0, .tokens = 4, .nseqs = 1 };

	s.seqs[0] = (struct step_seq){ 0, 4, 0, 3, 1 };
	perfetto__step(pf, &s);
}

/* The file is Trace.packet fields, each whole: field 1, length-delimited, to the end. */
static size_t whole_packets(const uint8_t *p, size_t n)
{
	size_t at = 0, count = 0;

	while (at < n) {
		uint64_t len = 0;
		int shift = 0;

		assert_int_equal(p[at++], 0x0a);
		do {
			assert_true(at < n);
			len |= (uint64_t)(p[at] & 0x7f) << shift;
			shift += 7;
		} while (p[at++] & 0x80);
		assert_true(at + len <= n);
		at += len;
		count++;
	}
	return count;
}

static void test_size_cap(void **state)
{
	char path[] = "/tmp/tokenscope-pf-XXXXXX";
	uint8_t data[8192];
	struct outfile f = { .fd = -1 };
	struct perfetto *pf;
	FILE *in;
	size_t n;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(outfile__open(&f, path), 0);
	assert_int_equal(outfile__start(&f), 0);
	pf = perfetto__new(&f, 4096);
	assert_non_null(pf);
	for (int i = 0; i < 200; i++)
		step(pf, 10 * MS + (uint64_t)i * 2 * MS);
	assert_true(perfetto__cut(pf) > 0); /* 200 steps do not fit in 4 KiB */
	assert_int_equal(perfetto__close(pf), 0); /* a cut is said, not a failure */
	assert_int_equal(outfile__close(&f), 0);
	in = fopen(path, "rb");
	n = fread(data, 1, sizeof(data), in);
	fclose(in);
	assert_true(n > 0 && n <= 4096);
	assert_true(whole_packets(data, n) > 3);
	/* the first packet: the clock snapshot (TracePacket field 6) whose primary_trace_clock
	 * (field 2, varint) is CLOCK_MONOTONIC (3) */
	assert_non_null(memmem(data, 16, "\x32", 1));
	assert_non_null(memmem(data, 40, "\x10\x03", 2));
	unlink(path);
}

static uint64_t varint(const uint8_t *p, size_t n, size_t *at)
{
	uint64_t v = 0;

	for (int shift = 0; *at < n; shift += 7) {
		uint8_t b = p[(*at)++];

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	return v;
}

/* Every slice the file begins it also ends, on its track (TracePacket.track_event, field 11:
 * its type, field 9, and track_uuid, field 11); returns the slices. */
static size_t slices_balanced(const uint8_t *p, size_t n)
{
	uint64_t tracks[512];
	int depth[512];
	size_t ntracks = 0, slices = 0, at = 0;

	while (at < n) {
		size_t end, f;

		assert_int_equal(p[at++], 0x0a);
		end = varint(p, n, &at);
		end += at;
		for (f = at; f < end;) {
			uint64_t tag = varint(p, end, &f), len;
			uint64_t type = 0, track = 0;

			if ((tag & 7) == 0) {
				varint(p, end, &f);
				continue;
			}
			if ((tag & 7) == 1) {
				f += 8;
				continue;
			}
			assert_int_equal(tag & 7, 2);
			len = varint(p, end, &f);
			if (tag >> 3 == 11) { /* the TrackEvent */
				for (size_t e = f; e < f + len;) {
					uint64_t t = varint(p, f + len, &e);

					if ((t & 7) == 0) {
						uint64_t v = varint(p, f + len, &e);

						if (t >> 3 == 9)
							type = v;
						else if (t >> 3 == 11)
							track = v;
					} else if ((t & 7) == 1) {
						e += 8;
					} else {
						e += varint(p, f + len, &e);
					}
				}
				if (type == 1 || type == 2) {
					size_t k;

					for (k = 0; k < ntracks && tracks[k] != track; k++)
						;
					if (k == ntracks) {
						assert_true(ntracks < 512);
						tracks[ntracks] = track;
						depth[ntracks++] = 0;
					}
					depth[k] += type == 1 ? 1 : -1;
					assert_true(depth[k] >= 0); /* an end with no begin */
					slices += type == 1;
				}
			}
			f += len;
		}
		at = end;
	}
	for (size_t k = 0; k < ntracks; k++)
		assert_int_equal(depth[k], 0); /* a slice left open */
	return slices;
}

static void request(struct perfetto *pf, uint64_t id, uint64_t start, int ntok)
{
	struct request *r = request__new();
	struct request_metrics m;
	char model[64];

	assert_non_null(r);
	r->id = id;
	r->pid = 9;
	r->role = ROLE_SERVER;
	snprintf(r->comm, sizeof(r->comm), "vllm");
	snprintf(model, sizeof(model), "model-%.*s", (int)(id % 40), "abcdefghijklmnopqrstuvwxyz0123456789ABCD");
	assert_true(request__set_str(&r->model, model, strlen(model)));
	r->start_ns = start;
	for (int i = 0; i < ntok; i++)
		request__token(r, start + (20 + 5 * (uint64_t)i) * MS);
	r->end_ns = r->last_token_ns + MS;
	r->response_done = true;
	request__metrics(r, &m);
	perfetto__request(pf, r, &m);
	request__free(r);
}

/* A cut anywhere leaves no slice open (issue 38, case 7: two requests ran to the end of the
 * timeline): requests and steps of varied sizes, under caps from 1 to 19 KiB. */
static void test_cut_leaves_no_slice_open(void **state)
{
	static uint8_t data[64 * 1024];

	for (uint64_t cap = 1024; cap <= 19 * 1024; cap += 1536) {
		char path[] = "/tmp/tokenscope-pf-XXXXXX";
		struct outfile f = { .fd = -1 };
		struct perfetto *pf;
		FILE *in;
		size_t n;
		int fd = mkstemp(path);

		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(outfile__open(&f, path), 0);
		assert_int_equal(outfile__start(&f), 0);
		pf = perfetto__new(&f, cap);
		for (int i = 0; i < 60; i++) {
			request(pf, (uint64_t)i + 1, 10 * MS + (uint64_t)i * 3 * MS, 1 + i % 7);
			step(pf, 11 * MS + (uint64_t)i * 3 * MS);
		}
		assert_true(perfetto__cut(pf) > 0);
		assert_int_equal(perfetto__close(pf), 0);
		assert_int_equal(outfile__close(&f), 0);
		in = fopen(path, "rb");
		n = fread(data, 1, sizeof(data), in);
		fclose(in);
		unlink(path);
		assert_true(n <= cap);
		assert_true(slices_balanced(data, n) > 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_cut_leaves_no_slice_open),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
