// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of `make bench`: the least any tracer pays that captures what read and write
 * move, on the same four tracepoints tokenscope uses for plaintext. The entry keeps the
 * call's fd and buffer per thread; the exit copies the bytes the call moved (up to
 * FLOOR_CHUNK) into one ring record, waking no reader. No filter, no state beyond that, no
 * parsing: every call of every process is captured. bench/sockbench.c loads it and drains the
 * ring every 20 ms.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define FLOOR_CHUNK 8192 /* tokenscope's TS_CHUNK_MAX: one record carries as much */

struct floor_call {
	__u64 buf;
	__s32 fd;
};

struct floor_rec {
	__u64 ts;
	__u32 tid;
	__s32 fd;
	__u32 len;
	__u8 data[FLOOR_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct floor_call);
} floor_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct floor_rec);
} floor_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} floor_ring SEC(".maps");

/* Attached to sys_enter_read and sys_enter_write: (fd, buf, count) in args[0..2]. */
SEC("tracepoint/syscalls/sys_enter_read")
int floor_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct floor_call c = { .buf = ctx->args[1], .fd = (__s32)ctx->args[0] };

	bpf_map_update_elem(&floor_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* Attached to sys_exit_read and sys_exit_write. */
SEC("tracepoint/syscalls/sys_exit_read")
int floor_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
	struct floor_call *c = bpf_map_lookup_elem(&floor_calls, &tid);
	struct floor_rec *r;
	long n = ctx->ret;

	if (!c)
		return 0;
	r = bpf_map_lookup_elem(&floor_scratch, &zero);
	if (r && n > 0) {
		if (n > FLOOR_CHUNK)
			n = FLOOR_CHUNK;
		r->ts = bpf_ktime_get_ns();
		r->tid = tid;
		r->fd = c->fd;
		r->len = (__u32)n;
		n &= FLOOR_CHUNK * 2 - 1; /* for the verifier */
		if (n > 0 && n <= FLOOR_CHUNK && !bpf_probe_read_user(r->data, n, (void *)c->buf))
			bpf_ringbuf_output(&floor_ring, r, sizeof(*r) - FLOOR_CHUNK + n,
					   BPF_RB_NO_WAKEUP);
	}
	bpf_map_delete_elem(&floor_calls, &tid);
	return 0;
}
