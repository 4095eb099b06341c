/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ZMTP 3.0 and 3.1 (rfc.zeromq.org/spec/23 and /37), the wire of ZeroMQ sockets, one direction
 * of one connection, read incrementally: the 64-byte greeting (signature, version, mechanism,
 * as-server), then frames: a flags byte (MORE, LONG, COMMAND), a size of one byte or eight
 * (big endian), the body. Commands (READY with its metadata properties, PING, ...) and
 * messages (a frame with MORE and those after it, up to one without) are handed on whole.
 * libzmq's I/O thread splits and coalesces frames freely across syscalls: any cut of the
 * bytes gives the same messages.
 *
 * A connection joined after its greeting has no frame boundary to start from: each piece
 * (a syscall's bytes) is tried as the start of a message, and taken when its frames parse to
 * the piece's end and end a message there; pieces before one that does are skipped (counted).
 * Past ZMTP_RESYNC_MAX skipped bytes the reader says it cannot, and stops.
 *
 * Nothing here knows what the messages mean (vLLM's engine wire is the first reader).
 */
#ifndef TS_ZMTP_H
#define TS_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZMTP_GREETING_LEN 64
#define ZMTP_FRAMES_MAX 16	     /* frames of one message handed on; later ones counted */
#define ZMTP_FRAME_KEEP (1u << 20)   /* bytes of a frame's body kept; a longer one is cut */
#define ZMTP_RESYNC_MAX (4u << 20)   /* bytes skipped looking for a message start */

struct zmtp_greeting {
	uint8_t major, minor;
	char mechanism[21]; /* "NULL", "PLAIN", "CURVE" */
	bool as_server;
};

struct zmtp_frame {
	const uint8_t *data; /* the body's first min(len, ZMTP_FRAME_KEEP) bytes */
	uint64_t len;	     /* the body's length on the wire */
	bool cut;	     /* len > ZMTP_FRAME_KEEP: data holds only the first bytes */
};

struct zmtp_message {
	const struct zmtp_frame *frames;
	size_t nframes;	      /* at most ZMTP_FRAMES_MAX */
	size_t frames_dropped; /* past ZMTP_FRAMES_MAX: counted only */
	uint64_t start_ns;     /* when its first byte came */
	uint64_t end_ns;       /* when its last byte came */
};

struct zmtp_callbacks {
	void (*greeting)(void *ctx, const struct zmtp_greeting *g); /* NULL: not wanted */
	/* A command: its name (NUL-terminated) and the bytes after it. */
	void (*command)(void *ctx, const char *name, const uint8_t *data, size_t len,
			uint64_t ts);
	void (*message)(void *ctx, const struct zmtp_message *m);
};

enum zmtp_state {
	ZMTP_OK = 0,
	ZMTP_ERR_GREETING = -1, /* bytes that are no ZMTP greeting */
	ZMTP_ERR_FRAME = -2,	/* a flags byte with reserved bits, or a command without a name */
	ZMTP_ERR_RESYNC = -3,	/* joined: no message start found within ZMTP_RESYNC_MAX */
	ZMTP_ERR_NO_MEMORY = -4,
};

struct zmtp;

/* from_start: the greeting comes first (the connection was seen from its start); else joined
 * mid-stream. */
struct zmtp *zmtp__new(const struct zmtp_callbacks *cb, void *ctx, bool from_start);
void zmtp__free(struct zmtp *z);
/* One piece of one direction's bytes, in order. Returns ZMTP_OK, or the error that stopped
 * the reader (it then reads nothing more, and says the same again). */
enum zmtp_state zmtp__feed(struct zmtp *z, const uint8_t *data, size_t len, uint64_t ts);
/* Bytes skipped while joined and looking for a message start. */
uint64_t zmtp__skipped(const struct zmtp *z);
/* Do these first bytes begin a ZMTP greeting (0xFF, 8 bytes, 0x7F, major 3)? n < 11: could
 * they still? */
bool zmtp__looks_like_greeting(const uint8_t *d, size_t n);
/* The value of property name in a READY (or INITIATE) command's data: 1 and its bytes, 0 when
 * absent, -1 when the data is malformed. */
int zmtp__property(const uint8_t *data, size_t len, const char *name, const uint8_t **value,
		   uint32_t *vlen);

#endif
