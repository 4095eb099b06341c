// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * HTTP/2 through the whole pipeline: one TLS stream whose client has written the preface
 * (or, with the first byte odd, one joined after it), then pieces in either direction (a
 * piece's first byte: bit 0 the direction, 0xff a capture gap of the piece's length): frames,
 * HPACK (exact and partial), gRPC messages, the body readers and every dialect.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/h2.h"
#include "stream/pipeline.h"
#include "sinks/jsonl.h"

struct state {
	struct pipeline *pl;
	uint64_t seq;
};

static void on_request(void *ctx, const struct request *r, const struct request_metrics *m)
{
	free(jsonl__request_json(r, m));
}

static void feed(struct state *s, bool write, const uint8_t *p, size_t n, uint64_t ts,
		 bool gap)
{
	uint8_t rec[sizeof(struct ts_tls_data) + 256];
	struct ts_tls_data *e = (void *)rec;

	memset(rec, 0, sizeof(*e));
	e->hdr.type = TS_EV_TLS_DATA;
	e->hdr.size = sizeof(*e) + n;
	e->hdr.ts_ns = ts;
	e->hdr.pid = 7;
	e->ssl = 0x100;
	e->seq = s->seq++;
	if (gap)
		e->seq++; /* a piece lost before this one */
	e->dir = write ? TS_DIR_WRITE : TS_DIR_READ;
	e->total_len = n;
	e->len = n;
	memcpy(e->data, p, n);
	pipeline__feed(s->pl, e, e->hdr.size);
}

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	struct state *s = ctx;

	if (!n)
		return;
	feed(s, p[0] & 1, p + 1, n - 1, 1000000 + i * 1000, p[0] == 0xff);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct state s = { 0 };

	if (!size || !(s.pl = pipeline__new(on_request, NULL, NULL)))
		return 0;
	if (!(data[0] & 1))
		feed(&s, true, (const uint8_t *)H2_PREFACE, H2_PREFACE_LEN, 1000, false);
	fuzz_pieces(data + 1, size - 1, piece, &s);
	pipeline__finish(s.pl, 0);
	pipeline__free(s.pl);
	return 0;
}
