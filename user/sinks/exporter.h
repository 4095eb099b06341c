/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --metrics [ADDR:]PORT: GET /metrics over HTTP (libmicrohttpd, its own thread). It serves the
 * last exposition the capture loop published: a scrape copies a finished text under a lock
 * held only for that copy, so it never waits for the capture, never blocks it, and never sees
 * a half-updated histogram.
 */
#ifndef TS_EXPORTER_H
#define TS_EXPORTER_H

#include <stddef.h>

struct exporter;

/* spec: "PORT" (127.0.0.1) or "ADDR:PORT" (IPv4). NULL with a message on stderr on failure. */
struct exporter *exporter__start(const char *spec);
/* Replace the served text (copied). */
void exporter__publish(struct exporter *e, const char *text, size_t len);
void exporter__stop(struct exporter *e);
/* Parse spec without starting anything: 0, or -1 when it is not [ADDR:]PORT. */
int exporter__parse(const char *spec, char *addr, size_t addrn, unsigned *port);

#endif
