/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The HTML report's words (sinks/html.c): text made safe for it, times for people, and the
 * TTFT phases' colours and names. */
#ifndef TS_HTML_TEXT_H
#define TS_HTML_TEXT_H

#include <stddef.h>

/* Text from the traffic or a process, for HTML: control bytes as \xNN, markup escaped;
 * into out (n bytes), which it returns. */
const char *html_text__esc(const char *s, char *out, size_t n);
/* A time for people: three significant figures, ms or s ("-" for NAN). */
const char *html_text__when(double ms, char *out, size_t n);
/* A TTFT part's colour and words, by its name in the split (llm/attribution.h). */
const char *html_text__phase_colour(const char *name);
const char *html_text__phase_words(const char *name);

#endif
