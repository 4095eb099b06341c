// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Naming a runtime kernel stub of a process that is gone before its exec record is read: the
 * record's text mapping stands in for /proc/PID/maps, only when the file at its path is the
 * one the kernel mapped. Ground truth: this test binary's own text and a function in it.
 */
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/cuda_names.h"
#include "capture/procmaps.h"

/* No process has these pids (above any pid_max): /proc/PID is absent, as for a reaped one. */
#define GONE_PID 4294967200u

__attribute__((noinline)) void stub_under_test(void)
{
	__asm__ volatile("");
}

/* The exec record the kernel side would send for this binary, as pid. */
static struct ts_exec exec_record_of_self(uint32_t pid)
{
	char line[PATH_MAX + 256];
	uint64_t addr = (uint64_t)(uintptr_t)&stub_under_test;
	struct ts_exec e = { 0 };
	struct maps_entry m;
	struct stat st;
	FILE *f = fopen("/proc/self/maps", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (procmaps__parse(line, &m) || !m.path || addr < m.start || addr >= m.end)
			continue;
		e.text_start = m.start;
		e.text_end = m.end;
		e.text_offset = m.offset;
		snprintf(e.path, sizeof(e.path), "%s", m.path);
		break;
	}
	fclose(f);
	assert_true(e.text_start);
	assert_int_equal(stat(e.path, &st), 0);
	e.hdr.type = TS_EV_EXEC;
	e.hdr.size = sizeof(e);
	e.hdr.pid = pid;
	e.ino = st.st_ino;
	e.dev = major(st.st_dev) << 20 | minor(st.st_dev);
	e.ppid = (uint32_t)getpid();
	return e;
}

static void name_of(struct cuda_names *k, uint32_t pid, char *out, size_t n)
{
	cuda_names__name(k, pid, (uint64_t)(uintptr_t)&stub_under_test, out, n);
}

static void test_gone_process_named_from_exec_record(void **state)
{
	struct cuda_names *k = cuda_names__new();
	struct ts_exec e = exec_record_of_self(GONE_PID);
	char name[256];

	assert_int_equal(cuda_names__snapshot(k, GONE_PID), -1); /* no /proc/PID */
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, ""); /* nothing to name it from yet */
	cuda_names__forget(k, GONE_PID);

	assert_int_equal(cuda_names__snapshot_exec(k, &e), 0);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "stub_under_test");

	/* the process's exit forgets it: its addresses mean nothing any more */
	cuda_names__forget(k, GONE_PID);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "");
	cuda_names__free(k);
}

/* Through the live side's entry point, as the reader calls it on each record. */
static void feed_nothing(void *ctx, void *rec, size_t size)
{
	fail_msg("an exec record must not produce records");
}

static void test_exec_record_through_before_hook(void **state)
{
	struct cuda_names *k = cuda_names__new();
	struct ts_exec e = exec_record_of_self(GONE_PID);
	char name[256];

	cuda_names__before(k, &e, sizeof(e), feed_nothing, NULL);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "stub_under_test");
	/* a header-only exec record (an older recording's size, or the kernel's none) adds none */
	cuda_names__forget(k, GONE_PID);
	cuda_names__before(k, &e, sizeof(struct ts_proc), feed_nothing, NULL);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "");
	cuda_names__free(k);
}

/*
 * The race CI hit: a short program that has exited but is not reaped yet when its exec record
 * is read. Its /proc/PID/maps still opens, and reads empty; the record's mapping must name
 * it all the same, however late the reader is.
 */
static void test_exited_unreaped_process_named(void **state)
{
	struct cuda_names *k = cuda_names__new();
	char fn[64], name[256], line[256];
	siginfo_t info;
	pid_t child = fork();
	FILE *f;

	if (!child)
		_exit(0);
	assert_true(child > 0);
	/* until it is a zombie, reaping it only after the checks */
	assert_int_equal(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
	snprintf(fn, sizeof(fn), "/proc/%d/maps", child);
	f = fopen(fn, "re");
	assert_non_null(f); /* the state of the race: maps opens... */
	assert_null(fgets(line, sizeof(line), f)); /* ...and is empty */
	fclose(f);

	struct ts_exec e = exec_record_of_self((uint32_t)child); /* forked: the same text */
	cuda_names__before(k, &e, sizeof(e), feed_nothing, NULL);
	name_of(k, (uint32_t)child, name, sizeof(name));
	assert_string_equal(name, "stub_under_test");
	cuda_names__free(k);
	assert_int_equal(waitpid(child, NULL, 0), child);
}

/* A pid's new program (exec): nothing of its earlier one names its addresses. */
static void test_exec_replaces_the_earlier_program(void **state)
{
	struct cuda_names *k = cuda_names__new();
	struct ts_exec e = exec_record_of_self(GONE_PID);
	char name[256];

	assert_int_equal(cuda_names__snapshot_exec(k, &e), 0);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "stub_under_test");
	e.ino++; /* the next program's file is not there any more */
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	assert_false(cuda_names__known(k, GONE_PID, (uint64_t)(uintptr_t)&stub_under_test));
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "");
	cuda_names__free(k);
}

/* Never a name from another file: the inode and device decide, not the path. */
static void test_other_file_refused(void **state)
{
	struct cuda_names *k = cuda_names__new();
	struct ts_exec good = exec_record_of_self(GONE_PID), e;
	char name[256];

	e = good;
	e.ino++; /* the path now holds another file (replaced since the exec) */
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	e = good;
	e.dev ^= 1;
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	e = good;
	e.text_start = 0; /* the kernel found no text mapping */
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	e = good;
	e.path[0] = 0; /* no path: deeper or longer than the record holds */
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	e = good;
	memmove(e.path, e.path + 1, strlen(e.path)); /* relative: no working directory to use */
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	e = good;
	memset(e.path, 'a', sizeof(e.path)); /* no NUL inside: cut, never read past */
	e.path[0] = '/';
	assert_int_equal(cuda_names__snapshot_exec(k, &e), -1);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "");

	/* the parent gone too: the path is tried as it is */
	e = good;
	e.ppid = GONE_PID + 1;
	assert_int_equal(cuda_names__snapshot_exec(k, &e), 0);
	name_of(k, GONE_PID, name, sizeof(name));
	assert_string_equal(name, "stub_under_test");
	cuda_names__free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gone_process_named_from_exec_record),
		cmocka_unit_test(test_exec_record_through_before_hook),
		cmocka_unit_test(test_other_file_refused),
		cmocka_unit_test(test_exited_unreaped_process_named),
		cmocka_unit_test(test_exec_replaces_the_earlier_program),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
