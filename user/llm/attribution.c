// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>

#include "llm/attribution.h"

static const char *const estimate_names[] = { "prefill_start", "gpu_done", "engine",
						      "token_steps", "sequence" };

const char *attribution__estimate_name(uint32_t bit)
{
	for (size_t i = 0; i < sizeof(estimate_names) / sizeof(*estimate_names); i++) {
		if (bit == 1u << i)
			return estimate_names[i];
	}
	return "?";
}

static void part(struct ttft_split *s, const char *name, uint64_t ns)
{
	s->parts[s->nparts].name = name;
	s->parts[s->nparts++].ns = ns;
}

void attribution__ttft_split(const struct attribution *a, struct ttft_split *s)
{
	memset(s, 0, sizeof(*s));
	if (!a || !a->ok)
		return;
	s->wire = a->wire.split;
	s->engine_events = s->wire && a->wire.events;
	if (s->engine_events)
		s->source = TTFT_WIRE_EVENTS;
	else if (s->wire && !a->wire.cuda)
		s->source = TTFT_WIRE_SPAN;
	else
		s->source = TTFT_STEPS;
	s->source_name = s->source == TTFT_STEPS ? "steps" : "engine_wire";
	s->queue_apart = s->source != TTFT_WIRE_SPAN;
	s->busy_idle = s->source != TTFT_WIRE_EVENTS;
	s->queue_ns = a->queue_ns;
	s->queue_busy_ns = a->queue_busy_ns;
	s->queue_idle_ns = a->queue_idle_ns;
	s->prefill_ns = a->prefill_ns;
	s->emit_ns = a->emit_ns;
	s->prefill_steps = a->prefill_steps;
	s->estimated = a->estimated;
	if (s->wire) {
		s->frontend_ns = a->wire.frontend_ns;
		s->engine_queue_ns = a->wire.engine_queue_ns;
		s->engine_ns = a->wire.engine_ns;
	}
	switch (s->source) {
	case TTFT_WIRE_EVENTS:
		part(s, "frontend", s->frontend_ns);
		part(s, "engine_queue", s->engine_queue_ns);
		part(s, "prefill", s->prefill_ns);
		break;
	case TTFT_WIRE_SPAN:
		part(s, "frontend", s->frontend_ns);
		part(s, "engine", s->engine_ns);
		break;
	default:
		part(s, "queue_busy", s->queue_busy_ns);
		part(s, "queue_idle", s->queue_idle_ns);
		part(s, "prefill", s->prefill_ns);
	}
	part(s, "emit", s->emit_ns);
}

void attribution__free(struct attribution *a)
{
	if (!a)
		return;
	free(a->interfered_by);
	free(a->gaps);
	free(a);
}
