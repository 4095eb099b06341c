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
