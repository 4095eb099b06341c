// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "llm/request.h"
#include "llm/judge.h"
#include "llm/session.h"
#include "engine/cuda_steps.h"
#include "engine/llama_models.h"
#include "engine/llama_steps.h"
#include "engine/engine_wire.h"
#include "stream/match.h"
#include "stream/conn.h"
#include "stream/identities.h"
#include "stream/pipeline.h"
#include "stream/recording.h"
#include "stream/relay.h"
#include "stream/settle.h"
#include "stream/streams.h"
#include "stream/tls_link.h"

/*
 * The pipeline's rooms: the stream table (streams.c), a TLS stream's socket (tls_link.c), the
 * settle queue (settle.c) and the step sources (engine/); this file holds them together and
 * dispatches each record by its type (record_kinds, below).
 */

/* Without engine steps, a finished request still waits this much record time before it is
 * reported: the ends of two CPUs' records are not always parsed in the order they happened
 * (seen under a CPU hog: a proxy's HTTP/2 server record parsed after its client's, which
 * ended 2.5 ms later), and matching needs a server's record before its client's. */
#define REORDER_NS (100ull * 1000000ull)
#define SWEEP_EVERY_NS (10ull * 1000000000ull)
#define TIME_EVERY_NS 1000000000ull /* time_fn's beat */

struct pipeline {
	request_fn fn;
	step_fn on_step;
	exit_fn on_exit;
	sched_fn on_sched;
	session_fn on_session;
	time_fn on_time;
	void *ctx;
	struct cuda_steps *cuda; /* the CUDA step source */
	struct llama_models models; /* llama.cpp: each context's model */
	struct recording *rec;
	struct health h;
	struct conn_sink sink;
	struct jdoc json; /* the dialects' JSON document (sink.json) */
	uint64_t last_ts; /* of the newest record: the end of a replayed capture */
	uint64_t next_sweep_ns; /* when idle streams are looked for next (record time) */
	uint64_t next_time_ns;	/* when on_time is called next (record time) */
	struct attrib *attr;
	struct engine_wire_set wires; /* each engine wire's reader (engine_wires[]) */
	struct identities idents; /* processes in a container or pod, and which */
	struct match *match;
	struct judge judge; /* each request's consumer, reading headroom and SLOs */
	struct sessions *sessions; /* clients' chained calls */
	struct relays relays; /* which processes may relay a stream on (stream/relay.h) */
	struct settle settle;
	uint64_t next_id;
	struct streams streams;
};

/* ---- a finished request, from its connection to the sinks ---- */

/* What an engine wire says of a server request's outputs: the first one's time, and each
 * one's time and tokens (for the alignment of token events to steps). */
static void engine_outputs(struct pipeline *p, struct request *r)
{
	uint64_t first = engine_wire_set__first_output(&p->wires, r);

	if (first)
		r->engine_output_ns = first;
	free(r->engine_out_ts);
	free(r->engine_out_tokens);
	r->engine_outs = engine_wire_set__outputs(&p->wires, r, &r->engine_out_ts,
						  &r->engine_out_tokens);
}

/* Its client <-> server join, and a server's TTFT split. */
static void join_and_attribute(struct pipeline *p, struct request *r)
{
	match__request(p->match, r);
	if (r->role == ROLE_SERVER) {
		engine_outputs(p, r);
		attrib__compute(p->attr, r);
		engine_wire_set__attribute(&p->wires, r); /* the engine's own times, where told */
		if (r->attr && r->attr->ok)
			p->h.attributed++;
		else
			p->h.not_attributed++;
	}
	request__engine_counts(r); /* what the stream left unsaid, from the engine */
}

static const struct request *downstream(void *ctx, const struct request *r)
{
	struct pipeline *p = ctx;

	return relay__downstream(&p->relays, &p->streams, &p->settle, r);
}

/* Out of the settle queue: joined, attributed, counted, handed on, freed. */
static void deliver_request(void *ctx, struct request *r)
{
	struct pipeline *p = ctx;
	struct request_metrics m;

	identities__stamp(&p->idents, r);
	join_and_attribute(p, r);
	request__metrics(r, &m);
	judge__request(&p->judge, r, &m, &(struct judge_relay){ downstream, p });
	sessions__request(p->sessions, r, &m);
	p->h.requests++;
	if (!m.complete)
		p->h.requests_incomplete++;
	if (p->fn)
		p->fn(p->ctx, r, &m);
	request__free(r);
}

static void deliver_exit(void *ctx, uint32_t pid)
{
	struct pipeline *p = ctx;

	identities__exit(&p->idents, pid);
	relay__exit(&p->relays, pid);
	attrib__exit(p->attr, pid);
	sessions__exit(p->sessions, pid);
	if (p->on_exit)
		p->on_exit(p->ctx, pid);
}

/* Finished requests come here from every connection, and wait in the settle queue. */
static void on_request(void *ctx, struct request *r)
{
	struct pipeline *p = ctx;
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;

	/* LLM calls only: a known API path or payload, or a streamed (SSE/NDJSON) reply. */
	if (r->api == API_UNKNOWN && r->stream != 1) {
		p->h.other_http++;
		request__free(r);
		return;
	}
	if (r->role == ROLE_SERVER && attrib__has_steps(p->attr)) {
		engine_outputs(p, r);
		attrib__finished(p->attr, r);
	}
	end = end > r->start_ns ? end : r->start_ns;
	if (!settle__hold(&p->settle, r, end,
			  end + (attrib__has_steps(p->attr) ? ATTRIB_SETTLE_NS : REORDER_NS)))
		deliver_request(p, r);
}

static void on_first_token(void *ctx, struct request *r)
{
	struct pipeline *p = ctx;

	if (r->role == ROLE_SERVER)
		r->engine_output_ns = engine_wire_set__first_output(&p->wires, r);
	attrib__first_token(p->attr, r);
	relay__seen(&p->relays, r);
}

static void on_session(void *ctx, const struct session *s)
{
	struct pipeline *p = ctx;

	p->h.sessions++;
	if (p->on_session)
		p->on_session(p->ctx, s);
}

static void on_sched(void *ctx, const struct engine_sched *s)
{
	struct pipeline *p = ctx;

	if (p->on_sched)
		p->on_sched(p->ctx, s);
}

static void on_zmtp_message(void *ctx, uint32_t pid, const char *comm, bool is_write,
			    const struct zmtp_message *m)
{
	engine_wire_set__zmtp_message(&((struct pipeline *)ctx)->wires, pid, comm, is_write, m);
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
	p->sessions = sessions__new(on_session, p);
	if (!p->cuda || !p->attr || !p->match || !p->sessions ||
	    engine_wire_set__init(&p->wires, on_sched, p)) {
		sessions__free(p->sessions);
		engine_wire_set__free(&p->wires);
		cuda_steps__free(p->cuda);
		attrib__free(p->attr);
		match__free(p->match);
		free(p);
		return NULL;
	}
	judge__init(&p->judge);
	p->fn = fn;
	p->on_step = on_engine_step;
	p->ctx = ctx;
	p->sink.on_request = on_request;
	p->sink.on_first_token = on_first_token;
	p->sink.ctx = p;
	p->sink.next_id = &p->next_id;
	p->sink.counts = &p->h.conn;
	p->sink.json = &p->json;
	jdoc__keep_recent(&p->json); /* an event read at both ends, or each hop, parsed once */
	p->sink.h2 = &p->h.h2;
	p->sink.zmtp_message = on_zmtp_message;
	streams__init(&p->streams, &p->sink, &p->h);
	settle__init(&p->settle, &(struct settle_out){ deliver_request, deliver_exit, p });
	return p;
}

void pipeline__free(struct pipeline *p)
{
	if (!p)
		return;
	cuda_steps__free(p->cuda);
	llama_models__free(&p->models);
	settle__free(&p->settle);
	attrib__free(p->attr);
	match__free(p->match);
	sessions__free(p->sessions);
	relay__free(&p->relays);
	streams__free(&p->streams);
	engine_wire_set__free(&p->wires);
	identities__free(&p->idents);
	jdoc__free(&p->json);
	free(p);
}

void pipeline__set_recording(struct pipeline *p, struct recording *rec)
{
	p->rec = rec;
}

/* ---- bytes ---- */

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

static void on_piece(struct pipeline *p, const struct piece *pc)
{
	uint64_t ts = pc->hdr->ts_ns;
	struct stream *s = streams__get(&p->streams, &pc->key, pc->hdr->comm);
	unsigned lane = (pc->flags & TS_F_SEQ_PER_DIR) && pc->is_write;

	if (!s) {
		p->h.conn.no_memory++; /* the stream's requests go unreported: counted, never silent */
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
		stream__set_addresses(s, pc->addr);

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

/* ---- one handler a record type ---- */

static int on_tls_data(struct pipeline *p, void *rec, size_t size)
{
	struct ts_tls_data *e = rec;
	struct piece pc;

	if (e->len != size - sizeof(*e) || e->dir > TS_DIR_WRITE)
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

static int on_tls_free(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_tls_free *e = rec;

	streams__close(&p->streams, &(struct stream_key){ e->hdr.pid, TRANSPORT_TLS, e->ssl },
		       e->hdr.ts_ns, "connection_closed");
	return 0;
}

static int on_tls_sock(struct pipeline *p, void *rec, size_t size)
{
	if (!tls_link__sock(&p->streams, rec))
		p->h.conn.no_memory++;
	return 0;
}

/* A captured TCP socket's namespace (and its addresses): its stream is made now, before its
 * first bytes. */
static int on_sock_net(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_sock_net *e = rec;
	struct stream *s = streams__get(&p->streams,
					&(struct stream_key){ e->owner, TRANSPORT_TCP, e->sock },
					e->hdr.comm);

	if (!s) {
		p->h.conn.no_memory++;
		return 0;
	}
	s->last_ns = e->hdr.ts_ns;
	if (!conn__has_addresses(s->conn))
		stream__set_addresses(s, &e->addr);
	conn__set_netns(s->conn, e->netns);
	return 0;
}

/* A connection NAT changed: its ends as the far side sees them, for the join. */
static int on_sock_nat(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_rec_sock_nat *e = rec;
	static const enum transport of[] = { [TS_NAT_TCP] = TRANSPORT_TCP,
					     [TS_NAT_TLS] = TRANSPORT_TLS,
					     [TS_NAT_GO_TLS] = TRANSPORT_GO_TLS };
	struct stream *s;

	if (e->stream > TS_NAT_GO_TLS)
		return -1;
	s = streams__get(&p->streams, &(struct stream_key){ e->hdr.pid, of[e->stream], e->id },
			 e->hdr.comm);
	if (!s) {
		p->h.conn.no_memory++;
		return 0;
	}
	s->last_ns = e->hdr.ts_ns;
	stream__set_nat(s, &e->after);
	p->h.streams_nat++;
	return 0;
}

static int on_sock_data(struct pipeline *p, void *rec, size_t size)
{
	struct ts_sock_data *e = rec;
	struct piece pc;

	if (e->len != size - sizeof(*e) || e->dir > TS_DIR_WRITE)
		return -1;
	pc = (struct piece){
		.key = { .pid = e->owner,
			 .transport = e->addr.family == AF_UNIX ? TRANSPORT_UNIX : TRANSPORT_TCP,
			 .id = e->sock },
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

/* A socket the kernel closed as its last process died: the other end, where traced, learns
 * that its peer died. */
static void close_by_exit(struct pipeline *p, const struct stream_key *key, uint64_t ts)
{
	struct stream **link = streams__find(&p->streams, key);
	const struct conn *dead;

	tls_link__end_orphans(&p->streams, key->id, ts, true);
	if (!*link)
		return;
	dead = (*link)->conn;
	if (conn__has_addresses(dead))
		streams__tell_peers(&p->streams, &dead, 1);
	streams__drop(&p->streams, link, ts, "process_exited");
}

/* A captured Unix socket's path and peer: its stream (made now: this comes before its first
 * bytes) gets addresses both ends share and its peer's process. */
static int on_unix_sock(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_unix_sock *e = rec;
	struct stream *s;

	if (e->path_len > TS_UNIX_PATH_MAX)
		return -1;
	s = streams__get(&p->streams, &(struct stream_key){ e->owner, TRANSPORT_UNIX, e->sock },
			 e->hdr.comm);
	if (!s) {
		p->h.conn.no_memory++;
		return 0;
	}
	s->last_ns = e->hdr.ts_ns;
	stream__set_unix(s, e);
	return 0;
}

static int on_sock_close(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_sock_close *e = rec;
	struct stream_key key = { e->owner, e->flags & TS_CLOSE_UNIX ? TRANSPORT_UNIX : TRANSPORT_TCP,
				  e->sock };

	if (e->flags & TS_CLOSE_BY_EXIT) {
		close_by_exit(p, &key, e->hdr.ts_ns);
	} else {
		tls_link__end_orphans(&p->streams, e->sock, e->hdr.ts_ns, false);
		streams__close(&p->streams, &key, e->hdr.ts_ns, "connection_closed");
	}
	return 0;
}

static int on_process_exit(struct pipeline *p, void *rec, size_t size)
{
	const struct ts_event_hdr *h = rec;

	streams__exit(&p->streams, h->pid, h->ts_ns,
		      size >= sizeof(struct ts_exit) &&
			      (((struct ts_exit *)rec)->flags & TS_EXIT_SOCKET_CLOSES));
	cuda_steps__exit(p->cuda, h->pid);
	llama_models__exit(&p->models, h->pid);
	settle__exit(&p->settle, h->pid);
	return 0;
}

static int on_gpu_mark(struct pipeline *p, void *rec, size_t size)
{
	cuda_steps__mark(p->cuda, rec);
	return 0;
}

static int on_gpu_kname(struct pipeline *p, void *rec, size_t size)
{
	cuda_steps__kname(p->cuda, rec);
	return 0;
}

/* A llama.cpp call: one step of its engine, as the step source reads it. */
static int on_llama_step(struct pipeline *p, void *rec, size_t size)
{
	struct engine_step es;

	if (llama_steps__read(rec, size, &es))
		return -1;
	es.model = llama_models__name_of(&p->models, es.pid, es.context);
	es.model_key = llama_model__key(es.model);
	if (!es.failed && llama_models__positions(&p->models, &es))
		p->h.conn.no_memory++;
	on_step(p, &es);
	return 0;
}

/* llama.cpp loaded a model, or made a context of one: which model a context's steps are. */
static int on_llama_model(struct pipeline *p, void *rec, size_t size)
{
	if (llama_models__model(&p->models, rec))
		p->h.conn.no_memory++;
	return 0;
}

static int on_llama_context(struct pipeline *p, void *rec, size_t size)
{
	if (llama_models__context(&p->models, rec))
		p->h.conn.no_memory++;
	return 0;
}

/* Attach work, done by the live loop; recorded all the same. */
static int on_attach_work(struct pipeline *p, void *rec, size_t size)
{
	return 0;
}

/* Userspace's record of the BPF counters. A writer with fewer counters (an older version)
 * wrote a shorter record. */
static int on_counters(struct pipeline *p, void *rec, size_t size)
{
	struct ts_rec_counters *c = rec;
	__u64 counters[TS_CNT__MAX] = { 0 };
	size_t n = (size - sizeof(c->hdr)) / sizeof(__u64);

	memcpy(counters, c->counters, (n < TS_CNT__MAX ? n : TS_CNT__MAX) * sizeof(__u64));
	pipeline__set_bpf_counters(p, counters);
	return 0;
}

/* Userspace's record of a process's ancestors, read from /proc. */
static int on_proc_tree(struct pipeline *p, void *rec, size_t size)
{
	struct ts_rec_proc_tree *t = rec;

	if (t->n > TS_REC_MAX_ANCESTORS)
		return -1;
	attrib__proc_tree(p->attr, t->hdr.pid, t->ancestors, t->n);
	return 0;
}

static int on_proc_identity(struct pipeline *p, void *rec, size_t size)
{
	(void)size;
	if (identities__add(&p->idents, rec))
		p->h.conn.no_memory++;
	return 0;
}

/*
 * Every record type (pipeline.h): at least min_size bytes, then its handler (which may check
 * more, and returns -1 for a malformed record). A new probe family's records are rows here.
 * Records of other types, or too short, are counted (bad_events) and skipped.
 */
#define KIND(t, size, flags, fn) { t, #t, size, flags, fn }
/* In the order of their types, which record_kind__of indexes by */
static const struct record_kind record_kinds[] = {
	KIND(TS_EV_TLS_DATA, sizeof(struct ts_tls_data), REC_PROCESS | REC_STREAM_BYTES,
	     on_tls_data),
	KIND(TS_EV_TLS_FREE, sizeof(struct ts_tls_free), 0, on_tls_free),
	KIND(TS_EV_EXEC, sizeof(struct ts_event_hdr), REC_CUDA_NAMES, on_attach_work),
	/* older recordings' exits carry no flags */
	KIND(TS_EV_EXIT, sizeof(struct ts_event_hdr), REC_CUDA_NAMES, on_process_exit),
	KIND(TS_EV_DLOPEN, sizeof(struct ts_event_hdr), 0, on_attach_work),
	KIND(TS_EV_GPU_MARK, sizeof(struct ts_gpu_mark), REC_PROCESS | REC_CUDA_NAMES,
	     on_gpu_mark),
	KIND(TS_EV_GPU_KNAME, sizeof(struct ts_gpu_kname), REC_CUDA_NAMES, on_gpu_kname),
	KIND(TS_EV_SOCK_DATA, sizeof(struct ts_sock_data), REC_PROCESS | REC_STREAM_BYTES,
	     on_sock_data),
	KIND(TS_EV_SOCK_CLOSE, sizeof(struct ts_sock_close), 0, on_sock_close),
	/* recordings made before 2026-12-05 end before its netns */
	KIND(TS_EV_TLS_SOCK, offsetof(struct ts_tls_sock, netns), 0, on_tls_sock),
	/* checks its own size */
	KIND(TS_EV_LLAMA_STEP, sizeof(struct ts_event_hdr), REC_PROCESS, on_llama_step),
	KIND(TS_EV_UNIX_SOCK, sizeof(struct ts_unix_sock), 0, on_unix_sock),
	KIND(TS_EV_SOCK_NET, sizeof(struct ts_sock_net), REC_PROCESS, on_sock_net),
	KIND(TS_EV_LLAMA_MODEL, sizeof(struct ts_llama_model), 0, on_llama_model),
	KIND(TS_EV_LLAMA_CONTEXT, sizeof(struct ts_llama_context), 0, on_llama_context),
	KIND(TS_REC_COUNTERS, sizeof(struct ts_event_hdr), 0, on_counters),
	KIND(TS_REC_PROC_TREE, sizeof(struct ts_rec_proc_tree), 0, on_proc_tree),
	KIND(TS_REC_PROC_IDENTITY, sizeof(struct ts_rec_proc_identity), 0, on_proc_identity),
	KIND(TS_REC_SOCK_NAT, sizeof(struct ts_rec_sock_nat), 0, on_sock_nat),
};
#define NKINDS (sizeof(record_kinds) / sizeof(record_kinds[0]))

/* Every record passes here, twice live (capture, then the pipeline): an index, not a search. */
const struct record_kind *record_kind__of(uint32_t type)
{
	size_t i = SIZE_MAX;

	if (type >= 1 && type < TS_EV__END)
		i = type - 1;
	else if (type >= TS_REC_COUNTERS && type < TS_REC__END)
		i = (TS_EV__END - 1) + (type - TS_REC_COUNTERS);
	return i < NKINDS && record_kinds[i].type == type ? &record_kinds[i] : NULL;
}

const struct record_kind *record_kinds__all(size_t *n)
{
	*n = NKINDS;
	return record_kinds;
}

int pipeline__feed(struct pipeline *p, void *rec, size_t size)
{
	struct ts_event_hdr *h = rec;
	const struct record_kind *k;

	if (size < sizeof(*h) || h->size != size) {
		p->h.bad_events++;
		return -1;
	}
	if (h->ts_ns > p->last_ts)
		p->last_ts = h->ts_ns;
	if (p->last_ts >= p->next_sweep_ns) {
		if (p->next_sweep_ns)
			streams__sweep_idle(&p->streams, p->last_ts);
		attrib__prune(p->attr, p->last_ts);
		engine_wire_set__prune(&p->wires, p->last_ts);
		sessions__tick(p->sessions, p->last_ts);
		p->next_sweep_ns = p->last_ts + SWEEP_EVERY_NS;
	}
	if (p->on_time && p->last_ts >= p->next_time_ns) {
		/* a request is held at most this long past its end (settle queue) */
		if (p->next_time_ns)
			p->on_time(p->ctx, p->last_ts > ATTRIB_SETTLE_NS ?
					       p->last_ts - ATTRIB_SETTLE_NS : 0);
		p->next_time_ns = p->last_ts + TIME_EVERY_NS;
	}
	k = record_kind__of(h->type);
	if (!k || size < k->min_size || k->handle(p, rec, size)) {
		p->h.bad_events++;
		return -1;
	}
	if (p->rec && recording__write(p->rec, rec, size)) /* said by outfile.c */
		p->h.recording_errors++;
	settle__release(&p->settle, p->last_ts);
	return 0;
}

void pipeline__set_bpf_counters(struct pipeline *p, const __u64 c[TS_CNT__MAX])
{
	/* Lost CUDA marks or llama.cpp steps: no request whose time covers this is attributed. */
	if (c[TS_CNT_GPU_DROPS] > p->h.bpf[TS_CNT_GPU_DROPS] ||
	    c[TS_CNT_GPU_NO_SLOT] > p->h.bpf[TS_CNT_GPU_NO_SLOT] ||
	    c[TS_CNT_LLAMA_DROPS] > p->h.bpf[TS_CNT_LLAMA_DROPS])
		attrib__step_loss(p->attr, p->last_ts);
	/* Lost stream records: a stream that shows no gap after this may have lost its end */
	if (c[TS_CNT_DROPS] > p->h.bpf[TS_CNT_DROPS] ||
	    c[TS_CNT_OTHER_DROPS] > p->h.bpf[TS_CNT_OTHER_DROPS])
		p->streams.lost_ns = p->last_ts;
	/* The plaintext socket table full (an LRU: the kernel makes room before it is quite
	 * full): a captured socket pushed out goes quiet, as a stream whose records were dropped
	 * does, so it is treated the same. */
	if (c[TS_CNT_SOCK_STATES_ADDED] - c[TS_CNT_SOCK_STATES_REMOVED] + TS_SOCK_STATES_SLACK >=
	    TS_SOCK_STATES_MAX) {
		p->streams.lost_ns = p->last_ts;
		p->h.sock_table_full++;
	}
	memcpy(p->h.bpf, c, sizeof(p->h.bpf));
}

void pipeline__set_exit_fn(struct pipeline *p, exit_fn fn)
{
	p->on_exit = fn;
}

void pipeline__set_sched_fn(struct pipeline *p, sched_fn fn)
{
	p->on_sched = fn;
}

void pipeline__set_time_fn(struct pipeline *p, time_fn fn)
{
	p->on_time = fn;
}

void pipeline__set_session_fn(struct pipeline *p, session_fn fn)
{
	p->on_session = fn;
}

struct sessions *pipeline__sessions(struct pipeline *p)
{
	return p->sessions;
}

struct judge *pipeline__judge(struct pipeline *p)
{
	return &p->judge;
}

struct attrib *pipeline__attrib(struct pipeline *p)
{
	return p->attr;
}

void pipeline__finish(struct pipeline *p, uint64_t ts)
{
	if (!ts)
		ts = p->last_ts;
	streams__finish(&p->streams, ts);
	cuda_steps__finish(p->cuda);
	settle__release(&p->settle, UINT64_MAX);
	sessions__finish(p->sessions);
	p->h.sessions_evicted = sessions__evicted(p->sessions);
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

	streams__each_open(&p->streams, open_llm, &f);
}

uint64_t pipeline__reported_through(const struct pipeline *p, uint64_t now)
{
	return settle__reported_through(&p->settle, now);
}

void pipeline__set_otlp_counts(struct pipeline *p, uint64_t sent, uint64_t dropped,
			       uint64_t retries, uint64_t failures)
{
	p->h.otlp.on = true;
	p->h.otlp.spans_sent = sent;
	p->h.otlp.spans_dropped = dropped;
	p->h.otlp.retries = retries;
	p->h.otlp.failures = failures;
}

const struct health *pipeline__health(struct pipeline *p)
{
	p->h.gpu_marks = cuda_steps__marks(p->cuda);
	p->h.gpu_unobserved = cuda_steps__unobserved(p->cuda);
	engine_wire_set__counts(&p->wires, p->h.engine_wires);
	return &p->h;
}
