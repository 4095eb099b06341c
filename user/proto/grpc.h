/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * gRPC over HTTP/2: the length-prefixed messages of one direction of a call (a compressed
 * flag, a 4-byte big-endian length, the message), and the protobuf wire format read without
 * a schema (field numbers and wire types only), for the dialects that know which fields
 * carry what (llm/grpc_dialect.c).
 */
#ifndef TS_GRPC_H
#define TS_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest message kept to be read (gRPC's default receive limit). A longer one is still
 * counted, handed on with data NULL. */
#define GRPC_MESSAGE_MAX (4u << 20)

/* One message, decompressed; data NULL when it could not be read (len: its wire length). */
typedef void (*grpc_message_fn)(void *ctx, const uint8_t *data, size_t len, uint64_t ts);

enum grpc_error {
	GRPC_OK = 0,
	GRPC_ERR_COMPRESSION = -1, /* a compressed message without grpc-encoding gzip, or bad gzip */
	GRPC_ERR_NO_MEMORY = -2,
};

struct grpc_reader;

/* gzip: the call's grpc-encoding is gzip (compressed messages can be read). */
struct grpc_reader *grpc_reader__new(bool gzip, grpc_message_fn fn, void *ctx);
void grpc_reader__free(struct grpc_reader *g);
/* Returns GRPC_OK, or the first error of a message (that message is handed on as unread;
 * the framing goes on). */
enum grpc_error grpc_reader__feed(struct grpc_reader *g, const uint8_t *data, size_t len,
				  uint64_t ts);
/* Bytes of a message that has not ended (a body cut short). */
bool grpc_reader__pending(const struct grpc_reader *g);

/* Protobuf wire format (https://protobuf.dev/programming-guides/encoding/). */
enum pb_wire { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

struct pb_field {
	uint32_t num;
	enum pb_wire wire;
	uint64_t v;	   /* VARINT, I64, I32 */
	const uint8_t *p;  /* LEN: its bytes */
	size_t len;
};

/* The next field at *p (before end): 1, 0 at the end, -1 when malformed (groups included). */
int pb__next(const uint8_t **p, const uint8_t *end, struct pb_field *f);
/* The first LEN field num of the message, or NULL (len 0). */
const uint8_t *pb__bytes(const uint8_t *msg, size_t n, uint32_t num, size_t *len);

#endif
