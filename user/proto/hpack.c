// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nghttp2/nghttp2.h>

#include "base/buf.h"
#include "proto/hpack.h"
#include "proto/http1.h"

#define STATIC_ENTRIES 61
#define ENTRY_OVERHEAD 32     /* RFC 7541 4.1 */
#define HUFFMAN_STAR 0xf9     /* '*' is the 8-bit code 11111001 (RFC 7541 Appendix B) */
#define INT_MAX_VALUE (1u << 30)
#define WHOLE_MAX 8	      /* values a block's parts left masked whole, by offset */

/* A dynamic-table entry inserted since capture joined (partial mode); name NULL when the
 * insertion named an entry from before. */
struct entry {
	char *name, *value;
	size_t nlen, vlen;
};

struct hpack {
	bool exact;
	nghttp2_hd_inflater *inf;     /* exact mode: the connection's own table */
	nghttp2_hd_inflater *scratch; /* the static table, and Huffman strings on their own */
	struct entry *ent;	      /* partial mode: newest first */
	size_t nent, cap, ent_bytes;
	struct buf tmp;		      /* a string wrapped for the scratch inflater */
	struct buf name;	      /* the current representation's literal name, decoded */
	struct buf strs;	      /* its value, and what masking decodes */
	size_t emitted;		      /* decoded bytes handed on in this block */
	bool unknown;		      /* this block had a field that could not be resolved */
	/* masking a block whose end is still to come (hpack__mask_part) */
	uint8_t *ins;		      /* the name class of each insertion so far in it */
	size_t nins, ins_cap;
	uint32_t whole[WHOLE_MAX];    /* offsets of values cut by a part's end and masked whole */
	size_t nwhole;
	bool all_whole;		      /* more of them than whole[] holds: every value */
};

/* What masking needs to know of a header's name. */
enum name_class { N_OTHER, N_CREDENTIAL, N_PATH, N_UNKNOWN };

/* One representation (RFC 7541 section 6) inside a block. */
struct rep {
	enum { R_INDEXED, R_LITERAL, R_SIZE } kind;
	bool incremental;
	uint32_t index;		/* the field (indexed), the name (literal; 0: literal name) */
	const uint8_t *name;	/* a literal name's string: its length prefix and bytes */
	size_t name_len;
	uint8_t *value;		/* a literal value's string, the same way */
	size_t value_len;
	size_t len;
};

static void entries_clear(struct hpack *h)
{
	for (size_t i = 0; i < h->nent; i++) {
		free(h->ent[i].name);
		free(h->ent[i].value);
	}
	h->nent = 0;
	h->ent_bytes = 0;
}

struct hpack *hpack__new(bool exact)
{
	struct hpack *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	if (nghttp2_hd_inflate_new(&h->scratch) ||
	    (exact && nghttp2_hd_inflate_new(&h->inf))) {
		hpack__free(h);
		return NULL;
	}
	h->exact = exact;
	return h;
}

void hpack__free(struct hpack *h)
{
	if (!h)
		return;
	if (h->inf)
		nghttp2_hd_inflate_del(h->inf);
	if (h->scratch)
		nghttp2_hd_inflate_del(h->scratch);
	entries_clear(h);
	free(h->ent);
	free(h->ins);
	buf__free(&h->tmp);
	buf__free(&h->name);
	buf__free(&h->strs);
	free(h);
}

void hpack__set_max_table(struct hpack *h, uint32_t size)
{
	if (h->inf)
		nghttp2_hd_inflate_change_table_size(h->inf, size < HPACK_TABLE_MAX ? size
										 : HPACK_TABLE_MAX);
}

void hpack__lose(struct hpack *h)
{
	if (h->inf)
		nghttp2_hd_inflate_del(h->inf);
	h->inf = NULL;
	h->exact = false;
	entries_clear(h);
	h->nwhole = 0;
	h->all_whole = false;
}

bool hpack__exact(const struct hpack *h)
{
	return h->exact;
}

/* ---- representations ---- */

/* An integer with an n-bit prefix (RFC 7541 5.1). Returns its bytes, or 0 when malformed. */
static size_t parse_int(const uint8_t *p, size_t len, int n, uint32_t *v)
{
	uint32_t max = (1u << n) - 1, m = 0;
	size_t i = 1;

	if (!len)
		return 0;
	*v = p[0] & max;
	if (*v < max)
		return 1;
	for (; i < len; i++) {
		*v += (uint32_t)(p[i] & 0x7f) << m;
		m += 7;
		if (*v > INT_MAX_VALUE || m > 28)
			return 0;
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return 0;
}

/* A string (length prefix and bytes): its whole size, or 0 when it runs past the block. */
static size_t string_size(const uint8_t *p, size_t len)
{
	uint32_t n;
	size_t k = parse_int(p, len, 7, &n);

	return k && n <= len - k ? k + n : 0;
}

static bool parse_rep(uint8_t *p, size_t len, struct rep *r)
{
	size_t k, s;
	int prefix;

	memset(r, 0, sizeof(*r));
	if (p[0] & 0x80) {
		r->kind = R_INDEXED;
		r->len = parse_int(p, len, 7, &r->index);
		return r->len && r->index;
	}
	if ((p[0] & 0xe0) == 0x20) {
		r->kind = R_SIZE;
		r->len = parse_int(p, len, 5, &r->index);
		return r->len != 0;
	}
	r->kind = R_LITERAL;
	r->incremental = (p[0] & 0xc0) == 0x40;
	prefix = r->incremental ? 6 : 4;
	k = parse_int(p, len, prefix, &r->index);
	if (!k)
		return false;
	if (!r->index) {
		s = string_size(p + k, len - k);
		if (!s)
			return false;
		r->name = p + k;
		r->name_len = s;
		k += s;
	}
	s = string_size(p + k, len - k);
	if (!s)
		return false;
	r->value = p + k;
	r->value_len = s;
	r->len = k + s;
	return true;
}

/* Decode a string (Huffman or not) onto out; its offset there, or -1 when malformed.
 * Huffman strings go through the scratch inflater as a literal without indexing, which
 * leaves its table as it was. */
static long decode_string(struct hpack *h, struct buf *out, const uint8_t *s, size_t n)
{
	static const uint8_t wrap[] = { 0x00, 0x01, 'x' };
	size_t off = out->len, k;
	uint32_t len;
	nghttp2_nv nv;
	int flags = 0;
	ssize_t rv;

	k = parse_int(s, n, 7, &len);
	if (!(s[0] & 0x80)) {
		if (buf__add(out, s + k, len, SIZE_MAX))
			return -1;
		return (long)off;
	}
	buf__reset(&h->tmp);
	if (buf__add(&h->tmp, wrap, sizeof(wrap), SIZE_MAX) || buf__add(&h->tmp, s, n, SIZE_MAX))
		return -1;
	rv = nghttp2_hd_inflate_hd2(h->scratch, &nv, &flags, (uint8_t *)h->tmp.p, h->tmp.len, 1);
	if (rv < 0 || !(flags & NGHTTP2_HD_INFLATE_EMIT) ||
	    buf__add(out, nv.value, nv.valuelen, SIZE_MAX)) {
		/* a failed inflater cannot be reused: a fresh one */
		nghttp2_hd_inflate_del(h->scratch);
		h->scratch = NULL;
		nghttp2_hd_inflate_new(&h->scratch);
		return -1;
	}
	while (!(flags & NGHTTP2_HD_INFLATE_FINAL) && rv >= 0)
		rv = nghttp2_hd_inflate_hd2(h->scratch, &nv, &flags, NULL, 0, 1);
	nghttp2_hd_inflate_end_headers(h->scratch);
	return (long)off;
}

/* Overwrite a literal value's bytes so that it decodes to '*'s (raw or Huffman); of a value
 * cut short (n bytes of it here), the bytes that are here. */
static void mask_value(uint8_t *s, size_t n)
{
	uint32_t len;
	size_t k = parse_int(s, n, 7, &len);
	bool huff = s[0] & 0x80;

	if (!k)
		return;
	for (size_t i = 0; i < len && k + i < n; i++)
		s[k + i] = huff ? HUFFMAN_STAR : '*';
}

/* The length prefix of a Huffman string of n bytes (7-bit prefix, H set); its size. */
static size_t huffman_header(uint8_t *out, size_t n)
{
	size_t k = 0;

	if (n < 127) {
		out[k++] = (uint8_t)(0x80 | n);
		return k;
	}
	out[k++] = 0xff;
	for (n -= 127; n >= 128; n >>= 7)
		out[k++] = (uint8_t)(n | 0x80);
	out[k++] = (uint8_t)n;
	return k;
}

/* The characters the first bits of Huffman bytes v decode to (the bits after them read as
 * padding), appended to h->strs: their offset there, or -1 when they do not decode. */
static long decode_bits(struct hpack *h, const uint8_t *v, size_t bits)
{
	size_t nbytes = (bits + 7) / 8, hn;
	uint8_t *w = malloc(nbytes + 8);
	long off;

	if (!w)
		return -1;
	hn = huffman_header(w, nbytes);
	memcpy(w + hn, v, nbytes);
	if (bits % 8)
		w[hn + nbytes - 1] |= (uint8_t)(0xff >> (bits % 8));
	off = decode_string(h, &h->strs, w, hn + nbytes);
	free(w);
	return off;
}

#define NO_QUERY 0
#define QUERY_UNKNOWN SIZE_MAX
/* The longest Huffman code (RFC 7541 Appendix B) */
#define HUFFMAN_CODE_MAX 30

/*
 * Where the first '?' of Huffman bytes v (n of them, all of a :path or its first part) ends,
 * in bits from the start; NO_QUERY when they hold none, QUERY_UNKNOWN when they do not decode.
 * The characters the bytes hold whole are those of the longest prefix that decodes, found
 * within the last HUFFMAN_CODE_MAX bits. Where '?' ends is found by decoding ever longer
 * prefixes: a prefix that ends inside a code does not decode (its tail is no valid padding),
 * or decodes to fewer characters, so the first one that decodes through the '?' ends at it.
 * Every code is at least 5 bits. Bytes that no longer decode past the '?' (masked in an
 * earlier part while the rest was still to come) are searched the same way from the start.
 */
static size_t query_bit(struct hpack *h, const uint8_t *v, size_t n)
{
	size_t mark = h->strs.len, total = n * 8, keep = 0, bits, lo = 5;
	long off = -1;
	const char *q;

	for (bits = total; off < 0 && bits >= 5 && total - bits <= HUFFMAN_CODE_MAX; bits--)
		off = decode_bits(h, v, bits);
	if (off >= 0) {
		q = memchr(h->strs.p + off, '?', h->strs.len - (size_t)off);
		if (!q) {
			h->strs.len = mark;
			return NO_QUERY;
		}
		keep = (size_t)(q - (h->strs.p + off)) + 1;
		lo = 5 * keep;
	}
	h->strs.len = mark;
	for (; lo <= total; lo++) {
		bool hit;

		off = decode_bits(h, v, lo);
		hit = off >= 0 && (keep ? h->strs.len - (size_t)off == keep
					: h->strs.len > (size_t)off && h->strs.p[h->strs.len - 1] == '?');
		h->strs.len = mark;
		if (hit)
			return lo;
	}
	return QUERY_UNKNOWN;
}

/*
 * A Huffman-coded :path (its string, n bytes of it here) with a query string: the query is
 * overwritten in the bit stream with the 5-bit code of '0' (then 1s, which read as padding),
 * the path up to its '?' left as it was; of a value cut short, the bits that are here. Bytes
 * that do not decode are masked whole, and then it returns true.
 */
static bool mask_huffman_query(struct hpack *h, uint8_t *s, size_t n)
{
	uint32_t len;
	size_t k = parse_int(s, n, 7, &len), lo, bit, end, zeros;
	uint8_t *v = s + k;

	if (!k || k >= n)
		return false;
	end = (k + len < n ? len : n - k) * 8;
	lo = query_bit(h, v, end / 8);
	if (lo == NO_QUERY)
		return false;
	if (lo == QUERY_UNKNOWN) { /* the whole value, rather than a key left in place */
		mask_value(s, n);
		return true;
	}
	/* a value cut here: zeros to the cut, as the whole value's mask will have them there */
	zeros = k + len <= n ? lo + (end - lo) / 5 * 5 : end;
	for (bit = lo; bit < end; bit++) {
		if (bit < zeros)
			v[bit / 8] &= (uint8_t)~(0x80 >> (bit % 8));
		else
			v[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
	}
	return false;
}

/* The name a literal representation refers to, before it is decoded (a literal name into
 * h->name, where decoding the value cannot move it); NULL when unknown. */
static const char *name_of(struct hpack *h, const struct rep *r, size_t *nlen)
{
	const nghttp2_nv *nv;
	long off;

	if (r->kind != R_LITERAL)
		return NULL;
	if (!r->index) {
		buf__reset(&h->name);
		off = decode_string(h, &h->name, r->name, r->name_len);
		if (off < 0)
			return NULL;
		*nlen = h->name.len;
		return h->name.p ? h->name.p : "";
	}
	if (r->index > STATIC_ENTRIES && !h->exact) {
		size_t k = r->index - STATIC_ENTRIES - 1;

		if (k >= h->nent || !h->ent[k].name)
			return NULL;
		*nlen = h->ent[k].nlen;
		return h->ent[k].name;
	}
	nv = nghttp2_hd_inflate_get_table_entry(r->index <= STATIC_ENTRIES ? h->scratch : h->inf,
						r->index);
	if (!nv)
		return NULL;
	*nlen = nv->namelen;
	return (const char *)nv->name;
}

static enum name_class classify(const char *name, size_t nlen)
{
	if (!name)
		return N_UNKNOWN;
	if (http__is_credential(name, nlen))
		return N_CREDENTIAL;
	if (nlen == 5 && !memcmp(name, ":path", 5))
		return N_PATH;
	return N_OTHER;
}

/* A raw :path's query string (of the n bytes of its string here) overwritten with '*'. */
static void mask_raw_query(uint8_t *s, size_t n)
{
	uint32_t vlen;
	size_t k = parse_int(s, n, 7, &vlen);
	uint8_t *end = s + (k + vlen < n ? k + vlen : n), *q;

	if (!k || k >= n)
		return;
	q = memchr(s + k, '?', (size_t)(end - (s + k)));
	if (q)
		for (uint8_t *p = q + 1; p < end; p++)
			*p = '*';
}

/* Masked in place before anything decodes the representation: credentials, values whose name
 * is unknown (they may be credentials), a value masked whole while its block was cut, and
 * what follows the '?' of a :path. */
static void mask_rep(struct hpack *h, const struct rep *r, enum name_class c, bool whole)
{
	if (whole || c == N_CREDENTIAL || c == N_UNKNOWN)
		mask_value(r->value, r->value_len);
	else if (c == N_PATH && (r->value[0] & 0x80))
		mask_huffman_query(h, r->value, r->value_len);
	else if (c == N_PATH)
		mask_raw_query(r->value, r->value_len);
}

static bool masked_whole(const struct hpack *h, size_t off)
{
	if (h->all_whole)
		return true;
	for (size_t i = 0; i < h->nwhole; i++) {
		if (h->whole[i] == off)
			return true;
	}
	return false;
}

/* ---- masking a block whose end has not come yet ---- */

/*
 * The class of the name at a literal's index, in a block whose earlier representations made
 * h->nins insertions: the newest entries are those, and every entry from before the block
 * has moved back by as many (an eviction moves none of those that stay).
 */
static enum name_class class_at(struct hpack *h, uint32_t index)
{
	const nghttp2_nv *nv;

	if (index > STATIC_ENTRIES && index - STATIC_ENTRIES - 1 < h->nins)
		return h->ins[h->nins - 1 - (index - STATIC_ENTRIES - 1)];
	if (index > STATIC_ENTRIES)
		index -= (uint32_t)h->nins;
	if (index > STATIC_ENTRIES && !h->exact) {
		size_t k = index - STATIC_ENTRIES - 1;

		return k < h->nent && h->ent[k].name ? classify(h->ent[k].name, h->ent[k].nlen)
						     : N_UNKNOWN;
	}
	nv = nghttp2_hd_inflate_get_table_entry(index <= STATIC_ENTRIES ? h->scratch : h->inf,
						index);
	return nv ? classify((const char *)nv->name, nv->namelen) : N_UNKNOWN;
}

/* The class of a literal's name: index (0: the literal name string, n bytes of it here);
 * -1 when that string is not all here (nor then is any of the value). */
static int literal_class(struct hpack *h, uint32_t index, const uint8_t *name, size_t n)
{
	long off;
	int c;

	if (index)
		return class_at(h, index);
	if (!string_size(name, n))
		return -1;
	buf__reset(&h->name);
	off = decode_string(h, &h->name, name, n);
	c = off < 0 ? N_UNKNOWN : classify(h->name.p ? h->name.p : "", h->name.len);
	return c;
}

/* A literal cut by the end of the bytes here (n of them, at offset off in its block): the
 * value's bytes that are here, where its name calls for it. A Huffman :path whose bytes here
 * do not decode is masked whole, now and once the block is whole. */
static void mask_cut(struct hpack *h, uint8_t *p, size_t n, size_t off)
{
	uint32_t index, vlen;
	size_t k;
	int c;

	if ((p[0] & 0x80) || (p[0] & 0xe0) == 0x20)
		return; /* an indexed field or a table size: no value */
	k = parse_int(p, n, (p[0] & 0xc0) == 0x40 ? 6 : 4, &index);
	if (!k)
		return;
	c = literal_class(h, index, p + k, n - k);
	if (c < 0)
		return;
	if (!index)
		k += string_size(p + k, n - k);
	if (k >= n || !parse_int(p + k, n - k, 7, &vlen))
		return; /* none of the value's bytes yet */
	if (masked_whole(h, off) || c == N_CREDENTIAL || c == N_UNKNOWN) {
		mask_value(p + k, n - k);
	} else if (c == N_PATH && !(p[k] & 0x80)) {
		mask_raw_query(p + k, n - k);
	} else if (c == N_PATH && mask_huffman_query(h, p + k, n - k)) {
		if (h->nwhole < WHOLE_MAX)
			h->whole[h->nwhole++] = (uint32_t)off;
		else
			h->all_whole = true;
	}
}

void hpack__mask_part(struct hpack *h, uint8_t *block, size_t len)
{
	size_t off = 0;

	h->nins = 0;
	while (off < len) {
		struct rep r;
		int c;

		if (!parse_rep(block + off, len - off, &r)) {
			mask_cut(h, block + off, len - off, off);
			return;
		}
		if (r.kind == R_LITERAL) {
			c = literal_class(h, r.index, r.name, r.name_len);
			mask_rep(h, &r, c < 0 ? N_UNKNOWN : (enum name_class)c, masked_whole(h, off));
			if (r.incremental) {
				if (array__reserve((void **)&h->ins, &h->ins_cap, h->nins + 1, 1))
					h->ins[h->nins++] = (uint8_t)(c < 0 ? N_UNKNOWN : c);
				else /* the names of what follows are not known */
					h->all_whole = true;
			}
		}
		off += r.len;
	}
}

static void emit(struct hpack *h, hpack_field_fn fn, void *ctx, const char *name, size_t nlen,
		 const char *value, size_t vlen, bool known)
{
	struct hpack_field f = { name, value, nlen, vlen, known };

	if (!known)
		h->unknown = true;
	h->emitted += nlen + vlen;
	if (h->emitted > HPACK_LIST_MAX) {
		h->unknown = true;
		return;
	}
	fn(ctx, &f);
}

/* ---- exact: nghttp2 ---- */

static int inflate_exact(struct hpack *h, const uint8_t *p, size_t n, int final,
			 hpack_field_fn fn, void *ctx)
{
	for (;;) {
		nghttp2_nv nv;
		int flags = 0;
		ssize_t rv = nghttp2_hd_inflate_hd2(h->inf, &nv, &flags, p, n, final);

		if (rv < 0)
			return -1;
		if (rv) /* p is NULL for the final call */
			p += rv;
		n -= (size_t)rv;
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			emit(h, fn, ctx, (const char *)nv.name, nv.namelen, (const char *)nv.value,
			     nv.valuelen, true);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			nghttp2_hd_inflate_end_headers(h->inf);
			return 0;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && !n)
			return 0;
	}
}

/* ---- partial: static table, literals, and what was inserted since the join ---- */

static void insert(struct hpack *h, const char *name, size_t nlen, const char *value,
		   size_t vlen)
{
	struct entry e = { NULL, NULL, nlen, vlen };
	size_t size = ENTRY_OVERHEAD + nlen + vlen;

	if (size > HPACK_TABLE_MAX) { /* past any table we keep: the order is lost */
		entries_clear(h);
		return;
	}
	e.value = malloc(vlen + 1);
	if (name)
		e.name = malloc(nlen + 1);
	if (!e.value || (name && !e.name) ||
	    !array__reserve((void **)&h->ent, &h->cap, h->nent + 1, sizeof(*h->ent))) {
		free(e.name);
		free(e.value);
		entries_clear(h); /* an entry missing would shift every later index */
		return;
	}
	memcpy(e.value, value, vlen);
	if (name)
		memcpy(e.name, name, nlen);
	while (h->nent && h->ent_bytes + size > HPACK_TABLE_MAX) { /* drop the oldest we know */
		struct entry *old = &h->ent[--h->nent];

		h->ent_bytes -= ENTRY_OVERHEAD + old->nlen + old->vlen;
		free(old->name);
		free(old->value);
	}
	memmove(h->ent + 1, h->ent, h->nent * sizeof(*h->ent));
	h->ent[0] = e;
	h->nent++;
	h->ent_bytes += size;
}

static int partial_rep(struct hpack *h, const struct rep *r, const char *name, size_t nlen,
		       hpack_field_fn fn, void *ctx)
{
	long voff;

	if (r->kind == R_SIZE) /* evictions move no newer entry: what we know stays known */
		return 0;
	if (r->kind == R_INDEXED) {
		const nghttp2_nv *nv;
		size_t k = r->index - STATIC_ENTRIES - 1;

		if (r->index <= STATIC_ENTRIES) {
			nv = nghttp2_hd_inflate_get_table_entry(h->scratch, r->index);
			emit(h, fn, ctx, (const char *)nv->name, nv->namelen, (const char *)nv->value,
			     nv->valuelen, true);
		} else if (k < h->nent && h->ent[k].name) {
			emit(h, fn, ctx, h->ent[k].name, h->ent[k].nlen, h->ent[k].value,
			     h->ent[k].vlen, true);
		} else {
			emit(h, fn, ctx, NULL, 0, NULL, 0, false);
		}
		return 0;
	}
	voff = decode_string(h, &h->strs, r->value, r->value_len);
	if (voff < 0)
		return -1;
	emit(h, fn, ctx, name, nlen, h->strs.p + voff, h->strs.len - (size_t)voff, name != NULL);
	if (r->incremental)
		insert(h, name, nlen, h->strs.p + voff, h->strs.len - (size_t)voff);
	return 0;
}

enum hpack_status hpack__decode(struct hpack *h, uint8_t *block, size_t len, hpack_field_fn fn,
				void *ctx)
{
	size_t off = 0;
	int err = 0;

	h->emitted = 0;
	h->unknown = false;
	if (!h->scratch)
		return HPACK_NO_MEMORY;
	while (off < len && !err) {
		const char *name = NULL;
		size_t nlen = 0;
		struct rep r;

		if (!parse_rep(block + off, len - off, &r)) {
			h->nins = 0; /* the table is the block's so far */
			mask_cut(h, block + off, len - off, off);
			err = -1;
			break;
		}
		buf__reset(&h->strs);
		if (r.kind == R_LITERAL) {
			name = name_of(h, &r, &nlen);
			mask_rep(h, &r, classify(name, nlen), masked_whole(h, off));
			if (!name && !r.index) {
				err = -1; /* a literal name that does not decode */
				break;
			}
		}
		if (h->exact)
			err = inflate_exact(h, block + off, r.len, 0, fn, ctx);
		else
			err = partial_rep(h, &r, name, nlen, fn, ctx);
		off += r.len;
	}
	if (!err && h->exact)
		err = inflate_exact(h, NULL, 0, 1, fn, ctx);
	h->nwhole = 0;
	h->all_whole = false;
	/* strings of a large block are not kept */
	if (h->strs.cap > 4096)
		buf__free(&h->strs);
	if (h->name.cap > 4096)
		buf__free(&h->name);
	if (h->tmp.cap > 4096)
		buf__free(&h->tmp);
	if (err) {
		hpack__lose(h);
		return HPACK_ERROR;
	}
	return h->unknown ? HPACK_PARTIAL : HPACK_OK;
}
