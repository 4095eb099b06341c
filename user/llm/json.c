// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON reader of json.h. Each rule that decides between accepting and refusing follows
 * jansson 2.14's lexer and parser (load.c, utf8.c): the comments name the difference they
 * avoid.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/buf.h"
#include "base/text.h"
#include "llm/json.h"

#define JSON_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */
#define JSON_PAD 16	    /* zero bytes past the input's copy: its NUL, and plain_run_end's reads */

struct parser {
	struct jdoc *d;
	char *p, *end;
	int depth;
};

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

/* A new value at the end; its index, or -1 without memory. */
static long add_value(struct parser *ps, enum jkind kind)
{
	struct jdoc *d = ps->d;

	/* room is there but once in a doubling: no call for it */
	if (d->nv == d->vcap && !array__reserve((void **)&d->v, &d->vcap, d->nv + 1, sizeof(*d->v)))
		return -1;
	d->v[d->nv] = (struct jval){ .kind = kind, .skip = 1 };
	return (long)d->nv++;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The 4 hex digits at p (p + 4 <= end checked by the caller), or -1. */
static long hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int h = text__hex_digit(p[i]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* Length of the UTF-8 sequence that starts with byte c, 0 if none may (utf8_check_first). */
static int utf8_first(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c < 0xC2) /* a continuation byte, or an overlong encoding of ASCII */
		return 0;
	if (c <= 0xDF)
		return 2;
	if (c <= 0xEF)
		return 3;
	if (c <= 0xF4)
		return 4;
	return 0;
}

/* Is the n-byte sequence at s a code point, shortest form, not a surrogate (utf8_check_full)? */
static bool utf8_full(const unsigned char *s, int n)
{
	uint32_t v = n == 2 ? s[0] & 0x1F : n == 3 ? s[0] & 0x0F : s[0] & 0x07;

	for (int i = 1; i < n; i++) {
		if (s[i] < 0x80 || s[i] > 0xBF)
			return false;
		v = v << 6 | (s[i] & 0x3F);
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return false;
	return !((n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && v < 0x10000));
}

static char *put_utf8(char *w, uint32_t cp)
{
	if (cp < 0x80) {
		*w++ = (char)cp;
	} else if (cp < 0x800) {
		*w++ = (char)(0xC0 | cp >> 6);
		*w++ = (char)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		*w++ = (char)(0xE0 | cp >> 12);
		*w++ = (char)(0x80 | (cp >> 6 & 0x3F));
		*w++ = (char)(0x80 | (cp & 0x3F));
	} else {
		*w++ = (char)(0xF0 | cp >> 18);
		*w++ = (char)(0x80 | (cp >> 12 & 0x3F));
		*w++ = (char)(0x80 | (cp >> 6 & 0x3F));
		*w++ = (char)(0x80 | (cp & 0x3F));
	}
	return w;
}

/* One \uXXXX escape (or a surrogate pair of them) at r, just past the 'u'; decoded to *cp. */
static const char *unicode_escape(const char *r, const char *end, uint32_t *cp)
{
	long v, lo;

	if (end - r < 4 || (v = hex4(r)) < 0)
		return NULL;
	r += 4;
	if (v >= 0xDC00 && v <= 0xDFFF)
		return NULL; /* a low surrogate alone */
	if (v >= 0xD800 && v <= 0xDBFF) {
		if (end - r < 6 || r[0] != '\\' || r[1] != 'u' || (lo = hex4(r + 2)) < 0 ||
		    lo < 0xDC00 || lo > 0xDFFF)
			return NULL; /* a high surrogate without its low half */
		v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
		r += 6;
	}
	if (!v)
		return NULL; /* \u0000: jansson wants JSON_ALLOW_NUL for it */
	*cp = (uint32_t)v;
	return r;
}

#ifndef __SSE2__
/* The bytes a JSON string holds as they are: printable ASCII but the quote and the backslash. */
static const bool plain_byte[256] = {
	[0x20 ... '"' - 1] = true,
	['"' + 1 ... '\\' - 1] = true,
	['\\' + 1 ... 0x7f] = true,
};
#endif

/*
 * The first byte at or after r (r < end) that does not stand for itself, or end. The copy of
 * the input has JSON_PAD zero bytes past its end, so that 16 bytes can be read at any r before
 * it. With SSE2 16 bytes are tested at once: the quote, the backslash, and (compared as signed
 * bytes, below 0x20) both the control characters and every byte from 0x80 on.
 */
static char *plain_run_end(char *r, const char *end)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
		      space = _mm_set1_epi8(0x20);

	while (r < end) {
		__m128i b = _mm_loadu_si128((const __m128i *)r);
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(b, quote), _mm_cmpeq_epi8(b, backslash)),
			_mm_cmplt_epi8(b, space)));

		if (m)
			return r + __builtin_ctz(m) < end ? r + __builtin_ctz(m) : (char *)end;
		r += 16;
	}
	return (char *)end;
#else
	while (r < end && plain_byte[(unsigned char)*r])
		r++;
	return r;
#endif
}

/* A string at ps->p (its opening quote), decoded in place and NUL-terminated. */
static bool parse_string(struct parser *ps)
{
	char *r = ps->p + 1, *w = r, *start = r;
	long idx = add_value(ps, J_STRING);

	if (idx < 0)
		return false;
	for (;;) {
		unsigned char c;
		char *run = r;

		/* a run of bytes that stand for themselves, moved at once (not at all before the
		 * first escape, where w is r) */
		r = plain_run_end(r, ps->end);
		if (w != run)
			memmove(w, run, (size_t)(r - run));
		w += r - run;
		if (r >= ps->end)
			return false;
		c = (unsigned char)*r;
		if (c == '"')
			break;
		if (c < 0x20)
			return false; /* control characters must be escaped */
		if (c == '\\') {
			static const char plain[] = "\"\\/bfnrt", meaning[] = "\"\\/\b\f\n\r\t";
			const char *m;
			uint32_t cp;

			if (++r >= ps->end)
				return false;
			if (*r == 'u') {
				r = (char *)unicode_escape(r + 1, ps->end, &cp);
				if (!r)
					return false;
				w = put_utf8(w, cp);
				continue;
			}
			m = *r ? strchr(plain, *r) : NULL;
			if (!m)
				return false;
			*w++ = meaning[m - plain];
			r++;
		} else if (c < 0x80) {
			*w++ = *r++;
		} else {
			int n = utf8_first(c);

			if (!n || ps->end - r < n || !utf8_full((unsigned char *)r, n))
				return false;
			while (n--)
				*w++ = *r++;
		}
	}
	*w = 0; /* w <= r: the closing quote or before */
	ps->d->v[idx].s = start;
	ps->d->v[idx].n = (uint32_t)(w - start);
	ps->p = r + 1;
	return true;
}

/*
 * jansson reads one byte past a number or a word and puts it back; a NUL byte put back reads
 * as the end of its one-byte buffer, and the next byte is read in its place: one NUL right
 * after a number, true, false or null is skipped ([1\0] is [1]). Kept, so that a reply is
 * read as it was before.
 */
static char *skip_nul_after_token(char *p, const char *end)
{
	return p < end && !*p ? p + 1 : p;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?: an integer that fits a long long, or a real
 * that does not overflow a double (jansson refuses both others). */
static bool parse_number(struct parser *ps)
{
	char *start = ps->p, *p = ps->p, *end = ps->end, saved;
	bool neg = false, real = false;
	unsigned long long mag = 0;
	long idx;

	if (*p == '-') {
		neg = true;
		p++;
	}
	if (p < end && *p == '0') {
		p++;
		if (p < end && is_digit(*p))
			return false; /* a leading zero */
	} else if (p < end && is_digit(*p)) {
		while (p < end && is_digit(*p)) {
			unsigned d = (unsigned)(*p++ - '0');

			if (mag > (~0ull - d) / 10)
				mag = ~0ull; /* far too big: refused below, unless it is a real */
			else
				mag = mag * 10 + d;
		}
	} else {
		return false;
	}
	if (p < end && *p == '.') {
		if (++p >= end || !is_digit(*p))
			return false;
		while (p < end && is_digit(*p))
			p++;
		real = true;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || !is_digit(*p))
			return false;
		while (p < end && is_digit(*p))
			p++;
		real = true;
	}
	idx = add_value(ps, real ? J_REAL : J_INT);
	if (idx < 0)
		return false;
	ps->p = skip_nul_after_token(p, end);
	if (!real) {
		if (mag > (neg ? 1ull << 63 : (1ull << 63) - 1))
			return false; /* "too big integer" */
		ps->d->v[idx].i = neg ? (long long)(0 - mag) : (long long)mag;
		return true;
	}
	saved = *p; /* the copy has a byte past the input: room for the NUL */
	*p = 0;
	errno = 0;
	ps->d->v[idx].d = strtod(start, NULL);
	*p = saved;
	/* "real number overflow"; an underflow to 0 is accepted */
	return !(errno == ERANGE && isinf(ps->d->v[idx].d));
}

/* true, false, null: jansson reads a run of letters and compares it whole. */
static bool parse_literal(struct parser *ps)
{
	static const struct {
		const char *word;
		enum jkind kind;
	} words[] = { { "true", J_TRUE }, { "false", J_FALSE }, { "null", J_NULL } };
	char *p = ps->p;
	size_t n;

	while (p < ps->end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
		p++;
	n = (size_t)(p - ps->p);
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strlen(words[i].word) == n && !memcmp(ps->p, words[i].word, n)) {
			ps->p = skip_nul_after_token(p, ps->end);
			return add_value(ps, words[i].kind) >= 0;
		}
	}
	return false;
}

static bool parse_value(struct parser *ps);

/* An array or an object at ps->p: '[' or '{'. */
static bool parse_container(struct parser *ps)
{
	bool object = *ps->p == '{';
	char close = object ? '}' : ']';
	long idx = add_value(ps, object ? J_OBJECT : J_ARRAY);
	uint32_t n = 0;

	if (idx < 0)
		return false;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
	} else {
		for (;;) {
			if (object) {
				if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps))
					return false;
				skip_ws(ps);
				if (ps->p >= ps->end || *ps->p != ':')
					return false;
				ps->p++;
			}
			if (!parse_value(ps))
				return false;
			n++;
			skip_ws(ps);
			if (ps->p >= ps->end)
				return false;
			if (*ps->p == close) {
				ps->p++;
				break;
			}
			if (*ps->p != ',')
				return false;
			ps->p++;
			skip_ws(ps);
		}
	}
	ps->d->v[idx].n = n;
	ps->d->v[idx].skip = (uint32_t)(ps->d->nv - (size_t)idx);
	return true;
}

/* Every value counts for the depth, a scalar too (jansson's parse_value), keys do not. */
static bool parse_value(struct parser *ps)
{
	bool ok;

	skip_ws(ps);
	if (ps->p >= ps->end)
		return false;
	if (++ps->depth > JSON_MAX_DEPTH) {
		ps->d->too_deep = true;
		return false;
	}
	switch (*ps->p) {
	case '{':
	case '[':
		ok = parse_container(ps);
		break;
	case '"':
		ok = parse_string(ps);
		break;
	case '-':
	case '0' ... '9':
		ok = parse_number(ps);
		break;
	default:
		ok = parse_literal(ps);
		break;
	}
	ps->depth--;
	return ok;
}

/* What a document keeps between parses: the usual event fits; a 1 MiB prompt read once is
 * given back at the next small parse. */
#define JDOC_KEEP 65536

static void release(struct jdoc *d)
{
	free(d->text);
	free(d->v);
	d->text = NULL;
	d->v = NULL;
	d->textcap = d->vcap = d->nv = 0;
}

static const struct jval *parse_doc(struct jdoc *d, const char *buf, size_t len)
{
	struct parser ps = { .d = d };

	if (len < JDOC_KEEP && (d->textcap > JDOC_KEEP || d->vcap > JDOC_KEEP))
		release(d);

	if (len + JSON_PAD > d->textcap) {
		char *t = realloc(d->text, len + JSON_PAD);

		if (!t)
			return NULL;
		d->text = t;
		d->textcap = len + JSON_PAD;
	}
	memcpy(d->text, buf, len);
	memset(d->text + len, 0, JSON_PAD);
	d->nv = 0;
	d->too_deep = false;
	ps.p = d->text;
	ps.end = d->text + len;
	skip_ws(&ps);
	/* jansson without JSON_DECODE_ANY: an object or an array, then only white space */
	if (ps.p >= ps.end || (*ps.p != '{' && *ps.p != '['))
		return NULL;
	if (!parse_value(&ps))
		return NULL;
	skip_ws(&ps);
	return ps.p == ps.end ? d->v : NULL;
}

/*
 * The recent documents: direct-mapped by a hash of the input's bytes, each with a copy of the
 * bytes it was parsed from, compared whole before it answers. 128 of them cover the events in
 * flight between a write and its reads across a relay of 32 streams at a time. Only parses
 * that succeeded are kept: a refusal is parsed again, for its reason (too_deep).
 */
#define JDOC_RECENT_BITS 7
#define JDOC_RECENT (1u << JDOC_RECENT_BITS)
#define JDOC_RECENT_MAX 4096 /* bytes: a larger input (a prompt) is parsed in d itself */

struct jdoc_recent {
	struct jdoc doc;
	char *raw; /* the bytes doc was parsed from */
	size_t len, rawcap;
	uint64_t hash;
	bool ok; /* doc holds raw's parse */
};

/* 8 bytes at a time; the slot is taken from the top bits, which every input bit reaches. */
static uint64_t bytes_hash(const char *b, size_t n)
{
	uint64_t h = (n + 1) * 0x9e3779b97f4a7c15ull, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
	}
	w = 0;
	memcpy(&w, b + i, n - i);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 31);
}

bool jdoc__keep_recent(struct jdoc *d)
{
	if (!d->recent)
		d->recent = calloc(JDOC_RECENT, sizeof(*d->recent));
	return d->recent;
}

static const struct jval *parse_recent(struct jdoc *d, const char *buf, size_t len)
{
	uint64_t h = bytes_hash(buf, len);
	struct jdoc_recent *s = &d->recent[h >> (64 - JDOC_RECENT_BITS)];
	const struct jval *v;

	d->too_deep = false;
	if (s->ok && s->len == len && s->hash == h && !memcmp(s->raw, buf, len)) {
		d->recent_hits++;
		return s->doc.v;
	}
	s->ok = false;
	v = parse_doc(&s->doc, buf, len);
	d->too_deep = s->doc.too_deep;
	if (!v)
		return NULL;
	if (len > s->rawcap) {
		char *raw = realloc(s->raw, JDOC_RECENT_MAX);

		if (!raw)
			return v; /* answered, not kept */
		s->raw = raw;
		s->rawcap = JDOC_RECENT_MAX;
	}
	memcpy(s->raw, buf, len);
	s->len = len;
	s->hash = h;
	s->ok = true;
	return v;
}

const struct jval *jdoc__parse(struct jdoc *d, const char *buf, size_t len)
{
	if (d->recent && len <= JDOC_RECENT_MAX)
		return parse_recent(d, buf, len);
	return parse_doc(d, buf, len);
}

void jdoc__free(struct jdoc *d)
{
	release(d);
	if (d->recent) {
		for (size_t i = 0; i < JDOC_RECENT; i++) {
			release(&d->recent[i].doc);
			free(d->recent[i].raw);
		}
		free(d->recent);
	}
	*d = (struct jdoc){ 0 };
}
