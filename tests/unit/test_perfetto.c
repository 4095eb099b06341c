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
#include "out/perfetto.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
