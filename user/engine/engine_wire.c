// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The engine wires tokenscope reads (engine_wire.h): one row each. */
#include "engine/engine_wire.h"
#include "engine/vllm_wire.h"

const struct engine_wire_ops *const engine_wires[] = {
	&vllm_wire_ops,
};
const size_t engine_nwires = sizeof(engine_wires) / sizeof(engine_wires[0]);

bool engine_wires__look_like_frames(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i < engine_nwires; i++) {
		if (engine_wires[i]->looks_like_frames && engine_wires[i]->looks_like_frames(d, n))
			return true;
	}
	return false;
}

int engine_wire_set__init(struct engine_wire_set *s, engine_sched_fn on_sched, void *ctx)
{
	for (size_t i = 0; i < engine_nwires && i < ENGINE_WIRES_MAX; i++) {
		s->r[i] = engine_wires[i]->new(on_sched, ctx);
		if (!s->r[i])
			return -1;
	}
	return 0;
}

void engine_wire_set__free(struct engine_wire_set *s)
{
	for (size_t i = 0; i < engine_nwires; i++) {
		if (s->r[i])
			engine_wires[i]->free(s->r[i]);
		s->r[i] = NULL;
	}
}

void engine_wire_set__zmtp_message(struct engine_wire_set *s, uint32_t pid, const char *comm,
				   bool is_write, const struct zmtp_message *m)
{
	for (size_t i = 0; i < engine_nwires; i++) {
		if (engine_wires[i]->zmtp_message)
			engine_wires[i]->zmtp_message(s->r[i], pid, comm, is_write, m);
	}
}

bool engine_wire_set__attribute(struct engine_wire_set *s, struct request *r)
{
	for (size_t i = 0; i < engine_nwires; i++) {
		if (engine_wires[i]->attribute(s->r[i], r))
			return true;
	}
	return false;
}

uint64_t engine_wire_set__first_output(const struct engine_wire_set *s, const struct request *r)
{
	uint64_t first = 0;

	for (size_t i = 0; i < engine_nwires && !first; i++)
		first = engine_wires[i]->first_output(s->r[i], r);
	return first;
}

size_t engine_wire_set__outputs(const struct engine_wire_set *s, const struct request *r,
				uint64_t **ts, uint32_t **tokens)
{
	size_t n = 0;

	*ts = NULL;
	*tokens = NULL;
	for (size_t i = 0; i < engine_nwires && !n; i++)
		n = engine_wires[i]->outputs(s->r[i], r, ts, tokens);
	return n;
}

void engine_wire_set__prune(struct engine_wire_set *s, uint64_t ts)
{
	for (size_t i = 0; i < engine_nwires; i++)
		engine_wires[i]->prune(s->r[i], ts);
}

void engine_wire_set__counts(const struct engine_wire_set *s,
			     struct engine_wire_counts out[ENGINE_WIRES_MAX])
{
	for (size_t i = 0; i < engine_nwires; i++)
		engine_wires[i]->counts(s->r[i], &out[i]);
}
