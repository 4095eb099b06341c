// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The small shared pieces: the growable buffer's limit, the k-th smallest, the /proc/PID/maps
 * line parser, a request's strings. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/pidset.h"
#include "base/stats.h"
#include "llm/group.h"
#include "llm/request.h"
#include "capture/llama_layout.h"
#include "capture/procmaps.h"
#include "capture/tracefs.h"

static void test_buf_limit_is_sticky(void **state)
{
	struct buf b = { 0 };

	assert_int_equal(buf__add(&b, "abc", 3, 5), 0);
	assert_int_equal(buf__add(&b, "de", 2, 5), 0); /* exactly max */
	assert_string_equal(b.p, "abcde");
	assert_int_equal(buf__add(&b, "f", 1, 5), -1);
	assert_true(b.overflow);
	assert_int_equal(buf__add(&b, "", 0, 5), -1); /* stays overflowed */
	assert_int_equal(b.len, 5);
	buf__reset(&b);
	assert_false(b.overflow);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.p, "");
	assert_int_equal(buf__add(&b, "xy", 2, 5), 0);
	assert_string_equal(b.p, "xy");
	buf__free(&b);
	assert_null(b.p);
}

static void test_array_reserve_doubles(void **state)
{
	int *a = NULL;
	size_t cap = 0;

	assert_true(array__reserve((void **)&a, &cap, 1, sizeof(*a)));
	assert_int_equal(cap, 16);
	assert_true(array__reserve((void **)&a, &cap, 17, sizeof(*a)));
	assert_int_equal(cap, 32);
	assert_true(array__reserve((void **)&a, &cap, 100, sizeof(*a)));
	assert_int_equal(cap, 128);
	a[99] = 7;
	free(a);
}

static void test_maps_lines(void **state)
{
	char exe[] = "7f3a10000000-7f3a10200000 r-xp 00012000 fd:01 1234   /usr/lib/libssl.so.3\n";
	char gone[] = "55d0-55e0 r-xp 00000000 fd:01 99 /tmp/node (deleted)\n";
	char anon[] = "7ffd0000-7ffe0000 rw-p 00000000 00:00 0                  [stack]\n";
	char data[] = "7f3a10200000-7f3a10300000 rw-p 00200000 fd:01 1234 /usr/lib/libssl.so.3\n";
	struct maps_entry e;

	assert_int_equal(procmaps__parse(exe, &e), 0);
	assert_true(e.start == 0x7f3a10000000ull && e.end == 0x7f3a10200000ull);
	assert_true(e.offset == 0x12000);
	assert_true(e.dev == (0xfdull << 32 | 1) && e.ino == 1234);
	assert_string_equal(e.path, "/usr/lib/libssl.so.3");
	assert_true(procmaps__is_exec_file(&e));
	assert_int_equal(procmaps__parse(gone, &e), 0);
	assert_true(e.exec && e.deleted);
	assert_false(procmaps__is_exec_file(&e));
	assert_int_equal(procmaps__parse(anon, &e), 0);
	assert_null(e.path);
	assert_false(procmaps__is_exec_file(&e));
	assert_int_equal(procmaps__parse(data, &e), 0);
	assert_false(e.exec);
	assert_int_equal(procmaps__parse((char[]){ "not a mapping\n" }, &e), -1);
}

/*
 * PROCMAP_QUERY (Linux 6.11 on) names this very process's executable file mappings, each with
 * its device, inode and name, as the text of its maps does: the two compared mapping by
 * mapping. On an older kernel the query says so (-1, ENOTTY or EINVAL) and the text stands.
 */
static void test_maps_query_matches_text(void **state)
{
	struct maps_entry text[64], q;
	char line[4352], name[4096];
	size_t nt = 0, nq = 0;
	uint64_t from = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	int fd = open("/proc/self/maps", O_RDONLY), got;

	assert_non_null(f);
	assert_true(fd >= 0);
	while (fgets(line, sizeof(line), f) && nt < 64) {
		struct maps_entry e;

		if (!procmaps__parse(line, &e) && e.exec && e.path && !e.deleted)
			text[nt++] = e;
	}
	fclose(f);
	assert_true(nt > 0); /* the test binary itself, libc */
	while ((got = procmaps__next_exec(fd, &from, &q)) > 0) {
		assert_true(nq < nt);
		assert_true(q.start == text[nq].start && q.end == text[nq].end);
		assert_true(q.dev == text[nq].dev && q.ino == text[nq].ino);
		assert_int_equal(procmaps__name(fd, q.start, name, sizeof(name)), 0);
		assert_true(name[0] == '/');
		nq++;
	}
	if (got < 0) {
		assert_true(errno == ENOTTY || errno == EINVAL); /* before 6.11 */
		assert_int_equal(nq, 0);
	} else {
		assert_int_equal(nq, nt);
	}
	close(fd);
}

/* One tracepoint program on several tracepoints: the names its section lists, in order. */
static void test_tracepoint_sections(void **state)
{
	const char *sec = "tracepoint/syscalls/sys_exit_read,sys_exit_write,sys_exit_splice";
	static const char *const want[] = { "sys_exit_read", "sys_exit_write", "sys_exit_splice" };
	char cat[64], name[128];

	for (size_t k = 0; k < 3; k++) {
		assert_int_equal(tracefs__nth(sec, k, cat, sizeof(cat), name, sizeof(name)), 0);
		assert_string_equal(cat, "syscalls");
		assert_string_equal(name, want[k]);
	}
	assert_int_equal(tracefs__nth(sec, 3, cat, sizeof(cat), name, sizeof(name)), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(tracefs__nth("tp/sched/sched_process_exec", 0, cat, sizeof(cat), name,
				      sizeof(name)), 0);
	assert_string_equal(name, "sched_process_exec");
	assert_int_equal(tracefs__nth("tracepoint/syscalls/a,,b", 1, cat, sizeof(cat), name,
				      sizeof(name)), -1); /* an empty name */
	assert_int_equal(tracefs__nth("tracepoint", 0, cat, sizeof(cat), name, sizeof(name)), -1);
}

/* A request's strings are copies of their own size; the same value again keeps the copy. */

/*
 * Where a llama.cpp build keeps a context's embeddings flag, read off its setter: node-llama-cpp
 * 3.22's llama_context::set_embeddings (a log call between the argument's copy and the store:
 * the context in rbp, the bool in ebx, "mov %bl,0x50(%rbp)"), an older build's C setter with
 * the store inlined, and what does not say: a setter that jumps to the member (followed
 * from its own symbol instead), and a store of another register.
 */
static void test_llama_embeddings_offset(void **state)
{
	static const uint8_t member[] = {
		0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x40, 0x0f, 0xb6, 0xce, 0x48, 0x89, 0xfd, 0x48, 0x8d,
		0x15, 0xcc, 0x27, 0x15, 0x00, 0x53, 0xbf, 0x01, 0x00, 0x00, 0x00, 0x89, 0xf3, 0x31,
		0xc0, 0x48, 0x8d, 0x35, 0xca, 0x27, 0x15, 0x00, 0x48, 0x83, 0xec, 0x08, 0xe8, 0x53,
		0x01, 0xed, 0xff, 0x88, 0x5d, 0x50, 0x48, 0x83, 0xc4, 0x08, 0x5b, 0x5d, 0xc3,
	};
	/* endbr64; mov %sil,0x3c(%rdi); ret */
	static const uint8_t inlined[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x40, 0x88, 0x77, 0x3c, 0xc3 };
	/* endbr64; movzbl %sil,%esi; jmp (the member, through the PLT) */
	static const uint8_t jumps[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x40, 0x0f, 0xb6, 0xf6,
					 0xe9, 0x00, 0x00, 0x00, 0x00 };
	/* mov %al,0x3c(%rdi); ret: not the argument */
	static const uint8_t other[] = { 0x88, 0x47, 0x3c, 0xc3 };
	/* the argument stored after a call that may have changed rsi: not it either */
	static const uint8_t clobbered[] = { 0xe8, 0x00, 0x00, 0x00, 0x00, 0x40, 0x88, 0x77, 0x3c,
					     0xc3 };

	assert_int_equal(llama_layout__store_offset(member, sizeof(member)), 0x50);
	assert_int_equal(llama_layout__store_offset(inlined, sizeof(inlined)), 0x3c);
	assert_int_equal(llama_layout__store_offset(jumps, sizeof(jumps)), 0);
	assert_int_equal(llama_layout__store_offset(other, sizeof(other)), 0);
	assert_int_equal(llama_layout__store_offset(clobbered, sizeof(clobbered)), 0);
	assert_int_equal(llama_layout__store_offset(member, 20), 0); /* cut before the store */
}

static void test_request_strings(void **state)
{
	struct request *r = request__new();
	const char *first;
	char long_name[300];

	assert_non_null(r);
	assert_string_equal(r->model, "");
	assert_true(request__set_str(&r->model, "llama-3.1-8b", 12));
	assert_string_equal(r->model, "llama-3.1-8b");
	first = r->model;
	assert_true(request__set_str(&r->model, "llama-3.1-8b", 12));
	assert_ptr_equal(r->model, first); /* each SSE event names it again: no new copy */
	assert_true(request__set_str(&r->model, "llama-3.1-8b-instruct", 5));
	assert_string_equal(r->model, "llama"); /* the first n bytes */
	assert_true(request__set_str(&r->model, "a\0b", 3));
	assert_string_equal(r->model, "a"); /* stops at a NUL */
	memset(long_name, 'm', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	assert_true(request__set_str(&r->response_model, long_name, REQ_MODEL_MAX - 1));
	assert_int_equal(strlen(r->response_model), REQ_MODEL_MAX - 1);
	assert_true(request__set_str(&r->model, "", 0));
	assert_string_equal(r->model, ""); /* back to the shared empty string */
	assert_true(request__set_path(r, "/v1/chat/completions"));
	assert_string_equal(r->path, "/v1/chat/completions");
	request__free(r); /* frees what is left: the sanitized run checks for leaks */
}

/* Against a plain array as the truth: adds, deletes out of order (backward shift across
 * collisions and the wrap), re-adds; then the memory goes when it empties. */
struct counted {
	struct request_group key;
	int n;
};

/* The one grouping every output uses: command, role, API and model (the request's, else the
 * response's), groups in the order they first appeared, processes counted once while they
 * live and again when a pid comes back after its exit. */
static void test_request_groups(void **state)
{
	struct request_groups t;
	struct request *a = request__new(), *b = request__new();
	struct counted *g1, *g2;
	char who[32];

	assert_non_null(a);
	assert_non_null(b);
	request_groups__init(&t, sizeof(struct counted));
	memcpy(a->comm, "python3", 8);
	a->pid = 100;
	a->api = API_OPENAI_CHAT;
	assert_true(request__set_str(&a->response_model, "served", 6));
	assert_string_equal(request__model(a), "served"); /* no request model: the response's */
	g1 = request_groups__of(&t, a);
	assert_non_null(g1);
	assert_string_equal(g1->key.model, "served");
	assert_int_equal(g1->key.pid, 100);
	assert_int_equal(g1->n, 0); /* zeroed past the key */
	request_group__add_process(&g1->key, a->pid);
	b->pid = 101;
	b->api = API_OPENAI_CHAT;
	memcpy(b->comm, "python3", 8);
	assert_true(request__set_str(&b->model, "served", 6));
	assert_ptr_equal(request_groups__of(&t, b), g1); /* the request's model, the same key */
	request_group__add_process(&g1->key, b->pid);
	request_group__add_process(&g1->key, b->pid);
	request_group__who(&g1->key, who, sizeof(who));
	assert_string_equal(who, "2 pids");
	request_groups__process_exit(&t, 101);
	request_group__add_process(&g1->key, 101); /* pid reused: a new process */
	assert_int_equal(g1->key.npids, 3);
	b->role = ROLE_SERVER; /* a server of the same API and model: a group of its own */
	g2 = request_groups__of(&t, b);
	assert_non_null(g2);
	assert_ptr_not_equal(g2, g1);
	assert_int_equal(t.n, 2);
	assert_ptr_equal(t.v[0], g1); /* first seen, first listed */
	request_group__who(&g2->key, who, sizeof(who));
	assert_string_equal(who, "101");
	request_groups__free(&t, NULL);
	request__free(a);
	request__free(b);
}

static void test_pidset(void **state)
{
	static bool in[5000];
	struct pidset s = { 0 };
	uint32_t x = 12345;

	memset(in, 0, sizeof(in));
	for (int round = 0; round < 200000; round++) {
		uint32_t pid;

		x = x * 1103515245u + 12345u;
		pid = 1 + (x >> 8) % 4999;
		if ((x >> 4) & 1) {
			assert_int_equal(pidset__add(&s, pid), !in[pid]);
			in[pid] = true;
		} else {
			pidset__del(&s, pid);
			in[pid] = false;
		}
		if (round % 997 == 0) {
			size_t n = 0;

			for (uint32_t p = 1; p < 5000; p++) {
				assert_int_equal(pidset__has(&s, p), in[p]);
				n += in[p];
			}
			assert_int_equal(s.n, n);
		}
	}
	for (uint32_t p = 1; p < 5000; p++)
		pidset__del(&s, p);
	assert_int_equal(s.n, 0);
	assert_null(s.v);
	assert_false(pidset__add(&s, 0)); /* no such pid */
	pidset__free(&s);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* select_u64's k-th smallest is the sorted array's v[k], for every k: arrays of few distinct
 * values (ties), sorted ones, reversed ones and random ones, of every length up to 40. */
static void test_select_u64(void **state)
{
	uint64_t v[40], w[40], s[40], rng = 88172645463325252ull;

	for (size_t n = 1; n <= 40; n++) {
		for (int kind = 0; kind < 4; kind++) {
			for (size_t i = 0; i < n; i++) {
				rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
				v[i] = kind == 0 ? rng % 3 : kind == 1 ? i : kind == 2 ? n - i : rng;
			}
			memcpy(s, v, n * sizeof(*v));
			qsort(s, n, sizeof(*s), cmp_u64);
			for (size_t k = 0; k < n; k++) {
				memcpy(w, v, n * sizeof(*v));
				assert_int_equal(select_u64(w, n, k), s[k]);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_limit_is_sticky),
		cmocka_unit_test(test_pidset),
		cmocka_unit_test(test_select_u64),
		cmocka_unit_test(test_array_reserve_doubles),
		cmocka_unit_test(test_maps_lines),
		cmocka_unit_test(test_maps_query_matches_text),
		cmocka_unit_test(test_tracepoint_sections),
		cmocka_unit_test(test_llama_embeddings_offset),
		cmocka_unit_test(test_request_strings),
		cmocka_unit_test(test_request_groups),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
