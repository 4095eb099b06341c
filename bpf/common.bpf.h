/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every probe family shares: the filters userspace sets before load, the ring buffer,
 * the counters and the pid filter map (each object defines them; userspace loads the later
 * objects with the first one's maps, bpf_map__reuse_fd), and the record header.
 * BPF side only: include after vmlinux.h and the libbpf headers.
 */
#ifndef TS_COMMON_BPF_H
#define TS_COMMON_BPF_H

#include "tokenscope.h"

const volatile bool filter_pids = false;
const volatile bool filter_comm = false;
const volatile char target_comm[TS_COMM_LEN] = {};

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

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

static __always_inline bool traced(__u32 tgid)
{
	if (filter_pids && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (filter_comm) {
		char comm[TS_COMM_LEN];

		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < TS_COMM_LEN; i++) {
			if (comm[i] != target_comm[i])
				return false;
			if (!comm[i])
				break;
		}
	}
	return true;
}

static __always_inline void fill_hdr(struct ts_event_hdr *h, __u32 type, __u32 size, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();

	h->type = type;
	h->size = size;
	h->ts_ns = ts;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

/* The current process is gone (its thread-group leader exited). */
static __always_inline void send_exit(__u32 ppid, __u32 exit_code)
{
	struct ts_proc *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count(TS_CNT_OTHER_DROPS, 1);
		return;
	}
	fill_hdr(&e->hdr, TS_EV_EXIT, sizeof(*e), bpf_ktime_get_ns());
	e->ppid = ppid;
	e->exit_code = exit_code;
	e->path[0] = 0;
	bpf_ringbuf_submit(e, 0);
}

#endif /* TS_COMMON_BPF_H */
