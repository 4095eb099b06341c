/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every probe family shares: the filter userspace sets before load, the ring buffer,
 * the counters and the pid filter map (each object defines them; userspace loads the later
 * objects with the first one's maps, bpf_map__reuse_fd), and the helpers that fill records.
 * Names here start with ts_; each family prefixes its own (tls_, cuda_, ...).
 * BPF side only: include after vmlinux.h and the libbpf headers.
 */
#ifndef TS_COMMON_BPF_H
#define TS_COMMON_BPF_H

#include "tokenscope.h"

#if !defined(__TARGET_ARCH_x86)
/* Register access (PT_REGS_PARM6, stack arguments) is written for the x86-64 ABI only. */
#error "tokenscope's probes support x86-64 only"
#endif

const volatile struct ts_filter ts_filter = {};
/* Bytes waiting in the ring past which a record wakes the reader: an eighth of the ring, set
 * by userspace before load (see ts_submit_flags). */
const volatile __u64 ts_ring_wake = 1 << 20;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by userspace (-b) */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TS_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Records submitted on each CPU (ts_submit_flags): a map lookup the JIT inlines. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ts_submits SEC(".maps");

/* -p PID filter: tgids to trace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

static __always_inline void ts_count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

/*
 * The legacy build (TS_LEGACY: user/capture/live.c loads it where the kernel lacks bpf_loop,
 * bpf_find_vma or task storage: before 5.17, Debian 11's 5.10, Ubuntu 22.04's 5.15) is the
 * same programs written with what 5.10 has (docs/kernels.md):
 * - the current task as a plain pointer (bpf_get_current_task_btf is 5.11): its fields are
 *   CO-RE reads, a helper call each, where the default build loads them directly;
 * - per-thread state in hash maps keyed by thread id, deleted at the thread's exit, where the
 *   default build has task storage (5.11 for tracing programs);
 * - loops whose step is a global function called from a bounded loop (verified once, like a
 *   bpf_loop callback, 5.17), its state in per-CPU scratch, not on the stack;
 * - no atomic fetch-and-add (5.12): ts_fetch_add takes a lock made of a hash map entry;
 * - a mapping found by walking the mappings' tree (ts_vma_at), and a task's user registers
 *   by where its kernel stack keeps them (tls_link.bpf.h).
 */
#ifdef TS_LEGACY
#define ts_current_task() ((struct task_struct *)bpf_get_current_task())
#define TS_TGID(t) ((__u32)BPF_CORE_READ(t, tgid))
#else
#define ts_current_task() bpf_get_current_task_btf()
#define TS_TGID(t) ((__u32)(t)->tgid)
#endif

/*
 * A loop of at most max steps, n of them, as bpf_loop runs it: step(i) returns 0 to go on,
 * 1 to stop; the value is the number of steps run (the stopping one included). A step is
 * written TS_LOOP_STEP(name) and keeps what it needs in per-CPU scratch: a bpf_loop callback
 * in the default build, a global function (scalars only, verified once) in the legacy one.
 */
#ifdef TS_LEGACY
/* The step's i passes through barrier_var: clang drops the argument of a call whose callee
 * does not read it, and the verifier refuses a global function called with a stale
 * register. */
#define TS_LOOP_STEP(name)                                                                    \
	static __always_inline long name##_body(__u32 i);                                    \
	__noinline int name(__u32 i)                                                          \
	{                                                                                     \
		barrier_var(i);                                                               \
		return name##_body(i);                                                        \
	}                                                                                     \
	static __always_inline long name##_body(__u32 i)
#define ts_loop(max, n, step)                                                                 \
	({                                                                                    \
		__u32 __n = 0, __max = (n) < (max) ? (n) : (max);                             \
		for (__u32 __i = 0; __i < (max); __i++) {                                     \
			if (__i >= __max)                                                     \
				break;                                                        \
			__n++;                                                                \
			if (step(__i))                                                        \
				break;                                                        \
		}                                                                             \
		__n;                                                                          \
	})
#else
#define TS_LOOP_STEP(name) static long name(__u64 i, void *unused)
#define ts_loop(max, n, step) bpf_loop((n) < (max) ? (n) : (max), step, NULL, 0)
#endif

/*
 * The process's command name: its thread group leader's. A thread's own name is what a server
 * gives its workers (pthread_setname_np), which -c must not be fooled by, and which would
 * split one process's requests over names. Read by direct loads from the current task (its
 * BTF pointer is inlined by the JIT): no helper call, which costs 40-150 ns here, where every
 * return pays for a speculation mitigation. The legacy build reads it in one copy.
 *
 * Loading a pointer (group_leader) from a trusted one (the current task) makes Linux 6.18's
 * verifier look up to four type names (task_struct__safe_trusted, ...) in the kernel's BTF,
 * each a linear search of its 125 000 types (btf_find_by_name_kind), at every path that
 * reaches the load: with the loads inlined in every record's header, that search was a third
 * of the verifier's time at start (perf; docs/performance.md). So the walk starts from a
 * pointer the verifier does not trust, which it takes as it is:
 * - the plaintext family's default build (TS_TASK_RDONLY: sock.bpf.c), on every call of a
 *   traced process, casts the task read-only (bpf_rdonly_cast, 6.2, inlined: no call);
 * - the other builds, whose kernels may lack that kfunc, call ts_leader_comm8, a global
 *   function, which the verifier walks once per program that calls it, not once per path
 *   to it. A call and its return cost 20-30 ns here, nothing beside the uprobe traps those
 *   families' records come from.
 */
#if defined(TS_TASK_RDONLY)
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

static __always_inline __u64 ts_leader_comm8_of(struct task_struct *t, __u32 half)
{
	struct task_struct *walk = bpf_rdonly_cast(t, bpf_core_type_id_kernel(struct task_struct));
	struct task_struct *leader = walk->group_leader;

	return half ? *(__u64 *)&leader->comm[8] : *(__u64 *)&leader->comm[0];
}
#elif !defined(TS_LEGACY)
/* 8 bytes of the process's command name: the first (half 0) or the last (half 1). Not in
 * bpf/maps.bpf.c (TS_MAPS_ONLY), which has no program to call it. */
__u64 ts_leader_comm8(__u32 half);
#ifndef TS_MAPS_ONLY
__noinline __u64 ts_leader_comm8(__u32 half)
{
	struct task_struct *leader = bpf_get_current_task_btf()->group_leader;

	return half ? *(__u64 *)&leader->comm[8] : *(__u64 *)&leader->comm[0];
}
#endif
/* t: the current task, which ts_leader_comm8 finds itself */
#define ts_leader_comm8_of(t, half) ts_leader_comm8(half)
#endif

/* comm: 8-byte aligned (a record header's) */
static __always_inline void ts_process_comm_of(struct task_struct *t, char comm[TS_COMM_LEN])
{
#ifdef TS_LEGACY
	struct task_struct *leader = BPF_CORE_READ(t, group_leader);

	if (bpf_core_read(comm, TS_COMM_LEN, &leader->comm))
		comm[0] = 0;
#else
	((__u64 *)comm)[0] = ts_leader_comm8_of(t, 0);
	((__u64 *)comm)[1] = ts_leader_comm8_of(t, 1);
#endif
}

#define ts_process_comm(comm) ts_process_comm_of(ts_current_task(), comm)

/* Whether the current process is traced: not tokenscope itself, and through -p and -c. */
static __always_inline bool ts_traced_task(struct task_struct *t, __u32 tgid)
{
	if (tgid == ts_filter.self)
		return false;
	if (ts_filter.by_pid && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (ts_filter.by_comm) {
#ifdef TS_LEGACY
		char comm[TS_COMM_LEN];

		ts_process_comm(comm);
		for (int i = 0; i < TS_COMM_LEN; i++) {
			char c = comm[i];
#else
		__u64 half[2] = { ts_leader_comm8_of(t, 0), ts_leader_comm8_of(t, 1) };

		for (int i = 0; i < TS_COMM_LEN; i++) {
			char c = (char)(half[i / 8] >> (8 * (i % 8)));
#endif

			if (c != ts_filter.comm[i])
				return false;
			if (!c)
				break;
		}
	}
	return true;
}

static __always_inline bool ts_traced(__u32 tgid)
{
	return ts_traced_task(ts_current_task(), tgid);
}

/*
 * Per-thread state: a map `name` of vtype and `fn(create)`, which finds the current thread's
 * entry (made zeroed when create); `fn_of(t, create)` the same for t, the current task as
 * ts_current_task() gave it (one helper call fewer). Task storage in the default build
 * (freed with the thread; reached without a hash); in the legacy build an LRU hash by thread id, which the family
 * deletes at the thread's exit (LRU so that a thread whose exit was not seen, one that began
 * before tokenscope, cannot fill it).
 */
#ifdef TS_LEGACY
#define TS_THREAD_STATE(name, vtype, fn)                                                      \
	struct {                                                                              \
		__uint(type, BPF_MAP_TYPE_LRU_HASH);                                          \
		__uint(max_entries, 65536);                                                   \
		__type(key, __u32);                                                           \
		__type(value, vtype);                                                         \
	} name SEC(".maps");                                                                  \
	static __always_inline vtype *fn(bool create)                                         \
	{                                                                                     \
		__u32 tid = (__u32)bpf_get_current_pid_tgid();                                \
		vtype none = {};                                                              \
                                                                                              \
		return create ? ts_lookup_or_init(&name, &tid, &none)                         \
			      : bpf_map_lookup_elem(&name, &tid);                             \
	}                                                                                     \
	static __always_inline vtype *fn##_of(struct task_struct *t, bool create)             \
	{                                                                                     \
		return fn(create);                                                            \
	}
#else
#define TS_THREAD_STATE(name, vtype, fn)                                                      \
	struct {                                                                              \
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);                                      \
		__uint(map_flags, BPF_F_NO_PREALLOC);                                         \
		__type(key, int);                                                             \
		__type(value, vtype);                                                         \
	} name SEC(".maps");                                                                  \
	static __always_inline vtype *fn##_of(struct task_struct *t, bool create)             \
	{                                                                                     \
		return bpf_task_storage_get(&name, t, NULL,                                   \
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);      \
	}                                                                                     \
	static __always_inline vtype *fn(bool create)                                         \
	{                                                                                     \
		return fn##_of(bpf_get_current_task_btf(), create);                           \
	}
#endif

/* The mapping that holds an address: its range and file offset (vm_pgoff in bytes). */
struct ts_vma {
	__u64 start, end, offset;
	__u32 file; /* a file's mapping, not anonymous memory */
	__u32 _pad;
};

#ifdef TS_LEGACY
/* bpf_find_vma is 5.17. Before 6.1 a process's mappings are also a red-black tree
 * (mm->mm_rb, each vm_area_struct's vm_rb), walked here as find_vma walks it. Without the
 * mmap lock: a tree that changes under the walk can lead it astray, which the range check
 * catches (then the lookup fails); its callers look once, at an exec or a runtime's first
 * call, when a process's mappings rarely change. These fields are gone in 6.1 (the maple
 * tree), where the default build runs. */
struct vm_area_struct___rb {
	unsigned long vm_start, vm_end;
	struct rb_node vm_rb;
	unsigned long vm_pgoff;
	struct file *vm_file;
} __attribute__((preserve_access_index));

struct mm_struct___rb {
	struct rb_root mm_rb;
} __attribute__((preserve_access_index));

/* A red-black tree of vm.max_map_count's 65 530 mappings is at most 32 deep. */
#define TS_VMA_DEPTH 40

/* 0 and the mapping holding addr in the task's memory; nonzero when none was found. */
static __always_inline long ts_vma_at(struct task_struct *task, __u64 addr, struct ts_vma *v)
{
	struct mm_struct___rb *mm = (void *)BPF_CORE_READ(task, mm);
	struct rb_node *node;

	/* a newer kernel made to load this build (TOKENSCOPE_LEGACY=1) has no such tree: there
	 * the lookup fails, as it would with the mm busy */
	if (!mm || !bpf_core_field_exists(mm->mm_rb))
		return -1;
	node = BPF_CORE_READ(mm, mm_rb.rb_node);

	for (int i = 0; i < TS_VMA_DEPTH && node; i++) {
		struct vm_area_struct___rb *vma =
			(void *)node - bpf_core_field_offset(struct vm_area_struct___rb, vm_rb);
		__u64 start = BPF_CORE_READ(vma, vm_start), end = BPF_CORE_READ(vma, vm_end);

		if (addr >= end) {
			node = BPF_CORE_READ(node, rb_right);
			continue;
		}
		if (addr >= start) {
			v->start = start;
			v->end = end;
			v->offset = BPF_CORE_READ(vma, vm_pgoff) << 12; /* PAGE_SHIFT (4 KiB pages) */
			v->file = BPF_CORE_READ(vma, vm_file) != NULL;
			return 0;
		}
		node = BPF_CORE_READ(node, rb_left);
	}
	return -1;
}
#else
static long ts_vma_found(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct ts_vma *v = ctx;

	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->offset = vma->vm_pgoff << 12; /* PAGE_SHIFT on x86-64 and arm64 (4 KiB pages) */
	v->file = vma->vm_file != NULL;
	return 0;
}

/* 0 and the mapping holding addr in the task's memory (task: a BTF pointer); nonzero when
 * there is none, or the mm was busy (bpf_find_vma does not wait for its lock). */
static __always_inline long ts_vma_at(struct task_struct *task, __u64 addr, struct ts_vma *v)
{
	return bpf_find_vma(task, addr, ts_vma_found, v, 0);
}
#endif

/* The map's value for key, created from init when absent (NULL when the map is full). */
static __always_inline void *ts_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/* A record's header, of the current task t (ts_current_task()). */
static __always_inline void ts_fill_hdr_of(struct task_struct *t, struct ts_event_hdr *h,
					   __u32 type, __u32 size, __u64 ts)
{
#ifdef TS_LEGACY
	__u64 id = bpf_get_current_pid_tgid();

	h->pid = id >> 32;
	h->tid = (__u32)id;
#else
	h->pid = t->tgid;
	h->tid = t->pid;
#endif
	h->type = type;
	h->size = size;
	h->ts_ns = ts;
	ts_process_comm_of(t, h->comm);
}

#define ts_fill_hdr(h, type, size, ts) ts_fill_hdr_of(ts_current_task(), h, type, size, ts)

/*
 * A fixed-size record of the current task, stamped now, its header filled: the caller fills
 * the body and calls bpf_ringbuf_submit(rec, ts_submit_flags()). NULL when the ring buffer is
 * full, counted under drop_counter: nothing is lost silently. size must be a constant.
 */
static __always_inline void *ts_reserve(__u32 type, __u32 size, __u32 drop_counter)
{
	struct ts_event_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		ts_count(drop_counter, 1);
		return NULL;
	}
	ts_fill_hdr(h, type, size, bpf_ktime_get_ns());
	return h;
}

/*
 * The flags to submit a record with. A record that wakes the reader costs an irq_work and a
 * self-interrupt, as much as the probe's trap, and a context switch in the reader: records
 * go without, and the reader's thread drains the ring every 20 ms (user/capture/backlog.c);
 * a ring past an eighth full wakes it at once. Timestamps are taken here, so delivery delay changes no
 * figure. Records the reader acts on (exec, dlopen, exit: probes to attach) wake it always
 * (flags 0 would not: they notify only a reader that has caught up).
 */
static __always_inline __u64 ts_submit_flags(void)
{
	__u32 zero = 0, *n = bpf_map_lookup_elem(&ts_submits, &zero);

	/* Asking the ring how full it is costs a helper call: on each CPU one record in 16 asks
	 * (the others go without), which lets at most 15 records (120 KiB) more in before the
	 * reader wakes. The ring's size is fixed once loaded: userspace sets ts_ring_wake to an
	 * eighth of it, which saves another helper call. */
	if (n && ((*n)++ & 15))
		return BPF_RB_NO_WAKEUP;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ts_ring_wake ? BPF_RB_FORCE_WAKEUP
									   : BPF_RB_NO_WAKEUP;
}

/*
 * *counter += n, returning what it held, for numbers that two CPUs may take at once (a
 * stream's pieces, a free slot): an atomic fetch-and-add. The legacy build has none (5.12),
 * nor bpf_spin_lock in tracing programs: there a hash map entry keyed by (a, b), the thing
 * numbered, is the lock (an insert with BPF_NOEXIST is atomic), held for the read and the
 * write. Programs run to their end on their CPU, so a holder lets go within a few hundred
 * nanoseconds; a lock still held after TS_LOCK_SPINS tries is not waited for but counted
 * (TS_CNT_SEQ_UNLOCKED), and the numbers taken without it.
 */
#ifdef TS_LEGACY
#define TS_LOCK_SPINS 512

struct ts_lock_key {
	__u64 a, b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ts_lock_key);
	__type(value, __u8);
} ts_locks SEC(".maps");

/* 1 when (a, b) is now this program's to hold. A global function: verified once. */
__noinline int ts_lock(__u64 a, __u64 b)
{
	struct ts_lock_key k = { .a = a, .b = b };
	__u8 one = 1;

	for (int i = 0; i < TS_LOCK_SPINS; i++) {
		if (!bpf_map_update_elem(&ts_locks, &k, &one, BPF_NOEXIST))
			return 1;
	}
	ts_count(TS_CNT_SEQ_UNLOCKED, 1);
	return 0;
}

__noinline int ts_unlock(__u64 a, __u64 b)
{
	struct ts_lock_key k = { .a = a, .b = b };

	return bpf_map_delete_elem(&ts_locks, &k);
}

#define ts_fetch_add(counter, n, a, b)                                                         \
	({                                                                                    \
		int __held = ts_lock(a, b);                                                   \
		__u64 __v = *(counter);                                                       \
		*(counter) = __v + (n);                                                       \
		if (__held)                                                                   \
			ts_unlock(a, b);                                                      \
		__v;                                                                          \
	})
#else
#define ts_fetch_add(counter, n, a, b) __sync_fetch_and_add(counter, n)
#endif

/* A record that is only its header (process exit, dlopen). */
static __always_inline void ts_send_proc(__u32 type)
{
	struct ts_proc *e = ts_reserve(type, sizeof(*e), TS_CNT_OTHER_DROPS);

	if (e)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

#endif /* TS_COMMON_BPF_H */
