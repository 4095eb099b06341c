// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The whole pipeline from bytes: each piece becomes a TLS or socket data record of one of two
 * streams (its first byte picks the stream, the direction, a lost piece, a sendfile, a close
 * or an SSL link), and goes through pipeline__feed: connections, HTTP, decoding, SSE and
 * every dialect, to the JSON a request becomes.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "stream/pipeline.h"
#include "sinks/jsonl.h"

struct state {
	struct pipeline *pl;
	uint64_t seq[4];
};

static void on_request(void *ctx, const struct request *r, const struct request_metrics *m)
{
	free(jsonl__request_json(r, m));
}

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	struct state *s = ctx;
	uint8_t rec[sizeof(struct ts_sock_data) + 256];
	uint8_t op = n ? p[0] : 0, stream = op & 3;
	uint64_t ts = 1000000 + i * 1000;

	memset(rec, 0, sizeof(rec));
	if (n)
		p++, n--;
	if ((op >> 2) == 1) /* a lost piece */
		s->seq[stream] += 1 + (op >> 4);
	if (stream < 2) {
		struct ts_tls_data *e = (void *)rec;

		e->hdr.type = TS_EV_TLS_DATA;
		e->hdr.size = sizeof(*e) + n;
		e->hdr.ts_ns = ts;
		e->hdr.pid = 7;
		e->ssl = 0x100 + stream;
		e->seq = s->seq[stream]++;
		e->dir = (op >> 3) & 1;
		e->flags = (op >> 7) ? TS_F_READ_FAULT : 0;
		e->total_len = n;
		e->len = n;
		memcpy(e->data, p, n);
		pipeline__feed(s->pl, e, e->hdr.size);
	} else if ((op >> 2) == 2) {
		struct ts_sock_close *e = (void *)rec;

		e->hdr.type = TS_EV_SOCK_CLOSE;
		e->hdr.size = sizeof(*e);
		e->hdr.ts_ns = ts;
		e->sock = stream;
		e->owner = 7;
		pipeline__feed(s->pl, e, sizeof(*e));
		s->seq[stream] = 0;
	} else if ((op >> 2) == 3) {
		struct ts_tls_sock *e = (void *)rec;

		e->hdr.type = TS_EV_TLS_SOCK;
		e->hdr.size = sizeof(*e);
		e->hdr.pid = 7;
		e->ssl = 0x100 + (op >> 7);
		e->exact = (op >> 6) & 1;
		e->addr.family = (op >> 5) & 1 ? 10 : 2;
		memcpy(e->addr.laddr, p, n < 32 ? n : 32);
		pipeline__feed(s->pl, e, sizeof(*e));
	} else {
		struct ts_sock_data *e = (void *)rec;
		int unseen = (op >> 4) == 0xf;

		e->hdr.type = TS_EV_SOCK_DATA;
		e->hdr.size = sizeof(*e) + (unseen ? 0 : n);
		e->hdr.ts_ns = ts;
		e->hdr.pid = 7;
		e->sock = stream;
		e->seq = s->seq[stream]++;
		e->dir = (op >> 3) & 1;
		e->flags = unseen ? TS_F_NO_USER_BUFFER : 0;
		e->total_len = unseen ? 4096 : n;
		e->len = unseen ? 0 : n;
		e->owner = 7;
		e->addr.family = 2;
		if (!unseen)
			memcpy(e->data, p, n);
		pipeline__feed(s->pl, e, e->hdr.size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct state s = { .pl = pipeline__new(on_request, NULL, NULL) };

	if (!s.pl)
		return 0;
	fuzz_pieces(data, size, piece, &s);
	pipeline__finish(s.pl, 1000000 + size * 1000 + 1);
	pipeline__free(s.pl);
	return 0;
}
