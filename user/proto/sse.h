/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Server-Sent Events (WHATWG event stream grammar) and NDJSON, parsed incrementally.
 * Lines may end in CR, LF or CRLF, and a CRLF may be split across two feeds.
 */
#ifndef TS_SSE_H
#define TS_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One dispatched event. event is "" when no event field was given (type "message");
 * data is NUL-terminated, several data lines joined with '\n'. For NDJSON, event is "" and
 * data is one line. Returns nothing: the consumer decides what an event means. */
typedef void (*sse_event_fn)(void *ctx, const char *event, const char *data, size_t len,
			     uint64_t ts);

struct sse_parser;

/* ndjson selects line-delimited JSON instead of the SSE grammar. */
struct sse_parser *sse_parser__new(bool ndjson, sse_event_fn fn, void *ctx);
void sse_parser__free(struct sse_parser *p);
/* Returns 0, or -1 when a line or event exceeds the size limit (the parser then stops). */
int sse_parser__feed(struct sse_parser *p, const uint8_t *data, size_t len, uint64_t ts);
/* End of the body: an NDJSON line without its final newline still counts. */
void sse_parser__finish(struct sse_parser *p, uint64_t ts);

#endif
