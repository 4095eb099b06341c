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

#include "cuda_work.bpf.h"

/*
 * Work on a stream (a launch, an async copy, a capture's begin or end) and a device-wide sync
 * are done by two programs that every entry point tail-calls: each entry reads its own
 * arguments into the per-CPU cuda_entry and jumps. The work (finding the stream's slot, 5 000
 * to 14 000 instructions) is then verified twice in all, not once per entry point (22 of
 * them): most of the CUDA family's load time, and of tokenscope's start
 * (docs/performance.md, Start). The jump costs an entry a map lookup and a tail call.
 */
enum stream_work { WORK_LAUNCH, WORK_COPY, WORK_CAPTURE_BEGIN, WORK_CAPTURE_END };

struct cuda_entry {
	struct launch l; /* WORK_LAUNCH; l.stream for all */
	__u32 api;
	__u32 what; /* enum stream_work */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuda_entry);
} cuda_entry SEC(".maps");

static __always_inline struct cuda_entry *entry_scratch(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cuda_entry, &zero);
}

/*
 * Device-wide sync: every stream of the process hands over its work first, one stream a
 * loop step (ts_loop: verified once, where the 16 streams unrolled made the device sync's
 * program the largest the verifier walked at start, 35 000 instructions). Reached through
 * cuda_device_sync_work only, whose entry scratch holds the API.
 */
TS_LOOP_STEP(flush_stream)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct cuda_entry *e = entry_scratch();
	struct cuda_proc *p = bpf_map_lookup_elem(&cuda_procs, &tgid);
	struct work_slot *s;
	__u64 stream;

	if (!e || !p || i >= TS_GPU_MAX_STREAMS)
		return 1;
	if (!p->s[i])
		return 0;
	stream = p->s[i] - 1;
	s = work_find(tgid, stream);
	if (s && (s->w.launches || s->w.graph_launches || s->w.copies))
		send_mark(TS_GPU_FLUSH, TS_GPU_SCOPE_STREAM, stream, 0, e->api, true, 0, 0);
	return 0;
}

static __always_inline int launch(struct pt_regs *ctx, const struct launch *l, __u32 api);
static __always_inline int async_copy(struct pt_regs *ctx, __u64 stream, __u32 api);
static __always_inline int capture(__u64 stream, __u32 on);
static __always_inline int cuda_call_enter(__u32 kind, __u32 scope, __u64 stream, __u64 event,
					   __u32 api);

/* Attached nowhere: reached from the entry points (cuda_work_progs). */
SEC("uprobe")
int cuda_stream_work(struct pt_regs *ctx)
{
	struct cuda_entry *e = entry_scratch();

	if (!e)
		return 0;
	switch (e->what) {
	case WORK_LAUNCH:
		return launch(ctx, &e->l, e->api);
	case WORK_COPY:
		return async_copy(ctx, e->l.stream, e->api);
	default:
		return capture(e->l.stream, e->what == WORK_CAPTURE_BEGIN);
	}
}

SEC("uprobe")
int cuda_device_sync_work(struct pt_regs *ctx)
{
	struct cuda_entry *e = entry_scratch();

	return e ? cuda_call_enter(TS_GPU_SYNC_ENTER, TS_GPU_SCOPE_DEVICE, 0, 0, e->api) : 0;
}

enum { PROG_STREAM_WORK, PROG_DEVICE_SYNC };

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct pt_regs *));
} cuda_work_progs SEC(".maps") = {
	.values = { [PROG_STREAM_WORK] = (void *)&cuda_stream_work,
		    [PROG_DEVICE_SYNC] = (void *)&cuda_device_sync_work },
};

/* An entry point's jump to the shared work (l: NULL but for launches). */
static __always_inline int jump(struct pt_regs *ctx, __u32 prog, __u32 what, __u64 stream,
				const struct launch *l, __u32 api)
{
	struct cuda_entry *e = entry_scratch();

	if (!e)
		return 0;
	if (l)
		e->l = *l;
	e->l.stream = stream;
	e->what = what;
	e->api = api;
	bpf_tail_call(ctx, &cuda_work_progs, prog);
	ts_count(TS_CNT_GPU_DROPS, 1); /* the tail call failed: the call goes uncounted */
	return 0;
}

/* ---- launches ---- */

static __always_inline int launch(struct pt_regs *ctx, const struct launch *l, __u32 api)
{
	struct work_slot *s = work_call(ctx, l->stream, l->ret, api);

	if (!s)
		return 0;
	if (s->w.capturing)
		ts_count(TS_CNT_GPU_CAPTURED, 1);
	else
		add_launch(&s->w, l);
	return 0;
}

/* cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
 *                  cudaStream_t stream): each dim3 travels in two registers.
 * cudaLaunchCooperativeKernel has the same arguments. */
static __always_inline int rt_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	__u64 gxy = PT_REGS_PARM2(ctx), bxy = PT_REGS_PARM4(ctx);
	struct launch l = {
		.stream = norm_stream(stack_arg(ctx, 2), ptsz), .id = PT_REGS_PARM1(ctx),
		.flags = TS_KS_STUB, .grid = { (__u32)gxy, gxy >> 32, (__u32)PT_REGS_PARM3(ctx) },
		.block = { (__u32)bxy, bxy >> 32, (__u32)PT_REGS_PARM5(ctx) },
	};

	return jump(ctx, PROG_STREAM_WORK, WORK_LAUNCH, l.stream, &l, api);
}

/* cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) */
static __always_inline int rt_launch_ex(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct {
		__u32 grid[3], block[3];
		__u64 shmem, stream;
	} c = {};
	struct launch l = { .id = PT_REGS_PARM2(ctx), .flags = TS_KS_STUB };

	bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	l.stream = norm_stream(c.stream, ptsz);
	__builtin_memcpy(l.grid, c.grid, sizeof(l.grid));
	__builtin_memcpy(l.block, c.block, sizeof(l.block));
	return jump(ctx, PROG_STREAM_WORK, WORK_LAUNCH, l.stream, &l, api);
}

/* cuLaunchKernel(CUfunction f, gx, gy, gz, bx, by, bz, shmem, CUstream s, params, extra);
 * cuLaunchCooperativeKernel has the same first nine arguments. The return address and the
 * stack arguments come in one read. */
static __always_inline int drv_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct {
		__u64 ret, bz, shmem, stream;
	} st = {};
	struct launch l = { .id = PT_REGS_PARM1(ctx) };

	bpf_probe_read_user(&st, sizeof(st), (void *)PT_REGS_SP(ctx));
	l.stream = norm_stream(st.stream, ptsz);
	l.ret = st.ret;
	l.grid[0] = (__u32)PT_REGS_PARM2(ctx);
	l.grid[1] = (__u32)PT_REGS_PARM3(ctx);
	l.grid[2] = (__u32)PT_REGS_PARM4(ctx);
	l.block[0] = (__u32)PT_REGS_PARM5(ctx);
	l.block[1] = (__u32)PT_REGS_PARM6(ctx);
	l.block[2] = (__u32)st.bz;
	return jump(ctx, PROG_STREAM_WORK, WORK_LAUNCH, l.stream, &l, api);
}

/* cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) */
static __always_inline int drv_launch_ex(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct {
		__u32 grid[3], block[3];
		__u32 shmem, _pad;
		__u64 stream;
	} c = {};
	struct launch l = { .id = PT_REGS_PARM2(ctx) };

	bpf_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(ctx));
	l.stream = norm_stream(c.stream, ptsz);
	__builtin_memcpy(l.grid, c.grid, sizeof(l.grid));
	__builtin_memcpy(l.block, c.block, sizeof(l.block));
	return jump(ctx, PROG_STREAM_WORK, WORK_LAUNCH, l.stream, &l, api);
}

/* cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s), cuGraphLaunch(CUgraphExec, CUstream) */
static __always_inline int graph_launch(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	struct launch l = {
		.stream = norm_stream(PT_REGS_PARM2(ctx), ptsz), .id = PT_REGS_PARM1(ctx),
		.flags = TS_KS_GRAPH, .graph = true,
	};

	return jump(ctx, PROG_STREAM_WORK, WORK_LAUNCH, l.stream, &l, api);
}

BOTH_STREAMS(cuda_launch, rt_launch, TS_GPU_RUNTIME)
BOTH_STREAMS(cuda_launch_ex, rt_launch_ex, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_launch, drv_launch, TS_GPU_DRIVER)
BOTH_STREAMS(cu_launch_ex, drv_launch_ex, TS_GPU_DRIVER)
BOTH_STREAMS(cuda_graph, graph_launch, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_graph, graph_launch, TS_GPU_DRIVER)

/* ---- async copies: work on the stream, no marker ---- */

static __always_inline int async_copy(struct pt_regs *ctx, __u64 stream, __u32 api)
{
	struct work_slot *s = work_call(ctx, stream, 0, api);

	if (s && !s->w.capturing)
		__sync_fetch_and_add(&s->w.copies, 1);
	return 0;
}

/* cudaMemcpyAsync(dst, src, count, kind, stream) */
static __always_inline int rt_copy_async(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return jump(ctx, PROG_STREAM_WORK, WORK_COPY, norm_stream(PT_REGS_PARM5(ctx), ptsz), NULL,
		    api);
}

/* cuMemcpyDtoHAsync_v2(dst, src, bytes, stream), cuMemcpyAsync(dst, src, bytes, stream) */
static __always_inline int drv_copy_async(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return jump(ctx, PROG_STREAM_WORK, WORK_COPY, norm_stream(PT_REGS_PARM4(ctx), ptsz), NULL,
		    api);
}

BOTH_STREAMS(cuda_copy_async, rt_copy_async, TS_GPU_RUNTIME)
BOTH_STREAMS(cu_copy_async, drv_copy_async, TS_GPU_DRIVER)

/* ---- event record, stream wait ---- */

static __always_inline int ordering(struct pt_regs *ctx, __u32 kind, __u64 stream, __u64 event,
				    __u32 api)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct cuda_proc *p;

	if (!ts_traced(tgid))
		return 0;
	p = proc_get(tgid);
	if (p && api == TS_GPU_RUNTIME)
		learn_runtime(ctx, p);
	else if (p && p->rt_lo && from_runtime(return_address(ctx), p->rt_lo, p->rt_hi))
		return 0;
	send_mark(kind, TS_GPU_SCOPE_STREAM, stream, event, api, kind == TS_GPU_RECORD, 0, 0);
	return 0;
}

/* cudaEventRecord(event, stream[, flags]), cuEventRecord(event, stream[, flags]) */
static __always_inline int record(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return ordering(ctx, TS_GPU_RECORD, norm_stream(PT_REGS_PARM2(ctx), ptsz),
			PT_REGS_PARM1(ctx), api);
}

/* cudaStreamWaitEvent(stream, event, flags), cuStreamWaitEvent(stream, event, flags) */
static __always_inline int wait_event(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return ordering(ctx, TS_GPU_WAIT, norm_stream(PT_REGS_PARM1(ctx), ptsz),
			PT_REGS_PARM2(ctx), api);
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
		ts_loop(TS_GPU_MAX_STREAMS, TS_GPU_MAX_STREAMS, flush_stream);
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
/* cudaDeviceSynchronize(), cuCtxSynchronize(): flushing every stream, the shared work */
SEC("uprobe") int cuda_device_sync(struct pt_regs *ctx)
{
	return jump(ctx, PROG_DEVICE_SYNC, 0, 0, NULL, TS_GPU_RUNTIME);
}

SEC("uprobe") int cu_ctx_sync(struct pt_regs *ctx)
{
	return jump(ctx, PROG_DEVICE_SYNC, 0, 0, NULL, TS_GPU_DRIVER);
}

/* ---- stream capture: launches into a capture build a graph, they do not run ---- */

static __always_inline int capture(__u64 stream, __u32 on)
{
	__u64 pt = bpf_get_current_pid_tgid();
	struct work_slot *s;

	if (!ts_traced(pt >> 32))
		return 0;
	s = work_get(pt >> 32, stream);
	if (s)
		s->w.capturing = on;
	return 0;
}

/* cudaStreamBeginCapture(stream, mode), cuStreamBeginCapture(_v2)(stream, mode),
 * cudaStreamEndCapture(stream, graph *), cuStreamEndCapture(stream, graph *): runtime and
 * driver alike. */
static __always_inline int capture_begin_fn(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return jump(ctx, PROG_STREAM_WORK, WORK_CAPTURE_BEGIN, norm_stream(PT_REGS_PARM1(ctx), ptsz),
		    NULL, api);
}

static __always_inline int capture_end_fn(struct pt_regs *ctx, bool ptsz, __u32 api)
{
	return jump(ctx, PROG_STREAM_WORK, WORK_CAPTURE_END, norm_stream(PT_REGS_PARM1(ctx), ptsz),
		    NULL, api);
}

BOTH_STREAMS(capture_begin, capture_begin_fn, 0)
BOTH_STREAMS(capture_end, capture_end_fn, 0)

/* A thread that dies inside a sync or a name call must not leave state that its tid's next
 * calls would find. A process that used CUDA gives its streams' slots back and is reported
 * gone (its open work is then counted as never observed, and a later process with the same
 * pid starts clean). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(cuda_thread_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct cuda_proc *cp;

	bpf_map_delete_elem(&cuda_calls, &tid);
	bpf_map_delete_elem(&cuda_name_calls, &tid);
	if (tid != tgid || !(cp = bpf_map_lookup_elem(&cuda_procs, &tgid)))
		return 0;
	for (int i = 0; i < TS_GPU_MAX_STREAMS; i++) {
		struct work_key key = { .pid = tgid, .stream = cp->s[i] - 1 };
		struct work_slot *s;
		__u32 *slot;

		if (!cp->s[i] || !(slot = bpf_map_lookup_elem(&cuda_slot_of, &key)))
			continue;
		s = slot_at(*slot);
		if (s && s->pid == tgid) {
			s->pid = 0;
			bpf_map_push_elem(&cuda_free_slots, slot, 0);
		}
		bpf_map_delete_elem(&cuda_slot_of, &key);
	}
	bpf_map_delete_elem(&cuda_procs, &tgid);
	ts_send_proc(TS_EV_EXIT);
	return 0;
}
