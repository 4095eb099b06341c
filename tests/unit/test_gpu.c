// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The GPU step model on hand-made CUDA marks: sync, async (vLLM) chains, device syncs,
 * queries, names and aliases, processes that exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine/cuda_steps.h"

#define MS 1000000ull
#define S_MAIN 0x1000
#define S_COPY 0x2000

struct seen {
	struct cuda_step steps[16];
	int n;
	char names[16][64];
};

/* Every CUDA step is also the source-neutral record attribution reads: the same span. */
static void on_step(void *ctx, const struct engine_step *es)
{
	const struct cuda_step *s = es->cuda;
	const struct cuda_steps *g = es->cuda_names;
	struct seen *seen = ctx;
	char buf[64];

	assert_true(seen->n < 16);
	assert_non_null(s);
	assert_int_equal(es->source, STEP_SOURCE_CUDA);
	assert_int_equal(es->pid, s->pid);
	assert_int_equal(es->tid, s->tid);
	assert_string_equal(es->comm, s->comm);
	assert_int_equal(es->start_ns, s->first_launch_ns);
	assert_int_equal(es->end_ns, s->gpu_done_ns);
	assert_int_equal(es->host_seen_ns, s->host_seen_ns);
	assert_int_equal(es->end_bound, s->done_bound);
	assert_int_equal(es->nseqs, 0); /* CUDA does not know the sequences */
	seen->steps[seen->n] = *s;
	snprintf(seen->names[seen->n], sizeof(seen->names[0]), "%s",
		 s->nkernels ? cuda_steps__kernel_name(g, s->pid, &s->k[0], buf, sizeof(buf)) : "");
	seen->n++;
}

static struct ts_gpu_work work(uint32_t launches, uint32_t graphs, uint32_t copies, uint64_t first,
			       uint64_t kernel)
{
	struct ts_gpu_work w = { 0 };

	w.launches = launches;
	w.graph_launches = graphs;
	w.copies = copies;
	w.first_ns = first;
	if (launches || graphs) {
		w.nsamples = 1;
		w.k[0] = (struct ts_kernel_sample){ .id = kernel, .count = launches + graphs,
						    .flags = graphs ? TS_KS_GRAPH : 0 };
	}
	return w;
}

static void mark(struct cuda_steps *g, uint32_t kind, uint32_t scope, uint64_t stream, uint64_t event,
		 uint64_t ts, uint64_t enter, const struct ts_gpu_work *w)
{
	struct ts_gpu_mark m = { 0 };

	m.hdr.type = TS_EV_GPU_MARK;
	m.hdr.size = sizeof(m);
	m.hdr.ts_ns = ts;
	m.hdr.pid = m.hdr.tid = 42;
	strcpy(m.hdr.comm, "engine");
	m.kind = kind;
	m.scope = scope;
	m.stream = stream;
	m.event = event;
	m.enter_ns = enter;
	if (w)
		m.work = *w;
	cuda_steps__mark(g, &m);
}

static void test_sync_step(void **state)
{
	struct seen seen = { 0 };
	struct cuda_steps *g = cuda_steps__new(on_step, &seen);
	struct ts_gpu_work w = work(3, 0, 1, 10 * MS, 0xf1);

	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 12 * MS, 0, &w);
	assert_int_equal(seen.n, 0);
	/* the host waited 3 ms: it saw the GPU finish */
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 15 * MS, 12 * MS, NULL);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.steps[0].launches, 3);
	assert_int_equal(seen.steps[0].first_launch_ns, 10 * MS);
	assert_int_equal(seen.steps[0].gpu_done_ns, 15 * MS);
	assert_int_equal(seen.steps[0].host_seen_ns, 15 * MS);
	assert_false(seen.steps[0].done_bound);
	/* a sync that returns at once only bounds completion */
	w = work(2, 0, 0, 20 * MS, 0xf1);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 30 * MS, 0, &w);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 30 * MS + 20000, 30 * MS, NULL);
	assert_int_equal(seen.n, 2);
	assert_true(seen.steps[1].done_bound);
	/* a failed sync (no driver) too */
	w = work(1, 0, 0, 40 * MS, 0xf1);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 41 * MS, 0, &w);
	{
		struct ts_gpu_mark m = { 0 };

		m.hdr = (struct ts_event_hdr){ .type = TS_EV_GPU_MARK, .size = sizeof(m), .ts_ns = 45 * MS,
					       .pid = 42, .tid = 42 };
		m.kind = TS_GPU_SYNC_RETURN;
		m.stream = S_MAIN;
		m.enter_ns = 41 * MS;
		m.result = 35;
		cuda_steps__mark(g, &m);
	}
	assert_int_equal(seen.n, 3);
	assert_true(seen.steps[2].done_bound);
	cuda_steps__free(g);
}

/* vLLM V1: step N is recorded on the main stream, the copy stream waits for it and copies
 * the sampled tokens, and the host syncs on the copy's event one step later. */
static void test_async_chain(void **state)
{
	struct seen seen = { 0 };
	struct cuda_steps *g = cuda_steps__new(on_step, &seen);
	struct ts_gpu_work w1 = work(0, 1, 0, 10 * MS, 0x9a);
	struct ts_gpu_work c1 = work(0, 0, 1, 0, 0), w2 = work(0, 1, 0, 12 * MS, 0x9a);
	struct ts_gpu_work c2 = c1;

	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe1, 10 * MS + 100, 0, &w1);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe1, 10 * MS + 200, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc1, 10 * MS + 300, 0, &c1);
	/* step N+1 launched before the host waits for step N */
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe2, 12 * MS + 100, 0, &w2);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe2, 12 * MS + 200, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc2, 12 * MS + 300, 0, &c2);
	assert_int_equal(seen.n, 0);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, 0, 0xc1, 13 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_EVENT, 0, 0xc1, 16 * MS, 13 * MS, NULL);
	/* step N only (the copy segment is no step). The host blocked on the copy that only
	 * waited for step N: step N is done there, its tokens on the host, exactly */
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.steps[0].graph_launches, 1);
	assert_int_equal(seen.steps[0].first_launch_ns, 10 * MS);
	assert_int_equal(seen.steps[0].host_seen_ns, 16 * MS);
	assert_int_equal(seen.steps[0].gpu_done_ns, 16 * MS);
	assert_false(seen.steps[0].done_bound);
	assert_string_equal(seen.names[0], "graph@0x9a");
	/* the host came after step N+1 was over: a bound */
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, 0, 0xc2, 17 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_EVENT, 0, 0xc2, 17 * MS + 10000, 17 * MS, NULL);
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.steps[1].first_launch_ns, 12 * MS);
	assert_true(seen.steps[1].done_bound);
	assert_int_equal(cuda_steps__unobserved(g), 0);
	cuda_steps__free(g);
}

/* A step seen through other work is exact only when that work was a relay: no kernels of
 * its own, one step waited for, nothing before it on its stream left unseen. */
static void test_async_chain_bounds(void **state)
{
	struct seen seen = { 0 };
	struct cuda_steps *g = cuda_steps__new(on_step, &seen);
	struct ts_gpu_work w1 = work(2, 0, 0, 10 * MS, 0x9a), w2 = w1, w3 = w1, w4 = w1;
	struct ts_gpu_work k = work(1, 0, 0, 10 * MS, 0x77), c = work(0, 0, 1, 0, 0);

	/* the side stream runs a kernel of its own after waiting: step 1 is a bound */
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe1, 10 * MS + 100, 0, &w1);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe1, 10 * MS + 200, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc1, 10 * MS + 300, 0, &k);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, 0, 0xc1, 11 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_EVENT, 0, 0xc1, 14 * MS, 11 * MS, NULL);
	assert_int_equal(seen.n, 2); /* the side stream's kernel is a step too */
	for (int i = 0; i < 2; i++)
		assert_true(seen.steps[i].done_bound == (seen.steps[i].stream == S_MAIN));
	/* a copy queued behind an earlier copy the host never waited for: step 3 a bound */
	w2.first_ns = 20 * MS;
	w3.first_ns = 21 * MS;
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe2, 20 * MS + 100, 0, &w2);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe2, 20 * MS + 200, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc2, 20 * MS + 300, 0, &c);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe3, 21 * MS + 100, 0, &w3);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe3, 21 * MS + 200, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc3, 21 * MS + 300, 0, &c);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, 0, 0xc3, 22 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_EVENT, 0, 0xc3, 25 * MS, 22 * MS, NULL);
	assert_int_equal(seen.n, 4);
	assert_int_equal(seen.steps[2].first_launch_ns, 20 * MS);
	assert_true(seen.steps[2].done_bound);
	assert_int_equal(seen.steps[3].first_launch_ns, 21 * MS);
	assert_true(seen.steps[3].done_bound);
	/* a copy that waited for two steps: a bound for both */
	w4.first_ns = 31 * MS;
	w1.first_ns = 30 * MS;
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe4, 30 * MS + 100, 0, &w1);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe5, 31 * MS + 100, 0, &w4);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe4, 31 * MS + 200, 0, NULL);
	mark(g, TS_GPU_WAIT, TS_GPU_SCOPE_STREAM, S_COPY, 0xe5, 31 * MS + 300, 0, NULL);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_COPY, 0xc4, 31 * MS + 400, 0, &c);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, 0, 0xc4, 32 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_EVENT, 0, 0xc4, 35 * MS, 32 * MS, NULL);
	assert_int_equal(seen.n, 6);
	assert_true(seen.steps[4].done_bound && seen.steps[5].done_bound);
	cuda_steps__free(g);
}

static void test_device_sync_and_query(void **state)
{
	struct seen seen = { 0 };
	struct cuda_steps *g = cuda_steps__new(on_step, &seen);
	struct ts_gpu_work a = work(4, 0, 0, 1 * MS, 0xa), b = work(2, 0, 0, 1 * MS, 0xb);

	mark(g, TS_GPU_FLUSH, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 4 * MS, 0, &a);
	mark(g, TS_GPU_FLUSH, TS_GPU_SCOPE_STREAM, S_COPY, 0, 4 * MS, 0, &b);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_DEVICE, 0, 0, 4 * MS, 0, NULL);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_DEVICE, 0, 0, 9 * MS, 4 * MS, NULL);
	assert_int_equal(seen.n, 2);
	assert_false(seen.steps[0].done_bound);
	assert_false(seen.steps[1].done_bound);
	/* a query that reports done closes the stream's work, as an upper bound */
	a = work(1, 0, 0, 10 * MS, 0xa);
	mark(g, TS_GPU_QUERY_DONE, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 12 * MS, 11 * MS, &a);
	assert_int_equal(seen.n, 3);
	assert_true(seen.steps[2].done_bound);
	assert_int_equal(seen.steps[2].host_seen_ns, 12 * MS);
	cuda_steps__free(g);
}

static void test_names_aliases_and_exit(void **state)
{
	struct seen seen = { 0 };
	struct cuda_steps *g = cuda_steps__new(on_step, &seen);
	struct ts_gpu_kname k = { 0 };
	struct ts_gpu_work w = work(1, 0, 0, 1 * MS, 0xf00d);

	k.hdr = (struct ts_event_hdr){ .type = TS_EV_GPU_KNAME, .size = sizeof(k), .pid = 42 };
	k.id = 0xbeef; /* a CUkernel from cuLibraryGetKernel */
	strcpy(k.name, "void gemm<float>(float*)");
	cuda_steps__kname(g, &k);
	k.id = 0xf00d; /* the CUfunction cuKernelGetFunction made of it */
	k.alias = 0xbeef;
	k.name[0] = 0;
	cuda_steps__kname(g, &k);
	mark(g, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 2 * MS, 0, &w);
	mark(g, TS_GPU_SYNC_RETURN, TS_GPU_SCOPE_STREAM, S_MAIN, 0, 3 * MS, 2 * MS, NULL);
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.names[0], "void gemm<float>(float*)");
	/* open work of a process that exits is never reported, only counted */
	w = work(5, 0, 0, 4 * MS, 0xf00d);
	mark(g, TS_GPU_RECORD, TS_GPU_SCOPE_STREAM, S_MAIN, 0xe9, 5 * MS, 0, &w);
	cuda_steps__exit(g, 42);
	assert_int_equal(seen.n, 1);
	assert_int_equal(cuda_steps__unobserved(g), 1);
	cuda_steps__free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_step),
		cmocka_unit_test(test_async_chain),
		cmocka_unit_test(test_async_chain_bounds),
		cmocka_unit_test(test_device_sync_and_query),
		cmocka_unit_test(test_names_aliases_and_exit),
	};

	return cmocka_run_group_tests_name("gpu", tests, NULL, NULL);
}
