// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU work capture: uprobes on the CUDA runtime (libcudart, or a binary with cudart linked
 * in) and driver (libcuda.so.1) launch, graph-launch, event, stream-wait, sync, query and
 * copy entry points.
 *
 * Launches are never sent one by one: they are aggregated per (process, stream) in the `work`
 * map - counts, first/last launch time, a bounded sample of kernels - and that aggregate
 * travels with the next marker on the stream (event record, sync, query that reports done).
 * Sync calls send their entry and their return. A driver call made from inside a probed
 * runtime call on the same thread is not counted again.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#ifndef PT_REGS_PARM6
#define PT_REGS_PARM6(x) ((x)->r9) /* libbpf 1.1 stops at five on x86-64 */
#endif

struct work_key {
	__u32 pid;
	__u32 _pad;
	__u64 stream;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct work_key);
	__type(value, struct ts_gpu_work);
} cuda_work SEC(".maps");

/* The streams of each process that have a `work` entry, for device-wide syncs. */
struct pid_streams {
	__u64 s[TS_GPU_MAX_STREAMS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct pid_streams);
} cuda_streams SEC(".maps");

/* Zeroed values to create map entries from: they are too big for the BPF stack. Never
 * written. */
struct zeros {
	struct ts_gpu_work work;
	struct pid_streams streams;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct zeros);
} cuda_zeros SEC(".maps");

/* A sync/query/copy call in progress on a thread, from entry to return. */
struct gpu_call {
	__u32 kind;  /* TS_GPU_SYNC_ENTER or TS_GPU_QUERY_DONE (a query) */
	__u32 scope;
	__u64 stream;
	__u64 event;
	__u64 enter_ns;
	__u32 api;
	__u32 driver_inside; /* a driver call is running inside this runtime call */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct gpu_call);
} cuda_calls SEC(".maps");

/* The last entry-only runtime call (launch, record, wait, copy) of a thread: a driver call of
 * the same kind and key right after it is the runtime calling the driver. */
enum pending_kind { P_LAUNCH = 1, P_GRAPH, P_RECORD, P_WAIT, P_COPY };

struct pending {
	__u32 kind;
	__u32 _pad;
	__u64 key;
	__u64 ts;
};

#define NESTED_WINDOW_NS 10000000ull

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pending);
} cuda_pending SEC(".maps");

/* cuModuleGetFunction / cuLibraryGetKernel arguments, entry to return. */
struct name_call {
	__u64 out;
	__u64 name;  /* const char * (0 for cuKernelGetFunction) */
	__u64 alias; /* cuKernelGetFunction: the CUkernel */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct name_call);
} cuda_name_calls SEC(".maps");

/* The legacy (0, CU_STREAM_LEGACY=1) default stream is one stream; per-thread default
 * (CU_STREAM_PER_THREAD=2, or 0 through a _ptsz/_ptds entry point) another. */
static __always_inline __u64 norm_stream(__u64 s, bool per_thread)
{
	if (s == 0)
		return per_thread ? 2 : 0;
	return s == 1 ? 0 : s;
}

static __always_inline void set_pending(__u32 tid, __u32 kind, __u64 key, __u64 now)
{
	struct pending p = { .kind = kind, .key = key, .ts = now };

	bpf_map_update_elem(&cuda_pending, &tid, &p, BPF_ANY);
}

/* A driver call: was it made by the runtime call that this thread just entered? */
static __always_inline bool nested(__u32 tid, __u32 kind, __u64 key, __u64 now)
{
	struct pending *p = bpf_map_lookup_elem(&cuda_pending, &tid);

	if (!p || p->kind != kind || p->key != key || now - p->ts > NESTED_WINDOW_NS)
		return false;
	bpf_map_delete_elem(&cuda_pending, &tid);
	ts_count(TS_CNT_GPU_NESTED, 1);
	return true;
}

static __always_inline struct ts_gpu_work *work_get(__u32 tgid, __u64 stream)
{
	struct work_key key = { .pid = tgid, .stream = stream };
	struct ts_gpu_work *w = bpf_map_lookup_elem(&cuda_work, &key);
	struct pid_streams *ps;
	struct zeros *z;
	__u32 zero = 0;
	int slot = -1;

	if (w)
		return w;
	z = bpf_map_lookup_elem(&cuda_zeros, &zero);
	if (!z)
		return NULL;
	/* a new stream of this process: give it a slot for device-wide syncs */
	ps = ts_lookup_or_init(&cuda_streams, &tgid, &z->streams);
	if (!ps)
		return NULL;
	for (int i = 0; i < TS_GPU_MAX_STREAMS; i++) {
		if (ps->s[i] == stream + 1) { /* stored +1 so that stream 0 is not "empty" */
			slot = i;
			break;
		}
		if (!ps->s[i] && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		ts_count(TS_CNT_GPU_NO_SLOT, 1);
		return NULL;
	}
	if (slot < TS_GPU_MAX_STREAMS)
		ps->s[slot] = stream + 1;
	w = ts_lookup_or_init(&cuda_work, &key, &z->work);
	if (!w)
		ts_count(TS_CNT_GPU_NO_SLOT, 1); /* the map is full */
	return w;
}

static __always_inline void add_launch(__u32 tgid, __u64 stream, __u64 id, __u32 flags,
				       __u32 gx, __u32 gy, __u32 gz, __u32 bx, __u32 by,
				       __u32 bz, bool graph)
{
	struct ts_gpu_work *w = work_get(tgid, stream);
	__u64 now = bpf_ktime_get_ns();

	if (!w)
		return;
	if (w->capturing) {
		ts_count(TS_CNT_GPU_CAPTURED, 1);
		return;
	}
	if (graph)
		__sync_fetch_and_add(&w->graph_launches, 1);
	else
		__sync_fetch_and_add(&w->launches, 1);
	if (!w->first_ns)
		w->first_ns = now;
	w->last_ns = now;
	ts_count(TS_CNT_GPU_LAUNCHES, 1);

	/* the bounded kernel sample: the same kernel with the same shape counts up */
	for (int i = 0; i < TS_KSAMPLES; i++) {
		struct ts_kernel_sample *k = &w->k[i];

		if (i >= w->nsamples) {
			k->id = id;
			k->count = 1;
			k->flags = flags;
			k->grid[0] = gx;
			k->grid[1] = gy;
			k->grid[2] = gz;
			k->block[0] = bx;
			k->block[1] = by;
			k->block[2] = bz;
			w->nsamples = i + 1;
			return;
		}
		if (k->id == id && k->grid[0] == gx && k->grid[1] == gy && k->grid[2] == gz &&
		    k->block[0] == bx && k->block[1] == by && k->block[2] == bz) {
			__sync_fetch_and_add(&k->count, 1);
			return;
		}
	}
	__sync_fetch_and_add(&w->other_samples, 1);
}

/* Send a mark; with take_work, the stream's aggregate travels with it and starts over. */
static __always_inline void send_mark(__u32 kind, __u32 scope, __u64 stream, __u64 event,
				      __u32 api, bool take_work, __s32 result, __u64 enter_ns)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct work_key key = { .pid = id >> 32, .stream = stream };
	struct ts_gpu_work *w = take_work ? bpf_map_lookup_elem(&cuda_work, &key) : NULL;
	struct ts_gpu_mark *m;

	if (w && w->capturing)
		return; /* inside a capture: records and syncs belong to the graph */
	m = ts_reserve(TS_EV_GPU_MARK, sizeof(*m), TS_CNT_GPU_DROPS);
	if (!m)
		return;
	m->kind = kind;
	m->scope = scope;
	m->stream = stream;
	m->event = event;
	m->api = api;
	m->result = result;
	m->enter_ns = enter_ns;
	if (w) {
		__builtin_memcpy(&m->work, w, sizeof(m->work));
		__builtin_memset(w, 0, sizeof(*w));
	} else {
		__builtin_memset(&m->work, 0, sizeof(m->work));
	}
	bpf_ringbuf_submit(m, ts_quiet());
}

/* Device-wide sync: every stream of the process hands over its work first. */
static __always_inline void flush_all(__u32 tgid, __u32 api)
{
	struct pid_streams *ps = bpf_map_lookup_elem(&cuda_streams, &tgid);

	if (!ps)
		return;
	for (int i = 0; i < TS_GPU_MAX_STREAMS; i++) {
		__u64 s = ps->s[i];
		struct work_key key = { .pid = tgid, .stream = s - 1 };
		struct ts_gpu_work *w;

		if (!s)
			continue;
		w = bpf_map_lookup_elem(&cuda_work, &key);
		if (w && (w->launches || w->graph_launches || w->copies))
			send_mark(TS_GPU_FLUSH, TS_GPU_SCOPE_STREAM, s - 1, 0, api, true, 0, 0);
	}
}

/*
 * Most entry points come twice: NAME takes 0 as the legacy default stream, NAME_ptsz (the
 * _ptsz/_ptds symbols) as the per-thread one. BOTH_STREAMS makes both programs from one body
 * fn(ctx, per_thread, api).
 */
#define BOTH_STREAMS(name, fn, api)                                                           \
	SEC("uprobe") int name(struct pt_regs *ctx) { return fn(ctx, false, api); }          \
	SEC("uprobe") int name##_ptsz(struct pt_regs *ctx) { return fn(ctx, true, api); }

/* ---- launches ---- */

static __always_inline int launch(__u64 stream, __u64 id, __u32 flags, __u32 gx, __u32 gy,
				  __u32 gz, __u32 bx, __u32 by, __u32 bz, bool graph, __u32 api)
{
	__u64 pt = bpf_get_current_pid_tgid(), now;
	__u32 tgid = pt >> 32, tid = (__u32)pt;

	if (!ts_traced(tgid))
		return 0;
	now = bpf_ktime_get_ns();
	if (api == TS_GPU_DRIVER) {
		if (nested(tid, graph ? P_GRAPH : P_LAUNCH, stream, now))
			return 0;
	} else {
		set_pending(tid, graph ? P_GRAPH : P_LAUNCH, stream, now);
	}
	add_launch(tgid, stream, id, flags, gx, gy, gz, bx, by, bz, graph);
	return 0;
}

static __always_inline __u64 stack_arg(struct pt_regs *ctx, int n)
{
	__u64 v = 0;

	/* x86-64: at entry, sp points at the return address; stack arguments follow it */
	bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * n));
	return v;
}

/* cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
 *                  cudaStream_t stream): each dim3 travels in two registers.
 * cudaLaunchCooperativeKernel has the same arguments. */
static __always_inline int rt_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	__u64 gxy = PT_REGS_PARM2(ctx), bxy = PT_REGS_PARM4(ctx);

	return launch(norm_stream(stack_arg(ctx, 2), ptsz), PT_REGS_PARM1(ctx), TS_KS_STUB,
		      (__u32)gxy, gxy >> 32, (__u32)PT_REGS_PARM3(ctx), (__u32)bxy, bxy >> 32,
		      (__u32)PT_REGS_PARM5(ctx), false, api);
}

/* cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) */
static __always_inline int rt_launch_ex(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct {
		__u32 grid[3], block[3];
		__u64 shmem, stream;
	} c = {};

	bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	return launch(norm_stream(c.stream, ptsz), PT_REGS_PARM2(ctx), TS_KS_STUB, c.grid[0],
		      c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], false, api);
}

/* cuLaunchKernel(CUfunction f, gx, gy, gz, bx, by, bz, shmem, CUstream s, params, extra);
 * cuLaunchCooperativeKernel has the same first nine arguments. */
static __always_inline int drv_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return launch(norm_stream(stack_arg(ctx, 3), ptsz), PT_REGS_PARM1(ctx), 0,
		      (__u32)PT_REGS_PARM2(ctx), (__u32)PT_REGS_PARM3(ctx),
		      (__u32)PT_REGS_PARM4(ctx), (__u32)PT_REGS_PARM5(ctx),
		      (__u32)PT_REGS_PARM6(ctx), (__u32)stack_arg(ctx, 1), false, api);
}

/* cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) */
static __always_inline int drv_launch_ex(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct {
		__u32 grid[3], block[3];
		__u32 shmem, _pad;
		__u64 stream;
	} c = {};

	bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	return launch(norm_stream(c.stream, ptsz), PT_REGS_PARM2(ctx), 0, c.grid[0], c.grid[1],
		      c.grid[2], c.block[0], c.block[1], c.block[2], false, api);
}

/* cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s), cuGraphLaunch(CUgraphExec, CUstream) */
static __always_inline int graph_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return launch(norm_stream(PT_REGS_PARM2(ctx), ptsz), PT_REGS_PARM1(ctx), TS_KS_GRAPH, 0, 0,
		      0, 0, 0, 0, true, api);
}

BOTH_STREAMS(cuda_launch, rt_launch, TS_GPU_RUNTIME)
BOTH_STREAMS(cuda_launch_ex, rt_launch_ex, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_launch, drv_launch, TS_GPU_DRIVER)
BOTH_STREAMS(cu_launch_ex, drv_launch_ex, TS_GPU_DRIVER)
BOTH_STREAMS(cuda_graph, graph_launch, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_graph, graph_launch, TS_GPU_DRIVER)

/* ---- async copies: work on the stream, no marker ---- */

static __always_inline int async_copy(__u64 stream, __u32 api)
{
	__u64 pt = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	struct ts_gpu_work *w;

	if (!ts_traced(tgid))
		return 0;
	if (api == TS_GPU_DRIVER) {
		if (nested(tid, P_COPY, stream, now))
			return 0;
	} else {
		set_pending(tid, P_COPY, stream, now);
	}
	w = work_get(tgid, stream);
	if (w && !w->capturing)
		__sync_fetch_and_add(&w->copies, 1);
	return 0;
}

/* cudaMemcpyAsync(dst, src, count, kind, stream) */
static __always_inline int rt_copy_async(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return async_copy(norm_stream(PT_REGS_PARM5(ctx), ptsz), api);
}

/* cuMemcpyDtoHAsync_v2(dst, src, bytes, stream), cuMemcpyAsync(dst, src, bytes, stream) */
static __always_inline int drv_copy_async(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return async_copy(norm_stream(PT_REGS_PARM4(ctx), ptsz), api);
}

BOTH_STREAMS(cuda_copy_async, rt_copy_async, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_copy_async, drv_copy_async, TS_GPU_DRIVER)

/* ---- event record, stream wait ---- */

static __always_inline int ordering(__u32 kind, __u64 stream, __u64 event, __u32 api)
{
	__u64 pt = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 tid = (__u32)pt;
	__u32 pk = kind == TS_GPU_RECORD ? P_RECORD : P_WAIT;

	if (!ts_traced(pt >> 32))
		return 0;
	if (api == TS_GPU_DRIVER) {
		if (nested(tid, pk, event, now))
			return 0;
	} else {
		set_pending(tid, pk, event, now);
	}
	send_mark(kind, TS_GPU_SCOPE_STREAM, stream, event, api, kind == TS_GPU_RECORD, 0, 0);
	return 0;
}

/* cudaEventRecord(event, stream[, flags]), cuEventRecord(event, stream[, flags]) */
static __always_inline int record(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return ordering(TS_GPU_RECORD, norm_stream(PT_REGS_PARM2(ctx), ptsz), PT_REGS_PARM1(ctx),
			api);
}

/* cudaStreamWaitEvent(stream, event, flags), cuStreamWaitEvent(stream, event, flags) */
static __always_inline int wait_event(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return ordering(TS_GPU_WAIT, norm_stream(PT_REGS_PARM1(ctx), ptsz), PT_REGS_PARM2(ctx),
			api);
}

BOTH_STREAMS(cuda_record, record, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_record, record, TS_GPU_DRIVER)
BOTH_STREAMS(cuda_wait, wait_event, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_wait, wait_event, TS_GPU_DRIVER)

/* ---- syncs, queries and blocking copies: entry and return ---- */

/* kind: TS_GPU_SYNC_ENTER for waits, TS_GPU_QUERY_DONE for queries */
static __always_inline int cuda_call_enter(__u32 kind, __u32 scope, __u64 stream, __u64 event,
				      __u32 api)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	struct gpu_call c = {
		.kind = kind, .scope = scope, .stream = stream, .event = event, .api = api,
	}, *cur;

	if (!ts_traced(tgid))
		return 0;
	cur = bpf_map_lookup_elem(&cuda_calls, &tid);
	if (api == TS_GPU_DRIVER && cur && cur->api == TS_GPU_RUNTIME) {
		cur->driver_inside = 1; /* the runtime's own driver call: its caller reports */
		ts_count(TS_CNT_GPU_NESTED, 1);
		return 0;
	}
	c.enter_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&cuda_calls, &tid, &c, BPF_ANY);
	if (kind != TS_GPU_SYNC_ENTER)
		return 0;
	if (scope == TS_GPU_SCOPE_DEVICE)
		flush_all(tgid, api);
	send_mark(TS_GPU_SYNC_ENTER, scope, stream, event, api, scope == TS_GPU_SCOPE_STREAM, 0, 0);
	return 0;
}

static __always_inline int cuda_call_return(__u32 api, long ret)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct gpu_call *c = bpf_map_lookup_elem(&cuda_calls, &tid);
	struct gpu_call copy;

	if (!c)
		return 0;
	if (api == TS_GPU_DRIVER && c->api == TS_GPU_RUNTIME) {
		c->driver_inside = 0;
		return 0;
	}
	copy = *c;
	bpf_map_delete_elem(&cuda_calls, &tid);
	if (copy.kind == TS_GPU_SYNC_ENTER)
		send_mark(TS_GPU_SYNC_RETURN, copy.scope, copy.stream, copy.event, api, false,
			  (__s32)ret, copy.enter_ns);
	else if (ret == 0) /* a query that reports the work done */
		send_mark(TS_GPU_QUERY_DONE, copy.scope, copy.stream, copy.event, api,
			  copy.scope == TS_GPU_SCOPE_STREAM, 0, copy.enter_ns);
	return 0;
}

SEC("uretprobe") int cuda_ret(struct pt_regs *ctx)
{
	return cuda_call_return(TS_GPU_RUNTIME, PT_REGS_RC(ctx));
}

SEC("uretprobe") int cu_ret(struct pt_regs *ctx)
{
	return cuda_call_return(TS_GPU_DRIVER, PT_REGS_RC(ctx));
}

/* cudaStreamSynchronize(stream), cuStreamSynchronize(stream) */
static __always_inline int stream_sync(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return cuda_call_enter(TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM,
			       norm_stream(PT_REGS_PARM1(ctx), ptsz), 0, api);
}

/* cudaStreamQuery(stream), cuStreamQuery(stream) */
static __always_inline int stream_query(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return cuda_call_enter(TS_GPU_QUERY_DONE, TS_GPU_SCOPE_STREAM,
			       norm_stream(PT_REGS_PARM1(ctx), ptsz), 0, api);
}

/* Blocking copies wait for the default stream: cudaMemcpy(dst, src, count, kind),
 * cuMemcpyDtoH_v2(dst, src, bytes); the _ptds entry points use the per-thread stream. */
static __always_inline int blocking_copy(struct pt_regs *ctx, bool ptds, __u32 api)
{
	return cuda_call_enter(TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_STREAM, norm_stream(0, ptds), 0,
			       api);
}

BOTH_STREAMS(cuda_stream_sync, stream_sync, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_stream_sync, stream_sync, TS_GPU_DRIVER)
BOTH_STREAMS(cuda_stream_query, stream_query, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_stream_query, stream_query, TS_GPU_DRIVER)
BOTH_STREAMS(cuda_copy, blocking_copy, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_copy, blocking_copy, TS_GPU_DRIVER)

/* Event and device scope: one program each. */
#define SYNC_CALL(name, kind, scope, api)                                                     \
	SEC("uprobe") int name(struct pt_regs *ctx)                                           \
	{                                                                                     \
		return cuda_call_enter(kind, scope, 0,                                        \
				       scope == TS_GPU_SCOPE_EVENT ? PT_REGS_PARM1(ctx) : 0,  \
				       api);                                                  \
	}

/* cudaEventSynchronize(event), cuEventSynchronize(event), and the queries */
SYNC_CALL(cuda_event_sync, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, TS_GPU_RUNTIME)
SYNC_CALL(cu_event_sync, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_EVENT, TS_GPU_DRIVER)
SYNC_CALL(cuda_event_query, TS_GPU_QUERY_DONE, TS_GPU_SCOPE_EVENT, TS_GPU_RUNTIME)
SYNC_CALL(cu_event_query, TS_GPU_QUERY_DONE, TS_GPU_SCOPE_EVENT, TS_GPU_DRIVER)
/* cudaDeviceSynchronize(), cuCtxSynchronize() */
SYNC_CALL(cuda_device_sync, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_DEVICE, TS_GPU_RUNTIME)
SYNC_CALL(cu_ctx_sync, TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_DEVICE, TS_GPU_DRIVER)

/* ---- stream capture: launches into a capture build a graph, they do not run ---- */

static __always_inline int capture(__u64 stream, __u32 on)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct ts_gpu_work *w;

	if (!ts_traced(pt >> 32))
		return 0;
	w = work_get(pt >> 32, stream);
	if (w)
		w->capturing = on;
	return 0;
}

/* cudaStreamBeginCapture(stream, mode), cuStreamBeginCapture(_v2)(stream, mode),
 * cudaStreamEndCapture(stream, graph *), cuStreamEndCapture(stream, graph *): runtime and
 * driver alike. */
static __always_inline int capture_begin_fn(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return capture(norm_stream(PT_REGS_PARM1(ctx), ptsz), 1);
}

static __always_inline int capture_end_fn(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return capture(norm_stream(PT_REGS_PARM1(ctx), ptsz), 0);
}

BOTH_STREAMS(capture_begin, capture_begin_fn, 0)
BOTH_STREAMS(capture_end, capture_end_fn, 0)

/* ---- kernel names of driver handles ---- */

/* cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name),
 * cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name) */
SEC("uprobe") int cu_get_function(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call c = { .out = PT_REGS_PARM1(ctx), .name = PT_REGS_PARM3(ctx) };

	if (!ts_traced(pt >> 32))
		return 0;
	bpf_map_update_elem(&cuda_name_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* cuKernelGetFunction(CUfunction *f, CUkernel k): the same kernel under another handle */
SEC("uprobe") int cu_kernel_get_function(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call c = { .out = PT_REGS_PARM1(ctx), .alias = PT_REGS_PARM2(ctx) };

	if (!ts_traced(pt >> 32))
		return 0;
	bpf_map_update_elem(&cuda_name_calls, &tid, &c, BPF_ANY);
	return 0;
}

SEC("uretprobe") int cu_get_function_ret(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call *c = bpf_map_lookup_elem(&cuda_name_calls, &tid);
	struct ts_gpu_kname *e;
	__u64 handle = 0;

	if (!c)
		return 0;
	if (PT_REGS_RC(ctx) == 0 && !bpf_probe_read_user(&handle, sizeof(handle), (void *)c->out) &&
	    handle) {
		e = ts_reserve(TS_EV_GPU_KNAME, sizeof(*e), TS_CNT_GPU_DROPS);
		if (e) {
			e->id = handle;
			e->alias = c->alias;
			e->flags = 0;
			e->_pad = 0;
			e->name[0] = 0;
			if (c->name &&
			    bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)c->name) < 0)
				e->name[0] = 0;
			bpf_ringbuf_submit(e, ts_quiet());
		}
	}
	bpf_map_delete_elem(&cuda_name_calls, &tid);
	return 0;
}

/* A thread that dies inside a sync or between a runtime call and its driver call must not
 * leave state that would make its tid's next calls look nested. A process that used CUDA
 * gives its streams' aggregates back and is reported gone (its open work is then counted as
 * never observed, and a later process with the same pid starts clean). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(cuda_thread_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct pid_streams *ps;

	bpf_map_delete_elem(&cuda_calls, &tid);
	bpf_map_delete_elem(&cuda_pending, &tid);
	bpf_map_delete_elem(&cuda_name_calls, &tid);
	if (tid != tgid || !(ps = bpf_map_lookup_elem(&cuda_streams, &tgid)))
		return 0;
	for (int i = 0; i < TS_GPU_MAX_STREAMS; i++) {
		struct work_key key = { .pid = tgid, .stream = ps->s[i] - 1 };

		if (ps->s[i])
			bpf_map_delete_elem(&cuda_work, &key);
	}
	bpf_map_delete_elem(&cuda_streams, &tgid);
	ts_send_proc(TS_EV_EXIT);
	return 0;
}
