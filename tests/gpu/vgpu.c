// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A stand-in libcuda.so.1 with a virtual GPU, for machines without one.
 *
 * It exports the CUDA driver entry points tokenscope probes, with the real signatures and the
 * real semantics where they matter to step reconstruction:
 *   - every stream (the legacy NULL stream too) has a device thread that runs its work in
 *     order: kernels, graph launches, event records, waits on events, async copies;
 *   - a kernel takes the time its first parameter says: kernelParams[0] points to a uint32_t
 *     number of microseconds, read when the kernel starts (as a GPU reads device memory);
 *   - cuEventRecord/Query/Synchronize and cuStreamWaitEvent follow CUDA: a wait or sync is on
 *     the event's most recent record at the time of the call;
 *   - a collective (a kernel named cross_device_reduce*, vLLM's custom all-reduce) is a
 *     rendezvous of tensor-parallel ranks, each its own process and GPU: kernelParams[0]
 *     points to a struct vgpu_collective in memory the ranks share, and the kernel runs its
 *     microseconds only once every rank's has started, so that the ranks' steps overlap on
 *     the GPUs whatever their hosts do, as NCCL's do;
 *   - stream capture (cuStreamBeginCapture/EndCapture) records launches into a graph;
 *     cuGraphLaunch runs its nodes in order;
 *   - cuStreamSynchronize, cuEventSynchronize, cuCtxSynchronize and cuMemcpyDtoH_v2 block the
 *     caller until the work is done, in real time on CLOCK_MONOTONIC, spinning and yielding
 *     as CUDA's yield scheduling does.
 * Kernels do nothing but take their time; device memory is host memory.
 *
 * Ground truth for tests: vgpu_event_done_ns(event) and vgpu_stream_idle_ns(stream) report
 * when the virtual GPU finished an event's record and a stream's last work, and
 * vgpu_thread_launch_ns() when the calling thread's latest kernel or graph launch call began
 * (not CUDA API).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "vcuda.h"

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED 900

#define API __attribute__((visibility("default")))

struct vctx {
	int dummy;
};
struct vmod {
	int dummy;
};
struct vfunc {
	char name[128];
};

enum op_kind { OP_KERNEL, OP_GRAPH, OP_RECORD, OP_WAIT, OP_COPY };

struct node {
	struct vfunc *f;
	void *param0; /* uint32_t * microseconds */
};

struct vgraph {
	struct node *nodes;
	size_t n, cap;
};

struct vevent {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t recorded; /* generation of the latest record enqueued */
	uint64_t done;	   /* generation the GPU has reached */
	uint64_t done_ns;
};

struct op {
	enum op_kind kind;
	struct vfunc *f;
	void *param0;
	struct vgraph *graph;
	struct vevent *ev;
	uint64_t gen;
	void *dst;
	const void *src;
	size_t bytes;
	struct op *next;
};

struct vstream {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head, *tail;
	int busy;
	uint64_t idle_ns; /* when its last work finished */
	pthread_t thread;
	struct vgraph *capture; /* capture in progress */
	struct vstream *next_all;
};

static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vstream *all_streams;
static struct vstream *legacy;
static struct vctx the_ctx;
static int initialized;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void run_for(uint32_t us)
{
	uint64_t until = now_ns() + (uint64_t)us * 1000;
	struct timespec ts = { until / 1000000000ull, until % 1000000000ull };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* A collective's shared state (tests/fixtures/vllm/engine.py lays it out alike). */
struct vgpu_collective {
	uint32_t us;	   /* the reduction's own time, once every rank is in */
	uint32_t nranks;
	uint64_t arrived;  /* kernels started so far, over every rank and every step */
};

#define COLLECTIVE_TIMEOUT_NS 10000000000ull /* a rank that died: the others go on */

static void run_collective(struct vgpu_collective *c)
{
	uint64_t n = __atomic_add_fetch(&c->arrived, 1, __ATOMIC_SEQ_CST);
	uint64_t nranks = c->nranks ? c->nranks : 1, all = (n + nranks - 1) / nranks * nranks;
	uint64_t give_up = now_ns() + COLLECTIVE_TIMEOUT_NS;

	while (__atomic_load_n(&c->arrived, __ATOMIC_SEQ_CST) < all && now_ns() < give_up)
		run_for(5); /* a GPU spins on its peers' flags; a device thread sleeps between */
	run_for(c->us);
}

static void run_kernel(struct vfunc *f, void *param0)
{
	if (param0 && !strncmp(f->name, "cross_device_reduce", 19))
		run_collective(param0);
	else
		run_for(param0 ? *(volatile uint32_t *)param0 : 1);
}

/* A GPU runs beside the host's CPUs, not on them: the device threads run at a real-time
 * priority where allowed (root), so a loaded machine does not hold the virtual GPU's next
 * operation (a copy waiting on another stream's event, a kernel's end) behind the host's
 * threads. They only ever sleep or do a few microseconds of work. (At normal priority, the
 * copy stream woke after the main stream's event up to 3.9 ms late on the 2-core test VM;
 * now within 0.15 ms.) Without the priority, at least the timer slack goes (50 us). */
static void device_priority(void)
{
	struct sched_param sp = { .sched_priority = 1 };

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))
		prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

static void *device_thread(void *arg)
{
	struct vstream *s = arg;

	device_priority();
	for (;;) {
		struct op *o;

		pthread_mutex_lock(&s->mu);
		while (!s->head)
			pthread_cond_wait(&s->cv, &s->mu);
		o = s->head;
		s->busy = 1;
		pthread_mutex_unlock(&s->mu);

		switch (o->kind) {
		case OP_KERNEL:
			run_kernel(o->f, o->param0);
			break;
		case OP_GRAPH:
			for (size_t i = 0; i < o->graph->n; i++)
				run_kernel(o->graph->nodes[i].f, o->graph->nodes[i].param0);
			break;
		case OP_RECORD:
			pthread_mutex_lock(&o->ev->mu);
			if (o->gen > o->ev->done) {
				o->ev->done = o->gen;
				o->ev->done_ns = now_ns();
			}
			pthread_cond_broadcast(&o->ev->cv);
			pthread_mutex_unlock(&o->ev->mu);
			break;
		case OP_WAIT:
			pthread_mutex_lock(&o->ev->mu);
			while (o->ev->done < o->gen)
				pthread_cond_wait(&o->ev->cv, &o->ev->mu);
			pthread_mutex_unlock(&o->ev->mu);
			break;
		case OP_COPY:
			memcpy(o->dst, o->src, o->bytes);
			run_for(2 + (uint32_t)(o->bytes / 10000)); /* ~10 GB/s plus latency */
			break;
		}

		pthread_mutex_lock(&s->mu);
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = 0;
		s->idle_ns = now_ns();
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		free(o);
	}
	return NULL;
}

static struct vstream *stream_new(void)
{
	struct vstream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, device_thread, s)) {
		free(s);
		return NULL;
	}
	pthread_detach(s->thread);
	pthread_mutex_lock(&all_mu);
	s->next_all = all_streams;
	all_streams = s;
	pthread_mutex_unlock(&all_mu);
	return s;
}

/* NULL and CU_STREAM_LEGACY (1) are the legacy stream; CU_STREAM_PER_THREAD (2) is treated
 * as the same stream here. */
static struct vstream *resolve(CUstream s)
{
	if ((uintptr_t)s <= 2)
		return legacy;
	return s;
}

static void enqueue(struct vstream *s, struct op *o)
{
	pthread_mutex_lock(&s->mu);
	o->next = NULL;
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Host-side waits spin and yield, as CUDA's cudaDeviceScheduleYield does (and its default,
 * spinning, when there are fewer contexts than cores): the host sees completion within
 * microseconds, not after a sleeping thread's wake-up. */
static void wait_idle(struct vstream *s)
{
	for (;;) {
		int busy;

		pthread_mutex_lock(&s->mu);
		busy = s->head || s->busy;
		pthread_mutex_unlock(&s->mu);
		if (!busy)
			return;
		sched_yield();
	}
}

/* ---- init, context, device ---- */

API CUresult cuInit(unsigned int flags)
{
	pthread_mutex_lock(&all_mu);
	if (!initialized) {
		initialized = 1;
		pthread_mutex_unlock(&all_mu);
		legacy = stream_new();
		return legacy ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&all_mu);
	return CUDA_SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_VALUE;
	*d = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	strncpy(name, "tokenscope virtual GPU", len);
	if (len > 0)
		name[len - 1] = 0;
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
	*ctx = &the_ctx;
	return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	return CUDA_SUCCESS;
}

API CUresult cuCtxSynchronize(void)
{
	struct vstream *s;

	pthread_mutex_lock(&all_mu);
	s = all_streams;
	pthread_mutex_unlock(&all_mu);
	for (; s; s = s->next_all)
		wait_idle(s);
	return CUDA_SUCCESS;
}

/* ---- modules and functions ---- */

API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	*m = calloc(1, sizeof(struct vmod));
	return *m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	struct vfunc *fn;

	if (!m || !name)
		return CUDA_ERROR_INVALID_VALUE;
	fn = calloc(1, sizeof(*fn));
	if (!fn)
		return CUDA_ERROR_OUT_OF_MEMORY;
	strncpy(fn->name, name, sizeof(fn->name) - 1);
	*f = fn;
	return CUDA_SUCCESS;
}

/* ---- memory ---- */

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
	void *m = calloc(1, bytes ? bytes : 1);

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

API CUresult cuMemFree_v2(CUdeviceptr p)
{
	free((void *)(uintptr_t)p);
	return CUDA_SUCCESS;
}

API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
	wait_idle(legacy);
	memcpy((void *)(uintptr_t)dst, src, bytes);
	return CUDA_SUCCESS;
}

API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream hs)
{
	struct vstream *s = resolve(hs);
	struct op *o = calloc(1, sizeof(*o));

	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (s->capture) {
		free(o);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	o->kind = OP_COPY;
	o->dst = dst;
	o->src = (const void *)(uintptr_t)src;
	o->bytes = bytes;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)
{
	CUresult r = cuMemcpyDtoHAsync_v2(dst, src, bytes, NULL);

	if (r == CUDA_SUCCESS)
		wait_idle(legacy);
	return r;
}

/* ---- streams ---- */

API CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	*ps = stream_new();
	return *ps ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuStreamSynchronize(CUstream hs)
{
	wait_idle(resolve(hs));
	return CUDA_SUCCESS;
}

API CUresult cuStreamQuery(CUstream hs)
{
	struct vstream *s = resolve(hs);
	int busy;

	pthread_mutex_lock(&s->mu);
	busy = s->head || s->busy;
	pthread_mutex_unlock(&s->mu);
	return busy ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* ---- launches and graphs ---- */

/* The calling thread's latest launch call, read at its entry: a caller in Python reads its
 * own clock tens of microseconds before the call (argument marshalling), this one as the
 * call begins (after any probe's trap on its first instruction). */
static __thread unsigned long long thread_launch_ns;

API unsigned long long vgpu_thread_launch_ns(void)
{
	return thread_launch_ns;
}

API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			    unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			    CUstream hs, void **params, void **extra)
{
	struct vstream *s = resolve(hs);
	struct op *o;

	thread_launch_ns = now_ns();
	if (!f || !gx || !gy || !gz || !bx || !by || !bz)
		return CUDA_ERROR_INVALID_VALUE;
	if (s->capture) {
		struct vgraph *g = s->capture;

		if (g->n == g->cap) {
			size_t cap = g->cap ? g->cap * 2 : 8;
			struct node *nn = realloc(g->nodes, cap * sizeof(*nn));

			if (!nn)
				return CUDA_ERROR_OUT_OF_MEMORY;
			g->nodes = nn;
			g->cap = cap;
		}
		g->nodes[g->n++] = (struct node){ f, params ? params[0] : NULL };
		return CUDA_SUCCESS;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = OP_KERNEL;
	o->f = f;
	o->param0 = params ? params[0] : NULL;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

API CUresult cuStreamBeginCapture_v2(CUstream hs, int mode)
{
	struct vstream *s = resolve(hs);

	if (s == legacy || s->capture)
		return CUDA_ERROR_INVALID_VALUE;
	s->capture = calloc(1, sizeof(struct vgraph));
	return s->capture ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuStreamEndCapture(CUstream hs, CUgraph *g)
{
	struct vstream *s = resolve(hs);

	if (!s->capture)
		return CUDA_ERROR_INVALID_VALUE;
	*g = s->capture;
	s->capture = NULL;
	return CUDA_SUCCESS;
}

API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
	struct vgraph *e = calloc(1, sizeof(*e));

	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->nodes = malloc((g->n ? g->n : 1) * sizeof(*e->nodes));
	if (!e->nodes) {
		free(e);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(e->nodes, g->nodes, g->n * sizeof(*e->nodes));
	e->n = e->cap = g->n;
	*exec = e;
	return CUDA_SUCCESS;
}

API CUresult cuGraphLaunch(CUgraphExec exec, CUstream hs)
{
	struct op *o;

	thread_launch_ns = now_ns();
	o = calloc(1, sizeof(*o));

	if (!o)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = OP_GRAPH;
	o->graph = exec;
	enqueue(resolve(hs), o);
	return CUDA_SUCCESS;
}

/* ---- events ---- */

API CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
	struct vevent *e = calloc(1, sizeof(*e));

	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	*pe = e;
	return CUDA_SUCCESS;
}

API CUresult cuEventRecord(CUevent e, CUstream hs)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o || !e) {
		free(o);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	pthread_mutex_lock(&e->mu);
	o->gen = ++e->recorded;
	pthread_mutex_unlock(&e->mu);
	o->kind = OP_RECORD;
	o->ev = e;
	enqueue(resolve(hs), o);
	return CUDA_SUCCESS;
}

API CUresult cuStreamWaitEvent(CUstream hs, CUevent e, unsigned int flags)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o || !e) {
		free(o);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	pthread_mutex_lock(&e->mu);
	o->gen = e->recorded;
	pthread_mutex_unlock(&e->mu);
	o->kind = OP_WAIT;
	o->ev = e;
	enqueue(resolve(hs), o);
	return CUDA_SUCCESS;
}

API CUresult cuEventQuery(CUevent e)
{
	int done;

	pthread_mutex_lock(&e->mu);
	done = e->done >= e->recorded;
	pthread_mutex_unlock(&e->mu);
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

API CUresult cuEventSynchronize(CUevent e)
{
	uint64_t want;

	pthread_mutex_lock(&e->mu);
	want = e->recorded;
	pthread_mutex_unlock(&e->mu);
	for (;;) { /* spin and yield, as wait_idle */
		int done;

		pthread_mutex_lock(&e->mu);
		done = e->done >= want;
		pthread_mutex_unlock(&e->mu);
		if (done)
			return CUDA_SUCCESS;
		sched_yield();
	}
}

/* ---- ground truth for tests (not CUDA API) ---- */

API unsigned long long vgpu_event_done_ns(CUevent e)
{
	unsigned long long t;

	pthread_mutex_lock(&e->mu);
	t = e->done_ns;
	pthread_mutex_unlock(&e->mu);
	return t;
}

API unsigned long long vgpu_stream_idle_ns(CUstream hs)
{
	struct vstream *s = resolve(hs);
	unsigned long long t;

	pthread_mutex_lock(&s->mu);
	t = s->idle_ns;
	pthread_mutex_unlock(&s->mu);
	return t;
}
