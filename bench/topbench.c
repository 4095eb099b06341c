// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What one refresh of `tokenscope top` costs (sinks/top.c): N requests finished in the last
 * 60 s (default 10 000), over 8 processes x 4 models, each server request attributed (the
 * tail's letters); then the view the screen draws each second, the 60 s window of every
 * group, sorted by TTFT p99, timed R times (default 51). Prints the median, the 90th
 * percentile and the extremes, in ms; a refresh's time is its own CPU (CLOCK_PROCESS_CPUTIME),
 * which another process on the machine does not inflate.
 *
 * usage: topbench [N [R]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/attribution.h"
#include "llm/request.h"
#include "sinks/top.h"

#define MS 1000000ull
#define S 1000000000ull

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000, rounds = argc > 2 ? atoi(argv[2]) : 51;
	uint64_t start = 1000 * S, now = start + 60 * S, *took;
	static const char *const models[] = { "llama-3-8b", "qwen-2.5-7b", "mistral-7b", "gemma-2" };
	struct attribution a = { .ok = true, .queue_ns = 5 * MS, .queue_busy_ns = 3 * MS,
				 .queue_idle_ns = 2 * MS, .prefill_ns = 20 * MS, .emit_ns = MS };
	struct top *t = top__new(start);
	struct top_view v = { 0 };

	took = calloc((size_t)rounds, sizeof(*took));
	if (!t || !took || n <= 0 || rounds <= 0)
		return 1;
	srand(7);
	for (int i = 0; i < n; i++) {
		uint64_t end = start + 1 * S + (uint64_t)i * (59 * S / (uint64_t)n);
		double ttft = 20 + rand() % 400;
		struct request r = { .id = (uint64_t)i + 1, .pid = 1000 + (uint32_t)(i % 8),
				     .role = i % 2 ? ROLE_SERVER : ROLE_CLIENT,
				     .api = API_OPENAI_CHAT, .model = models[(i / 8) % 4],
				     .response_model = "", .path = "/v1/chat/completions",
				     .start_ns = end - 500 * MS, .end_ns = end };
		struct request_metrics m = { .ttft_ms = ttft, .tpot_ms = 5 + rand() % 20,
					     .e2e_ms = 500, .itl_max_ms = 40, .cache_hit = i % 3 == 0,
					     .complete = true };

		snprintf(r.comm, sizeof(r.comm), "%s", i % 8 < 4 ? "python3" : "node");
		r.attr = r.role == ROLE_SERVER ? &a : NULL;
		top__request(t, &r, &m);
	}
	for (int k = 0; k < rounds; k++) {
		uint64_t t0 = cpu_ns();

		if (top__view(t, NULL, now, TOP_W60S, TOP_ALL_GROUPS, &v))
			return 1;
		top_view__sort(&v, TOP_COL_TTFT99, false);
		took[k] = cpu_ns() - t0;
	}
	qsort(took, (size_t)rounds, sizeof(*took), by_value);
	printf("%d requests in the window, %zu rows: refresh %.3f ms median, p90 %.3f ms, "
	       "%.3f to %.3f ms over %d refreshes\n",
	       n, v.nrows, took[rounds / 2] / 1e6, took[rounds * 9 / 10] / 1e6, took[0] / 1e6,
	       took[rounds - 1] / 1e6, rounds);
	top_view__free(&v);
	top__free(t);
	free(took);
	return 0;
}
