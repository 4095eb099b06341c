// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "llm/request.h"
#include "engine/cuda_steps.h"
#include "engine/llama_steps.h"
#include "stream/match.h"
#include "stream/conn.h"
#include "stream/pipeline.h"
#include "stream/recording.h"

#define NBUCKETS 4096

struct stream {
	struct stream_key key;
	/* The piece sequence number expected next, by direction (TS_F_SEQ_PER_DIR; [0] alone
	 * in recordings with one counter a stream), and whether that counter has begun. */
	uint64_t next_seq[2];
	bool seq_begun[2];
	bool seen;	   /* a piece has come (a TLS stream can be made by its socket link) */
	uint64_t last_ns;  /* its newest record */
	bool addr_exact;   /* its addresses came from a socket call inside an SSL call */
	uint64_t sock;	   /* TLS: the socket it was last linked to (0: none yet) */
	struct stream *sock_next; /* TLS streams by socket (tls_socks) */
	bool orphaned;	   /* TLS: its process exited; it ends when its socket does */
	struct conn *conn;
	struct stream *next;
};

/* A finished request waiting for its attribution (and its turn). */
struct held {
	struct request *r;
	uint64_t end_ns;   /* its response's end (its start where none) */
	uint64_t ready_ns; /* record time after which it is attributed and reported */
	struct held *next;
};

/* Without engine steps, a finished request still waits this much record time before it is
 * reported: the ends of two CPUs' records are not always parsed in the order they happened
 * (seen under a CPU hog: a proxy's HTTP/2 server record parsed after its client's, which
 * ended 2.5 ms later), and matching needs a server's record before its client's. */
#define REORDER_NS (100ull * 1000000ull)

struct pipeline {
	request_fn fn;
	step_fn on_step;
	void *ctx;
	struct cuda_steps *cuda; /* the CUDA step source */
	struct recording *rec;
	struct health h;
	struct conn_sink sink;
	uint64_t last_ts; /* of the newest record: the end of a replayed capture */
	uint64_t next_sweep_ns; /* when idle streams are looked for next (record time) */
	struct attrib *attr;
	struct match *match;
	struct held *held; /* by ready_ns, the order their responses ended */
	struct held *held_last; /* its last: where nearly every finished request goes */
	uint32_t *exits;   /* processes gone whose requests may still be held */
	size_t nexits, capexits;
	exit_fn on_exit;
	uint64_t next_id;
	struct stream *buckets[NBUCKETS];
	struct stream *tls_socks[NBUCKETS]; /* TLS streams by their socket's inode */
};

static size_t bucket_of(const struct stream_key *k)
{
	uint64_t x = k->id ^ ((uint64_t)k->pid * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)k->transport << 62);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return x % NBUCKETS;
}

static void report_request(struct pipeline *p, struct request *r)
{
	struct request_metrics m;

	match__request(p->match, r);
	if (r->role == ROLE_SERVER) {
		attrib__compute(p->attr, r);
		if (r->attr && r->attr->ok)
			p->h.attributed++;
		else
			p->h.not_attributed++;
	}
	request__metrics(r, &m);
	p->h.requests++;
	if (!m.complete)
		p->h.requests_incomplete++;
	if (p->fn)
		p->fn(p->ctx, r, &m);
	request__free(r);
}

/* pid's state above the streams (summary lines, the correlation's client and process-tree
 * records) is let go once none of its requests is held any more: a host that runs a process
 * per request (cron, CLI calls) must not grow with every process it ever ran. */
static void deliver_exits(struct pipeline *p)
{
	size_t w = 0;

	for (size_t i = 0; i < p->nexits; i++) {
		uint32_t pid = p->exits[i];
		bool held = false;

		for (struct held *h = p->held; h && !held; h = h->next)
			held = h->r->pid == pid;
		if (held) {
			p->exits[w++] = pid;
			continue;
		}
		attrib__exit(p->attr, pid);
		if (p->on_exit)
			p->on_exit(p->ctx, pid);
	}
	p->nexits = w;
}

/* Held requests whose time has come (all of them when now is UINT64_MAX), in order. */
static void release_held(struct pipeline *p, uint64_t now)
{
	while (p->held && p->held->ready_ns <= now) {
		struct held *h = p->held;

		p->held = h->next;
		if (!p->held)
			p->held_last = NULL;
		report_request(p, h->r);
		free(h);
	}
	if (p->nexits)
		deliver_exits(p);
}

/* Finished requests come here from every connection. */
static void on_request(void *ctx, struct request *r)
{
	struct pipeline *p = ctx;
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	struct held *h, **link;

	/* LLM calls only: a known API path or payload, or a streamed (SSE/NDJSON) reply. */
	if (r->api == API_UNKNOWN && r->stream != 1) {
		p->h.other_http++;
		request__free(r);
		return;
	}
	if (r->role == ROLE_SERVER && attrib__has_steps(p->attr))
		attrib__finished(p->attr, r);
	/* Where engine steps are seen, a server request is attributed once later steps and other
	 * requests' first tokens had time to come; the others wait with it, to keep the order.
	 * Elsewhere every request waits REORDER_NS, for the same order. */
	h = malloc(sizeof(*h));
	if (!h) {
		report_request(p, r);
		return;
	}
	end = end > r->start_ns ? end : r->start_ns;
	*h = (struct held){ r, end,
			    end + (attrib__has_steps(p->attr) ? ATTRIB_SETTLE_NS : REORDER_NS), NULL };
	/* Requests are reported in the order their responses ended, which is not always the order
	 * their ends were parsed in (records of two CPUs); a server's then comes before its
	 * client's, which matching needs. Nearly always it goes last. */
	if (p->held_last && p->held_last->ready_ns <= h->ready_ns) {
		p->held_last->next = h;
		p->held_last = h;
		return;
	}
	link = &p->held;
	while (*link && (*link)->ready_ns <= h->ready_ns)
		link = &(*link)->next;
	h->next = *link;
	*link = h;
	if (!h->next)
		p->held_last = h;
}

static void on_first_token(void *ctx, struct request *r)
{
	struct pipeline *p = ctx;

	attrib__first_token(p->attr, r);
}

static void on_step(void *ctx, const struct engine_step *s)
{
	struct pipeline *p = ctx;

	if (s->source == STEP_SOURCE_CUDA)
		p->h.gpu_steps++;
	else
		p->h.llama_steps++;
	p->h.failed_steps += s->failed;
	if (!s->failed) /* a call that did no work is no step of the engine's */
		attrib__step(p->attr, s);
	if (p->on_step)
		p->on_step(p->ctx, s);
}

struct pipeline *pipeline__new(request_fn fn, step_fn on_engine_step, void *ctx)
{
	struct pipeline *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cuda = cuda_steps__new(on_step, p);
	p->attr = attrib__new();
	p->match = match__new();
	if (!p->cuda || !p->attr || !p->match) {
		cuda_steps__free(p->cuda);
		attrib__free(p->attr);
		match__free(p->match);
		free(p);
		return NULL;
	}
	p->fn = fn;
	p->on_step = on_engine_step;
	p->ctx = ctx;
	p->sink.on_request = on_request;
	p->sink.on_first_token = on_first_token;
	p->sink.ctx = p;
	p->sink.next_id = &p->next_id;
	p->sink.unpaired_responses = &p->h.unpaired_responses;
	p->sink.malformed_streams = &p->h.streams_malformed;
	p->sink.unsupported_encodings = &p->h.unsupported_encodings;
	p->sink.decode_budget_exceeded = &p->h.decode_budget_exceeded;
	p->sink.no_memory = &p->h.no_memory;
	p->sink.h2 = &p->h.h2;
	return p;
}

static void count_kind(struct pipeline *p, const struct conn *c)
{
	switch (conn__kind(c)) {
	case CONN_HTTP1: p->h.streams_http1++; break;
	case CONN_HTTP2: p->h.streams_http2++; break;
	case CONN_OTHER: p->h.streams_other++; break;
	default: break;
	}
}

static void unindex_sock(struct pipeline *p, struct stream *s)
{
	if (!s->sock)
		return;
	for (struct stream **l = &p->tls_socks[s->sock % NBUCKETS]; *l; l = &(*l)->sock_next) {
		if (*l == s) {
			*l = s->sock_next;
			break;
		}
	}
	s->sock = 0;
}

static void stream_drop(struct pipeline *p, struct stream **link, uint64_t ts, const char *why)
{
	struct stream *s = *link;

	unindex_sock(p, s);
	/* a connection another process still carries (fork) lives on */
	if (conn__unref(s->conn)) {
		conn__close(s->conn, ts, why);
		count_kind(p, s->conn);
		conn__free(s->conn);
	}
	*link = s->next;
	free(s);
}

void pipeline__free(struct pipeline *p)
{
	if (!p)
		return;
	cuda_steps__free(p->cuda);
	while (p->held) {
		struct held *h = p->held;

		p->held = h->next;
		request__free(h->r);
		free(h);
	}
	attrib__free(p->attr);
	match__free(p->match);
	free(p->exits);
	for (size_t b = 0; b < NBUCKETS; b++) {
		while (p->buckets[b]) {
			struct stream *s = p->buckets[b];

			p->buckets[b] = s->next;
			if (conn__unref(s->conn)) /* shared after a fork: freed once */
				conn__free(s->conn);
			free(s);
		}
	}
	free(p);
}

void pipeline__set_recording(struct pipeline *p, struct recording *rec)
{
	p->rec = rec;
}

static bool same_key(const struct stream_key *a, const struct stream_key *b)
{
	return a->pid == b->pid && a->transport == b->transport && a->id == b->id;
}

static struct stream **stream_find(struct pipeline *p, const struct stream_key *key)
{
	struct stream **link = &p->buckets[bucket_of(key)];

	while (*link && !same_key(&(*link)->key, key))
		link = &(*link)->next;
	return link;
}

/* One call's bytes (or a piece of them) on a stream, whatever the transport. */
struct piece {
	struct stream_key key;
	const struct ts_event_hdr *hdr;
	uint64_t seq;	    /* per-stream piece number: a gap means pieces were lost */
	bool is_write;
	uint32_t flags;	    /* TS_F_* */
	uint64_t total_len; /* bytes the call moved */
	uint32_t offset;    /* of this piece within the call */
	uint32_t len;
	uint8_t *data;
	bool tail_missing; /* the call's bytes past offset + len were not captured */
	bool unseen_io;	   /* bytes moved where no probe sees them (sendfile, splice, io_uring) */
	const struct ts_sock_addr *addr; /* sockets: their addresses (NULL: unknown) */
};

/* "1.2.3.4:80" or "[::1]:8080" */
static void format_addr(int family, const uint8_t *ip, uint16_t port, char *out, size_t n)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (family == AF_INET6 && inet_ntop(AF_INET6, ip, a, sizeof(a)))
		snprintf(out, n, "[%s]:%u", a, port);
	else if (family == AF_INET && inet_ntop(AF_INET, ip, a, sizeof(a)))
		snprintf(out, n, "%s:%u", a, port);
	else
		out[0] = 0;
}

static struct stream *stream_get(struct pipeline *p, const struct piece *pc)
{
	struct stream **link = stream_find(p, &pc->key), *s = *link;

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->key = pc->key;
	s->conn = conn__new(&pc->key, pc->hdr->comm, &p->sink);
	if (!s->conn) {
		free(s);
		return NULL;
	}
	*link = s;
	return s;
}

static void set_addresses(struct stream *s, const struct ts_sock_addr *a)
{
	char local[REQ_ADDR_MAX], peer[REQ_ADDR_MAX];

	format_addr(a->family, a->laddr, a->lport, local, sizeof(local));
	format_addr(a->family, a->raddr, a->rport, peer, sizeof(peer));
	conn__set_addresses(s->conn, local, peer);
}

static void on_piece(struct pipeline *p, const struct piece *pc)
{
	uint64_t ts = pc->hdr->ts_ns;
	struct stream *s = stream_get(p, pc);
	unsigned lane = (pc->flags & TS_F_SEQ_PER_DIR) && pc->is_write;

	if (!s) {
		p->h.no_memory++; /* the stream's requests go unreported: counted, never silent */
		return;
	}
	p->h.events++;
	p->h.bytes += pc->len;
	s->last_ns = ts;
	if (!s->seen) {
		/* The first piece: the stream counts from here (a TLS stream may exist already,
		 * made by its socket link). */
		s->seen = true;
		p->h.streams++;
	}
	if (!s->seq_begun[lane]) {
		/* its numbering starts here: it may have begun before the capture did */
		s->seq_begun[lane] = true;
		s->next_seq[lane] = pc->seq;
	}
	if (pc->addr && !conn__has_addresses(s->conn))
		set_addresses(s, pc->addr);

	/* phase: sequence gaps are lost pieces (ring buffer full); direction and size unknown */
	if (pc->seq > s->next_seq[lane]) {
		p->h.lost_pieces += pc->seq - s->next_seq[lane];
		conn__lost(s->conn, ts, "capture_loss");
	}
	/* A smaller number means the kernel forgot the stream (LRU) and started over. */
	s->next_seq[lane] = pc->seq + 1;

	/* phase: bytes, or the knowledge that bytes are missing */
	if (pc->unseen_io) {
		conn__lost(s->conn, ts, "unsupported_io");
		return;
	}
	if (pc->len && (pc->flags & TS_F_READ_FAULT))
		conn__missing(s->conn, pc->is_write, pc->len, ts);
	else if (pc->len)
		conn__data(s->conn, pc->is_write, pc->data, pc->len, ts);
	if (pc->tail_missing && pc->total_len > (uint64_t)pc->offset + pc->len)
		conn__missing(s->conn, pc->is_write, pc->total_len - pc->offset - pc->len, ts);
}

static int on_tls_data(struct pipeline *p, struct ts_tls_data *e, size_t size)
{
	struct piece pc;

	if (size < sizeof(*e) || e->len != size - sizeof(*e) || e->dir > TS_DIR_WRITE)
		return -1;
	pc = (struct piece){
		.key = { .pid = e->hdr.pid,
			 .transport = e->flags & TS_F_GO_TLS ? TRANSPORT_GO_TLS : TRANSPORT_TLS,
			 .id = e->ssl },
		.hdr = &e->hdr,
		.seq = e->seq,
		.is_write = e->dir == TS_DIR_WRITE,
		.flags = e->flags,
		.total_len = e->total_len,
		.offset = e->offset,
		.len = e->len,
		.data = e->data,
		/* the last piece of a truncated call: what did not fit is missing */
		.tail_missing = (e->flags & TS_F_TRUNCATED) &&
				e->offset + e->len == TS_MAX_PIECES * TS_CHUNK_MAX,
	};
	on_piece(p, &pc);
	return 0;
}

/*
 * A process forked after its TLS setup: parent and child hold the same SSL object, at the same
 * address, on the same socket. Each has its stream (the probes see each process's calls), but
 * they are one connection: a request the parent writes is answered in what the child reads.
 * The child's stream, new and empty, carries the other's connection from its first link on.
 * The same socket with an SSL object at the same address is a fork's copy: nothing else makes
 * one (an unrelated process has other sockets).
 */
static void link_sock(struct pipeline *p, struct stream *s, uint64_t sock)
{
	struct stream **bucket = &p->tls_socks[sock % NBUCKETS];

	if (s->sock == sock)
		return;
	if (!s->sock && !s->seen && conn__untouched(s->conn)) {
		for (struct stream *o = *bucket; o; o = o->sock_next) {
			if (o->sock == sock && o->key.id == s->key.id && o->key.pid != s->key.pid) {
				conn__free(s->conn);
				s->conn = o->conn;
				conn__ref(o->conn);
				break;
			}
		}
	}
	unindex_sock(p, s);
	s->sock = sock;
	s->sock_next = *bucket;
	*bucket = s;
}

/* A TLS stream's socket: exact links (a socket call inside an SSL call) win over inferred
 * ones (the write that followed an SSL_write on the same thread, with a memory BIO). */
static int on_tls_sock(struct pipeline *p, struct ts_tls_sock *e, size_t size)
{
	struct piece pc = { .key = { e->hdr.pid, TRANSPORT_TLS, e->ssl }, .hdr = &e->hdr };
	struct stream *s;

	if (size < sizeof(*e))
		return -1;
	if (e->flags & TS_F_GO_TLS)
		pc.key.transport = TRANSPORT_GO_TLS;
	s = stream_get(p, &pc);
	if (!s) {
		p->h.no_memory++;
		return 0;
	}
	s->last_ns = e->hdr.ts_ns;
	link_sock(p, s, e->sock);
	if (e->exact || !s->addr_exact || !conn__has_addresses(s->conn)) {
		set_addresses(s, &e->addr);
		s->addr_exact = e->exact;
	}
	return 0;
}

static int on_sock_data(struct pipeline *p, struct ts_sock_data *e, size_t size)
{
	struct piece pc;

	if (size < sizeof(*e) || e->len != size - sizeof(*e) || e->dir > TS_DIR_WRITE)
		return -1;
	pc = (struct piece){
		.key = { .pid = e->owner, .transport = TRANSPORT_TCP, .id = e->sock },
		.hdr = &e->hdr,
		.seq = e->seq,
		.is_write = e->dir == TS_DIR_WRITE,
		.flags = e->flags,
		.total_len = e->total_len,
		.offset = e->offset,
		.len = e->len,
		.data = e->data,
		/* a record without payload stands for what was not captured */
		.tail_missing = !e->len && (e->flags & TS_F_TRUNCATED),
		.unseen_io = !e->len && (e->flags & TS_F_NO_USER_BUFFER),
		.addr = &e->addr,
	};
	if (pc.tail_missing || pc.unseen_io)
		p->h.sock_not_captured++;
	on_piece(p, &pc);
	return 0;
}

static void close_stream(struct pipeline *p, const struct stream_key *key, uint64_t ts,
			 const char *why)
{
	struct stream **link = stream_find(p, key);

	if (*link)
		stream_drop(p, link, ts, why);
}

/* The other ends, where they are traced here too, of connections that died with their
 * process: their requests in flight say peer_exited. */
static void tell_peers(struct pipeline *p, const struct conn *const *dead, size_t n)
{
	for (size_t b = 0; n && b < NBUCKETS; b++) {
		for (struct stream *o = p->buckets[b]; o; o = o->next) {
			if (!conn__inflight(o->conn))
				continue;
			for (size_t i = 0; i < n; i++) {
				if (o->conn != dead[i] && conn__is_peer(o->conn, dead[i]))
					conn__peer_exited(o->conn);
			}
		}
	}
}

/* The TLS streams of dead processes on socket sock end with it. */
static void end_orphans(struct pipeline *p, uint64_t sock, uint64_t ts, bool by_exit)
{
	for (;;) {
		struct stream *o = p->tls_socks[sock % NBUCKETS], **link;

		while (o && !(o->sock == sock && o->orphaned))
			o = o->sock_next;
		if (!o)
			return;
		if (by_exit && conn__has_addresses(o->conn) && !conn__shared(o->conn))
			tell_peers(p, (const struct conn *const *)&o->conn, 1);
		link = stream_find(p, &o->key);
		stream_drop(p, link, ts, by_exit ? "process_exited" : "connection_closed");
	}
}

/* A socket the kernel closed as its last process died. */
static void close_by_exit(struct pipeline *p, const struct stream_key *key, uint64_t ts)
{
	struct stream **link = stream_find(p, key);
	const struct conn *dead;

	end_orphans(p, key->id, ts, true);
	if (!*link)
		return;
	dead = (*link)->conn;
	if (conn__has_addresses(dead))
		tell_peers(p, &dead, 1);
	stream_drop(p, link, ts, "process_exited");
}

/*
 * pid exited. Where the kernel's closes of its sockets follow (sockets_follow), its plaintext
 * streams end with those closes (close_by_exit), and so do its TLS streams on a socket: after
 * a fork the other process may carry on with the same SSL object and socket (link_sock), and
 * the socket then stays open. Its other TLS streams end now. A recording made before those
 * closes were recorded ends all its streams now, as it did then.
 */
static void close_pid(struct pipeline *p, uint32_t pid, uint64_t ts, bool sockets_follow)
{
	const struct conn **dead = NULL;
	size_t n = 0, cap = 0;

	for (size_t b = 0; b < NBUCKETS; b++) {
		for (struct stream *s = p->buckets[b]; s; s = s->next) {
			if (s->key.pid != pid || (sockets_follow && s->key.transport == TRANSPORT_TCP))
				continue;
			if (sockets_follow && s->sock)
				s->orphaned = true;
			else if (conn__has_addresses(s->conn) && !conn__shared(s->conn) &&
				 array__reserve((void **)&dead, &cap, n + 1, sizeof(*dead)))
				dead[n++] = s->conn;
		}
	}
	tell_peers(p, dead, n);
	free(dead);
	for (size_t b = 0; b < NBUCKETS; b++) {
		struct stream **link = &p->buckets[b];

		while (*link) {
			struct stream *s = *link;

			if (s->key.pid == pid && !s->orphaned &&
			    (!sockets_follow || s->key.transport != TRANSPORT_TCP))
				stream_drop(p, link, ts, "process_exited");
			else
				link = &s->next;
		}
	}
}

/*
 * Streams whose end was never seen (no SSL_free, no close: a process that keeps a connection
 * in a pool forever, a close the probes missed) would hold memory for the whole run. One idle
 * for IDLE_NS with nothing in flight is let go; one with a request in flight waits
 * IDLE_INFLIGHT_NS, then that request is reported incomplete (idle_timeout). Record time,
 * so a replay ages them exactly as the live run did.
 */
#define IDLE_NS (600ull * 1000000000ull)
#define IDLE_INFLIGHT_NS (3600ull * 1000000000ull)
#define SWEEP_EVERY_NS (10ull * 1000000000ull)

static void sweep_idle(struct pipeline *p, uint64_t now)
{
	for (size_t b = 0; b < NBUCKETS; b++) {
		struct stream **link = &p->buckets[b];

		while (*link) {
			struct stream *s = *link;
			uint64_t idle = now - s->last_ns;

			if (s->last_ns && now > s->last_ns &&
			    idle > (conn__inflight(s->conn) ? IDLE_INFLIGHT_NS : IDLE_NS)) {
				p->h.streams_aged_out++;
				stream_drop(p, link, now, "idle_timeout");
				continue;
			}
			link = &s->next;
		}
	}
}

/* A llama.cpp call: one step of its engine, as the step source reads it. */
static int on_llama_step(struct pipeline *p, const struct ts_llama_step *rec, size_t size)
{
	struct engine_step es;

	if (llama_steps__read(rec, size, &es))
		return -1;
	on_step(p, &es);
	return 0;
}

/* Records userspace made (recordings carry them too): counters, process trees. */
static int on_userspace_record(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_event_hdr *h = rec;

	if (h->type == TS_REC_COUNTERS) {
		/* A writer with fewer counters (an older version) wrote a shorter record. */
		struct ts_rec_counters *c = rec;
		__u64 counters[TS_CNT__MAX] = { 0 };
		size_t n = (size - sizeof(c->hdr)) / sizeof(__u64);

		memcpy(counters, c->counters, (n < TS_CNT__MAX ? n : TS_CNT__MAX) * sizeof(__u64));
		pipeline__set_bpf_counters(p, counters);
		return 0;
	}
	struct ts_rec_proc_tree *t = rec;

	if (size < sizeof(*t) || t->n > TS_REC_MAX_ANCESTORS)
		return -1;
	attrib__proc_tree(p->attr, h->pid, t->ancestors, t->n);
	return 0;
}

int pipeline__feed(struct pipeline *p, void *rec, size_t size)
{
	struct ts_event_hdr *h = rec;
	int err = 0;

	if (size < sizeof(*h) || h->size != size) {
		p->h.bad_events++;
		return -1;
	}
	if (h->ts_ns > p->last_ts)
		p->last_ts = h->ts_ns;
	if (p->last_ts >= p->next_sweep_ns) {
		if (p->next_sweep_ns)
			sweep_idle(p, p->last_ts);
		attrib__prune(p->attr, p->last_ts);
		p->next_sweep_ns = p->last_ts + SWEEP_EVERY_NS;
	}
	switch (h->type) {
	case TS_EV_TLS_DATA:
		err = on_tls_data(p, rec, size);
		break;
	case TS_EV_TLS_FREE: {
		struct ts_tls_free *e = rec;

		if (size < sizeof(*e)) {
			err = -1;
			break;
		}
		close_stream(p, &(struct stream_key){ h->pid, TRANSPORT_TLS, e->ssl }, h->ts_ns,
			     "connection_closed");
		break;
	}
	case TS_EV_SOCK_DATA:
		err = on_sock_data(p, rec, size);
		break;
	case TS_EV_TLS_SOCK:
		err = on_tls_sock(p, rec, size);
		break;
	case TS_EV_SOCK_CLOSE: {
		struct ts_sock_close *e = rec;

		if (size < sizeof(*e)) {
			err = -1;
			break;
		}
		if (e->flags & TS_CLOSE_BY_EXIT) {
			close_by_exit(p, &(struct stream_key){ e->owner, TRANSPORT_TCP, e->sock },
				      h->ts_ns);
		} else {
			end_orphans(p, e->sock, h->ts_ns, false);
			close_stream(p, &(struct stream_key){ e->owner, TRANSPORT_TCP, e->sock },
				     h->ts_ns, "connection_closed");
		}
		break;
	}
	case TS_EV_EXIT:
		close_pid(p, h->pid, h->ts_ns,
			      size >= sizeof(struct ts_exit) &&
				      (((struct ts_exit *)rec)->flags & TS_EXIT_SOCKET_CLOSES));
		cuda_steps__exit(p->cuda, h->pid);
		if (array__reserve((void **)&p->exits, &p->capexits, p->nexits + 1,
				   sizeof(*p->exits)))
			p->exits[p->nexits++] = h->pid;
		break;
	case TS_EV_GPU_MARK:
		if (size < sizeof(struct ts_gpu_mark)) {
			err = -1;
			break;
		}
		cuda_steps__mark(p->cuda, rec);
		break;
	case TS_EV_GPU_KNAME:
		if (size < sizeof(struct ts_gpu_kname)) {
			err = -1;
			break;
		}
		cuda_steps__kname(p->cuda, rec);
		break;
	case TS_EV_LLAMA_STEP:
		err = on_llama_step(p, rec, size);
		break;
	case TS_EV_EXEC:
	case TS_EV_DLOPEN:
		break; /* attach work, done by the live loop */
	case TS_REC_COUNTERS:
	case TS_REC_PROC_TREE:
		err = on_userspace_record(p, rec, size);
		break;
	default:
		err = -1;
	}
	if (err) {
		p->h.bad_events++;
		return err;
	}
	if (p->rec && recording__write(p->rec, rec, size)) /* said by outfile.c */
		p->h.recording_errors++;
	release_held(p, p->last_ts);
	return 0;
}

void pipeline__set_bpf_counters(struct pipeline *p, const __u64 c[TS_CNT__MAX])
{
	/* Lost CUDA marks or llama.cpp steps: no request whose time covers this is attributed. */
	if (c[TS_CNT_GPU_DROPS] > p->h.bpf[TS_CNT_GPU_DROPS] ||
	    c[TS_CNT_GPU_NO_SLOT] > p->h.bpf[TS_CNT_GPU_NO_SLOT] ||
	    c[TS_CNT_LLAMA_DROPS] > p->h.bpf[TS_CNT_LLAMA_DROPS])
		attrib__step_loss(p->attr, p->last_ts);
	memcpy(p->h.bpf, c, sizeof(p->h.bpf));
}

void pipeline__set_exit_fn(struct pipeline *p, exit_fn fn)
{
	p->on_exit = fn;
}

struct attrib *pipeline__attrib(struct pipeline *p)
{
	return p->attr;
}

void pipeline__finish(struct pipeline *p, uint64_t ts)
{
	if (!ts)
		ts = p->last_ts;
	for (size_t b = 0; b < NBUCKETS; b++) {
		while (p->buckets[b])
			stream_drop(p, &p->buckets[b], ts, "capture_ended");
	}
	cuda_steps__finish(p->cuda);
	release_held(p, UINT64_MAX);
}

struct open_filter {
	open_request_fn fn;
	void *ctx;
};

static void open_llm(void *ctx, const struct request *r)
{
	struct open_filter *f = ctx;

	if (r->api != API_UNKNOWN)
		f->fn(f->ctx, r);
}

void pipeline__each_open(struct pipeline *p, open_request_fn fn, void *ctx)
{
	struct open_filter f = { fn, ctx };

	for (size_t b = 0; b < NBUCKETS; b++) {
		for (struct stream *s = p->buckets[b]; s; s = s->next) {
			const struct stream_key *k = conn__key(s->conn);

			/* a connection two processes share: once, by the stream it was made for */
			if (k->pid == s->key.pid && k->id == s->key.id &&
			    k->transport == s->key.transport)
				conn__each_open(s->conn, open_llm, &f);
		}
	}
}

uint64_t pipeline__reported_through(const struct pipeline *p, uint64_t now)
{
	uint64_t end;

	if (!p->held)
		return now;
	end = p->held->end_ns; /* the first held request's end */
	return end && end - 1 < now ? end - 1 : now;
}

const struct health *pipeline__health(struct pipeline *p)
{
	p->h.gpu_marks = cuda_steps__marks(p->cuda);
	p->h.gpu_unobserved = cuda_steps__unobserved(p->cuda);
	return &p->h;
}
