// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Whom a request was made for, along a relay (relay.h). */
#include <string.h>

#include "llm/request.h"
#include "stream/relay.h"

struct find {
	const struct request *r; /* whose counterpart is looked for */
	bool by_address;	 /* the client call at the other end of r's connection; else
				  * the request r's process serves */
	const struct request *found;
	int n;
};

static void look(void *ctx, const struct request *c)
{
	struct find *f = ctx;
	const struct request *r = f->r;

	if (c == r || c->api == API_UNKNOWN)
		return;
	if (f->by_address) {
		if (c->role != ROLE_CLIENT || !r->peer[0] || strcmp(c->local, r->peer) ||
		    strcmp(c->peer, r->local) || (r->netns && c->netns && r->netns != c->netns) ||
		    (r->http_version == 2 && c->stream_id != r->stream_id) || c->start_ns > r->start_ns)
			return;
	} else if (c->role != ROLE_SERVER || c->pid != r->pid || c->start_ns > r->start_ns) {
		return;
	}
	f->found = c;
	f->n++;
}

static const struct request *one(const struct streams *open, const struct settle *held,
				 const struct request *r, bool by_address)
{
	struct find f = { r, by_address, NULL, 0 };

	streams__each_open(open, look, &f);
	settle__each(held, look, &f);
	return f.n == 1 ? f.found : NULL;
}

void relay__seen(struct relays *t, const struct request *r)
{
	struct pidset *mine = r->role == ROLE_SERVER ? &t->serving : &t->calling;
	struct pidset *other = r->role == ROLE_SERVER ? &t->calling : &t->serving;

	if (!pidset__has(mine, r->pid) && pidset__add(mine, r->pid) && pidset__has(other, r->pid))
		t->both++;
}

void relay__exit(struct relays *t, uint32_t pid)
{
	if (pidset__has(&t->serving, pid) && pidset__has(&t->calling, pid))
		t->both--;
	pidset__del(&t->serving, pid);
	pidset__del(&t->calling, pid);
}

void relay__free(struct relays *t)
{
	pidset__free(&t->serving);
	pidset__free(&t->calling);
}

const struct request *relay__downstream(const struct relays *t, const struct streams *open,
					const struct settle *held, const struct request *r)
{
	const struct request *call;

	if (r->role == ROLE_CLIENT) {
		if (!pidset__has(&t->serving, r->pid) || !pidset__has(&t->calling, r->pid))
			return NULL;
		return one(open, held, r, false);
	}
	if (!t->both)
		return NULL;
	call = one(open, held, r, true);
	return call ? one(open, held, call, false) : NULL;
}
