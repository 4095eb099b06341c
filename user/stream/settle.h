/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The settle queue: finished requests wait here, by record time, before they are reported.
 * Where engine steps are seen, a server request is attributed only once later steps and other
 * requests' first tokens had time to come (ATTRIB_SETTLE_NS); every other request waits with
 * it, so that requests leave in the order their responses ended, whatever order their ends
 * were parsed in (records of two CPUs). Matching needs that order: a server's record before
 * its client's. A process's exit is passed on only once none of its requests waits.
 */
#ifndef TS_SETTLE_H
#define TS_SETTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct request;

struct settle_held;

/* What leaves the queue, in order: requests, then processes none of whose requests wait. */
struct settle_out {
	void (*request)(void *ctx, struct request *r); /* takes it */
	void (*exit)(void *ctx, uint32_t pid);
	void *ctx;
};

struct settle {
	struct settle_held *first; /* by ready_ns */
	struct settle_held *last;  /* where nearly every finished request goes */
	uint32_t *exits;	   /* processes gone whose requests may still wait */
	size_t nexits, capexits;
	bool exits_due;		   /* an exit came, or a request left: look at exits again */
	struct settle_out out;
};

void settle__init(struct settle *q, const struct settle_out *out);
/* Frees what waits, unreported. */
void settle__free(struct settle *q);
/* r waits until record time ready_ns; end_ns is its response's end. Returns false without
 * memory (r is not taken). */
bool settle__hold(struct settle *q, struct request *r, uint64_t end_ns, uint64_t ready_ns);
/* pid exited: passed on once none of its requests waits. Returns false without memory. */
bool settle__exit(struct settle *q, uint32_t pid);
/* Requests whose time has come by now (all of them at UINT64_MAX) leave, in order, then the
 * exits that nothing waits for any more. */
void settle__release(struct settle *q, uint64_t now);
/* Calls fn for each request waiting (finished, not reported yet). */
void settle__each(const struct settle *q, void (*fn)(void *ctx, const struct request *r),
		  void *ctx);
/* Just before the oldest waiting request's end, at most now; now when none waits. */
uint64_t settle__reported_through(const struct settle *q, uint64_t now);

#endif
