// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <math.h>
#include <stdio.h>

#include "base/text.h"
#include "llm/attribution.h"
#include "llm/dialect.h"
#include "llm/group.h"
#include "sinks/line.h"

#define SAFE_MAX TEXT_SAFE_MAX(256)

static void fmt_ms(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1fms", v);
}

static void print_line(FILE *f, const struct request *r, const struct request_metrics *m)
{
	char ttft[32], tpot[32], e2e[32], p99[32];
	char comm[TS_COMM_LEN * 8], model[SAFE_MAX], path[SAFE_MAX], error[SAFE_MAX];
	struct ttft_split sp;

	fmt_ms(ttft, sizeof(ttft), m->ttft_ms);
	fmt_ms(tpot, sizeof(tpot), m->tpot_ms);
	fmt_ms(e2e, sizeof(e2e), m->e2e_ms);
	fmt_ms(p99, sizeof(p99), m->itl_p99_ms);
	fprintf(f, "%-6s %s[%u] %s %s %s status=%d ttft=%s tpot=%s itl_p99=%s e2e=%s",
		role__name(r->role), text__safe(comm, sizeof(comm), r->comm), r->pid,
		api__name(r->api),
		*request__model(r) ? text__safe(model, sizeof(model), request__model(r)) : "-",
		text__safe(path, sizeof(path), r->path), r->status, ttft, tpot, p99, e2e);
	if (r->peer[0])
		fprintf(f, " peer=%s", r->peer);
	if (m->output_tokens.set)
		fprintf(f, " out=%llu%s", (unsigned long long)m->output_tokens.v,
			m->output_tokens_estimated ? "~" : "");
	if (r->input_tokens.set)
		fprintf(f, " in=%llu", (unsigned long long)r->input_tokens.v);
	if (r->cached_tokens.set)
		fprintf(f, " cached=%llu", (unsigned long long)r->cached_tokens.v);
	if (!m->complete)
		fprintf(f, " INCOMPLETE");
	if (r->error[0])
		fprintf(f, " error=%s", text__safe(error, sizeof(error), r->error));
	attribution__ttft_split(r->attr, &sp);
	if (sp.source == TTFT_WIRE_EVENTS) {
		const struct attribution *a = r->attr;

		/* an engine wire's: the engine's own split */
		fprintf(f, " [%s: frontend=%.1f engine_queue=%.1f prefill=%.1f emit=%.1f",
			a->wire.name, sp.frontend_ns / 1e6, sp.engine_queue_ns / 1e6, sp.prefill_ns / 1e6,
			sp.emit_ns / 1e6);
		if (a->wire.preemptions)
			fprintf(f, " preempted=%u (%.1f)", a->wire.preemptions, a->wire.preempted_ns / 1e6);
		if (a->wire.cached_tokens >= 0)
			fprintf(f, " cached=%lld", (long long)a->wire.cached_tokens);
		fputc(']', f);
	} else if (sp.source == TTFT_WIRE_SPAN) {
		fprintf(f, " [%s: frontend=%.1f engine=%.1f emit=%.1f]", r->attr->wire.name,
			sp.frontend_ns / 1e6, sp.engine_ns / 1e6, sp.emit_ns / 1e6);
	} else if (sp.source == TTFT_STEPS) {
		fprintf(f, " [queue=%.1f (busy %.1f) prefill=%.1f/%u emit=%.1f | gaps: decode=%.1f "
			   "host=%.1f interference=%.1f]",
			sp.queue_ns / 1e6, sp.queue_busy_ns / 1e6, sp.prefill_ns / 1e6,
			sp.prefill_steps, sp.emit_ns / 1e6, r->attr->decode_ns / 1e6,
			r->attr->host_ns / 1e6, r->attr->interference_ns / 1e6);
	}
	fputc('\n', f);
	fflush(f);
}

static void on_request(void *self, const struct request *r, const struct request_metrics *m)
{
	print_line(self, r, m);
}

const struct sink_ops line_sink = { .name = "line", .on_request = on_request };
