/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Whom a finished request was made for, where a traced process relays a stream on: a proxy's
 * call upstream is made for the request it is serving, and a server's request comes from such
 * a call. The one at the end of the chain (a browser's request to the proxy, say) tells who
 * reads the reply (llm/judge.h: evidence "relay"). It is still open, or finished and not yet
 * reported (the settle queue), when the request upstream of it is reported.
 */
#ifndef TS_RELAY_H
#define TS_RELAY_H

#include "base/pidset.h"
#include "stream/settle.h"
#include "stream/streams.h"

struct request;

/* The processes seen serving (a server request's first token) and calling (a client's), and
 * how many do both: a relay is looked for only where one may be, so that a host with no
 * relaying process never scans its open streams. */
struct relays {
	struct pidset serving, calling;
	uint64_t both;
};

/* A request's first token: its process serves, or calls. */
void relay__seen(struct relays *t, const struct request *r);
/* A process exited. */
void relay__exit(struct relays *t, uint32_t pid);
void relay__free(struct relays *t);

/* The request r's stream is relayed on to: for a client's call, the one request its process
 * is serving (begun before it, not reported yet); for a server's request, that of the client
 * call it came from (traced on this host: the same connection seen from its other end). NULL
 * where there is none, or more than one could be (a proxy serving several at once says
 * nothing), or no process relays. */
const struct request *relay__downstream(const struct relays *t, const struct streams *open,
					const struct settle *held, const struct request *r);

#endif
