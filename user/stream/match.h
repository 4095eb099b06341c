/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Client <-> server: which server record served a client's request when both ends are traced
 * on this host. Directly: the server's connection is the client's, seen from the other end
 * (its local address is the client's peer and the other way round), and it began while the
 * client's request was open. Through a traced proxy (a server that is also an LLM API client,
 * such as nginx): from the proxy's server record to the upstream call it made for it (of that
 * process's calls, the one begun soonest after it and whose first token came nearest before
 * the proxy wrote its own), then on from that call. The client record gets the last server's id and
 * upstream_ms = client TTFT - that server's TTFT.
 */
#ifndef TS_MATCH_H
#define TS_MATCH_H

#include <stdint.h>

struct request;
struct match;

struct match *match__new(void);
void match__free(struct match *m);
/* r finished; requests come in the order they finished (a server's before its client's). A
 * client's gets server_id and upstream_ns when its server is found. */
void match__request(struct match *m, struct request *r);

#endif
