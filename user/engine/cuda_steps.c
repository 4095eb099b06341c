// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/cuda_steps.h"

#define MAX_DEPS 8
#define MAX_EVENTS 4096	 /* event handle -> segment, per process */
#define MAX_PENDING 4096 /* open segments per process before the oldest are given up */

/* Work on one stream between two markers, not yet seen done by the host. */
struct seg {
	uint64_t id;
	uint64_t stream;
	uint32_t tid;
	struct ts_gpu_work work;
	uint64_t deps[MAX_DEPS]; /* segments (ids) on other streams it waited for */
	uint32_t ndeps;
	bool done;
	bool exact; /* done at the return of a sync that blocked on it */
};

struct event_map {
	uint64_t event;
	uint64_t seg; /* 0: nothing pending when it was recorded */
};

struct stream_waits {
	uint64_t stream;
	uint64_t deps[MAX_DEPS];
	uint32_t ndeps;
};

struct proc {
	uint32_t pid;
	char comm[TS_COMM_LEN];
	struct seg *segs; /* open segments, oldest first */
	size_t nsegs, capsegs;
	struct event_map events[MAX_EVENTS];
	size_t nevents, next_event;
	struct stream_waits waits[TS_GPU_MAX_STREAMS];
	size_t nwaits;
	struct proc *next;
};

struct kname {
	uint32_t pid;
	uint64_t id;
	uint64_t alias; /* another handle of the same kernel: its name is this one's */
	char *name;
};

struct cuda_steps {
	step_fn fn;
	void *ctx;
	struct proc *procs;
	uint64_t next_seg;
	struct kname *names;
	size_t nnames, capnames;
	uint64_t marks, unobserved;
};

struct cuda_steps *cuda_steps__new(step_fn fn, void *ctx)
{
	struct cuda_steps *g = calloc(1, sizeof(*g));

	if (g) {
		g->fn = fn;
		g->ctx = ctx;
		g->next_seg = 1;
	}
	return g;
}

static void proc_free(struct proc *p)
{
	free(p->segs);
	free(p);
}

void cuda_steps__free(struct cuda_steps *g)
{
	if (!g)
		return;
	while (g->procs) {
		struct proc *p = g->procs;

		g->procs = p->next;
		proc_free(p);
	}
	for (size_t i = 0; i < g->nnames; i++)
		free(g->names[i].name);
	free(g->names);
	free(g);
}

uint64_t cuda_steps__marks(const struct cuda_steps *g)
{
	return g->marks;
}

uint64_t cuda_steps__unobserved(const struct cuda_steps *g)
{
	return g->unobserved;
}

static struct proc *proc_get(struct cuda_steps *g, const struct ts_event_hdr *h)
{
	struct proc *p;

	for (p = g->procs; p; p = p->next) {
		if (p->pid == h->pid)
			return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = h->pid;
	memcpy(p->comm, h->comm, sizeof(p->comm));
	p->next = g->procs;
	g->procs = p;
	return p;
}

void cuda_steps__exit(struct cuda_steps *g, uint32_t pid)
{
	for (struct proc **link = &g->procs; *link; link = &(*link)->next) {
		if ((*link)->pid == pid) {
			struct proc *p = *link;

			for (size_t i = 0; i < p->nsegs; i++)
				g->unobserved += p->segs[i].work.launches + p->segs[i].work.graph_launches > 0;
			*link = p->next;
			proc_free(p);
			return;
		}
	}
}

void cuda_steps__finish(struct cuda_steps *g)
{
	while (g->procs)
		cuda_steps__exit(g, g->procs->pid);
}

/* ---- kernel names ---- */

void cuda_steps__kname(struct cuda_steps *g, const struct ts_gpu_kname *k)
{
	char name[TS_KNAME_LEN + 1];

	memcpy(name, k->name, TS_KNAME_LEN);
	name[TS_KNAME_LEN] = 0;
	for (size_t i = 0; i < g->nnames; i++) {
		if (g->names[i].pid == k->hdr.pid && g->names[i].id == k->id) {
			if (!name[0] && !k->alias)
				return; /* an unnamed stub does not hide a driver function's name */
			free(g->names[i].name);
			g->names[i].name = strdup(name);
			g->names[i].alias = k->alias;
			return;
		}
	}
	if (!array__reserve((void **)&g->names, &g->capnames, g->nnames + 1, sizeof(*g->names)))
		return;
	g->names[g->nnames++] = (struct kname){ k->hdr.pid, k->id, k->alias, strdup(name) };
}

static const struct kname *find_name(const struct cuda_steps *g, uint32_t pid, uint64_t id)
{
	for (size_t i = 0; i < g->nnames; i++) {
		if (g->names[i].pid == pid && g->names[i].id == id)
			return &g->names[i];
	}
	return NULL;
}

const char *cuda_steps__kernel_name(const struct cuda_steps *g, uint32_t pid, const struct ts_kernel_sample *k,
			     char *buf, size_t n)
{
	const struct kname *kn = find_name(g, pid, k->id);

	/* follow cuKernelGetFunction aliases, a few hops at most */
	for (int hops = 0; kn && !(kn->name && kn->name[0]) && kn->alias && hops < 4; hops++)
		kn = find_name(g, pid, kn->alias);
	if (kn && kn->name && kn->name[0])
		return kn->name;
	snprintf(buf, n, "%s0x%llx", k->flags & TS_KS_GRAPH ? "graph@" : "", (unsigned long long)k->id);
	return buf;
}

/* ---- segments ---- */

static struct stream_waits *waits_of(struct proc *p, uint64_t stream, bool create)
{
	for (size_t i = 0; i < p->nwaits; i++) {
		if (p->waits[i].stream == stream)
			return &p->waits[i];
	}
	if (!create || p->nwaits == TS_GPU_MAX_STREAMS)
		return NULL;
	p->waits[p->nwaits] = (struct stream_waits){ .stream = stream };
	return &p->waits[p->nwaits++];
}

static struct seg *seg_by_id(struct proc *p, uint64_t id)
{
	for (size_t i = 0; i < p->nsegs; i++) {
		if (p->segs[i].id == id)
			return &p->segs[i];
	}
	return NULL;
}

static struct seg *last_open_on(struct proc *p, uint64_t stream)
{
	for (size_t i = p->nsegs; i-- > 0;) {
		if (p->segs[i].stream == stream)
			return &p->segs[i];
	}
	return NULL;
}

static bool has_work(const struct ts_gpu_work *w)
{
	return w->launches || w->graph_launches || w->copies;
}

/* The stream's work up to a marker becomes a segment; the stream's pending waits become its
 * dependencies. Returns the segment that the marker stands for (0: nothing open). */
static uint64_t close_work(struct cuda_steps *g, struct proc *p, uint64_t stream, uint32_t tid,
			   const struct ts_gpu_work *w)
{
	struct stream_waits *sw = waits_of(p, stream, false);
	struct seg *s;

	if (!has_work(w) && !(sw && sw->ndeps)) {
		s = last_open_on(p, stream);
		return s ? s->id : 0;
	}
	if (p->nsegs == MAX_PENDING) {
		/* never observed: give the oldest up rather than grow without bound */
		g->unobserved += p->segs[0].work.launches + p->segs[0].work.graph_launches > 0;
		memmove(&p->segs[0], &p->segs[1], (p->nsegs - 1) * sizeof(*p->segs));
		p->nsegs--;
	}
	if (!array__reserve((void **)&p->segs, &p->capsegs, p->nsegs + 1, sizeof(*p->segs)))
		return 0;
	s = &p->segs[p->nsegs++];
	memset(s, 0, sizeof(*s));
	s->id = g->next_seg++;
	s->stream = stream;
	s->tid = tid;
	s->work = *w;
	if (sw) {
		memcpy(s->deps, sw->deps, sw->ndeps * sizeof(s->deps[0]));
		s->ndeps = sw->ndeps;
		sw->ndeps = 0;
	}
	return s->id;
}

static void map_event(struct proc *p, uint64_t event, uint64_t seg)
{
	for (size_t i = 0; i < p->nevents; i++) {
		if (p->events[i].event == event) {
			p->events[i].seg = seg; /* a record replaces the event's earlier one */
			return;
		}
	}
	if (p->nevents < MAX_EVENTS) {
		p->events[p->nevents++] = (struct event_map){ event, seg };
	} else {
		p->events[p->next_event] = (struct event_map){ event, seg };
		p->next_event = (p->next_event + 1) % MAX_EVENTS;
	}
}

static uint64_t event_seg(struct proc *p, uint64_t event)
{
	for (size_t i = 0; i < p->nevents; i++) {
		if (p->events[i].event == event)
			return p->events[i].seg;
	}
	return 0;
}

static int cmp_sample(const void *a, const void *b)
{
	const struct ts_kernel_sample *x = a, *y = b;

	return (x->count < y->count) - (x->count > y->count);
}

/* Mark seg done (and, in stream order and through its dependencies, what it implies). */
static void observe(struct proc *p, struct seg *s, bool exact)
{
	bool relay;

	if (!s || s->done)
		return;
	s->done = true;
	s->exact = exact;
	/* Work that launched nothing, waited for one other segment and was first on its stream
	 * (vLLM's asynchronous scheduling: the copy stream waits for the step's event, copies
	 * the sampled tokens, records its own event) ended a copy's length after that segment:
	 * seen done, the step is seen done, its output on the host as a sync on its own stream
	 * would have shown it. Behind other work on its stream, or after several, it is a bound. */
	relay = !s->work.launches && !s->work.graph_launches && s->ndeps == 1;
	/* earlier work on the same stream finished before it */
	for (size_t i = 0; i < p->nsegs && &p->segs[i] != s; i++) {
		if (p->segs[i].stream == s->stream && !p->segs[i].done) {
			relay = false;
			observe(p, &p->segs[i], false);
		}
	}
	for (uint32_t d = 0; d < s->ndeps && d < MAX_DEPS; d++)
		observe(p, seg_by_id(p, s->deps[d]), exact && relay);
}

/* A CUDA step as the source-neutral record: the work's span from its first launch to where
 * the host saw it done. */
static void emit(struct cuda_steps *g, const struct cuda_step *st)
{
	struct engine_step es = {
		.source = STEP_SOURCE_CUDA,
		.pid = st->pid,
		.tid = st->tid,
		.start_ns = st->first_launch_ns,
		.end_ns = st->gpu_done_ns,
		.end_bound = st->done_bound,
		.host_seen_ns = st->host_seen_ns,
		.cuda = st,
		.cuda_names = g,
	};

	memcpy(es.comm, st->comm, sizeof(es.comm));
	g->fn(g->ctx, &es);
}

/* Report and drop every segment marked done. */
static void report_done(struct cuda_steps *g, struct proc *p, uint64_t ts)
{
	size_t w = 0;

	for (size_t i = 0; i < p->nsegs; i++) {
		struct seg *s = &p->segs[i];
		struct cuda_step st;

		if (!s->done) {
			p->segs[w++] = *s;
			continue;
		}
		if (s->work.launches || s->work.graph_launches) {
			memset(&st, 0, sizeof(st));
			st.pid = p->pid;
			st.tid = s->tid;
			memcpy(st.comm, p->comm, sizeof(st.comm));
			st.stream = s->stream;
			st.launches = s->work.launches;
			st.graph_launches = s->work.graph_launches;
			st.copies = s->work.copies;
			st.other_launches = s->work.other_samples;
			st.first_launch_ns = s->work.first_ns;
			st.host_seen_ns = ts;
			st.gpu_done_ns = ts;
			st.done_bound = !s->exact;
			st.nkernels = s->work.nsamples > TS_KSAMPLES ? TS_KSAMPLES : s->work.nsamples;
			memcpy(st.k, s->work.k, st.nkernels * sizeof(st.k[0]));
			qsort(st.k, st.nkernels, sizeof(st.k[0]), cmp_sample);
			emit(g, &st);
		}
	}
	p->nsegs = w;
}

void cuda_steps__mark(struct cuda_steps *g, const struct ts_gpu_mark *m)
{
	struct proc *p = proc_get(g, &m->hdr);
	bool blocked = m->kind == TS_GPU_SYNC_RETURN && m->result == 0 &&
		       m->hdr.ts_ns - m->enter_ns >= GPU_BLOCKED_NS;
	struct stream_waits *sw;
	uint64_t seg;

	if (!p)
		return;
	g->marks++;
	switch (m->kind) {
	case TS_GPU_RECORD:
		seg = close_work(g, p, m->stream, m->hdr.tid, &m->work);
		map_event(p, m->event, seg);
		break;
	case TS_GPU_FLUSH:
	case TS_GPU_SYNC_ENTER:
		if (m->scope == TS_GPU_SCOPE_STREAM)
			close_work(g, p, m->stream, m->hdr.tid, &m->work);
		break;
	case TS_GPU_WAIT:
		/* the stream's later work depends on what the event stands for */
		seg = event_seg(p, m->event);
		sw = waits_of(p, m->stream, true);
		if (seg && sw && sw->ndeps < MAX_DEPS)
			sw->deps[sw->ndeps++] = seg;
		break;
	case TS_GPU_QUERY_DONE:
	case TS_GPU_SYNC_RETURN:
		if (m->kind == TS_GPU_QUERY_DONE && m->scope == TS_GPU_SCOPE_STREAM)
			close_work(g, p, m->stream, m->hdr.tid, &m->work);
		if (m->scope == TS_GPU_SCOPE_STREAM) {
			observe(p, last_open_on(p, m->stream), blocked);
		} else if (m->scope == TS_GPU_SCOPE_EVENT) {
			observe(p, seg_by_id(p, event_seg(p, m->event)), blocked);
		} else {
			/* device-wide: everything open; the last on each stream was waited for */
			for (size_t i = p->nsegs; i-- > 0;) {
				struct seg *s = &p->segs[i];

				if (!s->done && last_open_on(p, s->stream) == s)
					observe(p, s, blocked);
			}
		}
		report_done(g, p, m->hdr.ts_ns);
		break;
	default:
		break;
	}
}
