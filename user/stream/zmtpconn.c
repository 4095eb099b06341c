// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ZeroMQ on one connection (stream/wire.h): a ZMTP reader per direction (proto/zmtp.h), each
 * whole message handed to the engine wires (engine/engine_wire.h, through the sink), each of
 * which knows what its engine's messages mean and counts every other application's. No request records are made
 * here: the engine's messages join the HTTP requests they served, by id, above.
 */
#include <stdlib.h>

#include "proto/zmtp.h"
#include "stream/wire.h"

struct zmtpconn {
	struct wire_host host;
	struct zmtp *dir[2]; /* [is_write] */
	bool failed[2];	     /* that direction stopped (counted once) */
	bool is_write;	     /* the direction being fed */
};

static void on_message(void *ctx, const struct zmtp_message *m)
{
	struct zmtpconn *c = ctx;

	if (c->host.sink->zmtp_message)
		c->host.sink->zmtp_message(c->host.sink->ctx, c->host.pid, c->host.comm, c->is_write,
					   m);
}

static void *zmtp_open(const struct wire_host *host, const struct wire_start *how)
{
	struct zmtpconn *c = calloc(1, sizeof(*c));
	static const struct zmtp_callbacks cb = { .message = on_message };

	if (!c)
		return NULL;
	c->host = *host;
	for (int d = 0; d < 2; d++) {
		c->dir[d] = zmtp__new(&cb, c, how->from_start);
		if (!c->dir[d]) {
			zmtp__free(c->dir[0]);
			free(c);
			return NULL;
		}
	}
	return c;
}

static void zmtp_free(void *w)
{
	struct zmtpconn *c = w;

	zmtp__free(c->dir[0]);
	zmtp__free(c->dir[1]);
	free(c);
}

static void zmtp_data(void *w, bool is_write, uint8_t *data, size_t len, uint64_t ts)
{
	struct zmtpconn *c = w;

	if (c->failed[is_write])
		return;
	c->is_write = is_write;
	if (zmtp__feed(c->dir[is_write], data, len, ts) != ZMTP_OK) {
		c->failed[is_write] = true;
		c->host.sink->counts->malformed++;
	}
}

/* Bytes missing: the frame boundary is lost; the direction looks for a message start again. */
static void zmtp_missing(void *w, bool is_write, uint64_t n, uint64_t ts)
{
	struct zmtpconn *c = w;
	static const struct zmtp_callbacks cb = { .message = on_message };

	(void)n;
	(void)ts;
	zmtp__free(c->dir[is_write]);
	c->dir[is_write] = zmtp__new(&cb, c, false);
	c->failed[is_write] = !c->dir[is_write];
}

static void zmtp_lost(void *w, uint64_t ts, const char *reason)
{
	(void)reason;
	zmtp_missing(w, false, 0, ts);
	zmtp_missing(w, true, 0, ts);
}

static void zmtp_close(void *w, uint64_t ts, const char *reason)
{
	(void)w;
	(void)ts;
	(void)reason;
}

static size_t zmtp_inflight(const void *w)
{
	(void)w;
	return 0;
}

static void zmtp_each_open(const void *w, open_request_fn fn, void *ctx)
{
	(void)w;
	(void)fn;
	(void)ctx;
}

static void zmtp_set_addresses(void *w, const struct conn_addr *a)
{
	(void)w;
	(void)a;
}

const struct wire_ops zmtp_wire = {
	.name = "zmtp",
	.kind = CONN_ZMTP,
	.open = zmtp_open,
	.free = zmtp_free,
	.data = zmtp_data,
	.missing = zmtp_missing,
	.lost = zmtp_lost,
	.close = zmtp_close,
	.inflight = zmtp_inflight,
	.each_open = zmtp_each_open,
	.set_addresses = zmtp_set_addresses,
};
