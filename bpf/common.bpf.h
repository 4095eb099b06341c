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
 * split one process's requests over names.
 */
static __always_inline void ts_process_comm(char comm[TS_COMM_LEN])
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *t, *leader;

	if ((__u32)id == id >> 32) { /* the leader itself: the usual single-threaded client */
		bpf_get_current_comm(comm, TS_COMM_LEN);
		return;
	}
	t = (struct task_struct *)bpf_get_current_task();
	leader = BPF_CORE_READ(t, group_leader);
	if (!leader || bpf_core_read(comm, TS_COMM_LEN, &leader->comm))
		bpf_get_current_comm(comm, TS_COMM_LEN);
}

static __always_inline bool ts_traced(__u32 tgid)
{
	if (tgid == ts_filter.self)
		return false;
	if (ts_filter.by_pid && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (ts_filter.by_comm) {
		char comm[TS_COMM_LEN];

		ts_process_comm(comm);
		for (int i = 0; i < TS_COMM_LEN; i++) {
			if (comm[i] != ts_filter.comm[i])
				return false;
			if (!comm[i])
				break;
		}
	}
	return true;
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
	__u64 id = bpf_get_current_pid_tgid();

	h->type = type;
	h->size = size;
	h->ts_ns = ts;
	h->pid = id >> 32;
	h->tid = (__u32)id;
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
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	return avail > size / 8 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* A record that is only its header (process exit, dlopen). */
static __always_inline void ts_send_proc(__u32 type)
{
	struct ts_proc *e = ts_reserve(type, sizeof(*e), TS_CNT_OTHER_DROPS);

	if (e)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

#endif /* TS_COMMON_BPF_H */
