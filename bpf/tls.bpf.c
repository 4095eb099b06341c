// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * TLS plaintext capture: uprobes on OpenSSL's SSL_read/SSL_write family (in libssl or in any
 * binary that embeds OpenSSL) and on Go's crypto/tls (go_tls_*, below), plus the process
 * lifecycle events that userspace needs to find
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

/* Next piece sequence number per stream and direction (TS_F_SEQ_PER_DIR): a Go Read and Write
 * run on two goroutines at once. LRU so that leaked SSL objects cannot fill it. */
struct stream_seq {
	__u64 next[2]; /* by enum ts_dir */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct stream_key);
	__type(value, struct stream_seq);
} tls_stream_seq SEC(".maps");

/* Processes that moved TLS bytes: only their exits are reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} tls_pids SEC(".maps");

/* What every piece of one call shares: on the stack, bpf_loop's context; in the legacy build,
 * whose loop steps take no pointer, in the scratch. */
struct piece_ctx {
	__u64 ssl;
	__u64 buf;
	__u64 total;
	__u64 seq;
	__u64 ts;
	__u32 dir;
	__u32 flags; /* TS_F_SEQ_PER_DIR, and TS_F_GO_TLS */
};

/* Per-CPU scratch: a data event is built here, then copied into the ring buffer with its
 * exact size (bpf_ringbuf_output takes a variable length; bpf_ringbuf_reserve does not). */
struct data_buf {
	__u8 bytes[sizeof(struct ts_tls_data) + TS_CHUNK_MAX];
#ifdef TS_LEGACY
	struct piece_ctx pc;
#endif
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct data_buf);
} tls_scratch SEC(".maps");

static __always_inline int tls_call_enter(void *ssl, const void *buf, void *out_len, __u32 dir)
{
	struct task_struct *t = ts_current_task();
	struct ssl_call *c;

	if (!ts_traced_task(t, TS_TGID(t)) || !(c = tls_thread_of(t, true)))
		return 0;
	/* OpenSSL does not nest these calls, so an entry still here is stale: its return was
	 * never seen (the thread died, or the probe was attached while the call ran). */
	if (c->active)
		ts_count(TS_CNT_STALE_CALLS, 1);
	c->ssl = (__u64)ssl;
	c->buf = (__u64)buf;
	c->out_len = (__u64)out_len;
	c->entry_ns = dir == TS_DIR_WRITE ? bpf_ktime_get_ns() : 0; /* one clock read a call */
	c->dir = dir;
	c->active = 1;
	return 0;
}

/* One ring-buffer record for piece i of a call, sized to the bytes it carries, built in d. */
static __always_inline long emit_piece_of(__u64 i, const struct piece_ctx *p, struct data_buf *d)
{
	__u64 off = i * TS_CHUNK_MAX;
	struct ts_tls_data *ev;
	__u32 n;

	if (off >= p->total)
		return 1;
	ev = (struct ts_tls_data *)d->bytes;
	n = p->total - off > TS_CHUNK_MAX ? TS_CHUNK_MAX : p->total - off;
	ts_fill_hdr(&ev->hdr, TS_EV_TLS_DATA, sizeof(*ev) + n, p->ts);
	ev->ssl = p->ssl;
	ev->seq = p->seq + i;
	ev->dir = p->dir;
	ev->flags = p->flags | (p->total > (__u64)TS_MAX_PIECES * TS_CHUNK_MAX ? TS_F_TRUNCATED : 0);
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
	if (bpf_ringbuf_output(&events, ev, sizeof(*ev) + n, ts_submit_flags())) {
		ts_count(TS_CNT_DROPS, 1);
		ts_count(TS_CNT_DROP_BYTES, n);
		return 0;
	}
	ts_count(TS_CNT_DATA_EVENTS, 1);
	ts_count(TS_CNT_DATA_BYTES, n);
	return 0;
}

/*
 * Piece i, a loop step rather than a loop body: the verifier checks it once, not once per
 * piece, which took the four return programs from 0.7 s of load time to a few milliseconds.
 */
#ifdef TS_LEGACY
TS_LOOP_STEP(emit_piece)
{
	__u32 zero = 0;
	struct data_buf *d = bpf_map_lookup_elem(&tls_scratch, &zero);

	return d ? emit_piece_of(i, &d->pc, d) : 1;
}
#else
static long emit_piece(__u64 i, void *pc)
{
	__u32 zero = 0;
	struct data_buf *d = bpf_map_lookup_elem(&tls_scratch, &zero);

	return d ? emit_piece_of(i, pc, d) : 1;
}
#endif

/* The bytes one call moved, as pieces with the stream's next sequence numbers. */
static __always_inline void tls_emit_call(__u32 tgid, __u64 ssl, __u64 buf, __u64 total,
					  __u64 ts, __u32 dir, __u32 flags)
{
	struct stream_key key = { .pid = tgid, .ssl = ssl };
	struct stream_seq *next, none = {};
	struct piece_ctx stack_pc, *pc = &stack_pc;
	struct data_buf *d;
	__u32 zero = 0;
	__u64 npieces;

	/* phase: reserve the stream's sequence numbers for every piece */
	npieces = (total + TS_CHUNK_MAX - 1) / TS_CHUNK_MAX;
	if (npieces > TS_MAX_PIECES) {
		npieces = TS_MAX_PIECES;
		ts_count(TS_CNT_TRUNCATED, 1);
		ts_count(TS_CNT_TRUNCATED_BYTES, total - (__u64)TS_MAX_PIECES * TS_CHUNK_MAX);
	}
	next = ts_lookup_or_init(&tls_stream_seq, &key, &none);
	d = bpf_map_lookup_elem(&tls_scratch, &zero);
	if (!next || !d)
		return;
#ifdef TS_LEGACY
	pc = &d->pc;
#endif
	pc->seq = ts_fetch_add(&next->next[dir & 1], npieces, ssl,
			       1ull << 62 | (__u64)tgid << 1 | (dir & 1));

	/* phase: the pieces */
	pc->ssl = ssl;
	pc->buf = buf;
	pc->total = total;
	pc->ts = ts;
	pc->dir = dir;
	pc->flags = flags | TS_F_SEQ_PER_DIR;
	if (npieces == 1) /* the usual case: no loop for it */
		emit_piece_of(0, pc, d);
	else
#ifdef TS_LEGACY
		ts_loop(TS_MAX_PIECES, npieces, emit_piece);
#else
		bpf_loop(npieces, emit_piece, pc, 0);
#endif
}

static __always_inline int tls_call_return(long ret, bool ex)
{
	__u32 tgid = TS_TGID(ts_current_task());
	struct ssl_call *c = tls_thread(false);
	__u64 total;
	__u8 one = 1;

	if (!c || !c->active)
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
		c->last_write = c->ssl;

	tls_emit_call(tgid, c->ssl, c->buf, total,
		      c->dir == TS_DIR_WRITE ? c->entry_ns : bpf_ktime_get_ns(), c->dir, 0);
	if (c->noted_pid != tgid) { /* once per thread, not an LRU update per call */
		bpf_map_update_elem(&tls_pids, &tgid, &one, BPF_ANY);
		c->noted_pid = tgid;
	}
out:
	c->active = 0;
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
/*
 * Go's crypto/tls, compiled into each Go program: uprobes at the start of (*Conn).Read's and
 * (*Conn).Write's bodies, past their stack check (so once a call: a call that grows its
 * stack runs again from its entry), and on each RET instruction of Read
 * (user/capture/gobin.c finds them). Never
 * a uretprobe: it rewrites the return address on the goroutine's stack, which Go may move or
 * unwind, and that crashes the program. Go's register ABI (1.17+): the receiver in AX, the
 * slice's pointer and length in BX and CX; the result n in AX at the return.
 *
 * A Write's bytes are sent at its entry: they are all known there, and net/http reads a reply
 * on another goroutine, which can return from Read with the reply before the writer returns
 * from Write (2 streams of 1 000 saw that). Numbered at the entry, the request stays ahead
 * of its reply. A Write that fails has a broken connection: its request never has a reply.
 *
 * A call is keyed by its goroutine (g, in R14), not by its thread: a goroutine blocked in
 * Read can go on on another thread. g's address stands for the goroutine for as long as the
 * call lasts (a g is reused only after its goroutine ended). The calls in progress
 * (go_tls_calls: tls_link.bpf.h) also tell the socket probes which *tls.Conn
 * a socket syscall made meanwhile by that goroutine belongs to: its addresses.
 */

/* This process's exit is reported (tls_pids), and its TLS sockets look for Go calls
 * (go_pids): both set at its first Go TLS call, one lookup a call after that (as OpenSSL's
 * threads note theirs once, noted_pid). */
static __always_inline void go_note_pid(__u32 tgid)
{
	__u8 one = 1;

	if (bpf_map_lookup_elem(&go_pids, &tgid))
		return;
	bpf_map_update_elem(&tls_pids, &tgid, &one, BPF_ANY);
	bpf_map_update_elem(&go_pids, &tgid, &one, BPF_ANY);
}

/* func (c *Conn) Read(b []byte) (int, error) */
SEC("uprobe")
int go_tls_read_enter(struct pt_regs *ctx)
{
	struct task_struct *t = ts_current_task();
	struct go_call_key k = { .pid = TS_TGID(t), .g = ctx->r14 };
	struct go_call c = { .conn = ctx->ax, .buf = ctx->bx, .dir = TS_DIR_READ };

	if (!ts_traced_task(t, k.pid))
		return 0;
	bpf_map_update_elem(&go_tls_calls, &k, &c, BPF_ANY);
	go_note_pid(k.pid); /* before the call's syscalls: they look for it */
	return 0;
}

/* at each RET of Read: n bytes read into the entry's buffer */
SEC("uprobe")
int go_tls_read_ret(struct pt_regs *ctx)
{
	struct task_struct *t = ts_current_task();
	struct go_call_key k = { .pid = TS_TGID(t), .g = ctx->r14 };
	struct go_call *c = bpf_map_lookup_elem(&go_tls_calls, &k);
	long n = (long)ctx->ax;

	if (!c || c->dir != TS_DIR_READ)
		return 0;
	if (n > 0)
		tls_emit_call(k.pid, c->conn, c->buf, n, bpf_ktime_get_ns(), TS_DIR_READ,
			      TS_F_GO_TLS);
	bpf_map_delete_elem(&go_tls_calls, &k);
	return 0;
}

/* func (c *Conn) Write(b []byte) (int, error): the bytes, at the entry (above) */
SEC("uprobe")
int go_tls_write_enter(struct pt_regs *ctx)
{
	struct task_struct *t = ts_current_task();
	struct go_call_key k = { .pid = TS_TGID(t), .g = ctx->r14 };
	struct go_call c = { .conn = ctx->ax, .dir = TS_DIR_WRITE };
	long n = (long)ctx->cx;

	if (n <= 0 || !ts_traced_task(t, k.pid))
		return 0;
	tls_emit_call(k.pid, c.conn, ctx->bx, n, bpf_ktime_get_ns(), TS_DIR_WRITE, TS_F_GO_TLS);
	go_note_pid(k.pid);
	bpf_map_update_elem(&go_tls_calls, &k, &c, BPF_ANY);
	return 0;
}

/* at each RET of Write: the call is over (its socket syscalls are) */
SEC("uprobe")
int go_tls_write_ret(struct pt_regs *ctx)
{
	struct go_call_key k = { .pid = TS_TGID(ts_current_task()), .g = ctx->r14 };
	struct go_call *c = bpf_map_lookup_elem(&go_tls_calls, &k);

	if (c && c->dir == TS_DIR_WRITE)
		bpf_map_delete_elem(&go_tls_calls, &k);
	return 0;
}

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
	bpf_ringbuf_submit(e, ts_submit_flags());
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

#define PATH_DEPTH 32 /* directories (a power of two, for masks); a deeper file gets no path */
#define PATH_HOPS (PATH_DEPTH + 8) /* and mount points crossed on the way up */

/* Where the walk stands between its steps. Loop steps are verified once, not per iteration:
 * the walk's branches would otherwise multiply the verifier's states past its limit. */
struct path_walk {
	struct dentry *d;
	struct mount *mnt;
	__u32 n;   /* names found */
	__u32 off; /* bytes written */
	int err;
	__u32 _pad;
};

/* The bytes are twice the path's size, so that a name copied at any offset below
 * TS_EXEC_PATH_LEN stays in bounds the verifier can see. */
struct path_buf {
	char bytes[2 * TS_EXEC_PATH_LEN];
	__u64 names[PATH_DEPTH]; /* const unsigned char *: the file's name first */
	struct path_walk w;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_buf);
} path_scratch SEC(".maps");

/* One step up: to the parent directory, or from a mount's root to where it is mounted. */
TS_LOOP_STEP(path_up)
{
	__u32 zero = 0;
	struct path_buf *b = bpf_map_lookup_elem(&path_scratch, &zero);
	struct path_walk *w;
	struct dentry *d, *parent; /* locals: CO-RE reads relocate their base's type */
	struct mount *mnt;

	if (!b)
		return 1;
	w = &b->w;
	d = w->d;
	mnt = w->mnt;
	if (d == BPF_CORE_READ(mnt, mnt.mnt_root)) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

		if (up == mnt)
			return 1; /* the namespace's root */
		w->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = up;
		return 0;
	}
	parent = BPF_CORE_READ(d, d_parent);
	if (parent == d)
		return 1;
	if (w->n >= PATH_DEPTH) {
		w->err = 1;
		return 1;
	}
	b->names[w->n & (PATH_DEPTH - 1)] = (__u64)BPF_CORE_READ(d, d_name.name);
	w->n++;
	w->d = parent;
	return 0;
}

/* One name, outermost first: "/name". */
TS_LOOP_STEP(path_put)
{
	__u32 zero = 0;
	struct path_buf *b = bpf_map_lookup_elem(&path_scratch, &zero);
	struct path_walk *w;
	__u32 k, at;
	long r;

	if (!b)
		return 1;
	w = &b->w;
	if (i >= w->n || w->n > PATH_DEPTH)
		return 1;
	k = (w->n - 1 - i) & (PATH_DEPTH - 1);
	if (w->off >= TS_EXEC_PATH_LEN - 1) {
		w->err = 1;
		return 1;
	}
	b->bytes[w->off & (TS_EXEC_PATH_LEN - 1)] = '/';
	at = w->off + 1;
	barrier_var(at); /* keep the mask: the verifier bounds the copy by it */
	at &= TS_EXEC_PATH_LEN - 1;
	r = bpf_probe_read_kernel_str(&b->bytes[at], TS_EXEC_PATH_LEN, (const void *)b->names[k]);
	if (r <= 1) {
		w->err = 1;
		return 1;
	}
	w->off = at + r - 1;
	return 0;
}

/* The file's path from the root of its mount namespace, as d_path would give it (no helper
 * does that here). Returns 0 and a NUL-terminated path in out, or -1 (deeper than
 * PATH_DEPTH, longer than TS_EXEC_PATH_LEN - 1, unreadable). */
static __always_inline int file_path(struct file *f, char out[TS_EXEC_PATH_LEN])
{
	struct path_walk *w;
	struct path_buf *b;
	__u32 zero = 0;

	b = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!b)
		return -1;
	w = &b->w;
	*w = (struct path_walk){};
	w->d = BPF_CORE_READ(f, f_path.dentry);
	w->mnt = (void *)BPF_CORE_READ(f, f_path.mnt) -
		 bpf_core_field_offset(struct mount, mnt); /* container_of */
	if (ts_loop(PATH_HOPS, PATH_HOPS, path_up) == PATH_HOPS || w->err || !w->n)
		return -1;
	ts_loop(PATH_DEPTH, PATH_DEPTH, path_put);
	if (w->err || w->off >= TS_EXEC_PATH_LEN)
		return -1;
	b->bytes[w->off & (TS_EXEC_PATH_LEN - 1)] = 0;
	return bpf_probe_read_kernel(out, TS_EXEC_PATH_LEN, b->bytes) ? -1 : 0;
}

/* tp_btf (raw tracepoints with BTF) need no tracefs mount. It fires once the new program is
 * mapped, before it runs. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct ts_vma t = {};
	struct ts_exec *e;
	struct file *exe;

	if (!ts_traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (ts_vma_at(p, BPF_CORE_READ(p, mm, start_code), &t) || !t.file)
		t = (struct ts_vma){};
	e = ts_reserve(TS_EV_EXEC, sizeof(*e), TS_CNT_OTHER_DROPS);
	if (!e)
		return 0;
	e->text_start = t.start;
	e->text_end = t.end;
	e->text_offset = t.offset;
	/* The file as exec opened it (/proc/PID/exe), not the mapping's: on overlayfs (most
	 * containers) the mapping holds the layer's file, whose path and inode the process's
	 * namespace does not show. The bytes are the same. */
	exe = BPF_CORE_READ(p, mm, exe_file);
	e->ino = BPF_CORE_READ(exe, f_inode, i_ino);
	e->dev = BPF_CORE_READ(exe, f_inode, i_sb, s_dev);
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	if (!exe || file_path(exe, e->path))
		e->path[0] = 0;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

#ifdef TS_LEGACY
	bpf_map_delete_elem(&tls_calls, &tid); /* the thread's SSL state (tls_link.bpf.h) */
#endif
	if (tgid != tid) /* threads: only the group leader's exit ends the process */
		return 0;
	if (!bpf_map_lookup_elem(&tls_pids, &tgid))
		return 0;
	bpf_map_delete_elem(&tls_pids, &tgid);
	ts_send_proc(TS_EV_EXIT);
	return 0;
}
