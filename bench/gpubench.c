// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Launch-path workloads for `make bench`, timed with CLOCK_MONOTONIC:
 *   gpubench rt N    N cudaLaunchKernel calls into the real libcudart (no GPU here: each call
 *                    fails fast, after the probe at its entry has run)
 *   gpubench drv N   N cuLaunchKernel calls into the stand-in libcuda.so.1 (virtual GPU)
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

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;
	struct timespec warm = { 0, 300000000 };
	unsigned zero_us = 0;
	void *params[] = { &zero_us };
	void *mod, *f, *s;
	double t0;

	if (argc < 3 || n <= 0 || (strcmp(argv[1], "rt") && strcmp(argv[1], "drv"))) {
		fprintf(stderr, "usage: gpubench rt|drv N\n");
		return 2;
	}
	nanosleep(&warm, NULL);
	if (!strcmp(argv[1], "rt")) {
		for (int i = 0; i < 1000; i++)
			cudaLaunchKernel((const void *)bench_kernel_stub, (dim3){ 1, 1, 1 },
					 (dim3){ 32, 1, 1 }, NULL, 0, NULL);
		t0 = now_ns();
		for (long i = 0; i < n; i++)
			cudaLaunchKernel((const void *)bench_kernel_stub, (dim3){ 1, 1, 1 },
					 (dim3){ 32, 1, 1 }, NULL, 0, NULL);
	} else {
		if (cuInit(0) || cuModuleLoadData(&mod, "x") || cuModuleGetFunction(&f, mod, "k") ||
		    cuStreamCreate(&s, 0))
			return 1;
		for (int i = 0; i < 1000; i++)
			cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
		cuStreamSynchronize(s);
		t0 = now_ns();
		for (long i = 0; i < n; i++)
			cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
	}
	printf("%.1f\n", (now_ns() - t0) / n);
	if (!strcmp(argv[1], "drv"))
		cuStreamSynchronize(s);
	return 0;
}
