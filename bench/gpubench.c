// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Launch-path workloads for `make bench`, timed with CLOCK_MONOTONIC:
 *   gpubench rt N    N cudaLaunchKernel calls into the real libcudart (no GPU here: each call
 *                    fails fast, after the probe at its entry has run)
 *   gpubench drv N   N cuLaunchKernel calls into the stand-in libcuda.so.1 (virtual GPU)
 *   gpubench rtgraph N   N cudaGraphLaunch calls into the real libcudart (fail fast, as rt)
 *   gpubench drvgraph N  N cuGraphLaunch calls of a captured one-kernel graph, stand-in libcuda
 * Each first waits 300 ms (tracers attach to new processes' libraries meanwhile), launches
 * 1000 times untimed, then prints nanoseconds per launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
	unsigned x, y, z;
} dim3;

int cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
		     void *stream);
int cudaGraphLaunch(void *exec, void *stream);
int cuStreamBeginCapture_v2(void *, int);
int cuStreamEndCapture(void *, void **);
int cuGraphInstantiateWithFlags(void **, void *, unsigned long long);
int cuGraphLaunch(void *, void *);
int cuInit(unsigned);
int cuModuleLoadData(void **, const void *);
int cuModuleGetFunction(void **, void *, const char *);
int cuStreamCreate(void **, unsigned);
int cuStreamSynchronize(void *);
int cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		   void *, void **, void **);

__attribute__((noinline)) void bench_kernel_stub(void)
{
	__asm__ volatile("" ::: "memory");
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static const char *const modes[] = { "rt", "drv", "rtgraph", "drvgraph" };

static int mode_of(const char *m)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(m, modes[i]))
			return i;
	return -1;
}

/* One call of the mode's entry point; the driver modes' handles are set up first. */
static void *mod, *f, *s, *graph, *exec;
static unsigned zero_us;
static void *params[] = { &zero_us };

static void call(int mode)
{
	switch (mode) {
	case 0:
		cudaLaunchKernel((const void *)bench_kernel_stub, (dim3){ 1, 1, 1 }, (dim3){ 32, 1, 1 },
				 NULL, 0, NULL);
		break;
	case 1:
		cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
		break;
	case 2:
		cudaGraphLaunch(NULL, NULL);
		break;
	default:
		cuGraphLaunch(exec, s);
	}
}

static int driver_setup(int mode)
{
	if (cuInit(0) || cuModuleLoadData(&mod, "x") || cuModuleGetFunction(&f, mod, "k") ||
	    cuStreamCreate(&s, 0))
		return 1;
	if (mode == 3 && (cuStreamBeginCapture_v2(s, 0) ||
			  cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL) ||
			  cuStreamEndCapture(s, &graph) || cuGraphInstantiateWithFlags(&exec, graph, 0)))
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;
	int mode = argc > 2 ? mode_of(argv[1]) : -1;
	struct timespec warm = { 0, 300000000 };
	double t0;

	if (mode < 0 || n <= 0) {
		fprintf(stderr, "usage: gpubench rt|drv|rtgraph|drvgraph N\n");
		return 2;
	}
	nanosleep(&warm, NULL);
	if ((mode & 1) && driver_setup(mode))
		return 1;
	for (int i = 0; i < 1000; i++)
		call(mode);
	if (mode & 1)
		cuStreamSynchronize(s);
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		call(mode);
	printf("%.1f\n", (now_ns() - t0) / n);
	if (mode & 1)
		cuStreamSynchronize(s);
	return 0;
}
