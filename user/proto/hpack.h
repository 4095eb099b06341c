/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * HPACK (RFC 7541) header block decoding for one direction of an HTTP/2 connection.
 *
 * Two modes:
 * - exact: the connection was seen from its preface. libnghttp2's inflater decodes every
 *   block and keeps the dynamic table; every field is known.
 * - partial: capture joined after the preface (or the exact table was lost). The static table
 *   and literals resolve. The dynamic table is unknown except for the entries inserted since
 *   the join: an insertion always goes to the front (index 62), so the entry at 62 + k is the
 *   k-th most recent insertion for as long as it exists, whatever was in the table before and
 *   whatever was evicted. Those resolve; an index past them is reported unknown, never guessed.
 *
 * Credential values (authorization, API keys, cookies), values whose name is unknown and
 * query strings are overwritten in the block before it is decoded, as the HTTP/1.1 parser
 * does, so the table and any output only ever hold the mask. A block that spans several
 * pieces of the stream is masked piece by piece (hpack__mask_part), so the pieces that have
 * passed, a recording's among them, hold the mask too.
 */
#ifndef TS_HPACK_H
#define TS_HPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The dynamic table kept per direction: a peer that announces more is held to this (its
 * blocks then fail to decode exactly, and the direction goes on in partial mode). */
#define HPACK_TABLE_MAX (64u << 10)
/* Decoded header bytes handed on per block; the rest are decoded (the table must follow
 * them) but not handed on. */
#define HPACK_LIST_MAX (64u << 10)

struct hpack_field {
	const char *name, *value; /* not NUL-terminated; name NULL when unknown */
	size_t nlen, vlen;
	bool known; /* false: it named a dynamic-table entry from before capture */
};

typedef void (*hpack_field_fn)(void *ctx, const struct hpack_field *f);

enum hpack_status {
	HPACK_OK = 0,
	HPACK_PARTIAL = 1,   /* decoded, but some fields were unknown */
	HPACK_ERROR = -1,    /* malformed (or a table size past the limit): the exact table is
			      * lost, the direction is partial from now on */
	HPACK_NO_MEMORY = -2,
};

struct hpack;

/* exact: decode from an empty table (the connection's start was seen). */
struct hpack *hpack__new(bool exact);
void hpack__free(struct hpack *h);
/* The decoding side announced SETTINGS_HEADER_TABLE_SIZE. */
void hpack__set_max_table(struct hpack *h, uint32_t size);
/* Decode one whole header block; masks credentials in block first. Calls fn per field. */
enum hpack_status hpack__decode(struct hpack *h, uint8_t *block, size_t len, hpack_field_fn fn,
				void *ctx);
/* Mask the first len bytes of a header block whose end is still to come: what the bytes so
 * far hold of credentials and query strings. The table is not changed, and hpack__decode of
 * the whole block masks the same bytes the same way (a value cut here whose mask needs all
 * of it, a Huffman-coded :path, is masked whole, there too). */
void hpack__mask_part(struct hpack *h, uint8_t *block, size_t len);
/* Forget the table (bytes of this direction were lost): partial from now on. */
void hpack__lose(struct hpack *h);
bool hpack__exact(const struct hpack *h);

#endif
