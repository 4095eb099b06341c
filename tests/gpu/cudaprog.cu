// A CUDA program built with nvcc against the real libcudart (shared), with named kernels and
// a known launch/sync sequence. Without a GPU every call fails ("driver version is
// insufficient"), but each launch and sync still enters libcudart, where tokenscope sees it.
// It prints the sequence it ran as JSON (the test's ground truth).
#include <cstdio>
#include <cuda_runtime.h>

__global__ void prefill_attn(float *x) { if (x) x[threadIdx.x] += 1.0f; }

template <typename T> __global__ void decode_step(T *x, int n) { if (x && threadIdx.x < n) x[threadIdx.x] = 0; }

namespace ts {
__global__ void mlp(const float *in, float *out) { if (out) out[0] = in ? in[0] : 0.0f; }
}

int main()
{
	float *f = nullptr;
	int *i = nullptr;
	cudaEvent_t ev = nullptr;

	/* step 1: 3 + 2 launches, closed by a stream sync */
	for (int k = 0; k < 3; k++)
		prefill_attn<<<4, 128>>>(f);
	for (int k = 0; k < 2; k++)
		decode_step<int><<<dim3(2, 2, 1), dim3(64, 1, 1)>>>(i, 7);
	cudaError_t e1 = cudaStreamSynchronize(0);
	/* step 2: 5 launches, closed by a device sync */
	for (int k = 0; k < 5; k++)
		ts::mlp<<<1, 32>>>(f, f);
	cudaError_t e2 = cudaDeviceSynchronize();
	/* step 3: 2 launches, an event record, an event sync */
	for (int k = 0; k < 2; k++)
		prefill_attn<<<8, 256>>>(f);
	cudaEventRecord(ev, 0);
	cudaError_t e3 = cudaEventSynchronize(ev);
	printf("{\"steps\":[{\"prefill_attn(float*)\":[3,[4,1,1],[128,1,1]],"
	       "\"void decode_step<int>(int*, int)\":[2,[2,2,1],[64,1,1]]},"
	       "{\"ts::mlp(float const*, float*)\":[5,[1,1,1],[32,1,1]]},"
	       "{\"prefill_attn(float*)\":[2,[8,1,1],[256,1,1]]}],"
	       "\"marks\":8,\"errors\":[%d,%d,%d]}\n", (int)e1, (int)e2, (int)e3);
	return 0;
}
