/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Incremental HTTP/1.1 message parser for one direction of a connection.
 *
 * Bytes come in whatever pieces SSL_read/SSL_write moved; the parser keeps no more than one
 * header line and hands body bytes (de-chunked, still content-encoded) to its owner as they
 * arrive, with the time of the event that carried them. Credential header values and query
 * strings are overwritten with '*' in the caller's buffer while parsing, so a recording made
 * from the same buffer never holds them.
 */
#ifndef TS_HTTP1_H
#define TS_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_METHOD_MAX 16
#define HTTP_PATH_MAX 256

enum http_encoding { HTTP_ENC_IDENTITY = 0, HTTP_ENC_GZIP, HTTP_ENC_DEFLATE, HTTP_ENC_UNSUPPORTED };
enum http_ctype { HTTP_CT_OTHER = 0, HTTP_CT_SSE, HTTP_CT_NDJSON, HTTP_CT_JSON };

/* a request's User-Agent, cut to this less one: enough for its products' names and versions */
#define HTTP_USER_AGENT_MAX 64

#define HTTP_TRACEPARENT_LEN 55 /* "00-" 32 hex "-" 16 hex "-" 2 hex */
/* room for a traceparent as sent, cut one past its four fields: enough to tell whether more
 * follows (request__set_traceparent judges it) */
#define HTTP_TRACEPARENT_ROOM (HTTP_TRACEPARENT_LEN + 2)
/* a tracestate's list as sent (its headers joined by commas), cut one past the 512 characters
 * W3C Trace Context has every tracer keep: enough to tell that more followed
 * (request__set_tracestate cuts at a member's end) */
#define HTTP_TRACESTATE_KEEP 512
#define HTTP_TRACESTATE_ROOM (HTTP_TRACESTATE_KEEP + 2)

struct http_head {
	char method[HTTP_METHOD_MAX];
	char path[HTTP_PATH_MAX]; /* without the query string (it may carry keys) */
	int status;		  /* responses */
	int64_t content_length;	  /* -1 when absent */
	bool chunked;
	enum http_encoding encoding;
	enum http_ctype ctype;
	char traceparent[HTTP_TRACEPARENT_ROOM]; /* W3C trace context, as sent ("" none) */
	char tracestate[HTTP_TRACESTATE_ROOM];	 /* and its vendors' list ("" none) */
	char user_agent[HTTP_USER_AGENT_MAX];	 /* requests: as sent, cut ("" none) */
	uint64_t start_ns; /* time of the event that held the first byte */
};

struct http_callbacks {
	/* Headers complete. Return false to treat the message as bodiless (HEAD replies). */
	bool (*on_head)(void *ctx, const struct http_head *h, uint64_t ts);
	void (*on_body)(void *ctx, const uint8_t *data, size_t len, uint64_t ts);
	void (*on_end)(void *ctx, uint64_t ts);
};

enum http_error {
	HTTP_OK = 0,
	HTTP_ERR_SYNTAX,     /* malformed start line, header or chunk framing */
	HTTP_ERR_TOO_LARGE,  /* a header line or block over the limits */
	HTTP_ERR_LOST_SYNC,  /* bytes were lost where the framing cannot skip them */
	HTTP_ERR_UPGRADE,    /* 101 Switching Protocols: what follows is not HTTP/1.1 */
	HTTP_ERR_NO_MEMORY,  /* no memory for a message's head or a long header line */
};

struct http_parser;

struct http_parser *http_parser__new(bool requests, const struct http_callbacks *cb, void *ctx);
void http_parser__free(struct http_parser *p);
/* Parse bytes; data may be modified (credential masking). Returns HTTP_OK or the first error:
 * after an error the parser ignores everything. */
enum http_error http_parser__feed(struct http_parser *p, uint8_t *data, size_t len, uint64_t ts);
/* n bytes of this direction were lost in capture. Inside a sized body they are skipped (the
 * message is then marked lossy by the owner); anywhere else the parser loses sync. */
enum http_error http_parser__gap(struct http_parser *p, uint64_t n, uint64_t ts);
/* The connection closed: ends a body delimited by the close. Returns true if a message was
 * left unfinished. */
bool http_parser__eof(struct http_parser *p, uint64_t ts);
enum http_error http_parser__error(const struct http_parser *p);
/* After an error in a request's headers: its start line as far as it was read (method, path,
 * start_ns; the rest of the head unknown); NULL when the error came before or after them. */
const struct http_head *http_parser__failed_head(const struct http_parser *p);
/* After HTTP_ERR_UPGRADE: the protocol the 101 named in its Upgrade header, lowercased ("h2c",
 * "websocket"; "" when none). */
const char *http_parser__upgrade(const struct http_parser *p);
/* After HTTP_ERR_UPGRADE: how many bytes of the last feed the 101 took; the rest are already
 * the new protocol's. */
size_t http_parser__upgrade_used(const struct http_parser *p);
const char *http_error__str(enum http_error e);

/* A header whose value is a credential, masked wherever it is seen (name of n bytes, any case). */
bool http__is_credential(const char *name, size_t n);
/* Content-Encoding and Content-Type values, as the response body's reader wants them. */
enum http_encoding http__encoding_of(const char *value);
/* A list header sent again (tracestate): value after what dst holds, a comma between, cut to
 * cap - 1 bytes. */
void http__append_list(char *dst, size_t cap, const char *value, size_t n);
enum http_ctype http__ctype_of(const char *value);

/* A request's start line begins data (used to find the role of a connection): a method of
 * bpf/http_methods.h, the list the probes capture by. */
bool http__looks_like_request(const uint8_t *data, size_t len);
/* data (len bytes) could still grow into a request line's method. */
bool http__could_start_request(const uint8_t *data, size_t len);
bool http__looks_like_h2_preface(const uint8_t *data, size_t len);

#endif
