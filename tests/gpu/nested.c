// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Test harness for nested runtime -> driver calls: a shared library that exports runtime
 * entry points (cudaLaunchKernel, cudaGraphLaunch, cudaEventRecord, cudaStreamWaitEvent,
 * cudaStreamSynchronize) and forwards each to the driver (the stand-in libcuda.so.1), as
 * libcudart does on a real GPU. tokenscope probes both: each call must count once.
 */
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUfunction;
typedef void *CUgraphExec;
typedef struct {
	unsigned x, y, z;
} dim3;

CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, CUstream, void **, void **);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuStreamSynchronize(CUstream);

/* The "host stub" is the CUfunction here: the harness launches driver functions by handle. */
__attribute__((visibility("default"))) int cudaLaunchKernel(const void *func, dim3 grid,
							      dim3 block, void **args,
							      size_t shmem, CUstream stream)
{
	return cuLaunchKernel((CUfunction)func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
			      (unsigned)shmem, stream, args, 0);
}

__attribute__((visibility("default"))) int cudaGraphLaunch(CUgraphExec g, CUstream s)
{
	return cuGraphLaunch(g, s);
}

__attribute__((visibility("default"))) int cudaEventRecord(CUevent e, CUstream s)
{
	return cuEventRecord(e, s);
}

__attribute__((visibility("default"))) int cudaStreamWaitEvent(CUstream s, CUevent e, unsigned f)
{
	return cuStreamWaitEvent(s, e, f);
}

__attribute__((visibility("default"))) int cudaStreamSynchronize(CUstream s)
{
	return cuStreamSynchronize(s);
}
