// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* ZMTP framing fed piece by piece (from the greeting, or joined), each message's frames walked
 * as MessagePack and read as vLLM's engine wire (engine/vllm_wire.c), then a request joined
 * to whatever engine requests that made. */
#include <stdio.h>

#include "proto/msgpack.h"
#include "proto/zmtp.h"
#include "llm/request.h"
#include "engine/vllm_wire.h"
#include "fuzz.h"

static void walk(const uint8_t *p, const uint8_t *end)
{
	volatile uint64_t sink = 0;
	struct mp_obj o;

	/* object by object, then whole objects skipped */
	for (const uint8_t *q = p; q < end && !mp__next(&q, end, &o);)
		sink += o.type + o.len;
	while (p < end && !mp__skip(&p, end))
		sink++;
}

static void on_command(void *ctx, const char *name, const uint8_t *data, size_t len,
		       uint64_t ts)
{
	const uint8_t *v;
	uint32_t vlen;

	zmtp__property(data, len, "Socket-Type", &v, &vlen);
	zmtp__property(data, len, "Identity", &v, &vlen);
}

static void on_message(void *ctx, const struct zmtp_message *m)
{
	vllm_wire__message(ctx, 1, "fuzz", m->start_ns & 1, m);
	for (size_t i = 0; i < m->nframes; i++)
		walk(m->frames[i].data, m->frames[i].data +
					 (m->frames[i].len < ZMTP_FRAME_KEEP ? m->frames[i].len
									  : ZMTP_FRAME_KEEP));
}

static void piece(void *ctx, size_t i, uint8_t *p, size_t n)
{
	vllm_wire__looks_like_frames(p, n);
	zmtp__feed(ctx, p, n, i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct zmtp_callbacks cb = { NULL, on_command, on_message };
	struct vllm_wire *w;
	struct request *r;
	struct zmtp *z;

	if (!size)
		return 0;
	w = vllm_wire__new(NULL, NULL);
	z = zmtp__new(&cb, w, data[0] & 1);
	fuzz_pieces(data + 1, size - 1, piece, z);
	zmtp__free(z);
	/* a request named by the input's first bytes, joined to what was read */
	r = request__new();
	if (r) {
		r->role = ROLE_SERVER;
		r->start_ns = 1;
		r->first_token_ns = UINT64_MAX / 2;
		snprintf(r->response_id, sizeof(r->response_id), "%.*s", (int)(size < 12 ? size : 12),
			 (const char *)data);
		vllm_wire__attribute(w, r);
		request__free(r);
	}
	vllm_wire__prune(w, UINT64_MAX / 2);
	vllm_wire__free(w);
	return 0;
}
