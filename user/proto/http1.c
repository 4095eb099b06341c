// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_methods.h"
#include "proto/http1.h"

#define LINE_MAX_BYTES 8192
/* Start lines, most header lines and every chunk-size line fit here; a longer line grows the
 * buffer on the heap (to LINE_MAX_BYTES) and gives it back once it ends, so an open stream
 * keeps a few hundred bytes per direction, not 8 KiB. A header line longer than that keeps
 * its first LINE_MAX_BYTES - 1 bytes (its name and the start of its value), which is all
 * that is read of a header not used here (a big cookie, an x-big): only the head's total,
 * HEAD_MAX_BYTES, bounds it, as servers' own limits do (nginx 4 x 8 KiB, Node 16 KiB, Go
 * 1 MiB). */
#define LINE_INLINE_BYTES 128
#define HEAD_MAX_BYTES (64 * 1024)

enum state {
	S_START,       /* before a start line (blank lines tolerated) */
	S_HEADERS,     /* header lines until an empty one */
	S_BODY_LEN,    /* Content-Length body */
	S_CHUNK_SIZE,  /* chunk-size [; ext] line */
	S_CHUNK_DATA,
	S_CHUNK_END,   /* the CRLF after chunk data */
	S_TRAILERS,    /* trailer lines after the last chunk */
	S_BODY_CLOSE,  /* body delimited by the connection close */
	S_RESYNC,      /* lost bytes: wait for an event that starts a message */
	S_DEAD,
};

struct http_parser {
	bool requests;
	const struct http_callbacks *cb;
	void *ctx;
	enum state st;
	enum http_error err;

	char *line; /* line_inline, or a longer line's heap buffer */
	size_t line_len, line_cap;
	char line_inline[LINE_INLINE_BYTES];
	size_t head_bytes;
	/* masking of secrets in the buffer being parsed */
	bool in_value;	     /* past the ':' of the current header line */
	bool line_cut;	     /* the current header line is longer than its buffer kept */
	bool mask_value;     /* the current header's value is a credential */
	bool last_sensitive; /* for obs-fold continuation lines */
	int sp_count;	     /* spaces seen in a request line */
	bool in_query;

	struct http_head *head; /* while a message's start line and headers are read, else NULL */
	char upgrade[16];	 /* a response's Upgrade protocol, lowercased ("h2c", "websocket") */
	size_t upgrade_used;	 /* bytes of the feed that held the 101, up to its end */
	uint64_t remaining;	 /* body or chunk bytes left */
	bool in_message;
};

/* with their lengths: every header name of every message is looked up here */
#define NAMED(s) { s, sizeof(s) - 1 }
static const struct {
	const char *name;
	size_t len;
} sensitive_headers[] = {
	NAMED("authorization"),	 NAMED("proxy-authorization"), NAMED("x-api-key"),
	NAMED("api-key"),	 NAMED("cookie"),		 NAMED("set-cookie"),
	NAMED("x-goog-api-key"), NAMED("openai-organization"), NAMED("openai-project"),
};
#undef NAMED

static void reset_message(struct http_parser *p);

struct http_parser *http_parser__new(bool requests, const struct http_callbacks *cb, void *ctx)
{
	struct http_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->requests = requests;
	p->cb = cb;
	p->ctx = ctx;
	p->line = p->line_inline;
	p->line_cap = sizeof(p->line_inline);
	reset_message(p);
	return p;
}

/* Back to the inline line buffer (the line in it is done). */
static void release_line(struct http_parser *p)
{
	if (p->line != p->line_inline)
		free(p->line);
	p->line = p->line_inline;
	p->line_cap = sizeof(p->line_inline);
}

/* Room for one more byte and the NUL; false without memory. */
static bool grow_line(struct http_parser *p)
{
	size_t cap = p->line_cap * 2 < LINE_MAX_BYTES ? p->line_cap * 2 : LINE_MAX_BYTES;
	char *n = p->line == p->line_inline ? malloc(cap) : realloc(p->line, cap);

	if (!n)
		return false;
	if (p->line == p->line_inline)
		memcpy(n, p->line_inline, p->line_len);
	p->line = n;
	p->line_cap = cap;
	return true;
}

void http_parser__free(struct http_parser *p)
{
	if (p) {
		release_line(p);
		free(p->head);
	}
	free(p);
}

const char *http_error__str(enum http_error e)
{
	switch (e) {
	case HTTP_OK: return "ok";
	case HTTP_ERR_SYNTAX: return "malformed_http";
	case HTTP_ERR_TOO_LARGE: return "http_header_too_large";
	case HTTP_ERR_LOST_SYNC: return "capture_loss";
	case HTTP_ERR_UPGRADE: return "protocol_upgrade";
	case HTTP_ERR_NO_MEMORY: return "no_memory";
	}
	return "unknown";
}

const char *http_parser__upgrade(const struct http_parser *p)
{
	return p->upgrade;
}

size_t http_parser__upgrade_used(const struct http_parser *p)
{
	return p->upgrade_used;
}

enum http_error http_parser__error(const struct http_parser *p)
{
	return p->err;
}

const struct http_head *http_parser__failed_head(const struct http_parser *p)
{
	return p->err && p->head && p->head->method[0] ? p->head : NULL;
}

#define METHOD_START(start, a, b, c, d) start,
static const char *const methods[] = { TS_HTTP_METHODS(METHOD_START) };
#undef METHOD_START

bool http__could_start_request(const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (len < strlen(methods[i]) && !memcmp(data, methods[i], len))
			return true;
	}
	return false;
}

bool http__looks_like_request(const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		size_t n = strlen(methods[i]);

		if (len >= n && !memcmp(data, methods[i], n))
			return true;
	}
	return false;
}

static bool looks_like_response(const uint8_t *data, size_t len)
{
	return len >= 7 && !memcmp(data, "HTTP/1.", 7);
}

bool http__looks_like_h2_preface(const uint8_t *data, size_t len)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	size_t n = len < sizeof(preface) - 1 ? len : sizeof(preface) - 1;

	return n >= 8 && !memcmp(data, preface, n);
}

static enum http_error fail(struct http_parser *p, enum http_error e)
{
	p->st = S_DEAD;
	p->err = e;
	return e;
}

static void reset_message(struct http_parser *p)
{
	free(p->head);
	p->head = NULL;
	p->head_bytes = 0;
	p->in_message = false;
	p->st = S_START;
}

static bool parse_request_line(struct http_parser *p, char *l)
{
	char *sp1 = strchr(l, ' '), *sp2, *q;
	size_t n;

	if (!sp1 || sp1 == l || (size_t)(sp1 - l) >= HTTP_METHOD_MAX)
		return false;
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2 || strncmp(sp2 + 1, "HTTP/1.", 7))
		return false;
	memcpy(p->head->method, l, sp1 - l);
	p->head->method[sp1 - l] = 0;
	q = memchr(sp1 + 1, '?', sp2 - sp1 - 1);
	n = (q ? q : sp2) - (sp1 + 1);
	if (n >= HTTP_PATH_MAX)
		n = HTTP_PATH_MAX - 1;
	memcpy(p->head->path, sp1 + 1, n);
	p->head->path[n] = 0;
	return true;
}

static bool parse_status_line(struct http_parser *p, const char *l)
{
	if (strncmp(l, "HTTP/1.", 7) || !isdigit((unsigned char)l[7]) || l[8] != ' ')
		return false;
	if (!isdigit((unsigned char)l[9]) || !isdigit((unsigned char)l[10]) ||
	    !isdigit((unsigned char)l[11]) || (l[12] && l[12] != ' '))
		return false;
	p->head->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
	return true;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = 0;
	return s;
}

/* Does a comma-separated header value list contain token (case-insensitive)? */
static bool has_token(const char *v, const char *token)
{
	size_t n = strlen(token);

	while (*v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		if (!strncasecmp(v, token, n) && (v[n] == 0 || v[n] == ',' || v[n] == ' ' ||
						  v[n] == ';' || v[n] == '\t'))
			return true;
		while (*v && *v != ',')
			v++;
	}
	return false;
}

void http__append_list(char *dst, size_t cap, const char *value, size_t n)
{
	size_t have = strlen(dst);

	if (have && have + 1 < cap)
		dst[have++] = ',';
	if (have + 1 >= cap)
		return;
	n = n < cap - 1 - have ? n : cap - 1 - have;
	memcpy(dst + have, value, n);
	dst[have + n] = 0;
}

enum http_encoding http__encoding_of(const char *v)
{
	if (!*v || !strcasecmp(v, "identity"))
		return HTTP_ENC_IDENTITY;
	if (!strcasecmp(v, "gzip") || !strcasecmp(v, "x-gzip"))
		return HTTP_ENC_GZIP;
	if (!strcasecmp(v, "deflate"))
		return HTTP_ENC_DEFLATE;
	return HTTP_ENC_UNSUPPORTED;
}

enum http_ctype http__ctype_of(const char *v)
{
	if (!strncasecmp(v, "text/event-stream", 17))
		return HTTP_CT_SSE;
	if (!strncasecmp(v, "application/x-ndjson", 20) || !strncasecmp(v, "application/ndjson", 18) ||
	    !strncasecmp(v, "application/jsonl", 17))
		return HTTP_CT_NDJSON;
	if (!strncasecmp(v, "application/json", 16))
		return HTTP_CT_JSON;
	return HTTP_CT_OTHER;
}

static bool parse_header(struct http_parser *p, char *l)
{
	char *colon = strchr(l, ':'), *v;

	if (*l == ' ' || *l == '\t') /* obs-fold: continuation of a value we do not need */
		return true;
	if (!colon || colon == l)
		return false;
	*colon = 0;
	v = trim(colon + 1);
	if (!strcasecmp(l, "content-length")) {
		char *end;
		long long n;

		/* digits only: strtoll would also take a sign and leading blanks */
		if (!isdigit((unsigned char)*v))
			return false;
		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || end == v || *end || n < 0)
			return false;
		if (p->head->content_length >= 0 && p->head->content_length != n)
			return false; /* conflicting lengths: request smuggling territory */
		p->head->content_length = n;
	} else if (!strcasecmp(l, "upgrade") && !p->requests) {
		size_t i = 0;

		for (; v[i] && v[i] != ',' && v[i] != ' ' && v[i] != '/' && i < sizeof(p->upgrade) - 1;
		     i++)
			p->upgrade[i] = (char)tolower((unsigned char)v[i]);
		p->upgrade[i] = 0;
	} else if (!strcasecmp(l, "transfer-encoding")) {
		p->head->chunked = has_token(v, "chunked");
	} else if (!strcasecmp(l, "content-encoding")) {
		p->head->encoding = http__encoding_of(v);
	} else if (!strcasecmp(l, "content-type")) {
		enum http_ctype t = http__ctype_of(v);

		if (t != HTTP_CT_OTHER)
			p->head->ctype = t;
	} else if (!strcasecmp(l, "traceparent")) {
		snprintf(p->head->traceparent, sizeof(p->head->traceparent), "%s", v);
	} else if (!strcasecmp(l, "tracestate")) {
		http__append_list(p->head->tracestate, sizeof(p->head->tracestate), v, strlen(v));
	} else if (!strcasecmp(l, "user-agent") && p->requests) {
		snprintf(p->head->user_agent, sizeof(p->head->user_agent), "%s", v);
	}
	return true;
}

/* Headers done: pick the body framing (RFC 9112 section 6.3). */
static enum http_error begin_body(struct http_parser *p, uint64_t ts)
{
	bool has_body;

	if (!p->requests && p->head->status >= 100 && p->head->status < 200) {
		if (p->head->status == 101)
			return fail(p, HTTP_ERR_UPGRADE);
		reset_message(p); /* interim response: not a message of its own */
		return HTTP_OK;
	}
	has_body = p->cb->on_head ? p->cb->on_head(p->ctx, p->head, ts) : true;
	if (!p->requests && (p->head->status == 204 || p->head->status == 304))
		has_body = false;
	if (has_body && p->head->chunked) {
		p->st = S_CHUNK_SIZE;
	} else if (has_body && p->head->content_length > 0) {
		p->st = S_BODY_LEN;
		p->remaining = p->head->content_length;
	} else if (has_body && !p->requests && p->head->content_length < 0) {
		p->st = S_BODY_CLOSE;
	} else {
		if (p->cb->on_end)
			p->cb->on_end(p->ctx, ts);
		reset_message(p);
	}
	free(p->head); /* the body needs only the framing chosen above */
	p->head = NULL;
	return HTTP_OK;
}

/* A header this parser takes the value of: a cut value would be a wrong one. */
static bool header_used(const char *l)
{
	static const char *const used[] = { "content-length", "transfer-encoding",
					    "content-encoding", "content-type", "upgrade" };

	for (size_t i = 0; i < sizeof(used) / sizeof(used[0]); i++) {
		size_t n = strlen(used[i]);

		if (!strncasecmp(l, used[i], n) && (l[n] == ':' || l[n] == ' ' || l[n] == '\t'))
			return true;
	}
	return false;
}

static enum http_error parse_line(struct http_parser *p, uint64_t ts)
{
	char *l = p->line;
	bool cut = p->line_cut;

	if (p->line_len && l[p->line_len - 1] == '\r')
		p->line_len--;
	l[p->line_len] = 0;
	p->line_len = 0;
	p->in_value = p->mask_value = p->line_cut = false;
	p->sp_count = 0;
	p->in_query = false;

	switch (p->st) {
	case S_START:
		if (!*l)
			return HTTP_OK; /* stray CRLF between messages (RFC 9112 2.2) */
		if (!(p->requests ? parse_request_line(p, l) : parse_status_line(p, l)))
			return fail(p, HTTP_ERR_SYNTAX);
		p->st = S_HEADERS;
		return HTTP_OK;
	case S_HEADERS:
		if (!*l)
			return begin_body(p, ts);
		if (cut && header_used(l))
			return fail(p, HTTP_ERR_TOO_LARGE);
		return parse_header(p, l) ? HTTP_OK : fail(p, HTTP_ERR_SYNTAX);
	case S_CHUNK_SIZE: {
		const char *end = l;
		uint64_t n = 0;

		/* hex digits only (no sign, blank or "0x"), at least one, and a size that fits */
		if (!isxdigit((unsigned char)*l))
			return fail(p, HTTP_ERR_SYNTAX);
		for (; isxdigit((unsigned char)*end); end++) {
			if (n >> 60)
				return fail(p, HTTP_ERR_SYNTAX);
			n = n << 4 | (uint64_t)(*end <= '9' ? *end - '0' : (*end | 0x20) - 'a' + 10);
		}
		if (*end && *end != ';' && *end != ' ' && *end != '\t')
			return fail(p, HTTP_ERR_SYNTAX);
		if (n == 0) {
			p->st = S_TRAILERS;
		} else {
			p->remaining = n;
			p->st = S_CHUNK_DATA;
		}
		return HTTP_OK;
	}
	case S_CHUNK_END:
		if (*l)
			return fail(p, HTTP_ERR_SYNTAX);
		p->st = S_CHUNK_SIZE;
		return HTTP_OK;
	case S_TRAILERS:
		if (!*l) {
			if (p->cb->on_end)
				p->cb->on_end(p->ctx, ts);
			reset_message(p);
		}
		return HTTP_OK;
	default:
		return fail(p, HTTP_ERR_SYNTAX);
	}
}

bool http__is_credential(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(sensitive_headers) / sizeof(sensitive_headers[0]); i++) {
		if (sensitive_headers[i].len == n && !strncasecmp(name, sensitive_headers[i].name, n))
			return true;
	}
	return false;
}

/* A line ended: parsed, then its buffer, if it grew, given back. */
static enum http_error end_line(struct http_parser *p, uint64_t ts)
{
	enum http_error e = parse_line(p, ts);

	release_line(p);
	return e;
}

/* One byte of a line-oriented state; masks credentials in place. */
static enum http_error line_byte(struct http_parser *p, uint8_t *c, uint64_t ts)
{
	if (*c == '\n')
		return end_line(p, ts);
	if (p->st == S_START || p->st == S_HEADERS || p->st == S_TRAILERS) {
		if (++p->head_bytes > HEAD_MAX_BYTES)
			return fail(p, HTTP_ERR_TOO_LARGE);
	}
	if (p->st == S_START && p->requests) {
		if (*c == ' ') {
			p->sp_count++;
			p->in_query = false;
		} else if (*c == '?' && p->sp_count == 1) {
			p->in_query = true;
		} else if (p->in_query && *c != '\r') {
			*c = '*';
		}
	} else if (p->st == S_HEADERS || p->st == S_TRAILERS) {
		if (p->line_len == 0 && *c != ' ' && *c != '\t')
			p->last_sensitive = false;
		if (p->line_len == 0 && (*c == ' ' || *c == '\t') && p->last_sensitive) {
			p->in_value = p->mask_value = true;
		} else if (!p->in_value && *c == ':') {
			p->in_value = true;
			p->mask_value = p->last_sensitive = http__is_credential(p->line, p->line_len);
		} else if (p->mask_value && *c != '\r' && *c != ' ' && *c != '\t') {
			*c = '*';
		}
	}
	if (p->line_len >= LINE_MAX_BYTES - 1) {
		if (p->st != S_HEADERS && p->st != S_TRAILERS)
			return fail(p, HTTP_ERR_TOO_LARGE);
		p->line_cut = true; /* the rest of a long header line: masked above, not kept */
		return HTTP_OK;
	}
	if (p->line_len + 1 >= p->line_cap && !grow_line(p))
		return fail(p, HTTP_ERR_NO_MEMORY);
	p->line[p->line_len++] = (char)*c;
	return HTTP_OK;
}

/* Whether the rest of the current line needs no byte's own look: a chunk line, a status
 * line, a request line past its target, a header value that is no credential. */
static bool line_plain(const struct http_parser *p)
{
	switch (p->st) {
	case S_CHUNK_SIZE:
	case S_CHUNK_END:
		return true;
	case S_START:
		return !p->requests || p->sp_count >= 2;
	case S_HEADERS:
	case S_TRAILERS:
		return p->in_value && !p->mask_value && p->line_len;
	default:
		return false;
	}
}

/* n bytes of a line, none its end, that line_plain says need no look: what line_byte does
 * to each, at once. Returns the bytes taken: all of them, or up to the one at which the head
 * or the line passed its bound or the line's buffer could not grow (then *e says so, as
 * line_byte would at that byte). */
static size_t line_plain_bytes(struct http_parser *p, const uint8_t *c, size_t n,
			       enum http_error *e)
{
	bool header = p->st == S_HEADERS || p->st == S_TRAILERS;
	size_t room = LINE_MAX_BYTES - 1 - p->line_len, keep = n < room ? n : room;
	size_t ok = header ? n : keep;

	*e = HTTP_OK;
	if ((header || p->st == S_START) && HEAD_MAX_BYTES - p->head_bytes < ok)
		ok = HEAD_MAX_BYTES - p->head_bytes;
	if (ok < n) {
		*e = fail(p, HTTP_ERR_TOO_LARGE);
		return ok + 1;
	}
	if (header || p->st == S_START)
		p->head_bytes += n;
	p->line_cut |= keep < n; /* the rest of a long header line: not kept */
	while (p->line_len + keep >= p->line_cap) {
		if (!grow_line(p)) {
			*e = fail(p, HTTP_ERR_NO_MEMORY);
			return p->line_cap - p->line_len;
		}
	}
	memcpy(p->line + p->line_len, c, keep);
	p->line_len += keep;
	return n;
}

/* A line's bytes from data up to its end, or the data's: those that need a look one by one,
 * the rest as a run. Returns the bytes taken. */
static size_t line_run(struct http_parser *p, uint8_t *data, size_t len, uint64_t ts,
		       enum http_error *e)
{
	uint8_t *nl = memchr(data, '\n', len);
	size_t n = nl ? (size_t)(nl - data) : len, i = 0;

	*e = HTTP_OK;
	while (i < n && !line_plain(p)) {
		*e = line_byte(p, &data[i++], ts);
		if (*e)
			return i;
	}
	if (i < n) {
		size_t took = line_plain_bytes(p, data + i, n - i, e);

		if (*e)
			return i + took;
	}
	if (!nl)
		return n;
	*e = end_line(p, ts);
	return n + 1;
}

enum http_error http_parser__feed(struct http_parser *p, uint8_t *data, size_t len, uint64_t ts)
{
	size_t i = 0;
	enum http_error e;

	if (p->st == S_RESYNC) {
		bool start = p->requests ? http__looks_like_request(data, len)
					 : looks_like_response(data, len);

		if (!start)
			return HTTP_OK;
		reset_message(p);
	}
	while (i < len) {
		size_t n;

		switch (p->st) {
		case S_DEAD:
			return p->err;
		case S_START:
			if (!p->in_message && data[i] != '\r' && data[i] != '\n') {
				/* the head lives until the headers end: an open stream keeps none */
				p->head = calloc(1, sizeof(*p->head));
				if (!p->head)
					return fail(p, HTTP_ERR_NO_MEMORY);
				p->head->content_length = -1;
				p->head->start_ns = ts;
				p->in_message = true;
			}
			/* fallthrough */
		case S_HEADERS:
		case S_CHUNK_SIZE:
		case S_CHUNK_END:
		case S_TRAILERS:
			/* before a message, a byte at a time: one other than CR or LF begins it */
			i += line_run(p, data + i, p->in_message || p->st != S_START ? len - i : 1, ts,
				      &e);
			if (e) {
				p->upgrade_used = i;
				return e;
			}
			break;
		case S_BODY_LEN:
		case S_CHUNK_DATA:
			n = len - i < p->remaining ? len - i : p->remaining;
			if (p->cb->on_body)
				p->cb->on_body(p->ctx, data + i, n, ts);
			i += n;
			p->remaining -= n;
			if (!p->remaining) {
				if (p->st == S_CHUNK_DATA) {
					p->st = S_CHUNK_END;
				} else {
					if (p->cb->on_end)
						p->cb->on_end(p->ctx, ts);
					reset_message(p);
				}
			}
			break;
		case S_BODY_CLOSE:
			if (p->cb->on_body)
				p->cb->on_body(p->ctx, data + i, len - i, ts);
			i = len;
			break;
		case S_RESYNC:
			return HTTP_OK;
		}
	}
	return HTTP_OK;
}

enum http_error http_parser__gap(struct http_parser *p, uint64_t n, uint64_t ts)
{
	switch (p->st) {
	case S_DEAD:
		return p->err;
	case S_BODY_CLOSE:
		return HTTP_OK;
	case S_BODY_LEN:
	case S_CHUNK_DATA:
		if (n <= p->remaining) {
			p->remaining -= n;
			if (!p->remaining)
				p->st = p->st == S_CHUNK_DATA ? S_CHUNK_END : S_BODY_LEN;
			if (p->st == S_BODY_LEN && !p->remaining) {
				if (p->cb->on_end)
					p->cb->on_end(p->ctx, ts);
				reset_message(p);
			}
			return HTTP_OK;
		}
		/* fallthrough */
	default:
		/* The framing is lost: drop bytes until an event starts a new message. */
		p->st = S_RESYNC;
		p->in_message = false;
		p->line_len = 0;
		release_line(p);
		free(p->head);
		p->head = NULL;
		return HTTP_ERR_LOST_SYNC;
	}
}

bool http_parser__eof(struct http_parser *p, uint64_t ts)
{
	if (p->st == S_BODY_CLOSE) {
		if (p->cb->on_end)
			p->cb->on_end(p->ctx, ts);
		reset_message(p);
		return false;
	}
	return p->in_message;
}
