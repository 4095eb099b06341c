// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Function symbols to file offsets (user/capture/elfsym.c), the offsets uprobes attach at.
 * Ground truth is this process's own memory: where the dynamic linker put a function
 * (dlsym, or the function's address) and the mapping that holds it (/proc/self/maps) give its
 * file offset, without reading the ELF file. Covered: a library's exported functions, found
 * through its GNU hash table (libcmocka's, one of them named "_c...", as node's C++ names
 * are "_Z..."), this binary's own functions, in .symtab only, and hostile files. Then
 * OpenSSL's inner read and write functions (user/capture/ssl_inner.c), found from the code of
 * the functions that call them: on Debian 12's libssl3 (3.0) code, on variants of it that
 * must not be taken, and on the library this process maps, against its code in memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/elfsym.h"
#include "capture/procmaps.h"
#include "capture/ssl_inner.h"

/* Functions of this binary: global, not exported (no -rdynamic), so in .symtab alone. */
__attribute__((noinline, used)) void elfsym_target_plain(void)
{
	__asm__ volatile("");
}

__attribute__((noinline, used)) void _elfsym_target_underscore(void)
{
	__asm__ volatile("nop");
}

/* The file offset of the code at addr, and the file that holds it, from /proc/self/maps. */
static uint64_t offset_in_mapping(const void *addr, char *path, size_t n)
{
	char line[PATH_MAX + 256];
	uint64_t a = (uint64_t)(uintptr_t)addr, off = 0;
	struct maps_entry m;
	FILE *f = fopen("/proc/self/maps", "re");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (procmaps__parse(line, &m) || !m.path || a < m.start || a >= m.end)
			continue;
		off = a - m.start + m.offset;
		snprintf(path, n, "%s", m.path);
		break;
	}
	fclose(f);
	assert_true(off);
	return off;
}

static void test_library_exports_through_gnu_hash(void **state)
{
	static const char *const names[] = { "_cmocka_run_group_tests", "no_such_function_here",
					     "mock_assert", "_assert_true", "cmocka_set_message_output" };
	const size_t n = sizeof(names) / sizeof(names[0]);
	char path[PATH_MAX], other[PATH_MAX];
	uint64_t want[5] = { 0 }, got[5];

	(void)state;
	for (size_t k = 0; k < n; k++) {
		void *fn = dlsym(RTLD_DEFAULT, names[k]);

		if (k == 1) {
			assert_null(fn);
			continue;
		}
		assert_non_null(fn);
		want[k] = offset_in_mapping(fn, k == 0 ? path : other, sizeof(path));
		if (k)
			assert_string_equal(other, path); /* all of them libcmocka's */
	}
	assert_int_equal(elfsym__offsets(path, names, n, got), (int)n - 1);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(got[k], want[k]);
}

static void test_own_functions_in_symtab(void **state)
{
	static const char *const names[] = { "elfsym_target_plain", "_elfsym_target_underscore",
					     "elfsym_target_absent" };
	char path[PATH_MAX], path2[PATH_MAX];
	uint64_t got[3], plain, underscore;

	(void)state;
	plain = offset_in_mapping((void *)elfsym_target_plain, path, sizeof(path));
	underscore = offset_in_mapping((void *)_elfsym_target_underscore, path2, sizeof(path2));
	assert_string_equal(path, path2);
	assert_int_equal(elfsym__offsets(path, names, 3, got), 2);
	assert_int_equal(got[0], plain);
	assert_int_equal(got[1], underscore);
	assert_int_equal(got[2], 0);

	/* in two steps, as attach.c looks: none is exported; then .symtab, keeping an offset
	 * already found (here one made up for the absent name) */
	assert_int_equal(elfsym__dynamic_offsets(path, names, 3, got), 0);
	assert_int_equal(got[0], 0);
	assert_int_equal(got[1], 0);
	got[2] = 12345;
	assert_int_equal(elfsym__static_offsets(path, names, 3, got), 3);
	assert_int_equal(got[0], plain);
	assert_int_equal(got[1], underscore);
	assert_int_equal(got[2], 12345);
}

/* Many names, most absent: the table's collisions resolve to the right ones. */
static void test_many_names(void **state)
{
	static char storage[200][32];
	const char *names[200];
	uint64_t got[200], plain;
	char path[PATH_MAX];

	(void)state;
	for (int k = 0; k < 200; k++) {
		snprintf(storage[k], sizeof(storage[k]), "elfsym_target_%d", k);
		names[k] = storage[k];
	}
	names[137] = "elfsym_target_plain";
	plain = offset_in_mapping((void *)elfsym_target_plain, path, sizeof(path));
	assert_int_equal(elfsym__offsets(path, names, 200, got), 1);
	for (int k = 0; k < 200; k++)
		assert_int_equal(got[k], k == 137 ? plain : 0);
	/* more names than the table holds: refused, not cut */
	{
		const char *too_many[300];
		uint64_t many_got[300];

		for (int k = 0; k < 300; k++)
			too_many[k] = "elfsym_target_plain";
		assert_int_equal(elfsym__offsets(path, too_many, 300, many_got), -E2BIG);
	}
}

/* A copy of a library with its bytes damaged from `from` on: any answer but a crash or a
 * read past the file (ASan, in the sanitized unit run) is fine; then the undamaged copy. */
static void write_damaged(const char *src, const char *dst, size_t keep, int scramble)
{
	struct stat st;
	char *buf;
	FILE *f = fopen(src, "rb");

	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	if (scramble)
		for (size_t i = 64; i < (size_t)st.st_size; i += 7)
			buf[i] ^= (char)(i * 31);
	f = fopen(dst, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, keep < (size_t)st.st_size ? keep : (size_t)st.st_size, f),
			 keep < (size_t)st.st_size ? keep : (size_t)st.st_size);
	fclose(f);
	free(buf);
}

static void test_hostile_files(void **state)
{
	static const char *const names[] = { "_cmocka_run_group_tests", "mock_assert" };
	char lib[PATH_MAX], tmp[] = "/tmp/tokenscope-elfsym-XXXXXX";
	uint64_t got[2];
	int fd;

	(void)state;
	offset_in_mapping(dlsym(RTLD_DEFAULT, "mock_assert"), lib, sizeof(lib));
	fd = mkstemp(tmp);
	assert_true(fd >= 0);
	close(fd);

	assert_int_equal(elfsym__offsets("/nonexistent/file", names, 2, got), -ENOENT);
	write_damaged("/proc/self/status", tmp, 1 << 20, 0); /* text, not ELF */
	assert_int_equal(elfsym__offsets(tmp, names, 2, got), -ENOEXEC);
	for (size_t keep = 16; keep < (1 << 20); keep = keep * 3 + 1) {
		write_damaged(lib, tmp, keep, 0); /* cut short */
		assert_true(elfsym__offsets(tmp, names, 2, got) <= 2);
		write_damaged(lib, tmp, keep, 1); /* cut and scrambled */
		assert_true(elfsym__offsets(tmp, names, 2, got) <= 2);
	}
	write_damaged(lib, tmp, SIZE_MAX, 0);
	assert_int_equal(elfsym__offsets(tmp, names, 2, got), 2);
	unlink(tmp);
}

/* Debian 12's libssl3 3.0.19: SSL_read_ex at 0x354c0 (sub $8,%rsp; call 0x35290; ...) and
 * SSL_read at 0x35430 (its checks, then the same call, then ret), and the first bytes of the
 * function both call (push %r13; push %r12; ...). */
static const uint8_t read_ex[] = { 0x48, 0x83, 0xec, 0x08, 0xe8, 0xc7, 0xfd, 0xff, 0xff,
				   0x31, 0xd2, 0x85, 0xc0, 0x0f, 0x48, 0xc2, 0xc3 };
static const uint8_t read_outer[] = {
	0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48,
	0x89, 0x44, 0x24, 0x08, 0x31, 0xc0, 0x85, 0xd2, 0x78, 0x2f, 0x48, 0x89, 0xe1, 0x48,
	0x63, 0xd2, 0xe8, 0x3d, 0xfe, 0xff, 0xff, 0x85, 0xc0, 0x7e, 0x03, 0x8b, 0x04, 0x24,
	0x48, 0x83, 0xc4, 0x18, 0xc3,
};
static const uint8_t read_inner[] = { 0x41, 0x55, 0x41, 0x54, 0x55, 0x53 };

static void test_ssl_inner_from_code(void **state)
{
	/* the same wrapper, the fourth argument (rcx) set before its call: not passed on */
	static const uint8_t sets_rcx[] = { 0x48, 0x83, 0xec, 0x08, 0x31, 0xc9, 0xe8, 0xc5, 0xfd,
					    0xff, 0xff, 0xc3 };
	/* a branch before the call (a check of its own): not a plain wrapper */
	static const uint8_t branches[] = { 0x85, 0xd2, 0x78, 0x10, 0xe8, 0xc7, 0xfd, 0xff, 0xff,
					    0xc3 };
	/* endbr64; jmp 0x35290 (a tail call, from 0x354c0): passed on */
	static const uint8_t tail[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 0xc7, 0xfd, 0xff, 0xff };
	/* SSL_read returning before its call: the call after the ret is not its path (with a
	 * nop in the ret's place, it is) */
	static const uint8_t returns_first[] = { 0x31, 0xc0, 0xc3, 0xe8, 0x3d, 0xfe, 0xff, 0xff };
	static const uint8_t nop_first[] = { 0x31, 0xc0, 0x90, 0xe8, 0x3d, 0xfe, 0xff, 0xff };
	static const uint8_t endbr_push[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x48 };
	static const uint8_t sub_first[] = { 0x48, 0x83, 0xec, 0x38, 0x53 };
	static const uint8_t endbr_sub[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x38 };

	(void)state;
	assert_int_equal(ssl_inner__passed_to(read_ex, sizeof(read_ex), 0x354c0), 0x35290);
	assert_true(ssl_inner__calls(read_outer, sizeof(read_outer), 0x35430, 0x35290));
	assert_false(ssl_inner__calls(read_outer, sizeof(read_outer), 0x35430, 0x35291));
	assert_false(ssl_inner__calls(read_outer, 30, 0x35430, 0x35290)); /* cut before it */
	assert_int_equal(ssl_inner__emulated_at(read_inner, sizeof(read_inner)), 0);

	assert_int_equal(ssl_inner__passed_to(sets_rcx, sizeof(sets_rcx), 0x354c0), 0);
	assert_int_equal(ssl_inner__passed_to(branches, sizeof(branches), 0x354c0), 0);
	assert_int_equal(ssl_inner__passed_to(tail, sizeof(tail), 0x354c0), 0x35290);
	assert_int_equal(ssl_inner__passed_to(read_ex, 6, 0x354c0), 0); /* cut in its call */
	assert_false(ssl_inner__calls(returns_first, sizeof(returns_first), 0x3544b, 0x35290));
	assert_true(ssl_inner__calls(nop_first, sizeof(nop_first), 0x3544b, 0x35290));
	assert_int_equal(ssl_inner__emulated_at(endbr_push, sizeof(endbr_push)), 4);
	assert_int_equal(ssl_inner__emulated_at(sub_first, sizeof(sub_first)), -1);
	assert_int_equal(ssl_inner__emulated_at(endbr_sub, sizeof(endbr_sub)), -1);
	assert_int_equal(ssl_inner__emulated_at(read_inner, 1), -1); /* cut in its push */
}

/* On the libssl this process maps: each direction's inner function is the target of the
 * call in SSL_read_ex's (SSL_write_ex's) code as it lies in memory, the two differ, and none
 * is found from a pair that does not share it (SSL_read with SSL_write_ex). */
static void test_ssl_inner_in_libssl(void **state)
{
	static const char *const names[] = { "SSL_read", "SSL_read_ex", "SSL_write",
					     "SSL_write_ex" };
	char path[PATH_MAX], other[PATH_MAX];
	uint64_t off[4], inner[2];
	void *lib = dlopen("libssl.so.3", RTLD_NOW);

	(void)state;
	assert_non_null(lib);
	for (int k = 0; k < 4; k++)
		off[k] = offset_in_mapping(dlsym(lib, names[k]), k ? other : path, sizeof(path));
	assert_string_equal(other, path);
	for (int d = 0; d < 2; d++) {
		const uint8_t *ex = dlsym(lib, names[2 * d + 1]);
		int32_t rel;

		inner[d] = ssl_inner__find(path, off[2 * d], off[2 * d + 1]);
		assert_true(inner[d]);
		/* Debian's code: sub $8,%rsp, then the call's e8 and its 32-bit displacement */
		assert_int_equal(ex[4], 0xe8);
		memcpy(&rel, ex + 5, sizeof(rel));
		assert_int_equal(inner[d], offset_in_mapping(ex + 9 + rel, other, sizeof(other)));
	}
	assert_true(inner[0] != inner[1]);
	/* the four places as attach.c probes them: each _ex form's moved inward, the other off */
	{
		uint64_t moved[4] = { off[0], off[1], off[2], off[3] };

		assert_int_equal(ssl_inner__move(path, moved), 3);
		assert_int_equal(moved[0], 0);
		assert_int_equal(moved[1], inner[0]);
		assert_int_equal(moved[2], 0);
		assert_int_equal(moved[3], inner[1]);
	}
	assert_int_equal(ssl_inner__find(path, off[0], off[3]), 0);
	assert_int_equal(ssl_inner__find(path, 0, off[1]), 0);
	assert_int_equal(ssl_inner__find("/nonexistent/libssl.so.3", off[0], off[1]), 0);
	dlclose(lib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_library_exports_through_gnu_hash),
		cmocka_unit_test(test_own_functions_in_symtab),
		cmocka_unit_test(test_many_names),
		cmocka_unit_test(test_hostile_files),
		cmocka_unit_test(test_ssl_inner_from_code),
		cmocka_unit_test(test_ssl_inner_in_libssl),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
