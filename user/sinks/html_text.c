// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report's words (html_text.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "llm/request.h"
#include "sinks/html_text.h"

/* Text from the traffic or a process, for HTML: control bytes as \xNN, markup escaped. */
const char *html_text__esc(const char *s, char *out, size_t n)
{
	char safe[TEXT_SAFE_MAX(REQ_MODEL_MAX)];
	size_t o = 0;

	text__safe(safe, sizeof(safe), s);
	for (const char *p = safe; *p && o + 7 < n; p++) {
		const char *e = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;"
			      : *p == '"' ? "&quot;" : *p == '\'' ? "&#39;" : NULL;

		if (e)
			o += (size_t)snprintf(out + o, n - o, "%s", e);
		else
			out[o++] = *p;
	}
	out[o] = 0;
	return out;
}

/* A time for people: three significant figures, ms or s. */
const char *html_text__when(double ms, char *out, size_t n)
{
	if (isnan(ms))
		snprintf(out, n, "-");
	else if (ms >= 1000)
		snprintf(out, n, "%.3g s", ms / 1000);
	else
		snprintf(out, n, "%.3g ms", ms);
	return out;
}

/* A TTFT part's colour and words (the parts' names: llm/attribution.h). */
static const struct {
	const char *name, *words, *colour;
} phases[] = {
	{ "queue_busy", "queue busy", "#d62728" }, { "queue_idle", "queue idle", "#ff9896" },
	{ "prefill", "prefill", "#1f77b4" },	   { "emit", "emit", "#2ca02c" },
	{ "frontend", "front end", "#9467bd" },	   { "engine_queue", "engine queue", "#8c564b" },
	{ "engine", "engine queue and prefill", "#e377c2" },
};

const char *html_text__phase_colour(const char *name)
{
	for (size_t i = 0; i < sizeof(phases) / sizeof(*phases); i++) {
		if (!strcmp(phases[i].name, name))
			return phases[i].colour;
	}
	return "#999999";
}

const char *html_text__phase_words(const char *name)
{
	for (size_t i = 0; i < sizeof(phases) / sizeof(*phases); i++) {
		if (!strcmp(phases[i].name, name))
			return phases[i].words;
	}
	return name;
}

/* The slowest requests by one figure, each with its phases drawn to scale. */
