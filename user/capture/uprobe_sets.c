// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>

#include "capture/uprobe_sets.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* OpenSSL: the order matters to tls_file() below and to attach.c (TLS_READ...). */
static const struct uprobe_spec tls_uprobes[] = {
	{ "SSL_read", "ssl_read_enter", "ssl_read_exit" },
	{ "SSL_read_ex", "ssl_read_ex_enter", "ssl_read_ex_exit" },
	{ "SSL_write", "ssl_write_enter", "ssl_write_exit" },
	{ "SSL_write_ex", "ssl_write_ex_enter", "ssl_write_ex_exit" },
	/* the return of SSL_write_ex2 reads like SSL_write_ex's: same program */
	{ "SSL_write_ex2", "ssl_write_ex2_enter", "ssl_write_ex_exit" },
	{ "SSL_free", "ssl_free_enter", NULL },
};

/* dlopen may bring a libssl or a CUDA library: the process is rescanned when it returns. */
static const struct uprobe_spec dlopen_uprobes[] = {
	{ "dlopen", NULL, "dlopen_exit" },
};

/* CUDA runtime and driver entry points: every variant that exists in a file is probed. */
static const struct uprobe_spec cuda_uprobes[] = {
	/* runtime: libcudart, or a binary with cudart linked in */
	{ "cudaLaunchKernel", "cuda_launch", NULL },
	{ "cudaLaunchKernel_ptsz", "cuda_launch_ptsz", NULL },
	{ "cudaLaunchCooperativeKernel", "cuda_launch", NULL },
	{ "cudaLaunchCooperativeKernel_ptsz", "cuda_launch_ptsz", NULL },
	{ "cudaLaunchKernelExC", "cuda_launch_ex", NULL },
	{ "cudaLaunchKernelExC_ptsz", "cuda_launch_ex_ptsz", NULL },
	{ "cudaGraphLaunch", "cuda_graph", NULL },
	{ "cudaGraphLaunch_ptsz", "cuda_graph_ptsz", NULL },
	{ "cudaMemcpyAsync", "cuda_copy_async", NULL },
	{ "cudaMemcpyAsync_ptsz", "cuda_copy_async_ptsz", NULL },
	{ "cudaEventRecord", "cuda_record", NULL },
	{ "cudaEventRecord_ptsz", "cuda_record_ptsz", NULL },
	{ "cudaEventRecordWithFlags", "cuda_record", NULL },
	{ "cudaEventRecordWithFlags_ptsz", "cuda_record_ptsz", NULL },
	{ "cudaStreamWaitEvent", "cuda_wait", NULL },
	{ "cudaStreamWaitEvent_ptsz", "cuda_wait_ptsz", NULL },
	{ "cudaStreamSynchronize", "cuda_stream_sync", "cuda_ret" },
	{ "cudaStreamSynchronize_ptsz", "cuda_stream_sync_ptsz", "cuda_ret" },
	{ "cudaStreamQuery", "cuda_stream_query", "cuda_ret" },
	{ "cudaStreamQuery_ptsz", "cuda_stream_query_ptsz", "cuda_ret" },
	{ "cudaEventSynchronize", "cuda_event_sync", "cuda_ret" },
	{ "cudaEventQuery", "cuda_event_query", "cuda_ret" },
	{ "cudaDeviceSynchronize", "cuda_device_sync", "cuda_ret" },
	{ "cudaMemcpy", "cuda_copy", "cuda_ret" },
	{ "cudaMemcpy_ptds", "cuda_copy_ptsz", "cuda_ret" },
	{ "cudaStreamBeginCapture", "capture_begin", NULL },
	{ "cudaStreamBeginCapture_ptsz", "capture_begin_ptsz", NULL },
	{ "cudaStreamEndCapture", "capture_end", NULL },
	{ "cudaStreamEndCapture_ptsz", "capture_end_ptsz", NULL },
	/* driver: libcuda.so.1 */
	{ "cuLaunchKernel", "cu_launch", NULL },
	{ "cuLaunchKernel_ptsz", "cu_launch_ptsz", NULL },
	{ "cuLaunchCooperativeKernel", "cu_launch", NULL },
	{ "cuLaunchCooperativeKernel_ptsz", "cu_launch_ptsz", NULL },
	{ "cuLaunchKernelEx", "cu_launch_ex", NULL },
	{ "cuLaunchKernelEx_ptsz", "cu_launch_ex_ptsz", NULL },
	{ "cuGraphLaunch", "cu_graph", NULL },
	{ "cuGraphLaunch_ptsz", "cu_graph_ptsz", NULL },
	{ "cuMemcpyDtoHAsync_v2", "cu_copy_async", NULL },
	{ "cuMemcpyDtoHAsync_v2_ptsz", "cu_copy_async_ptsz", NULL },
	{ "cuMemcpyAsync", "cu_copy_async", NULL },
	{ "cuMemcpyAsync_ptsz", "cu_copy_async_ptsz", NULL },
	{ "cuEventRecord", "cu_record", NULL },
	{ "cuEventRecord_ptsz", "cu_record_ptsz", NULL },
	{ "cuEventRecordWithFlags", "cu_record", NULL },
	{ "cuEventRecordWithFlags_ptsz", "cu_record_ptsz", NULL },
	{ "cuStreamWaitEvent", "cu_wait", NULL },
	{ "cuStreamWaitEvent_ptsz", "cu_wait_ptsz", NULL },
	{ "cuStreamSynchronize", "cu_stream_sync", "cu_ret" },
	{ "cuStreamSynchronize_ptsz", "cu_stream_sync_ptsz", "cu_ret" },
	{ "cuStreamQuery", "cu_stream_query", "cu_ret" },
	{ "cuStreamQuery_ptsz", "cu_stream_query_ptsz", "cu_ret" },
	{ "cuEventSynchronize", "cu_event_sync", "cu_ret" },
	{ "cuEventQuery", "cu_event_query", "cu_ret" },
	{ "cuCtxSynchronize", "cu_ctx_sync", "cu_ret" },
	{ "cuMemcpyDtoH_v2", "cu_copy", "cu_ret" },
	{ "cuMemcpyDtoH_v2_ptds", "cu_copy_ptsz", "cu_ret" },
	{ "cuStreamBeginCapture", "capture_begin", NULL },
	{ "cuStreamBeginCapture_v2", "capture_begin", NULL },
	{ "cuStreamBeginCapture_ptsz", "capture_begin_ptsz", NULL },
	{ "cuStreamBeginCapture_v2_ptsz", "capture_begin_ptsz", NULL },
	{ "cuStreamEndCapture", "capture_end", NULL },
	{ "cuStreamEndCapture_ptsz", "capture_end_ptsz", NULL },
	{ "cuModuleGetFunction", "cu_get_function", "cu_get_function_ret" },
	{ "cuLibraryGetKernel", "cu_get_function", "cu_get_function_ret" },
	{ "cuKernelGetFunction", "cu_kernel_get_function", "cu_get_function_ret" },
};

/* llama.cpp's step functions: libllama.so under any name, a binary that links llama.cpp, or
 * a shim that exports them (its calls into the real one are the same step: bpf/llama.bpf.c). */
static const struct uprobe_spec llama_uprobes[] = {
	{ "llama_decode", "llama_decode_enter", "llama_step_exit" },
	{ "llama_encode", "llama_encode_enter", "llama_step_exit" },
	/* which model each context is (its steps' engine) */
	{ "llama_model_load_from_file", "llama_model_load_enter", "llama_model_load_exit" },
	{ "llama_load_model_from_file", "llama_model_load_enter", "llama_model_load_exit" },
	{ "llama_model_load_from_splits", "llama_model_splits_enter", "llama_model_load_exit" },
	{ "llama_init_from_model", "llama_context_new_enter", "llama_context_new_exit" },
	{ "llama_new_context_with_model", "llama_context_new_enter", "llama_context_new_exit" },
	/* not probed: read for where the context keeps its embeddings flag (capture/llama_layout.h) */
	{ "llama_set_embeddings", NULL, NULL },
	{ "_ZN13llama_context14set_embeddingsEb", NULL, NULL },
};
/* A library or executable that exports SSL_read and SSL_write is an OpenSSL. */
static bool tls_file(const char *base, const uint64_t *off)
{
	return off[TLS_READ] && off[TLS_WRITE];
}

/* glibc 2.34+ has dlopen in libc itself; older ones in libdl. */
static bool libc_file(const char *base, const uint64_t *off)
{
	return off[0] && (!strncmp(base, "libc.so", 7) || !strncmp(base, "libdl.so", 8));
}

static bool no_symbols(const char *base, const uint64_t *off)
{
	return false;
}

static bool any_symbol(const char *base, const uint64_t *off)
{
	return true;
}

const struct uprobe_set uprobe_sets[SET__N] = {
	[SET_TLS] = { "TLS", "tls", tls_uprobes, ARRAY_LEN(tls_uprobes), tls_file },
	[SET_DLOPEN] = { "dlopen", "tls", dlopen_uprobes, ARRAY_LEN(dlopen_uprobes), libc_file },
	[SET_CUDA] = { "CUDA", "cuda", cuda_uprobes, ARRAY_LEN(cuda_uprobes), any_symbol },
	[SET_LLAMA] = { "llama.cpp", "llama", llama_uprobes, ARRAY_LEN(llama_uprobes), any_symbol },
	/* Go's crypto/tls: no exported symbols to look up; examine_go finds its offsets */
	[SET_GO_TLS] = { "Go TLS", "tls", NULL, 0, no_symbols },
};

_Static_assert(ARRAY_LEN(tls_uprobes) + ARRAY_LEN(dlopen_uprobes) + ARRAY_LEN(cuda_uprobes) +
		       ARRAY_LEN(llama_uprobes) <= UPROBE_SETS_MAX_SYMS,
	       "UPROBE_SETS_MAX_SYMS: more symbols than attach.c makes room for");
