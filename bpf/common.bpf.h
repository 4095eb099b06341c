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
 * by userspace before load (see ts_quiet). */
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
 * The process's command name: its thread group leader's. A thread's own name is what a server
 * gives its workers (pthread_setname_np), which -c must not be fooled by, and which would
 * split one process's requests over names. Read by direct loads from the current task (its
 * BTF pointer is inlined by the JIT): no helper call, which costs 40-150 ns here, where every
 * return pays for a speculation mitigation.
 */
static __always_inline void ts_process_comm(char comm[TS_COMM_LEN])
{
	struct task_struct *leader = bpf_get_current_task_btf()->group_leader;

	for (int i = 0; i < TS_COMM_LEN; i++)
		comm[i] = leader->comm[i];
}

/* Whether the current process is traced: not tokenscope itself, and through -p and -c. */
static __always_inline bool ts_traced_task(struct task_struct *t, __u32 tgid)
{
	if (tgid == ts_filter.self)
		return false;
	if (ts_filter.by_pid && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (ts_filter.by_comm) {
		struct task_struct *leader = t->group_leader;

		for (int i = 0; i < TS_COMM_LEN; i++) {
			char c = leader->comm[i];

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
	return ts_traced_task(bpf_get_current_task_btf(), tgid);
}

/* The map's value for key, created from init when absent (NULL when the map is full). */
static __always_inline void *ts_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

static __always_inline void ts_fill_hdr(struct ts_event_hdr *h, __u32 type, __u32 size, __u64 ts)
{
	struct task_struct *t = bpf_get_current_task_btf();

	h->type = type;
	h->size = size;
	h->ts_ns = ts;
	h->pid = t->tgid;
	h->tid = t->pid;
	ts_process_comm(h->comm);
}

/*
 * A fixed-size record of the current task, stamped now, its header filled: the caller fills
 * the body and calls bpf_ringbuf_submit(rec, ts_quiet()). NULL when the ring buffer is full, counted
 * under drop_counter: nothing is lost silently. size must be a constant.
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
 * go without, and the reader drains the ring every few milliseconds (user/capture/live.c); a ring past
 * an eighth full wakes it at once. Timestamps are taken here, so delivery delay changes no
 * figure. Records the reader acts on (exec, dlopen, exit: probes to attach) wake it always
 * (flags 0 would not: they notify only a reader that has caught up).
 */
static __always_inline __u64 ts_quiet(void)
{
	/* The ring's size is fixed once loaded: userspace sets ts_ring_wake to an eighth of it,
	 * which saves a helper call per record. */
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ts_ring_wake ? BPF_RB_FORCE_WAKEUP
									   : BPF_RB_NO_WAKEUP;
}

/* A record that is only its header (process exit, dlopen). */
static __always_inline void ts_send_proc(__u32 type)
{
	struct ts_proc *e = ts_reserve(type, sizeof(*e), TS_CNT_OTHER_DROPS);

	if (e)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

#endif /* TS_COMMON_BPF_H */
