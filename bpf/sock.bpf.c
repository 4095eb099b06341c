// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Plaintext TCP and Unix-socket capture on syscall tracepoints: read, readv, recvfrom,
 * recvmsg and write, writev, sendto, sendmsg (entry and exit), close, and the calls whose
 * bytes cannot be seen (sendfile, splice, io_uring), which are counted and said.
 *
 * At entry the fd is resolved to its file (CO-RE, through the task's fd table): only a stream
 * socket, TCP (IPv4 or IPv6) or Unix, goes further, so pipes, files and datagram sockets cost
 * those few reads and are never copied. A socket is named by its inode number (socket:[N]),
 * which a new socket never shares with a closed one even when the kernel reuses its memory
 * or its fd.
 *
 * The first bytes of a socket decide what it carries: an HTTP/1.x request or status line, an
 * HTTP/2 preface or frames, or a ZeroMQ greeting (vLLM's engine wire) is captured; a TLS
 * record header is left to the OpenSSL probes, which learn from it which
 * addresses their stream has (tls_link.bpf.h); anything else is ignored, and later calls on a
 * decided socket cost one map lookup.
 */
#if !defined(TS_SOCK_CORE_READS) && !defined(TS_LEGACY)
#define TS_TASK_RDONLY /* this kernel has bpf_rdonly_cast: common.bpf.h walks the task with it */
#endif
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "common.bpf.h"
#include "tls_link.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define IPPROTO_TCP 6
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define MSG_PEEK 2
/* Enough steps for any call to finish: each segment of an IOV_MAX (1024) array costs a step to
 * enter and at most one copy that ends it, each piece at most one copy that fills it, and one
 * more step ends the loop. A call then sends exactly the pieces it reserved (sock_exit). */
#define SOCK_MAX_STEPS (2 * 1024 + TS_MAX_PIECES + 1)

/* A socket direction's sequence numbers under ts_fetch_add's lock (legacy build): (inode,
 * this). */
#define SEQ_LOCK(dir) (2ull << 62 | ((dir) & 1))

#include "sock_classify.h" /* enum sock_proto, classify */

struct sock_state {
	__u64 seq[2];	  /* next piece sequence number, by enum ts_dir (TS_F_SEQ_PER_DIR) */
	__u64 linked;	  /* TLS sockets: the SSL* last linked to this socket */
	__u64 head;	  /* PROTO_UNKNOWN: its first bytes so far, nhead of them, little-endian */
	__u32 linked_pid; /* and in which process (after fork, the same SSL* is in both) */
	__u32 owner;	  /* the process whose stream this is: the first to move its bytes */
	__u8 proto;	  /* enum sock_proto */
	__u8 is_unix;	  /* AF_UNIX: its close says so (TS_CLOSE_UNIX) */
	__u8 unix_peer;	  /* AF_UNIX: its peer's inode was known when it was last said */
	__u8 nhead;	  /* PROTO_UNKNOWN: bytes in head, all moved in direction head_dir */
	__u8 head_dir;
	__u8 early;	  /* records went out while it was PROTO_UNKNOWN: its close is said */
	__u8 _pad[2];
};

/* Every TCP or Unix stream socket a traced process moved bytes on that is captured, TLS or
 * not decided yet, by inode number; LRU so that sockets whose close was not seen cannot fill
 * it (a TCP socket's own close is seen, and a Unix socket's at its process's exit:
 * sock_close.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TS_SOCK_STATES_MAX);
	__type(key, __u64);
	__type(value, struct sock_state);
} sock_states SEC(".maps");

/* Sockets found not HTTP (or left out by --port), by inode number: apart from sock_states,
 * so that however many of them a host opens, and leaves to the kernel to close, none pushes
 * a captured socket out of it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} sock_skipped SEC(".maps");

/* Processes that own a captured socket: their exit is reported, so that what userspace keeps
 * per process goes with them (their sockets end when the kernel closes them: below). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} sock_pids SEC(".maps");

/* --port: local or peer ports to capture (only with ts_filter.by_port). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} sock_ports SEC(".maps");

enum call_kind {
	CALL_BUF = 0,	 /* one user buffer: base, len */
	CALL_IOV,	 /* a user iovec array: base, nsegs */
	CALL_NO_BUFFER,	 /* sendfile, splice: the bytes never pass through user memory */
};

/* A call that moved bytes on a socket we capture, as its exit found it. */
struct sock_call {
	__u64 sock;	/* inode number */
	__u64 sk;	/* struct sock *, for the addresses */
	__u64 base;
	__u64 len;	/* CALL_BUF: buffer size; CALL_IOV: iovec count */
	__u64 ns;	/* its records' time: a write's entry, a read's return */
	__u32 dir;
	__u32 kind;	/* enum call_kind */
	__u32 counter;	/* CALL_NO_BUFFER: what to count it as */
	__u32 _pad;
};

/* Where the copy of a call's bytes stands, between steps of bpf_loop. It lives in the
 * per-CPU scratch, not on the stack: the verifier then checks one step once, instead of
 * following every value of every field through the loop. */
struct copy_state {
	__u64 total;	 /* bytes the call moved */
	__u64 off;	 /* of them, handled so far */
	__u64 seq;	 /* the stream's sequence number of the first piece */
	__u64 iov, nsegs; /* CALL_IOV: the user iovec array */
	__u64 seg_i, seg_base, seg_len, seg_done;
	__u64 fill;	 /* bytes in the piece being built */
	__u32 kind;
	__u32 pieces;
};

/* A piece gathers up to TS_CHUNK_MAX bytes from as many segments as it takes (a writev of
 * many small iovecs is one piece, not one per iovec). Twice the room, so that the verifier can
 * see that fill + n stays inside. */
struct sock_buf {
	struct copy_state cs;
	struct sock_call call; /* sock_exit_any's, kept here: see there */
	__u64 write_unstamped;	/* the thread whose write entry found its file not captured
				 * (sock_write_enter): its exit need not note it again */
	__u8 bytes[sizeof(struct ts_sock_data) + 2 * TS_CHUNK_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_buf);
} sock_scratch SEC(".maps");

/* phase: the call's registers, which socket an fd is, and its addresses (sock_fd.bpf.h) */
#include "sock_fd.bpf.h"

/* phase: a write's entry: when it began, unless its file is known not captured
 * (sock_write_start.bpf.h) */
#include "sock_write_start.bpf.h"

static __always_inline bool port_wanted(const struct ts_sock_addr *a)
{
	__u16 l = a->lport, r = a->rport;

	if (!ts_filter.by_port)
		return true;
	return bpf_map_lookup_elem(&sock_ports, &l) || bpf_map_lookup_elem(&sock_ports, &r);
}

/* phase: the sockets found ignored, remembered per CPU (sock_classify.bpf.h) */
#include "sock_classify.bpf.h"

/* phase: a TLS socket tells its SSL* where it is */

/* A syscall on a TLS socket: if an SSL call is running on this thread (socket BIO), or a Go
 * crypto/tls call on this goroutine, or an SSL_write just returned on it and this is the
 * write that sends its bytes (memory BIO), that SSL* (or *tls.Conn) uses this socket. Said
 * once per link. */
static __always_inline void tls_link(struct task_struct *t, struct sock_state *st, __u64 ino,
				     struct sock *sk, __u32 dir)
{
	__u32 tgid = TS_TGID(t), flags = 0;
	struct ssl_call *call = tls_thread_of(t, false);
	struct ts_tls_sock *e;
	__u64 ssl = 0;
	__u32 exact = 1;

	if (call && call->active) {
		ssl = call->ssl;
	} else if ((ssl = go_conn_in_call(t))) {
		flags = TS_F_GO_TLS; /* a goroutine in a Go crypto/tls call: exact as well */
	} else if (dir == TS_DIR_WRITE && call && call->last_write) {
		ssl = call->last_write;
		exact = 0;
		call->last_write = 0;
	}
	if (!ssl || (st->linked == ssl && st->linked_pid == tgid))
		return;
	st->linked = ssl;
	st->linked_pid = tgid;
	e = ts_reserve(TS_EV_TLS_SOCK, sizeof(*e), TS_CNT_OTHER_DROPS);
	if (!e)
		return;
	e->ssl = ssl;
	e->sock = ino;
	e->exact = exact;
	e->flags = flags;
	sock_addr(sk, &e->addr);
	e->netns = sock_netns(sk);
	e->_pad = 0;
	bpf_ringbuf_submit(e, ts_submit_flags());
}

/* A captured TCP socket's namespace, once (struct ts_sock_net). */
static __always_inline void send_sock_net(struct sock *sk, __u64 ino, __u32 owner,
					  const struct ts_sock_addr *addr)
{
	struct ts_sock_net *e = ts_reserve(TS_EV_SOCK_NET, sizeof(*e), TS_CNT_OTHER_DROPS);

	if (!e)
		return;
	e->sock = ino;
	e->owner = owner;
	e->netns = sock_netns(sk);
	e->addr = *addr;
	bpf_ringbuf_submit(e, ts_submit_flags());
}

/* phase: which call: is this a socket we capture, and where are its bytes */

/* Fills c for a call on fd of the current task t: true when its bytes are to be captured;
 * *stp is then the socket's state (NULL: none yet). False: c->sock is the inode number of
 * fd's file (in the default build for any file, else for a stream socket; 0: none). */
static __always_inline bool sock_begin(struct task_struct *t, __u64 fd, __u64 base, __u64 len,
				       __u32 kind, __u32 dir, __u32 counter, struct sock_call *c,
				       struct sock_state **stp)
{
	struct sock_state *st;
	struct sock *sk;
	__u64 ino = 0;

	sk = stream_sock_of(t, fd, &ino);
	c->sock = ino;
	if (!sk || known_ignored(ino, sk))
		return false;
	st = bpf_map_lookup_elem(&sock_states, &ino);
	if ((st && st->proto == PROTO_IGNORED) || (!st && bpf_map_lookup_elem(&sock_skipped, &ino))) {
		note_ignored(ino, (__u64)sk);
		return false;
	}
	if (st && st->proto == PROTO_TLS) {
		tls_link(t, st, ino, sk, dir);
		return false;
	}
	c->sock = ino;
	c->sk = (__u64)sk;
	c->base = base;
	c->len = len;
	c->dir = dir;
	c->kind = kind;
	c->counter = counter;
	*stp = st;
	return true;
}

/* phase: exit: what moved */

/* A record with no payload: the call's bytes from offset to total were not captured. */
static __always_inline void send_missing(struct ts_sock_data *ev, __u64 seq, __u32 flags,
					 __u64 total, __u64 offset)
{
	ev->hdr.size = sizeof(*ev);
	ev->seq = seq;
	ev->flags = flags | TS_F_SEQ_PER_DIR;
	ev->total_len = total > 0xffffffffULL ? 0xffffffffU : (__u32)total;
	ev->offset = offset;
	ev->len = 0;
	if (bpf_ringbuf_output(&events, ev, sizeof(*ev), ts_submit_flags()))
		ts_count(TS_CNT_DROPS, 1);
}

/* The i-th segment of a user iovec array. */
static __always_inline void iov_seg(__u64 iov, __u64 i, __u64 *base, __u64 *len)
{
	struct iovec v = {};

	bpf_probe_read_user(&v, sizeof(v), (void *)(iov + i * sizeof(v)));
	*base = (__u64)v.iov_base;
	*len = v.iov_len;
}

/* Send the piece built so far. */
static __always_inline void send_piece(struct copy_state *s, struct ts_sock_data *ev)
{
	__u64 n = s->fill;

	if (n == 0 || n > TS_CHUNK_MAX) /* for the verifier */
		return;
	/* the same n, bounded by its arithmetic: Linux 6.1's verifier loses the check above
	 * where clang keeps n on the stack across the header's calls (sock_core) */
	n = ((n - 1) & (TS_CHUNK_MAX - 1)) + 1;
	ev->hdr.size = sizeof(*ev) + n;
	ev->seq = s->seq + s->pieces;
	ev->total_len = s->total > 0xffffffffULL ? 0xffffffffU : (__u32)s->total;
	ev->offset = s->off - n;
	ev->len = n;
	s->pieces++;
	s->fill = 0;
	if (bpf_ringbuf_output(&events, ev, sizeof(*ev) + n, ts_submit_flags())) {
		ts_count(TS_CNT_DROPS, 1);
		ts_count(TS_CNT_DROP_BYTES, n);
		return;
	}
	ts_count(TS_CNT_DATA_EVENTS, 1);
	ts_count(TS_CNT_DATA_BYTES, n);
}

/* One step: copy from the current segment into the piece, or move to the next segment. */
TS_LOOP_STEP(copy_step)
{
	__u32 zero = 0;
	struct sock_buf *d = bpf_map_lookup_elem(&sock_scratch, &zero);
	struct copy_state *s;
	struct ts_sock_data *ev;
	__u64 n, fill;

	if (!d)
		return 1;
	s = &d->cs;
	ev = (struct ts_sock_data *)d->bytes;
	if (s->off >= s->total || s->pieces >= TS_MAX_PIECES) {
		send_piece(s, ev);
		return 1;
	}
	if (s->seg_done >= s->seg_len) {
		if (s->kind != CALL_IOV || ++s->seg_i >= s->nsegs) {
			send_piece(s, ev);
			return 1;
		}
		iov_seg(s->iov, s->seg_i, &s->seg_base, &s->seg_len);
		s->seg_done = 0;
		return 0;
	}
	fill = s->fill;
	if (fill == 0)
		ev->flags = TS_F_SEQ_PER_DIR;
	n = s->total - s->off;
	if (n > s->seg_len - s->seg_done)
		n = s->seg_len - s->seg_done;
	if (fill >= TS_CHUNK_MAX) /* for the verifier */
		return 1;
	if (n > TS_CHUNK_MAX - fill)
		n = TS_CHUNK_MAX - fill;
	if (n == 0 || n > TS_CHUNK_MAX) /* for the verifier */
		return 1;
	/* the same n, in a form Linux 6.1's verifier bounds too (it loses the check above) */
	n = ((n - 1) & (TS_CHUNK_MAX - 1)) + 1;
	if (bpf_probe_read_user(ev->data + fill, n, (void *)(s->seg_base + s->seg_done))) {
		ev->flags |= TS_F_READ_FAULT;
		ts_count(TS_CNT_READ_FAULTS, 1);
	}
	s->fill = fill + n;
	s->off += n;
	s->seg_done += n;
	if (s->fill == TS_CHUNK_MAX || s->off == s->total)
		send_piece(s, ev);
	return 0;
}

/* A socket not decided yet: its first bytes (in cs's first segment) decide it now. Returns
 * its state; NULL for a new socket not captured (sock_skipped), or when the state map is
 * full. */
static __always_inline struct sock_state *decide(struct task_struct *t, struct sock_state *st,
						 struct sock_call *c, const struct copy_state *cs,
						 const struct ts_sock_addr *addr, __u32 tgid)
{
	struct sock_state init = { .owner = tgid };
	__u8 proto = PROTO_UNKNOWN;
	__u64 head = 0, n = 0;

	if (!port_wanted(addr)) {
		proto = PROTO_IGNORED;
	} else if (c->kind != CALL_NO_BUFFER) {
		n = cs->seg_len < sizeof(head) ? cs->seg_len : sizeof(head);
		if (n > cs->total)
			n = cs->total;
		if (n > sizeof(head)) /* for the verifier */
			n = sizeof(head);
		/* ((n - 1) & 7) + 1 is n for 1..8, in a form Linux 6.1's verifier bounds */
		if (!n || bpf_probe_read_user(&head, ((n - 1) & 7) + 1, (void *)cs->seg_base))
			n = 0;
		/* a first call too short to tell (a request head written 1 to 3 bytes first): its
		 * bytes go before this call's, in the same direction */
		if (n && st && st->nhead && st->head_dir == c->dir) {
			__u32 k = st->nhead & 7;

			head = st->head | head << (8 * k);
			n = n + k > sizeof(head) ? sizeof(head) : n + k;
		}
		proto = classify(head, n, addr->family == AF_UNIX);
	}
	if (!st && proto == PROTO_IGNORED) {
		__u8 one = 1;

		bpf_map_update_elem(&sock_skipped, &c->sock, &one, BPF_ANY);
		ts_count(TS_CNT_SOCK_IGNORED, 1);
		note_ignored(c->sock, c->sk);
		return NULL;
	}
	if (!st) {
		st = ts_lookup_or_init(&sock_states, &c->sock, &init);
		if (!st)
			return NULL;
		ts_count(TS_CNT_SOCK_STATES_ADDED, 1);
	}
	st->proto = proto;
	if (proto == PROTO_UNKNOWN) {
		st->head = head;
		st->nhead = n;
		st->head_dir = c->dir;
		st->early = 1;
	}
	st->is_unix = addr->family == AF_UNIX;
	if (proto == PROTO_HTTP) {
		__u8 one = 1;

		bpf_map_update_elem(&sock_pids, &st->owner, &one, BPF_ANY);
		if (st->is_unix)
			st->unix_peer = send_unix_sock((void *)c->sk, c->sock, st->owner, 0);
		else
			send_sock_net((struct sock *)c->sk, c->sock, st->owner, addr);
	}
	if (proto == PROTO_TLS) {
		ts_count(TS_CNT_SOCK_TLS, 1);
		tls_link(t, st, c->sock, (struct sock *)c->sk, c->dir);
	}
	if (proto == PROTO_IGNORED) {
		ts_count(TS_CNT_SOCK_IGNORED, 1);
		note_ignored(c->sock, c->sk);
	}
	return st;
}

/* What call c moved (ret > 0 bytes) on the socket of state st (NULL: none yet): its records. */
static __always_inline void sock_finish(struct task_struct *t, struct sock_call *c,
					struct sock_state *st, long ret)
{
	struct copy_state cs = {}, *done;
	struct ts_sock_addr addr;
	__u64 planned;
	struct sock_buf *d;
	struct ts_sock_data *ev;
	__u32 zero = 0;

	cs.total = ret;
	cs.kind = c->kind;
	sock_addr((void *)c->sk, &addr);
	if (c->kind == CALL_BUF) {
		cs.seg_base = c->base;
		cs.seg_len = c->len;
	} else if (c->kind == CALL_IOV && c->len) {
		cs.iov = c->base;
		cs.nsegs = c->len;
		iov_seg(c->base, 0, &cs.seg_base, &cs.seg_len);
	}

	/* what does the socket carry: its first bytes say */
	if (!st || st->proto == PROTO_UNKNOWN) {
		st = decide(t, st, c, &cs, &addr, TS_TGID(t));
		if (!st || st->proto == PROTO_TLS || st->proto == PROTO_IGNORED)
			goto out;
	} else if (st->is_unix && !st->unix_peer) {
		st->unix_peer = send_unix_sock((void *)c->sk, c->sock, st->owner, 1);
	}

	d = bpf_map_lookup_elem(&sock_scratch, &zero);
	if (!d)
		goto out;
	ev = (struct ts_sock_data *)d->bytes;
	ts_fill_hdr_of(t, &ev->hdr, TS_EV_SOCK_DATA, sizeof(*ev), c->ns);
	ev->sock = c->sock;
	ev->dir = c->dir;
	ev->owner = st->owner;
	ev->addr = addr;

	if (c->kind == CALL_NO_BUFFER) {
		ts_count(c->counter, 1);
		send_missing(ev, ts_fetch_add(&st->seq[c->dir & 1], 1, c->sock, SEQ_LOCK(c->dir)),
			     TS_F_NO_USER_BUFFER, cs.total, 0);
		goto out;
	}

	/* The call's numbers are taken before its first piece is sent, all at once: a piece
	 * gathers TS_CHUNK_MAX bytes across segments, so a call of total bytes is that many
	 * pieces, or TS_MAX_PIECES and the record that says the rest was not captured. */
	planned = (cs.total + TS_CHUNK_MAX - 1) / TS_CHUNK_MAX;
	if (planned > TS_MAX_PIECES)
		planned = TS_MAX_PIECES + 1;
	cs.seq = ts_fetch_add(&st->seq[c->dir & 1], planned, c->sock, SEQ_LOCK(c->dir));

	/* One buffer that holds the whole call in one piece (an SSE event, a token's frame):
	 * copied and sent here, without the loop's helper call and steps. */
	if (c->kind == CALL_BUF && cs.total <= TS_CHUNK_MAX && cs.seg_len >= cs.total) {
		__u64 n = cs.total;

		if (n == 0 || n > TS_CHUNK_MAX) /* for the verifier */
			goto out;
		n = ((n - 1) & (TS_CHUNK_MAX - 1)) + 1; /* as in copy_step, for Linux 6.1 */
		ev->flags = TS_F_SEQ_PER_DIR;
		if (bpf_probe_read_user(ev->data, n, (void *)cs.seg_base)) {
			ev->flags |= TS_F_READ_FAULT;
			ts_count(TS_CNT_READ_FAULTS, 1);
		}
		cs.fill = cs.off = n;
		send_piece(&cs, ev);
		goto out;
	}

	/* one record per piece, at most TS_MAX_PIECES */
	d->cs = cs;
	ts_loop(SOCK_MAX_STEPS, SOCK_MAX_STEPS, copy_step);
	done = &d->cs;
	send_piece(done, ev); /* what the last step gathered, if the steps ran out first */
	cs.off = done->off;
	cs.pieces = done->pieces;
	if (cs.off < cs.total) {
		/* more pieces or segments than the budget: the rest is counted, and said */
		ts_count(TS_CNT_TRUNCATED, 1);
		ts_count(TS_CNT_TRUNCATED_BYTES, cs.total - cs.off);
		send_missing(ev, cs.seq + cs.pieces, TS_F_TRUNCATED, cs.total, cs.off);
	}
	/* A buffer shorter than the call's count (recv with MSG_TRUNC) ends the copy early: the
	 * numbers it reserved and did not use read as lost pieces, which the stream reports. */
out:
	return;
}

/* A MSG_PEEK read leaves the bytes queued: they are captured when read for real, never
 * twice. Counted on the sockets that are (or may become) captured. */
static __always_inline int count_peek(struct task_struct *t, __u64 fd)
{
	struct sock_state *st;
	__u64 ino;

	if (!stream_sock_of(t, fd, &ino))
		return 0;
	st = bpf_map_lookup_elem(&sock_states, &ino);
	if ((!st && !bpf_map_lookup_elem(&sock_skipped, &ino)) || (st && st->proto == PROTO_HTTP) ||
	    (st && st->proto == PROTO_UNKNOWN))
		ts_count(TS_CNT_SOCK_PEEKS, 1);
	return 0;
}

/* x86-64's numbers of the calls sock_exit_any is attached to */
#define NR_read 0
#define NR_write 1
#define NR_readv 19
#define NR_writev 20
#define NR_sendfile 40
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_splice 275
#define NR_preadv 295
#define NR_pwritev 296
#define NR_recvmmsg 299
#define NR_sendmmsg 307
#define NR_preadv2 327
#define NR_pwritev2 328

/* struct mmsghdr: a struct user_msghdr, then the message's length */
#define MMSG_LEN_OFF 56

/* A syscall's argument, from the user registers its entry saved (the kernel writes only ax,
 * the result, before the exit tracepoint): di, si, dx, r10, r8, r9. */
#ifdef TS_LEGACY
#define SYSCALL_ARG(regs, reg) BPF_CORE_READ(regs, reg)
#else
#define SYSCALL_ARG(regs, reg) ((regs)->reg)
#endif

/* A call's bytes (ret of them) on fd, its arguments decoded: captured where its socket is,
 * stamped when it began (a write) or now (a read). */
static __always_inline void capture_call(struct task_struct *t, __u64 fd, __u64 base, __u64 len,
					 __u32 kind, __u32 dir, __u32 counter, long ret)
{
	struct sock_state *st;
	struct sock_buf *d;
	__u32 zero = 0;

	d = bpf_map_lookup_elem(&sock_scratch, &zero);
	if (!d)
		return;
	if (!sock_begin(t, fd, base, len, kind, dir, counter, &d->call, &st)) {
		if (dir == TS_DIR_WRITE && kind != CALL_NO_BUFFER)
			note_uncaptured_write(t, d, fd);
		return;
	}
	d->call.ns = 0;
	if (dir == TS_DIR_WRITE && kind != CALL_NO_BUFFER) {
		struct write_start *w = write_start_of(t, false);

		if (w)
			d->call.ns = w->ns;
	}
	if (!d->call.ns) /* a read; or a write whose entry was not seen (it began before us) */
		d->call.ns = bpf_ktime_get_ns();
	/* The call goes through map memory, read back after the barrier: then the verifier
	 * checks sock_finish once for any kind and direction, not once for each case of
	 * sock_exit_any (48 000 instructions, 100 ms of the start). */
	asm volatile("" ::: "memory");
	sock_finish(t, &d->call, st, ret);
}

/*
 * The exit of every captured syscall, the only program on their path: what it moved is known
 * here (the result), and its arguments are still in the registers its entry saved, so no entry
 * program runs and nothing is kept between the two (an entry program and its task storage
 * were a third of the captured path: docs/decisions/performance-log.md). One program on all
 * sixteen exits: the section names them (families.c attaches it to each), and it is verified
 * once.
 *
 * A read is stamped here, at its return; a write when it began (sock_write_enter): its
 * return can come after what it caused on another CPU (its reader's read, the engine's next
 * step), which matching and attribution order after it (stamping writes at their return
 * broke both: docs/performance.md, History). ret <= 0: nothing moved (EAGAIN, an error, the
 * peer's end of stream), nothing to do.
 */
SEC("tracepoint/syscalls/sys_exit_read,sys_exit_write,sys_exit_readv,sys_exit_writev,"
    "sys_exit_recvfrom,sys_exit_sendto,sys_exit_recvmsg,sys_exit_sendmsg,sys_exit_sendfile64,"
    "sys_exit_splice,sys_exit_preadv,sys_exit_pwritev,sys_exit_preadv2,sys_exit_pwritev2,"
    "sys_exit_recvmmsg,sys_exit_sendmmsg")
int sock_exit_any(struct trace_event_raw_sys_exit *ctx)
{
	long ret = ctx->ret;
	struct task_struct *t;
	struct user_msghdr m;
	struct pt_regs *regs;
	__u64 fd, base, len, ino;
	__u32 kind = CALL_BUF, dir = TS_DIR_READ, counter = 0;

	if (ret <= 0)
		return 0;
	t = ts_current_task();
	if (!ts_traced_task(t, TS_TGID(t)))
		return 0;
	regs = sock_task_regs(t);
	if (!regs)
		return 0;
	fd = SYSCALL_ARG(regs, di);
	base = SYSCALL_ARG(regs, si);
	len = SYSCALL_ARG(regs, dx);
	switch (ctx->id) {
	case NR_read: /* ssize_t read(int fd, void *buf, size_t count) */
		break;
	case NR_write:
		dir = TS_DIR_WRITE;
		break;
	case NR_readv: /* ssize_t readv(int fd, const struct iovec *iov, int iovcnt) */
	case NR_preadv: /* the same, and an offset: on a socket, ESPIPE (nothing moved) */
	case NR_preadv2: /* with offset -1, readv with flags: it moves a socket's bytes */
		kind = CALL_IOV;
		break;
	case NR_writev:
	case NR_pwritev:
	case NR_pwritev2:
		kind = CALL_IOV;
		dir = TS_DIR_WRITE;
		break;
	case NR_recvmmsg: /* int recvmmsg(int fd, struct mmsghdr *msgvec, unsigned vlen, ...) */
	case NR_sendmmsg:
		dir = ctx->id == NR_sendmmsg ? TS_DIR_WRITE : TS_DIR_READ;
		if (ret == 1) { /* one message: its iovec array, as sendmsg and recvmsg */
			__u32 moved;

			if (bpf_probe_read_user(&m, sizeof(m), (void *)base) ||
			    bpf_probe_read_user(&moved, sizeof(moved), (void *)(base + MMSG_LEN_OFF)))
				return 0;
			ret = moved;
			kind = CALL_IOV;
			base = (__u64)m.msg_iov;
			len = m.msg_iovlen;
			break;
		}
		/* several: not captured, counted; how many bytes is not read (0: unknown, as for
		 * io_uring) */
		kind = CALL_NO_BUFFER;
		counter = TS_CNT_SOCK_MMSG;
		ret = 0;
		break;
	case NR_recvfrom: /* ssize_t recvfrom(int fd, void *buf, size_t len, int flags, ...) */
		if (SYSCALL_ARG(regs, r10) & MSG_PEEK)
			return count_peek(t, fd);
		break;
	case NR_sendto:
		dir = TS_DIR_WRITE;
		break;
	case NR_recvmsg: /* ssize_t recvmsg(int fd, struct msghdr *msg, int flags) */
	case NR_sendmsg:
		if (ctx->id == NR_recvmsg && (len & MSG_PEEK))
			return count_peek(t, fd);
		/* the iovec array is the message's */
		if (bpf_probe_read_user(&m, sizeof(m), (void *)base))
			return 0;
		kind = CALL_IOV;
		dir = ctx->id == NR_sendmsg ? TS_DIR_WRITE : TS_DIR_READ;
		base = (__u64)m.msg_iov;
		len = m.msg_iovlen;
		break;
	case NR_sendfile: /* ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) */
		/* file to socket in the kernel: counted as not captured on the socket's stream */
		kind = CALL_NO_BUFFER;
		dir = TS_DIR_WRITE;
		counter = TS_CNT_SOCK_SENDFILE;
		break;
	case NR_splice: /* ssize_t splice(int fd_in, loff_t *off_in, int fd_out, ...) */
		/* a pipe on one side; a socket on the other is the stream whose bytes are not seen */
		kind = CALL_NO_BUFFER;
		counter = TS_CNT_SOCK_SPLICE;
		if (stream_sock_of(t, len, &ino)) {
			fd = len;
			dir = TS_DIR_WRITE;
		}
		break;
	default:
		return 0;
	}
	capture_call(t, fd, base, len, kind, dir, counter, ret);
	return 0;
}

#include "sock_close.bpf.h"

/* io_uring moves socket bytes with no syscall per transfer: each request on a stream socket of a
 * traced process is counted, and a captured stream is told its bytes are no longer all seen. */
SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(sock_io_uring_submit, struct io_kiocb *req)
{
	__u64 id = bpf_get_current_pid_tgid(), ino = 0;
	struct sock_state *st;
	__u32 dir;
	struct ts_sock_data *ev;
	struct sock *sk;
	__u8 opcode;

	if (!ts_traced(id >> 32))
		return 0;
	opcode = BPF_CORE_READ(req, opcode);
	/* requests that move bytes: readv, writev, read/write_fixed, sendmsg, recvmsg, read,
	 * write, send, recv, send_zc, sendmsg_zc, read_multishot */
	if (!(opcode == 1 || opcode == 2 || opcode == 4 || opcode == 5 || opcode == 9 ||
	      opcode == 10 || opcode == 22 || opcode == 23 || opcode == 26 || opcode == 27 ||
	      opcode == 47 || opcode == 48 || opcode == 49))
		return 0;
	sk = stream_sock_of(ts_current_task(), BPF_CORE_READ(req, cqe.fd), &ino);
	if (!sk)
		return 0;
	ts_count(TS_CNT_SOCK_IO_URING, 1);
	st = bpf_map_lookup_elem(&sock_states, &ino);
	if (!st || st->proto != PROTO_HTTP)
		return 0;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		ts_count(TS_CNT_DROPS, 1);
		return 0;
	}
	ts_fill_hdr(&ev->hdr, TS_EV_SOCK_DATA, sizeof(*ev), bpf_ktime_get_ns());
	dir = (opcode == 2 || opcode == 5 || opcode == 9 || opcode == 23 || opcode == 26 ||
	       opcode == 47 || opcode == 48) ? TS_DIR_WRITE : TS_DIR_READ;
	ev->sock = ino;
	ev->seq = ts_fetch_add(&st->seq[dir], 1, ino, SEQ_LOCK(dir));
	ev->dir = dir;
	ev->flags = TS_F_NO_USER_BUFFER | TS_F_SEQ_PER_DIR;
	ev->total_len = 0;
	ev->offset = 0;
	ev->len = 0;
	ev->owner = st->owner;
	sock_addr(sk, &ev->addr);
	bpf_ringbuf_submit(ev, ts_submit_flags());
	return 0;
}
