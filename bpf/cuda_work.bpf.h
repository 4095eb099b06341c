/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUDA family's state (bpf/cuda.bpf.c includes this): per (process, stream) work slots
 * that gather launches until the stream's next marker, the processes' runtime ranges and
 * streams, calls in flight, and the helpers that find a slot, add a launch to it and send a
 * marker with the work it gathered.
 */
#ifndef TS_CUDA_WORK_BPF_H
#define TS_CUDA_WORK_BPF_H

struct work_key {
	__u32 pid;
	__u32 _pad;
	__u64 stream;
};

/*
 * The launch path is the hot one (an eager engine launches thousands of kernels a step), and
 * on it every helper call counts: 40-150 ns each on a host whose returns pay for a
 * speculation mitigation, against a trap of about 1 us. So a launch reaches its stream's
 * aggregate by inline loads only: aggregates live in the slots of an array (cuda_work), and a
 * per-CPU cache remembers the last (process, stream) and its slot. The hash map cuda_slot_of,
 * the authority on which slot is whose, is looked up when the cache misses and by markers.
 * Slots come from cuda_free_slots (given back at process exit), or are new.
 */
#define WORK_SLOTS 8192

struct work_slot {
	__u32 pid; /* owner (0: free) */
	__u32 _pad;
	__u64 stream;
	__u64 rt_lo, rt_hi; /* the process's CUDA runtime code: from_runtime() */
	struct ts_gpu_work w;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WORK_SLOTS);
	__type(key, __u32);
	__type(value, struct work_slot);
} cuda_work SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, WORK_SLOTS);
	__type(key, struct work_key);
	__type(value, __u32);
} cuda_slot_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, WORK_SLOTS);
	__type(value, __u32);
} cuda_free_slots SEC(".maps");

__u32 cuda_next_slot = 0; /* slots below it have been handed out at least once */

struct slot_cache {
	__u32 pid, slot;
	__u64 stream;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slot_cache);
} cuda_slot_cache SEC(".maps");

/* Per process: its streams that have a slot (for device-wide syncs), and where its CUDA
 * runtime's code lies. */
struct cuda_proc {
	__u64 s[TS_GPU_MAX_STREAMS]; /* stream + 1; 0: unused */
	__u64 rt_lo, rt_hi;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct cuda_proc);
} cuda_procs SEC(".maps");

/* A zeroed value to create entries from: too big for the BPF stack. Never written. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cuda_proc);
} cuda_zero_proc SEC(".maps");

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

/* Kernel names of driver handles: their calls in flight and programs (cuda_knames.bpf.h). */
#include "cuda_knames.bpf.h"

/* The legacy (0, CU_STREAM_LEGACY=1) default stream is one stream; per-thread default
 * (CU_STREAM_PER_THREAD=2, or 0 through a _ptsz/_ptds entry point) another. */
static __always_inline __u64 norm_stream(__u64 s, bool per_thread)
{
	if (s == 0)
		return per_thread ? 2 : 0;
	return s == 1 ? 0 : s;
}

/* x86-64: at a function's entry, sp points at the return address; stack arguments follow. */
static __always_inline __u64 return_address(struct pt_regs *ctx)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_SP(ctx));
	return v;
}

static __always_inline __u64 stack_arg(struct pt_regs *ctx, int n)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * n));
	return v;
}

/*
 * A driver call made by the CUDA runtime, for a runtime call counted already, returns into
 * the runtime's code; a driver call from anywhere else (Triton's launcher, the application)
 * does not. That is exact and needs no state per call. The runtime's code is learnt at its
 * first probed call in the process (learn_runtime).
 */
static __always_inline bool from_runtime(__u64 ret, __u64 lo, __u64 hi)
{
	if (!lo || ret < lo || ret >= hi)
		return false;
	ts_count(TS_CNT_GPU_NESTED, 1);
	return true;
}

/* A runtime call: the mapping its probe sits in is the runtime's code (libcudart's, or a
 * binary's that has cudart linked in). Once per process. */
static __always_inline void learn_runtime(struct pt_regs *ctx, struct cuda_proc *p)
{
	struct ts_vma r = {};

	if (p->rt_lo)
		return;
	if (ts_vma_at(ts_current_task(), PT_REGS_IP(ctx), &r) || !r.start) {
		/* the mm was busy: learnt at the next runtime call; until then its driver calls
		 * count again, and are counted here */
		ts_count(TS_CNT_GPU_RUNTIME_UNKNOWN, 1);
		return;
	}
	p->rt_hi = r.end;
	p->rt_lo = r.start;
}

static __always_inline struct cuda_proc *proc_get(__u32 tgid)
{
	__u32 zero = 0;
	struct cuda_proc *z = bpf_map_lookup_elem(&cuda_zero_proc, &zero);

	return z ? ts_lookup_or_init(&cuda_procs, &tgid, z) : NULL;
}

static __always_inline struct work_slot *slot_at(__u32 i)
{
	return bpf_map_lookup_elem(&cuda_work, &i);
}

/* The stream's slot, if it has one. */
static __always_inline struct work_slot *work_find(__u32 tgid, __u64 stream)
{
	struct work_key key = { .pid = tgid, .stream = stream };
	struct slot_cache *c;
	struct work_slot *s;
	__u32 zero = 0, *i;

	c = bpf_map_lookup_elem(&cuda_slot_cache, &zero);
	if (!c)
		return NULL;
	/* a slot's owner is checked, not trusted from the cache: the cache may be stale */
	if (c->pid == tgid && c->stream == stream && (s = slot_at(c->slot)) && s->pid == tgid &&
	    s->stream == stream)
		return s;
	i = bpf_map_lookup_elem(&cuda_slot_of, &key);
	if (!i || !(s = slot_at(*i)) || s->pid != tgid || s->stream != stream)
		return NULL;
	c->pid = tgid;
	c->stream = stream;
	c->slot = *i;
	return s;
}

/* Give the process's new stream a place among its streams, for device-wide syncs. */
static __always_inline bool proc_add_stream(struct cuda_proc *p, __u64 stream)
{
	int slot = -1;

	for (int i = 0; i < TS_GPU_MAX_STREAMS; i++) {
		if (p->s[i] == stream + 1)
			return true;
		if (!p->s[i] && slot < 0)
			slot = i;
	}
	if (slot < 0 || slot >= TS_GPU_MAX_STREAMS)
		return false;
	p->s[slot] = stream + 1;
	return true;
}

/* The stream's slot, made on its first use. NULL (counted) when the process has too many
 * streams or every slot is taken. */
static __always_inline struct work_slot *work_get(__u32 tgid, __u64 stream)
{
	struct work_key key = { .pid = tgid, .stream = stream };
	struct work_slot *s = work_find(tgid, stream);
	struct cuda_proc *p;
	__u32 i;

	if (s)
		return s;
	p = proc_get(tgid);
	if (!p || !proc_add_stream(p, stream)) {
		ts_count(TS_CNT_GPU_NO_SLOT, 1);
		return NULL;
	}
	if (bpf_map_pop_elem(&cuda_free_slots, &i) &&
	    (i = ts_fetch_add(&cuda_next_slot, 1, 0, 3ull << 62)) >= WORK_SLOTS) {
		ts_count(TS_CNT_GPU_NO_SLOT, 1);
		return NULL;
	}
	s = slot_at(i);
	if (!s)
		return NULL;
	__builtin_memset(&s->w, 0, sizeof(s->w));
	s->stream = stream;
	s->rt_lo = p->rt_lo;
	s->rt_hi = p->rt_hi;
	s->pid = tgid;
	if (bpf_map_update_elem(&cuda_slot_of, &key, &i, BPF_NOEXIST)) {
		/* another thread of the process made it meanwhile: use that one */
		s->pid = 0;
		bpf_map_push_elem(&cuda_free_slots, &i, 0);
		return work_find(tgid, stream);
	}
	return s;
}

/* A runtime call on this slot's stream: make sure the slot knows the runtime's code. */
static __always_inline void slot_learn_runtime(struct pt_regs *ctx, __u32 tgid,
					       struct work_slot *s)
{
	struct cuda_proc *p;

	if (s->rt_lo)
		return;
	p = bpf_map_lookup_elem(&cuda_procs, &tgid);
	if (!p)
		return;
	learn_runtime(ctx, p);
	s->rt_hi = p->rt_hi;
	s->rt_lo = p->rt_lo;
}

struct launch {
	__u64 stream, id, ret; /* ret: the return address (driver calls) */
	__u32 flags, grid[3], block[3];
	bool graph;
};

static __always_inline void add_launch(struct ts_gpu_work *w, const struct launch *l)
{
	if (l->graph)
		__sync_fetch_and_add(&w->graph_launches, 1);
	else
		__sync_fetch_and_add(&w->launches, 1);
	/* the one clock read is the step's first launch: a read per launch would add about a
	 * tenth of a trap here */
	if (!w->first_ns)
		w->first_ns = bpf_ktime_get_ns();
	ts_count(TS_CNT_GPU_LAUNCHES, 1);

	/* the bounded kernel sample: the same kernel with the same shape counts up */
	for (int i = 0; i < TS_KSAMPLES; i++) {
		struct ts_kernel_sample *k = &w->k[i];

		if (i >= w->nsamples) {
			k->id = l->id;
			k->count = 1;
			k->flags = l->flags;
			__builtin_memcpy(k->grid, l->grid, sizeof(k->grid));
			__builtin_memcpy(k->block, l->block, sizeof(k->block));
			w->nsamples = i + 1;
			return;
		}
		if (k->id == l->id && k->grid[0] == l->grid[0] && k->grid[1] == l->grid[1] &&
		    k->grid[2] == l->grid[2] && k->block[0] == l->block[0] &&
		    k->block[1] == l->block[1] && k->block[2] == l->block[2]) {
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
	struct work_slot *s = take_work ? work_find(bpf_get_current_pid_tgid() >> 32, stream) : NULL;
	struct ts_gpu_mark *m;

	if (s && s->w.capturing)
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
	if (s) {
		__builtin_memcpy(&m->work, &s->w, sizeof(m->work));
		__builtin_memset(&s->w, 0, sizeof(s->w));
	} else {
		__builtin_memset(&m->work, 0, sizeof(m->work));
	}
	bpf_ringbuf_submit(m, ts_submit_flags());
}

/*
 * Most entry points come twice: NAME takes 0 as the legacy default stream, NAME_ptsz (the
 * _ptsz/_ptds symbols) as the per-thread one. BOTH_STREAMS makes both programs from one body
 * fn(ctx, per_thread, api).
 */
#define BOTH_STREAMS(name, fn, api)                                                           \
	SEC("uprobe") int name(struct pt_regs *ctx) { return fn(ctx, false, api); }          \
	SEC("uprobe") int name##_ptsz(struct pt_regs *ctx) { return fn(ctx, true, api); }

/* The stream's slot for a call that adds work to it, or NULL: not traced, a driver call made
 * by the runtime (counted at the runtime's entry), or no slot. ret: the return address, 0 if
 * not read with the arguments (read here only where the process has a runtime). */
static __always_inline struct work_slot *work_call(struct pt_regs *ctx, __u64 stream, __u64 ret,
						   __u32 api)
{
	struct task_struct *t = ts_current_task();
	__u32 tgid = TS_TGID(t);
	struct work_slot *s;

	if (!ts_traced_task(t, tgid) || !(s = work_get(tgid, stream)))
		return NULL;
	if (api == TS_GPU_RUNTIME) {
		slot_learn_runtime(ctx, tgid, s);
		return s;
	}
	if (s->rt_lo && from_runtime(ret ? ret : return_address(ctx), s->rt_lo, s->rt_hi))
		return NULL;
	return s;
}

#endif
