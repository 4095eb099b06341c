// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Perfetto timeline (perfetto.h; docs/perfetto.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/pbwrite.h"
#include "base/text.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "llm/judge.h"
#include "engine/cuda_steps.h"
#include "engine/llama_steps.h"
#include "sinks/perfetto.h"
#include "sinks/perfetto_proto.h"

#define SEQUENCE_ID 1
#define NAME_MAX_TEXT 256

/* Track uuids: a kind in the top byte, what it is of below, so that a replay gives the same. */
enum track_kind {
	T_PROCESS = 1, /* | pid */
	T_REQUEST,     /* | request id */
	T_STEPS,       /* | pid, stream or context hash */
	T_BUSY,	       /* | the same: the step stream's busy counter */
	T_IN_FLIGHT,   /* | server pid */
	T_QUEUED,      /* | server pid */
	T_TOKENS,      /* | the step stream's: tokens per step */
	T_SCHED_RUNNING, /* | pid, engine index: an engine's scheduler, from its engine wire */
	T_SCHED_WAITING, /* | the same */
	T_SCHED_KV,      /* | the same: KV cache use, 0 to 1 */
};

/* A counter change: held until the end, then written in time order as running sums. */
struct delta {
	uint64_t ts, track;
	int32_t d;
};

/* A request whose other end may come later: its token times, for the write -> read flows. */
struct kept {
	uint64_t id, server_id, track;
	uint64_t *t; /* token event times */
	uint64_t n;
};

#define KEPT 1024 /* recent server requests, and clients whose server is not written yet */
#define UNIT_TRACKS 16 /* tracks one unit may describe (a request or a step: six at most) */
#define TRACK_GONE 1   /* a described track whose unit was cut (never a uuid: kind 0) */

/*
 * What is written whole or not at all under --perfetto-max-mb: a request (its slices, events,
 * flows and the tracks it describes), a step, a counter track's values. Its packets gather
 * here; past the cap the unit is cut as one, the tracks it described are forgotten and its
 * counter changes dropped, so that what the file holds never has a slice left open.
 */
struct unit {
	bool open;
	struct buf bytes;
	uint64_t packets;
	size_t ndeltas;	 /* the counter changes made before it */
	bool started;	 /* whether the clock snapshot was written before it */
	uint64_t tracks[UNIT_TRACKS]; /* described in it */
	size_t ntracks;
};

struct perfetto {
	struct outfile *f;
	uint64_t max_bytes, bytes, cut;
	bool started;
	struct pbw pkt;	 /* the packet being built */
	uint64_t *tracks; /* described already: a set (open addressing; 0 is empty) */
	size_t ntracks, captracks;
	struct delta *deltas;
	size_t ndeltas, capdeltas;
	struct kept servers[KEPT], clients[KEPT]; /* rings */
	size_t next_server, next_client;
	struct unit unit;
};

/* ---- packets ---- */

static void packet_begin(struct perfetto *pf)
{
	pbw__reset(&pf->pkt);
	pbw__begin(&pf->pkt, PF_TRACE_PACKET);
	pbw__uint(&pf->pkt, PF_PACKET_SEQUENCE_ID, SEQUENCE_ID);
}

/* The packet, whole, into the file: or cut and counted past the cap. */
static void packet_end(struct perfetto *pf)
{
	pbw__end(&pf->pkt);
	if (pf->pkt.failed) {
		outfile__no_memory(pf->f);
		return;
	}
	if (pf->unit.open) {
		if (buf__add(&pf->unit.bytes, pf->pkt.b.p, pf->pkt.b.len, SIZE_MAX))
			outfile__no_memory(pf->f);
		pf->unit.packets++;
		return;
	}
	if (pf->bytes + pf->pkt.b.len > pf->max_bytes) {
		pf->cut++;
		return;
	}
	pf->bytes += pf->pkt.b.len;
	outfile__record(pf->f, pf->pkt.b.p, pf->pkt.b.len, false);
}

static void unit_begin(struct perfetto *pf)
{
	buf__reset(&pf->unit.bytes);
	pf->unit.open = true;
	pf->unit.packets = 0;
	pf->unit.ndeltas = pf->ndeltas;
	pf->unit.started = pf->started;
	pf->unit.ntracks = 0;
}

static void forget_track(struct perfetto *pf, uint64_t id)
{
	size_t mask = pf->captracks - 1;

	for (size_t i = id & mask; pf->tracks[i]; i = (i + 1) & mask) {
		if (pf->tracks[i] == id) {
			pf->tracks[i] = TRACK_GONE; /* a lookup goes on past it */
			return;
		}
	}
}

/* The unit into the file, whole, or cut: as if it had never been written. */
static void unit_end(struct perfetto *pf)
{
	struct unit *u = &pf->unit;

	if (!u->open)
		return;
	u->open = false;
	if (!u->packets)
		return;
	if (pf->bytes + u->bytes.len <= pf->max_bytes && !u->bytes.overflow) {
		pf->bytes += u->bytes.len;
		outfile__record(pf->f, u->bytes.p, u->bytes.len, false);
		return;
	}
	pf->cut += u->packets;
	for (size_t i = 0; i < u->ntracks; i++)
		forget_track(pf, u->tracks[i]);
	pf->ndeltas = u->ndeltas;
	pf->started = u->started;
}

static void timed_packet(struct perfetto *pf, uint64_t ts)
{
	packet_begin(pf);
	pbw__uint(&pf->pkt, PF_PACKET_TIMESTAMP, ts);
	pbw__uint(&pf->pkt, PF_PACKET_TIMESTAMP_CLOCK_ID, PF_BUILTIN_CLOCK_MONOTONIC);
}

/* The first packet: the trace's clock is CLOCK_MONOTONIC, tokenscope's own. */
static void start(struct perfetto *pf, uint64_t ts)
{
	pf->started = true;
	packet_begin(pf);
	pbw__uint(&pf->pkt, PF_PACKET_SEQUENCE_FLAGS, PF_SEQ_INCREMENTAL_STATE_CLEARED);
	pbw__begin(&pf->pkt, PF_PACKET_CLOCK_SNAPSHOT);
	pbw__begin(&pf->pkt, PF_CLOCKS);
	pbw__uint(&pf->pkt, PF_CLOCK_ID, PF_BUILTIN_CLOCK_MONOTONIC);
	pbw__uint(&pf->pkt, PF_CLOCK_TIMESTAMP, ts);
	pbw__end(&pf->pkt);
	pbw__uint(&pf->pkt, PF_PRIMARY_TRACE_CLOCK, PF_BUILTIN_CLOCK_MONOTONIC);
	pbw__end(&pf->pkt);
	packet_end(pf);
}

static uint64_t uuid(enum track_kind k, uint64_t of)
{
	return (uint64_t)k << 56 | (of & ((1ull << 56) - 1));
}

/* FNV-1a of a few words: stable across runs. */
static uint64_t hash(uint64_t a, uint64_t b)
{
	uint64_t h = 1469598103934665603ull;
	uint64_t w[2] = { a, b };

	for (size_t i = 0; i < sizeof(w); i++) {
		h ^= ((const uint8_t *)w)[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Whether the track was described before; marks it described. */
static bool described(struct perfetto *pf, uint64_t id)
{
	size_t mask, i;

	if (pf->ntracks * 2 >= pf->captracks) {
		size_t cap = pf->captracks ? pf->captracks * 2 : 256;
		uint64_t *t = calloc(cap, sizeof(*t));

		if (!t)
			return true; /* described twice at worst: a reader takes that */
		pf->ntracks = 0;
		for (size_t k = 0; k < pf->captracks; k++) {
			if (!pf->tracks[k] || pf->tracks[k] == TRACK_GONE)
				continue;
			for (i = pf->tracks[k] & (cap - 1); t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = pf->tracks[k];
			pf->ntracks++;
		}
		free(pf->tracks);
		pf->tracks = t;
		pf->captracks = cap;
	}
	mask = pf->captracks - 1;
	for (i = id & mask; pf->tracks[i]; i = (i + 1) & mask) {
		if (pf->tracks[i] == id)
			return true;
	}
	if (pf->unit.open) {
		if (pf->unit.ntracks == UNIT_TRACKS)
			return true; /* cannot be taken back: not described (never happens: six) */
		pf->unit.tracks[pf->unit.ntracks++] = id;
	}
	pf->tracks[i] = id;
	pf->ntracks++;
	return false;
}

/* A process's track, named by its command (in a pod: "comm (namespace/pod)"; pod NULL or ""
 * for none). */
static void describe_process_in(struct perfetto *pf, uint32_t pid, const char *comm,
				const char *pod)
{
	char safe[TEXT_SAFE_MAX(TS_COMM_LEN) + TEXT_SAFE_MAX(144) + 4], spod[TEXT_SAFE_MAX(144)];
	size_t n;

	if (described(pf, uuid(T_PROCESS, pid)))
		return;
	packet_begin(pf);
	pbw__begin(&pf->pkt, PF_PACKET_TRACK_DESCRIPTOR);
	pbw__uint(&pf->pkt, PF_TRACK_UUID, uuid(T_PROCESS, pid));
	pbw__begin(&pf->pkt, PF_TRACK_PROCESS);
	pbw__uint(&pf->pkt, PF_PROCESS_PID, pid);
	text__safe(safe, sizeof(safe), comm);
	n = strlen(safe);
	if (pod && *pod)
		snprintf(safe + n, sizeof(safe) - n, " (%s)", text__safe(spod, sizeof(spod), pod));
	pbw__string(&pf->pkt, PF_PROCESS_NAME, safe);
	pbw__end(&pf->pkt);
	pbw__end(&pf->pkt);
	packet_end(pf);
}

/* A track under a process's (a request's, a step stream's, a counter). */
static void describe(struct perfetto *pf, uint64_t id, uint32_t pid, const char *name,
		     bool counter)
{
	if (described(pf, id))
		return;
	packet_begin(pf);
	pbw__begin(&pf->pkt, PF_PACKET_TRACK_DESCRIPTOR);
	pbw__uint(&pf->pkt, PF_TRACK_UUID, id);
	pbw__uint(&pf->pkt, PF_TRACK_PARENT_UUID, uuid(T_PROCESS, pid));
	pbw__string(&pf->pkt, PF_TRACK_NAME, name);
	if (counter) {
		pbw__begin(&pf->pkt, PF_TRACK_COUNTER);
		pbw__end(&pf->pkt);
	}
	pbw__end(&pf->pkt);
	packet_end(pf);
}

/* ---- events ---- */

static void annotate_uint(struct perfetto *pf, const char *name, uint64_t v)
{
	pbw__begin(&pf->pkt, PF_EVENT_DEBUG_ANNOTATIONS);
	pbw__string(&pf->pkt, PF_ANNOTATION_NAME, name);
	pbw__uint(&pf->pkt, PF_ANNOTATION_UINT, v);
	pbw__end(&pf->pkt);
}

static void annotate_double(struct perfetto *pf, const char *name, double v)
{
	pbw__begin(&pf->pkt, PF_EVENT_DEBUG_ANNOTATIONS);
	pbw__string(&pf->pkt, PF_ANNOTATION_NAME, name);
	pbw__double(&pf->pkt, PF_ANNOTATION_DOUBLE, v);
	pbw__end(&pf->pkt);
}

static void annotate_ms(struct perfetto *pf, const char *name, uint64_t ns)
{
	annotate_double(pf, name, (double)ns / 1e6);
}

static void annotate_str(struct perfetto *pf, const char *name, const char *v)
{
	char safe[TEXT_SAFE_MAX(NAME_MAX_TEXT)];

	pbw__begin(&pf->pkt, PF_EVENT_DEBUG_ANNOTATIONS);
	pbw__string(&pf->pkt, PF_ANNOTATION_NAME, name);
	pbw__string(&pf->pkt, PF_ANNOTATION_STRING, text__safe(safe, sizeof(safe), v));
	pbw__end(&pf->pkt);
}

/* An event's packet up to its annotations; the caller adds them and ends the packet. */
static void event(struct perfetto *pf, uint64_t ts, uint64_t track, int type, const char *name)
{
	timed_packet(pf, ts);
	pbw__begin(&pf->pkt, PF_PACKET_TRACK_EVENT);
	pbw__uint(&pf->pkt, PF_EVENT_TYPE, (uint64_t)type);
	pbw__uint(&pf->pkt, PF_EVENT_TRACK_UUID, track);
	if (name)
		pbw__string(&pf->pkt, PF_EVENT_NAME, name);
}

static void event_end(struct perfetto *pf)
{
	pbw__end(&pf->pkt); /* the TrackEvent */
	packet_end(pf);
}

static void slice(struct perfetto *pf, uint64_t track, const char *name, uint64_t from, uint64_t to)
{
	event(pf, from, track, PF_TYPE_SLICE_BEGIN, name);
	event_end(pf);
	event(pf, to, track, PF_TYPE_SLICE_END, NULL);
	event_end(pf);
}

static void counter_delta(struct perfetto *pf, uint64_t track, uint64_t ts, int32_t d)
{
	if (!array__reserve((void **)&pf->deltas, &pf->capdeltas, pf->ndeltas + 1,
			    sizeof(*pf->deltas))) {
		pf->cut++;
		return;
	}
	pf->deltas[pf->ndeltas++] = (struct delta){ ts, track, d };
}

/* ---- requests ---- */

/* The flow from the step that produced a token event to the event: one per event (a batched
 * step produces tokens of several requests). */
static uint64_t flow_of_token(uint64_t request_id, uint64_t event)
{
	return hash(request_id, event) | 1;
}

static void request_args(struct perfetto *pf, const struct request *r,
			 const struct request_metrics *m)
{
	annotate_uint(pf, "id", r->id);
	annotate_str(pf, "api", api__name(r->api));
	annotate_str(pf, "model", *r->model ? r->model : "-");
	annotate_str(pf, "path", r->path);
	annotate_uint(pf, "status", (uint64_t)(r->status > 0 ? r->status : 0));
	annotate_uint(pf, "token_events", r->token_events);
	if (m->output_tokens.set)
		annotate_uint(pf, "output_tokens", m->output_tokens.v);
	if (r->input_tokens.set)
		annotate_uint(pf, "input_tokens", r->input_tokens.v);
	if (r->cached_tokens.set)
		annotate_uint(pf, "cached_tokens", r->cached_tokens.v);
	if (r->first_token_ns)
		annotate_ms(pf, "ttft_ms", r->first_token_ns - r->start_ns);
	if (!m->complete)
		annotate_str(pf, "incomplete", *r->error ? r->error : "incomplete");
	if (r->server_id)
		annotate_uint(pf, "server_id", r->server_id);
	annotate_str(pf, "cache_regime", cache_regime__name(m->cache));
	annotate_str(pf, "consumer", consumer__name(m->consumer));
	if (!isnan(m->reading_headroom))
		annotate_double(pf, "reading_headroom", m->reading_headroom);
	annotate_str(pf, "slo", m->slo_met < 0 ? "none" : m->slo_met ? "met" : "missed");
}

/* A server's TTFT split, as slices: queued, prefill, emit. */
static void ttft_phases(struct perfetto *pf, uint64_t track, const struct request *r,
			const struct attribution *a)
{
	struct ttft_split sp;
	uint64_t ps, pe;

	attribution__ttft_split(a, &sp);
	ps = r->start_ns + sp.queue_ns;
	pe = ps + sp.prefill_ns;
	if (sp.source == TTFT_WIRE_SPAN) {
		/* an engine wire without its events and no CUDA split: the front end's part, then the
		 * engine's queue and prefill as one span */
		uint64_t add = r->start_ns + sp.frontend_ns;

		slice(pf, track, "frontend", r->start_ns, add);
		slice(pf, track, "engine", add, add + sp.engine_ns);
		slice(pf, track, "emit", add + sp.engine_ns, r->first_token_ns);
		return;
	}
	event(pf, r->start_ns, track, PF_TYPE_SLICE_BEGIN, "queued");
	if (sp.source == TTFT_WIRE_EVENTS) { /* an engine wire's: the engine's own split */
		annotate_ms(pf, "frontend_ms", sp.frontend_ns);
		annotate_ms(pf, "engine_queue_ms", sp.engine_queue_ns);
		annotate_uint(pf, "preemptions", a->wire.preemptions);
	} else {
		annotate_ms(pf, "busy_ms", sp.queue_busy_ns);
		annotate_ms(pf, "idle_ms", sp.queue_idle_ns);
	}
	event_end(pf);
	event(pf, ps, track, PF_TYPE_SLICE_END, NULL);
	event_end(pf);
	event(pf, ps, track, PF_TYPE_SLICE_BEGIN, "prefill");
	annotate_uint(pf, "steps", sp.prefill_steps);
	if (a->by_sequence) {
		annotate_uint(pf, "sequence", (uint64_t)a->seq);
		annotate_uint(pf, "cached_tokens", a->cached_tokens);
		annotate_uint(pf, "chunks", a->prefill_chunks);
		if (a->drafted) {
			/* the request's speculative decoding, over all its steps */
			annotate_uint(pf, "drafted", a->drafted);
			annotate_uint(pf, "accepted", a->accepted);
			annotate_uint(pf, "verify_steps", a->verify_steps);
		}
	}
	event_end(pf);
	event(pf, pe, track, PF_TYPE_SLICE_END, NULL);
	event_end(pf);
	slice(pf, track, "emit", pe, r->first_token_ns);
}

/* The token gaps as slices, and an instant per token event with its producing step's flow. */
static void tokens(struct perfetto *pf, uint64_t track, const struct request *r,
		   const struct attribution *a)
{
	uint64_t t = r->first_token_ns;

	for (uint64_t i = 0; i < r->token_events; i++) {
		const struct attrib_gap *g = a && i && i - 1 < a->ngaps ? &a->gaps[i - 1] : NULL;
		uint64_t prev = t;

		if (i)
			t += r->gaps_ns[i - 1];
		if (i) {
			event(pf, prev, track, PF_TYPE_SLICE_BEGIN, "gap");
			if (g) {
				annotate_ms(pf, "decode_ms", g->decode_ns);
				annotate_ms(pf, "host_ms", g->host_ns);
				annotate_ms(pf, "interference_ms", g->interference_ns);
				annotate_uint(pf, "steps", g->steps);
				if (g->verify) {
					annotate_uint(pf, "drafted", g->drafted);
					annotate_uint(pf, "accepted", g->accepted);
				}
			}
			event_end(pf);
			event(pf, t, track, PF_TYPE_SLICE_END, NULL);
			event_end(pf);
		}
		event(pf, t, track, PF_TYPE_INSTANT, "token");
		annotate_uint(pf, "event", i);
		if (g && g->producer_start_ns && a->nengine_pids) {
			uint64_t flow = flow_of_token(r->id, i);

			pbw__fixed64(&pf->pkt, PF_EVENT_TERMINATING_FLOW_IDS, flow);
			event_end(pf);
			/* the flow's start: on the engine process's track, at the step */
			describe_process_in(pf, a->engine_pids[0], "", NULL);
			event(pf, g->producer_start_ns, uuid(T_PROCESS, a->engine_pids[0]),
			      PF_TYPE_INSTANT, "produced");
			annotate_uint(pf, "request", r->id);
			pbw__fixed64(&pf->pkt, PF_EVENT_FLOW_IDS, flow);
		}
		event_end(pf);
	}
}

static void keep(struct kept *k, const struct request *r, uint64_t track)
{
	uint64_t t = r->first_token_ns;

	free(k->t);
	*k = (struct kept){ r->id, r->server_id, track, NULL, 0 };
	k->t = malloc((r->token_events ? r->token_events : 1) * sizeof(*k->t));
	if (!k->t)
		return;
	for (uint64_t i = 0; i < r->token_events; i++) {
		if (i)
			t += r->gaps_ns[i - 1];
		k->t[k->n++] = t;
	}
}

/* The server's token writes to the client's reads of them, event by event. */
static void write_read_flows(struct perfetto *pf, const struct kept *server, struct kept *client)
{
	uint64_t n = server->n < client->n ? server->n : client->n;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t flow = hash(client->id | 1ull << 63, i) | 1;

		event(pf, server->t[i], server->track, PF_TYPE_INSTANT, "written");
		pbw__fixed64(&pf->pkt, PF_EVENT_FLOW_IDS, flow);
		event_end(pf);
		event(pf, client->t[i], client->track, PF_TYPE_INSTANT, "read");
		pbw__fixed64(&pf->pkt, PF_EVENT_TERMINATING_FLOW_IDS, flow);
		event_end(pf);
	}
	free(client->t);
	*client = (struct kept){ 0 };
}

/* A client record naming its server record (through proxies too): the flows once both are
 * written, whichever comes first. */
static void link_ends(struct perfetto *pf, const struct request *r, uint64_t track)
{
	struct kept *s;

	if (r->role == ROLE_CLIENT && r->server_id) {
		struct kept c = { 0 };

		for (size_t i = 0; i < KEPT; i++) {
			if (pf->servers[i].t && pf->servers[i].id == r->server_id) {
				keep(&c, r, track);
				if (c.t)
					write_read_flows(pf, &pf->servers[i], &c);
				return;
			}
		}
		keep(&pf->clients[pf->next_client++ % KEPT], r, track);
		return;
	}
	if (r->role != ROLE_SERVER)
		return;
	s = &pf->servers[pf->next_server++ % KEPT];
	keep(s, r, track);
	for (size_t i = 0; s->t && i < KEPT; i++) {
		if (pf->clients[i].t && pf->clients[i].server_id == r->id)
			write_read_flows(pf, s, &pf->clients[i]);
	}
}

void perfetto__request(struct perfetto *pf, const struct request *r,
		       const struct request_metrics *m)
{
	const struct attribution *a = r->attr && r->attr->ok ? r->attr : NULL;
	uint64_t track = uuid(T_REQUEST, r->id), end_ns;
	char name[TEXT_SAFE_MAX(NAME_MAX_TEXT)], model[TEXT_SAFE_MAX(NAME_MAX_TEXT)];

	if (!r->start_ns)
		return;
	unit_begin(pf);
	if (!pf->started)
		start(pf, r->start_ns);
	end_ns = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	if (end_ns < r->start_ns)
		end_ns = r->start_ns;
	{
		char pod[144];

		request__pod(r, pod, sizeof(pod));
		describe_process_in(pf, r->pid, r->comm, pod);
	}
	snprintf(name, sizeof(name), "%s %llu %s %s", role__name(r->role), (unsigned long long)r->id,
		 api__name(r->api), *r->model ? text__safe(model, sizeof(model), r->model) : "-");
	describe(pf, track, r->pid, name, false);
	event(pf, r->start_ns, track, PF_TYPE_SLICE_BEGIN, "request");
	request_args(pf, r, m);
	event_end(pf);
	if (r->first_token_ns) {
		if (a)
			ttft_phases(pf, track, r, a);
		else
			slice(pf, track, "first token", r->start_ns, r->first_token_ns);
		tokens(pf, track, r, a);
	}
	event(pf, end_ns, track, PF_TYPE_SLICE_END, NULL);
	event_end(pf);
	link_ends(pf, r, track);
	if (r->role == ROLE_SERVER) {
		uint64_t flight = uuid(T_IN_FLIGHT, r->pid), queued = uuid(T_QUEUED, r->pid);

		snprintf(name, sizeof(name), "requests in flight [%u]", r->pid);
		describe(pf, flight, r->pid, name, true);
		counter_delta(pf, flight, r->start_ns, 1);
		counter_delta(pf, flight, end_ns, -1);
		if (a) {
			snprintf(name, sizeof(name), "requests queued [%u]", r->pid);
			describe(pf, queued, r->pid, name, true);
			counter_delta(pf, queued, r->start_ns, 1);
			counter_delta(pf, queued, r->start_ns + a->queue_ns, -1);
		}
	}
	unit_end(pf);
}

/* ---- steps ---- */

static void step_args(struct perfetto *pf, const struct engine_step *s)
{
	char buf[64];

	if (s->cuda) {
		annotate_uint(pf, "launches", s->cuda->launches);
		annotate_uint(pf, "graph_launches", s->cuda->graph_launches);
		if (s->cuda->nkernels)
			annotate_str(pf, "top_kernel", cuda_steps__kernel_name(s->cuda_names, s->pid,
									       &s->cuda->k[0], buf,
									       sizeof(buf)));
		if (s->end_bound)
			annotate_str(pf, "end", "upper bound");
		return;
	}
	annotate_uint(pf, "tokens", s->tokens);
	for (uint32_t i = 0; i < s->nseqs; i++) {
		snprintf(buf, sizeof(buf), "seq %d", s->seqs[i].seq);
		annotate_uint(pf, buf, s->seqs[i].tokens);
	}
	if (s->failed)
		annotate_str(pf, "result", "no work done");
}

void perfetto__step(struct perfetto *pf, const struct engine_step *s)
{
	uint64_t of = hash(s->pid, s->cuda ? s->cuda->stream : s->context);
	uint64_t track = uuid(T_STEPS, of), busy = uuid(T_BUSY, of);
	char name[192], what[128];

	unit_begin(pf);
	if (!pf->started)
		start(pf, s->start_ns);
	describe_process_in(pf, s->pid, s->comm, NULL);
	if (s->cuda)
		snprintf(what, sizeof(what), "[%u] stream 0x%llx", s->pid,
			 (unsigned long long)s->cuda->stream);
	else
		snprintf(what, sizeof(what), "[%u] %s%scontext 0x%llx", s->pid,
			 s->model ? s->model : "", s->model ? " " : "",
			 (unsigned long long)s->context);
	snprintf(name, sizeof(name), "%s steps %s", s->cuda ? "gpu" : "llama.cpp", what);
	describe(pf, track, s->pid, name, false);
	event(pf, s->start_ns, track, PF_TYPE_SLICE_BEGIN,
	      s->cuda ? "step" : s->failed ? "failed" : step_kind__name(step__kind(s)));
	step_args(pf, s);
	event_end(pf);
	event(pf, s->end_ns > s->start_ns ? s->end_ns : s->start_ns, track, PF_TYPE_SLICE_END,
	      NULL);
	event_end(pf);
	snprintf(name, sizeof(name), "%s busy %s", s->cuda ? "gpu" : "engine", what);
	describe(pf, busy, s->pid, name, true);
	counter_delta(pf, busy, s->start_ns, 1);
	counter_delta(pf, busy, s->end_ns > s->start_ns ? s->end_ns : s->start_ns, -1);
	if (s->source == STEP_SOURCE_LLAMA) {
		uint64_t tokens = uuid(T_TOKENS, of);

		snprintf(name, sizeof(name), "tokens per step %s", what);
		describe(pf, tokens, s->pid, name, true);
		event(pf, s->start_ns, tokens, PF_TYPE_COUNTER, NULL);
		pbw__uint(&pf->pkt, PF_EVENT_COUNTER_VALUE, s->tokens);
		event_end(pf);
	}
	unit_end(pf);
}

/* An engine's scheduler after one step (engine/engine_wire.h): counter tracks of its running
 * and waiting requests and its KV cache use, under the process that sent or read them. */
static void on_sched(void *self, const struct engine_sched *s)
{
	struct perfetto *pf = self;
	uint64_t of = hash(s->pid, s->engine_index);
	const struct {
		enum track_kind kind;
		const char *what;
		double v;
	} c[] = { { T_SCHED_RUNNING, "running", (double)s->running },
		  { T_SCHED_WAITING, "waiting", (double)s->waiting },
		  { T_SCHED_KV, "kv cache use", s->kv_cache_usage } };
	char name[96];

	unit_begin(pf);
	if (!pf->started)
		start(pf, s->ts);
	describe_process_in(pf, s->pid, s->comm ? s->comm : "", NULL);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t track = uuid(c[i].kind, of);

		if (isnan(c[i].v))
			continue;
		snprintf(name, sizeof(name), "%s %s [engine %u]", s->wire, c[i].what,
			 s->engine_index);
		describe(pf, track, s->pid, name, true);
		event(pf, s->ts, track, PF_TYPE_COUNTER, NULL);
		if (c[i].kind == T_SCHED_KV)
			pbw__double(&pf->pkt, PF_EVENT_DOUBLE_COUNTER_VALUE, c[i].v);
		else
			pbw__uint(&pf->pkt, PF_EVENT_COUNTER_VALUE, (uint64_t)c[i].v);
		event_end(pf);
	}
	unit_end(pf);
}

/* ---- the end ---- */

static int by_track_time(const void *x, const void *y)
{
	const struct delta *a = x, *b = y;

	if (a->track != b->track)
		return a->track < b->track ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->d - b->d; /* ends before starts at the same time */
}

/* The counters: per track, its running sum at each change (one value per time); a track's
 * values are one unit, so that a cut one never stops at a value it did not end at. */
static void write_counters(struct perfetto *pf)
{
	int64_t v = 0;

	qsort(pf->deltas, pf->ndeltas, sizeof(*pf->deltas), by_track_time);
	for (size_t i = 0; i < pf->ndeltas; i++) {
		const struct delta *d = &pf->deltas[i];

		if (!i || d->track != d[-1].track) {
			unit_end(pf);
			unit_begin(pf);
			v = 0;
		}
		v += d->d;
		if (i + 1 < pf->ndeltas && d[1].track == d->track && d[1].ts == d->ts)
			continue; /* the sum once every change at this time is in */
		event(pf, d->ts, d->track, PF_TYPE_COUNTER, NULL);
		pbw__uint(&pf->pkt, PF_EVENT_COUNTER_VALUE, (uint64_t)v);
		event_end(pf);
	}
	unit_end(pf);
}

struct perfetto *perfetto__new(struct outfile *f, uint64_t max_bytes)
{
	struct perfetto *pf = calloc(1, sizeof(*pf));

	if (pf) {
		pf->f = f;
		pf->max_bytes = max_bytes;
	}
	return pf;
}

uint64_t perfetto__cut(const struct perfetto *pf)
{
	return pf->cut;
}

int perfetto__close(struct perfetto *pf)
{
	int err;

	if (!pf)
		return 0;
	write_counters(pf);
	if (pf->cut) /* the cap the user set: said, not a failure */
		fprintf(stderr,
			"tokenscope: %s: %llu trace packets past the %.1f MB cap were not written "
			"(--perfetto-max-mb; whole requests, steps and counter tracks)\n",
			pf->f->path, (unsigned long long)pf->cut, (double)pf->max_bytes / (1 << 20));
	err = pf->f->err ? -1 : 0;
	free(pf->tracks);
	free(pf->deltas);
	for (size_t i = 0; i < KEPT; i++) {
		free(pf->servers[i].t);
		free(pf->clients[i].t);
	}
	pbw__free(&pf->pkt);
	buf__free(&pf->unit.bytes);
	free(pf);
	return err;
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	perfetto__request(self, r, m);
}

static void on_step(void *self, const struct engine_step *s)
{
	perfetto__step(self, s);
}

/* Closed by its owner (perfetto__close), also when the run failed: what was written is kept. */
const struct sink_ops perfetto_sink = { .name = "perfetto", .on_request = on_request,
					.on_step = on_step, .on_sched = on_sched };
