// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* vLLM's engine wire as a row of engine_wires[] (engine_wire.h): its functions
 * (vllm_wire.h) as the generic layers call them, and its counts in the generic form. */
#include <stdio.h>

#include "engine/vllm_wire.h"

static void *ops_new(engine_sched_fn on_sched, void *ctx)
{
	return vllm_wire__new(on_sched, ctx);
}

static void ops_free(void *w)
{
	vllm_wire__free(w);
}

static void ops_message(void *w, uint32_t pid, const char *comm, bool is_write,
			const struct zmtp_message *m)
{
	vllm_wire__message(w, pid, comm, is_write, m);
}

static bool ops_attribute(void *w, struct request *r)
{
	return vllm_wire__attribute(w, r);
}

static uint64_t ops_first_output(const void *w, const struct request *r)
{
	return vllm_wire__first_output(w, r);
}

static size_t ops_outputs(const void *w, const struct request *r, uint64_t **ts,
			  uint32_t **tokens)
{
	return vllm_wire__outputs(w, r, ts, tokens);
}

static void ops_prune(void *w, uint64_t ts)
{
	vllm_wire__prune(w, ts);
}

static void detail(struct engine_wire_counts *out, const char *name, uint64_t n)
{
	out->detail[out->ndetail].name = name;
	out->detail[out->ndetail++].n = n;
}

static void ops_counts(const void *wire, struct engine_wire_counts *out)
{
	const struct vllm_wire_counts *n = vllm_wire__counts(wire);
	int o;

	*out = (struct engine_wire_counts){
		.messages = n->messages, .duplicates = n->duplicates, .malformed = n->malformed,
		.not_engine = n->not_engine, .requests_joined = n->requests_joined,
		.requests_unjoined = n->requests_unjoined, .no_memory = n->no_memory,
		.evicted = n->evicted,
	};
	detail(out, "adds", n->adds);
	detail(out, "aborts", n->aborts);
	detail(out, "outputs", n->outputs);
	detail(out, "steps_with_stats", n->sched_stats);
	detail(out, "events", n->events);
	if (!n->unknown_layout)
		return;
	o = snprintf(out->note, sizeof(out->note),
		     "%llu outputs in a layout no known vLLM release wrote (field counts",
		     (unsigned long long)n->unknown_layout);
	for (size_t i = 0; i < 4 && n->unknown_fields[i] && o > 0 && (size_t)o < sizeof(out->note);
	     i++)
		o += snprintf(out->note + o, sizeof(out->note) - (size_t)o, " %u",
			      n->unknown_fields[i]);
	if (o > 0 && (size_t)o < sizeof(out->note))
		snprintf(out->note + o, sizeof(out->note) - (size_t)o,
			 "): only their ids, tokens and events were read");
}

const struct engine_wire_ops vllm_wire_ops = {
	.name = VLLM_WIRE_NAME,
	.title = "vLLM",
	.new = ops_new,
	.free = ops_free,
	.looks_like_frames = vllm_wire__looks_like_frames,
	.zmtp_message = ops_message,
	.attribute = ops_attribute,
	.first_output = ops_first_output,
	.outputs = ops_outputs,
	.prune = ops_prune,
	.counts = ops_counts,
};
