// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The engine wire's request table (engine/vllm_wire_state.h): requests by engine id, their
 * join keys, kept in touch order and let go by age or past REQS_MAX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/vllm_wire_state.h"

/* A finished request waits for its server request's join: that leaves the settle queue at
 * most ATTRIB_SETTLE_NS after its response ended, which was after the engine's last output. */
#define KEEP_FINISHED_NS (10ull * 1000000000ull)
/* One with no message for this long (its abort or end unseen: capture joined late, bytes
 * lost) is let go; a request that streams is touched by every output. */
#define KEEP_SILENT_NS (120ull * 1000000000ull)
/* The most engine requests kept; past it the least recently touched goes (counted). */
#define REQS_MAX 65536

struct vw_req *vw_table__find(struct vllm_wire *w, const uint8_t *id, size_t n)
{
	if (n >= ID_MAX)
		n = ID_MAX - 1;
	for (struct vw_req *q = w->buckets[vllm_wire_hash((const char *)id, n)]; q; q = q->next) {
		if (q->idlen == n && !memcmp(q->id, id, n))
			return q;
	}
	return NULL;
}

/* key1: the id without an n>1 child's "{i}_" (digits, then '_'). */
static void key1_of(const char *id, char *key)
{
	const char *u = id;

	while (*u >= '0' && *u <= '9')
		u++;
	snprintf(key, ID_MAX, "%s", u != id && *u == '_' ? u + 1 : id);
}

/* key2: external_req_id where known, else key1 without a trailing "-" and 8 characters. */
static void key2_of(const struct vw_req *q, char *key)
{
	size_t n = strlen(q->key1);

	if (q->external[0])
		snprintf(key, ID_MAX, "%s", q->external);
	else if (n > 9 && q->key1[n - 9] == '-')
		snprintf(key, ID_MAX, "%.*s", (int)(n - 9), q->key1);
	else
		key[0] = 0;
}

static void unlink_key(struct vw_req **head, struct vw_req *q, size_t off)
{
	struct vw_req **link = head;

	while (*link && *link != q)
		link = (struct vw_req **)((char *)*link + off);
	if (*link)
		*link = *(struct vw_req **)((char *)q + off);
}

/* (Re)files q under its keys. */
void vw_table__index_keys(struct vllm_wire *w, struct vw_req *q, bool again)
{
	uint32_t b;

	if (again && q->key2[0])
		unlink_key(&w->by_key2[vllm_wire_hash(q->key2, strlen(q->key2))], q,
			   offsetof(struct vw_req, next2));
	if (!again) {
		key1_of(q->id, q->key1);
		b = vllm_wire_hash(q->key1, strlen(q->key1));
		q->next1 = w->by_key1[b];
		w->by_key1[b] = q;
	}
	key2_of(q, q->key2);
	if (q->key2[0]) {
		b = vllm_wire_hash(q->key2, strlen(q->key2));
		q->next2 = w->by_key2[b];
		w->by_key2[b] = q;
	}
}

static void drop(struct vllm_wire *w, struct vw_req *q);

/* The request id (made when new). NULL without memory (counted). */
struct vw_req *vw_table__get(struct vllm_wire *w, const uint8_t *id, size_t n, uint64_t ts)
{
	struct vw_req *q = vw_table__find(w, id, n);
	uint32_t b;

	if (n >= ID_MAX)
		n = ID_MAX - 1;
	if (q) {
		/* to the young end of the age list */
		if (q != w->newest) {
			if (q->older)
				q->older->newer = q->newer;
			else
				w->oldest = q->newer;
			q->newer->older = q->older;
			q->older = w->newest;
			q->newer = NULL;
			w->newest->newer = q;
			w->newest = q;
		}
		q->touched_ns = ts > q->touched_ns ? ts : q->touched_ns;
		return q;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		w->n.no_memory++;
		return NULL;
	}
	if (w->nreqs >= REQS_MAX) {
		w->n.evicted++;
		drop(w, w->oldest);
	}
	memcpy(q->id, id, n);
	q->idlen = n;
	q->prompt_tokens = q->cached_tokens = -1;
	q->finish_reason = -1;
	q->touched_ns = ts;
	b = vllm_wire_hash(q->id, n);
	q->next = w->buckets[b];
	w->buckets[b] = q;
	q->older = w->newest;
	if (w->newest)
		w->newest->newer = q;
	else
		w->oldest = q;
	w->newest = q;
	w->nreqs++;
	vw_table__index_keys(w, q, false);
	return q;
}

static void drop(struct vllm_wire *w, struct vw_req *q)
{
	struct vw_req **link = &w->buckets[vllm_wire_hash(q->id, q->idlen)];

	while (*link != q)
		link = &(*link)->next;
	*link = q->next;
	unlink_key(&w->by_key1[vllm_wire_hash(q->key1, strlen(q->key1))], q,
		   offsetof(struct vw_req, next1));
	if (q->key2[0])
		unlink_key(&w->by_key2[vllm_wire_hash(q->key2, strlen(q->key2))], q,
			   offsetof(struct vw_req, next2));
	if (q->older)
		q->older->newer = q->newer;
	else
		w->oldest = q->newer;
	if (q->newer)
		q->newer->older = q->older;
	else
		w->newest = q->older;
	w->nreqs--;
	free(q->out_ts);
	free(q->out_tokens);
	free(q);
}

void vllm_wire__prune(struct vllm_wire *w, uint64_t ts)
{
	struct vw_req *q = w->oldest;

	while (q) {
		struct vw_req *next = q->newer;
		uint64_t keep = (q->finished || q->aborted) && q->joined ? KEEP_FINISHED_NS
									  : KEEP_SILENT_NS;

		if (q->touched_ns + keep >= ts)
			break; /* the list is in touch order: the rest are younger */
		drop(w, q);
		q = next;
	}
}
