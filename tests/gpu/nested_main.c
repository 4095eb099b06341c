// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Drives libnestedrt.so: N launches through the runtime entry point, then M straight to the
 * driver, one event record and a stream sync through the runtime. Prints the truth. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUfunction;
typedef struct {
	unsigned x, y, z;
} dim3;

CUresult cuInit(unsigned);
CUresult cuModuleLoadData(void **, const void *);
CUresult cuModuleGetFunction(CUfunction *, void *, const char *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, CUstream, void **, void **);
int cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, CUstream);
int cudaEventRecord(CUevent, CUstream);
int cudaStreamSynchronize(CUstream);

int main(int argc, char **argv)
{
	int n_rt = argc > 1 ? atoi(argv[1]) : 10, n_drv = argc > 2 ? atoi(argv[2]) : 3;
	uint32_t us = 200;
	void *params[] = { &us };
	void *mod;
	CUfunction f;
	CUstream s;
	CUevent e;

	struct timespec warmup = { 0, 300000000 }; /* as a real program loads first */

	nanosleep(&warmup, NULL);
	if (cuInit(0) || cuModuleLoadData(&mod, "x") || cuModuleGetFunction(&f, mod, "nested_kernel") ||
	    cuStreamCreate(&s, 0) || cuEventCreate(&e, 0))
		return 1;
	for (int i = 0; i < n_rt; i++)
		cudaLaunchKernel(f, (dim3){ 2, 1, 1 }, (dim3){ 32, 1, 1 }, params, 0, s);
	for (int i = 0; i < n_drv; i++)
		cuLaunchKernel(f, 3, 1, 1, 32, 1, 1, 0, s, params, 0);
	cudaEventRecord(e, s);
	cudaStreamSynchronize(s);
	printf("{\"launches\":%d,\"runtime\":%d,\"driver\":%d}\n", n_rt + n_drv, n_rt, n_drv);
	return 0;
}
