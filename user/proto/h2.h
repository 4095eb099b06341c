/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * HTTP/2 framing (RFC 9113) for one direction of a connection, incremental.
 *
 * Bytes come in whatever pieces the calls moved. DATA payloads are handed on as they arrive,
 * padding removed, with the time of the piece that carried them (a token's time is the time
 * of the bytes that completed its event, as for HTTP/1.1). A header block (HEADERS and its
 * CONTINUATIONs, padding and priority removed) is handed on whole, once END_HEADERS ends it.
 * Other frames are handed on whole. Nothing here knows streams or HPACK: stream/h2conn.c does.
 */
#ifndef TS_H2_H
#define TS_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24
#define H2_FRAME_HEADER_LEN 9
#define H2_DEFAULT_MAX_FRAME 16384u
#define H2_LARGEST_MAX_FRAME 16777215u
/* A header block past this is not kept (its headers are lost, the connection goes on): real
 * blocks are a few hundred bytes, nghttp2 refuses header lists over 64 KiB. */
#define H2_HEADER_BLOCK_MAX (256u << 10)
/* Control frames (SETTINGS, GOAWAY, ...) are read up to this; the rest of a longer one is skipped. */
#define H2_CONTROL_MAX 1024u

enum h2_type {
	H2_DATA = 0,
	H2_HEADERS = 1,
	H2_PRIORITY = 2,
	H2_RST_STREAM = 3,
	H2_SETTINGS = 4,
	H2_PUSH_PROMISE = 5,
	H2_PING = 6,
	H2_GOAWAY = 7,
	H2_WINDOW_UPDATE = 8,
	H2_CONTINUATION = 9,
};

enum h2_flag {
	H2_F_END_STREAM = 0x1, /* DATA, HEADERS */
	H2_F_ACK = 0x1,	       /* SETTINGS, PING */
	H2_F_END_HEADERS = 0x4,
	H2_F_PADDED = 0x8,
	H2_F_PRIORITY = 0x20,
};

enum h2_setting {
	H2_SETTINGS_HEADER_TABLE_SIZE = 1,
	H2_SETTINGS_MAX_FRAME_SIZE = 5,
};

struct h2_frame {
	uint32_t len;
	uint8_t type, flags;
	uint32_t stream;
	uint64_t start_ns; /* time of the piece that held the frame's first byte */
};

struct h2_callbacks {
	/* DATA payload bytes (padding removed); last is true for the frame's last piece. */
	void (*on_data)(void *ctx, const struct h2_frame *f, const uint8_t *data, size_t len,
			bool last, uint64_t ts);
	/* A whole header block (HEADERS' flags in f, f->start_ns its first byte's time);
	 * truncated when it was over H2_HEADER_BLOCK_MAX (then len is what was kept). */
	void (*on_headers)(void *ctx, const struct h2_frame *f, uint8_t *block, size_t len,
			   bool truncated, uint64_t ts);
	/* The first len bytes of a header block whose end is still to come, at the end of a
	 * piece (or after many frames of it in one): to be masked in place (hpack__mask_part). */
	void (*on_headers_part)(void *ctx, const struct h2_frame *f, uint8_t *block, size_t len);
	/* Any other frame, its payload cut at H2_CONTROL_MAX (f->len says how long it was). */
	void (*on_frame)(void *ctx, const struct h2_frame *f, const uint8_t *payload, size_t len,
			 uint64_t ts);
};

enum h2_error {
	H2_OK = 0,
	H2_ERR_FRAME_SIZE, /* a frame longer than the peer allowed */
	H2_ERR_PROTOCOL,   /* padding past the frame, CONTINUATION out of place, ... */
	H2_ERR_LOST_SYNC,  /* bytes were lost: the framing is gone until a frame is recognised */
	H2_ERR_NO_MEMORY,
};

struct h2_framer;

struct h2_framer *h2_framer__new(const struct h2_callbacks *cb, void *ctx);
void h2_framer__free(struct h2_framer *f);
/* The longest frame this direction may carry (the receiver's SETTINGS_MAX_FRAME_SIZE). */
void h2_framer__set_max_frame(struct h2_framer *f, uint32_t max);
/* Parse bytes; header block bytes in data are modified in place: what on_headers and
 * on_headers_part masked in the block is written back, and bytes no one reads are zeroed.
 * Returns H2_OK or the first error: after an error the framer ignores everything. */
enum h2_error h2_framer__feed(struct h2_framer *f, uint8_t *data, size_t len, uint64_t ts);
/* n bytes of this direction were lost. Inside a DATA payload they are skipped (the stream's
 * owner marks it lossy); anywhere else the framing is lost: H2_ERR_LOST_SYNC, and the framer
 * then waits for a piece that begins with plausible frames (h2__looks_like_frames). */
enum h2_error h2_framer__gap(struct h2_framer *f, uint64_t n, uint64_t ts);
/* The stream the current DATA frame belongs to (0 when not inside one). */
uint32_t h2_framer__data_stream(const struct h2_framer *f);
enum h2_error h2_framer__error(const struct h2_framer *f);
const char *h2_error__str(enum h2_error e);

/* Do these bytes begin with HTTP/2 frames (a connection joined after its preface)? True for a
 * SETTINGS, PING or WINDOW_UPDATE frame on stream 0 with a valid length, or for frames whose
 * headers are all plausible (known type, flags and stream rules, length within the default
 * maximum) and end exactly at the end of the bytes or run on past them after at least two. */
bool h2__looks_like_frames(const uint8_t *data, size_t len);

#endif
