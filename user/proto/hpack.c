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
};

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

/* Overwrite a literal value's bytes so that it decodes to '*'s (raw or Huffman). */
static void mask_value(uint8_t *s, size_t n)
{
	uint32_t len;
	size_t k = parse_int(s, n, 7, &len);
	bool huff = s[0] & 0x80;

	for (size_t i = 0; i < len; i++)
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

/* How many characters the first bits of Huffman bytes v decode to (the bits after them read
 * as padding); -1 when they do not decode. */
static long huffman_prefix_len(struct hpack *h, const uint8_t *v, size_t bits)
{
	size_t nbytes = (bits + 7) / 8, hn, start = h->strs.len;
	uint8_t *w = malloc(nbytes + 8);
	long off, n = -1;

	if (!w)
		return -1;
	hn = huffman_header(w, nbytes);
	memcpy(w + hn, v, nbytes);
	if (bits % 8)
		w[hn + nbytes - 1] |= (uint8_t)(0xff >> (bits % 8));
	off = decode_string(h, &h->strs, w, hn + nbytes);
	if (off >= 0)
		n = (long)(h->strs.len - (size_t)off);
	h->strs.len = start; /* the probe's text is not kept */
	free(w);
	return n;
}

/*
 * A Huffman-coded :path with a query string: the query is overwritten in the bit stream with
 * the 5-bit code of '0' (then 1s, which read as padding), the path up to its '?' (keep
 * characters) left as it was. Where those characters end in the bits is found by decoding
 * ever longer prefixes of them: a prefix that ends inside a code does not decode (its tail
 * is no valid padding), so the first one that decodes to keep characters ends at the '?'.
 * Every code is at least 5 bits, so the search starts at 5 * keep.
 */
static void mask_huffman_query(struct hpack *h, uint8_t *s, size_t n, size_t keep)
{
	uint32_t len;
	size_t k = parse_int(s, n, 7, &len), lo, bit, end = 0, zeros;
	uint8_t *v = s + k;

	for (lo = 5 * keep; lo <= (size_t)len * 8; lo++) {
		if (huffman_prefix_len(h, v, lo) == (long)keep) {
			end = (size_t)len * 8;
			break;
		}
	}
	if (!end) { /* not found: the whole value, rather than a key left in place */
		mask_value(s, n);
		return;
	}
	end = (size_t)len * 8;
	zeros = lo + (end - lo) / 5 * 5;
	for (bit = lo; bit < end; bit++) {
		if (bit < zeros)
			v[bit / 8] &= (uint8_t)~(0x80 >> (bit % 8));
		else
			v[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
	}
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

/* Credentials masked in place before anything decodes the representation; a :path keeps
 * what comes before its query string. */
static void mask_credentials(struct hpack *h, const struct rep *r, const char *name,
			     size_t nlen)
{
	size_t mark = h->strs.len;
	const char *q;
	uint32_t vlen;
	size_t k;
	long off;

	if (http__is_credential(name, nlen)) {
		mask_value(r->value, r->value_len);
		return;
	}
	if (nlen != 5 || memcmp(name, ":path", 5))
		return;
	k = parse_int(r->value, r->value_len, 7, &vlen);
	if (!(r->value[0] & 0x80)) {
		q = memchr(r->value + k, '?', vlen);
		if (q)
			for (uint8_t *p = (uint8_t *)q + 1; p < r->value + k + vlen; p++)
				*p = '*';
		return;
	}
	off = decode_string(h, &h->strs, r->value, r->value_len);
	q = off < 0 ? NULL : memchr(h->strs.p + off, '?', h->strs.len - (size_t)off);
	if (q)
		mask_huffman_query(h, r->value, r->value_len, (size_t)(q - (h->strs.p + off)) + 1);
	h->strs.len = mark;
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
			err = -1;
			break;
		}
		buf__reset(&h->strs);
		if (r.kind == R_LITERAL) {
			name = name_of(h, &r, &nlen);
			if (!name && !r.index) {
				err = -1; /* a literal name that does not decode */
				break;
			}
			if (name)
				mask_credentials(h, &r, name, nlen);
		}
		if (h->exact)
			err = inflate_exact(h, block + off, r.len, 0, fn, ctx);
		else
			err = partial_rep(h, &r, name, nlen, fn, ctx);
		off += r.len;
	}
	if (!err && h->exact)
		err = inflate_exact(h, NULL, 0, 1, fn, ctx);
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
