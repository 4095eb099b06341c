// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * TLS plaintext capture: uprobes on OpenSSL's SSL_read/SSL_write family (in libssl or in any
 * binary that embeds OpenSSL), plus the process lifecycle events that userspace needs to find
 * new TLS libraries (exec, dlopen) and to close streams of processes that die (exit).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "tls_link.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct stream_key {
	__u32 pid;
	__u32 _pad;
	__u64 ssl;
};

/* Next piece sequence number per stream; LRU so that leaked SSL objects cannot fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct stream_key);
	__type(value, __u64);
} tls_stream_seq SEC(".maps");

/* Processes that moved TLS bytes: only their exits are reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} tls_pids SEC(".maps");

/* Per-CPU scratch: a data event is built here, then copied into the ring buffer with its
 * exact size (bpf_ringbuf_output takes a variable length; bpf_ringbuf_reserve does not). */
struct data_buf {
	__u8 bytes[sizeof(struct ts_tls_data) + TS_CHUNK_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct data_buf);
} tls_scratch SEC(".maps");

static __always_inline int tls_call_enter(void *ssl, const void *buf, void *out_len, __u32 dir)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ssl_call c = {
		.ssl = (__u64)ssl,
		.buf = (__u64)buf,
		.out_len = (__u64)out_len,
		.entry_ns = bpf_ktime_get_ns(),
		.dir = dir,
	};

	if (!ts_traced(id >> 32))
		return 0;
	/* OpenSSL does not nest these calls, so an entry still here is stale: its return was
	 * never seen (the thread died, or the probe was attached while the call ran). */
	if (bpf_map_lookup_elem(&tls_calls, &tid))
		ts_count(TS_CNT_STALE_CALLS, 1);
	bpf_map_update_elem(&tls_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* What every piece of one call shares (bpf_loop passes it to emit_piece). */
struct piece_ctx {
	__u64 ssl;
	__u64 buf;
	__u64 total;
	__u64 seq;
	__u64 ts;
	__u32 dir;
};

/*
 * One ring-buffer record for piece i of a call, sized to the bytes it carries. A bpf_loop
 * callback rather than a loop body: the verifier checks it once, not once per piece, which
 * took the four return programs from 0.7 s of load time to a few milliseconds.
 */
static long emit_piece(__u64 i, struct piece_ctx *p)
{
	__u64 off = i * TS_CHUNK_MAX;
	struct ts_tls_data *ev;
	struct data_buf *d;
	__u32 zero = 0, n;

	if (off >= p->total)
		return 1;
	d = bpf_map_lookup_elem(&tls_scratch, &zero);
	if (!d)
		return 1;
	ev = (struct ts_tls_data *)d->bytes;
	n = p->total - off > TS_CHUNK_MAX ? TS_CHUNK_MAX : p->total - off;
	ts_fill_hdr(&ev->hdr, TS_EV_TLS_DATA, sizeof(*ev) + n, p->ts);
	ev->ssl = p->ssl;
	ev->seq = p->seq + i;
	ev->dir = p->dir;
	ev->flags = p->total > (__u64)TS_MAX_PIECES * TS_CHUNK_MAX ? TS_F_TRUNCATED : 0;
	ev->total_len = p->total > 0xffffffffULL ? 0xffffffffU : (__u32)p->total;
	ev->offset = off;
	ev->len = n;
	ev->_pad = 0;
	if (n > TS_CHUNK_MAX) /* for the verifier */
		return 1;
	if (bpf_probe_read_user(ev->data, n, (void *)(p->buf + off))) {
		ev->flags |= TS_F_READ_FAULT;
		ts_count(TS_CNT_READ_FAULTS, 1);
	}
	if (bpf_ringbuf_output(&events, d, sizeof(*ev) + n, ts_quiet())) {
		ts_count(TS_CNT_DROPS, 1);
		ts_count(TS_CNT_DROP_BYTES, n);
		return 0;
	}
	ts_count(TS_CNT_DATA_EVENTS, 1);
	ts_count(TS_CNT_DATA_BYTES, n);
	return 0;
}

static __always_inline int tls_call_return(long ret, bool ex)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;
	struct stream_key key = { .pid = tgid };
	struct piece_ctx pc;
	struct ssl_call *c;
	__u64 total, *next, zero64 = 0, npieces;
	__u8 one = 1;

	c = bpf_map_lookup_elem(&tls_calls, &tid);
	if (!c)
		return 0;

	/* phase: how many bytes did the call move */
	if (ex) {
		size_t moved = 0;

		if (ret != 1 || bpf_probe_read_user(&moved, sizeof(moved), (void *)c->out_len))
			goto out;
		total = moved;
	} else {
		if (ret <= 0)
			goto out;
		total = ret;
	}
	if (!total)
		goto out;
	if (c->dir == TS_DIR_WRITE)
		bpf_map_update_elem(&tls_last_write, &tid, &c->ssl, BPF_ANY);

	/* phase: reserve the stream's sequence numbers for every piece */
	key.ssl = c->ssl;
	npieces = (total + TS_CHUNK_MAX - 1) / TS_CHUNK_MAX;
	if (npieces > TS_MAX_PIECES) {
		npieces = TS_MAX_PIECES;
		ts_count(TS_CNT_TRUNCATED, 1);
		ts_count(TS_CNT_TRUNCATED_BYTES, total - (__u64)TS_MAX_PIECES * TS_CHUNK_MAX);
	}
	next = ts_lookup_or_init(&tls_stream_seq, &key, &zero64);
	if (!next)
		goto out;
	pc.seq = __sync_fetch_and_add(next, npieces);
	bpf_map_update_elem(&tls_pids, &tgid, &one, BPF_ANY);

	/* phase: the pieces */
	pc.ssl = c->ssl;
	pc.buf = c->buf;
	pc.total = total;
	pc.ts = c->dir == TS_DIR_WRITE ? c->entry_ns : now;
	pc.dir = c->dir;
	bpf_loop(npieces, emit_piece, &pc, 0);
out:
	bpf_map_delete_elem(&tls_calls, &tid);
	return 0;
}

/* int SSL_read(SSL *s, void *buf, int num) */
SEC("uprobe")
int BPF_KPROBE(ssl_read_enter, void *ssl, void *buf, int num)
{
	return tls_call_enter(ssl, buf, NULL, TS_DIR_READ);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_read_exit, int ret)
{
	return tls_call_return(ret, false);
}

/* int SSL_read_ex(SSL *s, void *buf, size_t num, size_t *readbytes) */
SEC("uprobe")
int BPF_KPROBE(ssl_read_ex_enter, void *ssl, void *buf, size_t num, size_t *readbytes)
{
	return tls_call_enter(ssl, buf, readbytes, TS_DIR_READ);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_read_ex_exit, int ret)
{
	return tls_call_return(ret, true);
}

/* int SSL_write(SSL *s, const void *buf, int num) */
SEC("uprobe")
int BPF_KPROBE(ssl_write_enter, void *ssl, const void *buf, int num)
{
	return tls_call_enter(ssl, buf, NULL, TS_DIR_WRITE);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_write_exit, int ret)
{
	return tls_call_return(ret, false);
}

/* int SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *written) */
SEC("uprobe")
int BPF_KPROBE(ssl_write_ex_enter, void *ssl, const void *buf, size_t num, size_t *written)
{
	return tls_call_enter(ssl, buf, written, TS_DIR_WRITE);
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_write_ex_exit, int ret)
{
	return tls_call_return(ret, true);
}

/* int SSL_write_ex2(SSL *s, const void *buf, size_t num, uint64_t flags, size_t *written) */
SEC("uprobe")
int BPF_KPROBE(ssl_write_ex2_enter, void *ssl, const void *buf, size_t num, __u64 flags,
	       size_t *written)
{
	return tls_call_enter(ssl, buf, written, TS_DIR_WRITE);
}

/* void SSL_free(SSL *s) */
SEC("uprobe")
int BPF_KPROBE(ssl_free_enter, void *ssl)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct stream_key key = { .pid = id >> 32, .ssl = (__u64)ssl };
	struct ts_tls_free *e;

	/* Only streams that moved bytes have a sequence entry: skip the rest cheaply. */
	if (!bpf_map_lookup_elem(&tls_stream_seq, &key))
		return 0;
	bpf_map_delete_elem(&tls_stream_seq, &key);
	e = ts_reserve(TS_EV_TLS_FREE, sizeof(*e), TS_CNT_OTHER_DROPS);
	if (!e)
		return 0;
	e->ssl = (__u64)ssl;
	bpf_ringbuf_submit(e, ts_quiet());
	return 0;
}

/* void *dlopen(const char *file, int mode): a new library may bring a libssl. */
SEC("uretprobe")
int BPF_KRETPROBE(dlopen_exit, void *handle)
{
	if (handle && ts_traced(bpf_get_current_pid_tgid() >> 32))
		ts_send_proc(TS_EV_DLOPEN);
	return 0;
}

/* tp_btf (raw tracepoints with BTF) need no tracefs mount. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (ts_traced(bpf_get_current_pid_tgid() >> 32))
		ts_send_proc(TS_EV_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	bpf_map_delete_elem(&tls_calls, &tid); /* a thread that dies inside an SSL call */
	if (tgid != tid) /* threads: only the group leader's exit ends the process */
		return 0;
	if (!bpf_map_lookup_elem(&tls_pids, &tgid))
		return 0;
	bpf_map_delete_elem(&tls_pids, &tgid);
	ts_send_proc(TS_EV_EXIT);
	return 0;
}
