// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The settle queue (stream/settle.h). */
#include <stdlib.h>

#include "base/buf.h"
#include "llm/request.h"
#include "stream/settle.h"

struct settle_held {
	struct request *r;
	uint64_t end_ns;   /* its response's end (its start where none) */
	uint64_t ready_ns; /* record time after which it is attributed and reported */
	struct settle_held *next;
};

void settle__init(struct settle *q, const struct settle_out *out)
{
	*q = (struct settle){ .out = *out };
}

void settle__free(struct settle *q)
{
	while (q->first) {
		struct settle_held *h = q->first;

		q->first = h->next;
		request__free(h->r);
		free(h);
	}
	free(q->exits);
}

bool settle__hold(struct settle *q, struct request *r, uint64_t end_ns, uint64_t ready_ns)
{
	struct settle_held *h = malloc(sizeof(*h)), **link;

	if (!h)
		return false;
	*h = (struct settle_held){ r, end_ns, ready_ns, NULL };
	/* Nearly always it goes last. */
	if (q->last && q->last->ready_ns <= h->ready_ns) {
		q->last->next = h;
		q->last = h;
		return true;
	}
	link = &q->first;
	while (*link && (*link)->ready_ns <= h->ready_ns)
		link = &(*link)->next;
	h->next = *link;
	*link = h;
	if (!h->next)
		q->last = h;
	return true;
}

bool settle__exit(struct settle *q, uint32_t pid)
{
	if (!array__reserve((void **)&q->exits, &q->capexits, q->nexits + 1, sizeof(*q->exits)))
		return false;
	q->exits[q->nexits++] = pid;
	q->exits_due = true;
	return true;
}

/* pid's state above the streams (summary lines, the correlation's client and process-tree
 * records) is let go once none of its requests waits any more: a host that runs a process
 * per request (cron, CLI calls) must not grow with every process it ever ran. */
static void pass_exits(struct settle *q)
{
	size_t w = 0;

	for (size_t i = 0; i < q->nexits; i++) {
		uint32_t pid = q->exits[i];
		bool waits = false;

		for (struct settle_held *h = q->first; h && !waits; h = h->next)
			waits = h->r->pid == pid;
		if (waits) {
			q->exits[w++] = pid;
			continue;
		}
		q->out.exit(q->out.ctx, pid);
	}
	q->nexits = w;
}

void settle__release(struct settle *q, uint64_t now)
{
	while (q->first && q->first->ready_ns <= now) {
		struct settle_held *h = q->first;

		q->first = h->next;
		if (!q->first)
			q->last = NULL;
		q->out.request(q->out.ctx, h->r);
		free(h);
		q->exits_due = true;
	}
	/* only an exit or a request that left can let an exit pass: not every record looks */
	if (q->nexits && q->exits_due)
		pass_exits(q);
	q->exits_due = false;
}

uint64_t settle__reported_through(const struct settle *q, uint64_t now)
{
	uint64_t end;

	if (!q->first)
		return now;
	end = q->first->end_ns;
	return end && end - 1 < now ? end - 1 : now;
}

void settle__each(const struct settle *q, void (*fn)(void *ctx, const struct request *r),
		  void *ctx)
{
	for (const struct settle_held *h = q->first; h; h = h->next)
		fn(ctx, h->r);
}
