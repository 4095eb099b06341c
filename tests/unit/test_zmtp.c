// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ZMTP 3.x framing (proto/zmtp.c) and MessagePack (proto/msgpack.c): a conversation as libzmq
 * writes it (greeting, READY, multi-part messages with short and long frames), fed whole, cut
 * at every byte and byte by byte; joined mid-stream; malformed input; msgpack's every format,
 * and inputs that must not run a reader off its bytes or its stack.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/msgpack.h"
#include "proto/zmtp.h"

/* What the reader handed on, as text: "G3.1 NULL s;", "C READY 22 DEALER;",
 * "M[5:00,3+:ab]d0(1,2);" (each frame's length, '+' when cut, first byte; frames dropped;
 * the message's first and last byte's times) */
struct seen {
	char text[8192];
};

static void add(struct seen *s, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(s->text);

	va_start(ap, fmt);
	vsnprintf(s->text + n, sizeof(s->text) - n, fmt, ap);
	va_end(ap);
}

static void on_greeting(void *ctx, const struct zmtp_greeting *g)
{
	add(ctx, "G%u.%u %s %s;", g->major, g->minor, g->mechanism, g->as_server ? "s" : "c");
}

static void on_command(void *ctx, const char *name, const uint8_t *data, size_t len,
		       uint64_t ts)
{
	const uint8_t *v;
	uint32_t vlen;

	add(ctx, "C %s %zu", name, len);
	if (!strcmp(name, "READY") && zmtp__property(data, len, "socket-type", &v, &vlen) == 1)
		add(ctx, " %.*s", (int)vlen, (const char *)v);
	add(ctx, ";");
}

/* Each frame's length, a '+' when cut, its first byte; the message's times. */
static void on_message(void *ctx, const struct zmtp_message *m)
{
	add(ctx, "M[");
	for (size_t i = 0; i < m->nframes; i++)
		add(ctx, "%s%llu%s:%02x", i ? "," : "", (unsigned long long)m->frames[i].len,
		    m->frames[i].cut ? "+" : "", m->frames[i].len ? m->frames[i].data[0] : 0);
	add(ctx, "]d%zu(%llu,%llu);", m->frames_dropped, (unsigned long long)m->start_ns,
	    (unsigned long long)m->end_ns);
}

static const struct zmtp_callbacks cb = { on_greeting, on_command, on_message };

/* A growing byte string. */
struct bytes {
	uint8_t b[1 << 16];
	size_t n;
};

static void put(struct bytes *w, const void *p, size_t n)
{
	assert_true(w->n + n <= sizeof(w->b));
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void greeting(struct bytes *w, bool as_server)
{
	uint8_t g[ZMTP_GREETING_LEN] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 1, 'N', 'U', 'L',
					 'L' };

	g[32] = as_server;
	put(w, g, sizeof(g));
}

/* A frame: flags (MORE 1, COMMAND 4), long when asked or needed. */
static void frame(struct bytes *w, uint8_t flags, const void *body, size_t n, bool force_long)
{
	uint8_t hdr[9];

	if (n > 255 || force_long) {
		hdr[0] = flags | 2;
		for (int i = 0; i < 8; i++)
			hdr[1 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
		put(w, hdr, 9);
	} else {
		hdr[0] = flags;
		hdr[1] = (uint8_t)n;
		put(w, hdr, 2);
	}
	put(w, body, n);
}

static void ready(struct bytes *w, const char *socket_type)
{
	uint8_t c[64] = { 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k', 'e', 't', '-', 'T',
			  'y', 'p', 'e', 0, 0, 0 };
	size_t n = strlen(socket_type);

	c[21] = (uint8_t)n;
	memcpy(c + 22, socket_type, n);
	frame(w, 4, c, 22 + n, false);
}

/* The engine's side of vLLM's input socket, as libzmq writes it: a greeting, READY, then an
 * ADD request (type byte, a msgpack body, an aux frame of 300 bytes), a one-frame message, an
 * empty frame, and a long frame with a short body. */
static void conversation(struct bytes *w)
{
	static uint8_t aux[300], body[] = { 0x92, 0xa2, 'r', '1', 0x93, 1, 2, 3 };

	memset(aux, 0xab, sizeof(aux));
	greeting(w, false);
	ready(w, "DEALER");
	frame(w, 1, "\x00", 1, false);
	frame(w, 1, body, sizeof(body), false);
	frame(w, 0, aux, sizeof(aux), false);
	frame(w, 0, "\x01", 1, false);
	frame(w, 1, "", 0, false);
	frame(w, 0, "z", 1, true);
}

static const char *want =
	"G3.1 NULL c;C READY 22 DEALER;M[1:00,8:92,300:ab]d0(2,2);M[1:01]d0(2,2);"
	"M[0:00,1:7a]d0(2,2);";

/* Fed cut at k (k = 0: whole; SIZE_MAX: byte by byte): the first piece at time 1, the rest
 * at 2. */
static void feed_split(const struct bytes *w, size_t k, struct seen *out)
{
	struct zmtp *z = zmtp__new(&cb, out, true);

	assert_non_null(z);
	memset(out, 0, sizeof(*out));
	if (k == SIZE_MAX) {
		for (size_t i = 0; i < w->n; i++)
			assert_int_equal(zmtp__feed(z, w->b + i, 1, i < 1 ? 1 : 2), ZMTP_OK);
	} else if (k == 0 || k >= w->n) {
		assert_int_equal(zmtp__feed(z, w->b, w->n, 1), ZMTP_OK);
	} else {
		assert_int_equal(zmtp__feed(z, w->b, k, 1), ZMTP_OK);
		assert_int_equal(zmtp__feed(z, w->b + k, w->n - k, 2), ZMTP_OK);
	}
	zmtp__free(z);
}

static void test_every_cut(void **state)
{
	struct bytes *w = calloc(1, sizeof(*w));
	struct seen s;

	conversation(w);
	feed_split(w, 0, &s);
	assert_string_equal(s.text, "G3.1 NULL c;C READY 22 DEALER;M[1:00,8:92,300:ab]d0(1,1);"
				    "M[1:01]d0(1,1);M[0:00,1:7a]d0(1,1);");
	/* cut at the first message's first byte: it starts and ends at 2 */
	feed_split(w, 64 + 2 + 28, &s);
	assert_string_equal(s.text, "G3.1 NULL c;C READY 22 DEALER;M[1:00,8:92,300:ab]d0(2,2);"
				    "M[1:01]d0(2,2);M[0:00,1:7a]d0(2,2);");
	/* byte by byte: the same messages, each ending where its last byte came */
	feed_split(w, SIZE_MAX, &s);
	assert_string_equal(s.text, want);
	/* every cut gives the same messages (times aside) */
	for (size_t k = 1; k < w->n; k++) {
		char *a, *b;

		feed_split(w, k, &s);
		a = strstr(s.text, "M[1:00,8:92,300:ab]");
		b = strstr(s.text, "M[0:00,1:7a]");
		assert_non_null(a);
		assert_non_null(b);
		assert_non_null(strstr(s.text, "C READY 22 DEALER;"));
	}
	free(w);
}

/* Joined after the greeting: pieces that do not start a message are skipped (counted); one
 * that begins and ends messages starts the reading. */
static void test_joined_midstream(void **state)
{
	struct bytes *w = calloc(1, sizeof(*w));
	struct zmtp *z = zmtp__new(&cb, NULL, false);
	struct seen s = { 0 };
	size_t first;

	assert_non_null(w);
	frame(w, 1, "\x00", 1, false);
	frame(w, 0, "abcdef", 6, false);
	first = w->n;
	frame(w, 0, "\x01", 1, false);
	zmtp__free(z);
	z = zmtp__new(&cb, &s, false);
	/* the middle of the first message's second frame: no message start */
	assert_int_equal(zmtp__feed(z, w->b + 5, first - 5, 1), ZMTP_OK);
	assert_int_equal(zmtp__skipped(z), first - 5);
	/* the next piece is a whole message */
	assert_int_equal(zmtp__feed(z, w->b + first, w->n - first, 2), ZMTP_OK);
	assert_string_equal(s.text, "M[1:01]d0(2,2);");
	/* and the reading goes on */
	assert_int_equal(zmtp__feed(z, w->b, first, 3), ZMTP_OK);
	assert_string_equal(s.text, "M[1:01]d0(2,2);M[1:00,6:61]d0(3,3);");
	zmtp__free(z);
	/* never a message start: after ZMTP_RESYNC_MAX it says it cannot */
	z = zmtp__new(&cb, &s, false);
	memset(w->b, 0xff, sizeof(w->b));
	for (size_t fed = 0; fed <= ZMTP_RESYNC_MAX; fed += sizeof(w->b)) {
		enum zmtp_state e = zmtp__feed(z, w->b, sizeof(w->b), 4);

		assert_int_equal(e, fed + sizeof(w->b) > ZMTP_RESYNC_MAX ? ZMTP_ERR_RESYNC : ZMTP_OK);
	}
	zmtp__free(z);
	free(w);
}

/* Frames longer than what is kept, and more frames than are handed on. */
static void test_limits(void **state)
{
	struct bytes *w = calloc(1, sizeof(*w));
	struct zmtp *z;
	struct seen s = { 0 };
	uint8_t hdr[9] = { 2, 0, 0, 0, 0, 0, 0x20, 0, 0 }; /* a long frame of 2 MiB */
	static uint8_t chunk[1 << 16];

	for (int i = 0; i < ZMTP_FRAMES_MAX + 3; i++)
		frame(w, i < ZMTP_FRAMES_MAX + 2 ? 1 : 0, "x", 1, false);
	z = zmtp__new(&cb, &s, false);
	assert_int_equal(zmtp__feed(z, w->b, w->n, 1), ZMTP_OK);
	assert_non_null(strstr(s.text, "]d3(1,1);"));
	memset(s.text, 0, sizeof(s.text));
	assert_int_equal(zmtp__feed(z, hdr, sizeof(hdr), 2), ZMTP_OK);
	memset(chunk, 0x5a, sizeof(chunk));
	for (int i = 0; i < 32; i++)
		assert_int_equal(zmtp__feed(z, chunk, sizeof(chunk), 3), ZMTP_OK);
	assert_string_equal(s.text, "M[2097152+:5a]d0(2,3);");
	zmtp__free(z);
	free(w);
}

static void test_malformed(void **state)
{
	struct seen s = { 0 };
	struct zmtp *z = zmtp__new(&cb, &s, true);
	static const uint8_t http[] = "GET / HTTP/1.1\r\n";
	static const uint8_t reserved[] = { 0x08, 1, 'x' }, command_more[] = { 0x05, 1, 1 },
			     no_name[] = { 0x04, 1, 0 };

	assert_true(zmtp__looks_like_greeting((const uint8_t *)"\xff", 1));
	assert_false(zmtp__looks_like_greeting(http, sizeof(http) - 1));
	assert_int_equal(zmtp__feed(z, http, sizeof(http) - 1, 1), ZMTP_ERR_GREETING);
	assert_int_equal(zmtp__feed(z, http, 1, 2), ZMTP_ERR_GREETING); /* stays stopped */
	zmtp__free(z);
	z = zmtp__new(&cb, &s, false);
	assert_int_equal(zmtp__feed(z, (const uint8_t *)"\x00\x01x", 3, 1), ZMTP_OK);
	assert_int_equal(zmtp__feed(z, reserved, sizeof(reserved), 1), ZMTP_ERR_FRAME);
	zmtp__free(z);
	z = zmtp__new(&cb, &s, false);
	assert_int_equal(zmtp__feed(z, (const uint8_t *)"\x00\x01x", 3, 1), ZMTP_OK);
	assert_int_equal(zmtp__feed(z, command_more, sizeof(command_more), 1), ZMTP_ERR_FRAME);
	zmtp__free(z);
	z = zmtp__new(&cb, &s, false);
	assert_int_equal(zmtp__feed(z, (const uint8_t *)"\x00\x01x", 3, 1), ZMTP_OK);
	assert_int_equal(zmtp__feed(z, no_name, sizeof(no_name), 1), ZMTP_ERR_FRAME);
	zmtp__free(z);
	/* a READY whose property claims more bytes than there are */
	{
		static const uint8_t bad[] = { 2, 'a', 'b', 0, 0, 1, 0, 'x' };
		const uint8_t *v;
		uint32_t vlen;

		assert_int_equal(zmtp__property(bad, sizeof(bad), "ab", &v, &vlen), -1);
		assert_int_equal(zmtp__property(bad, 0, "ab", &v, &vlen), 0);
	}
}

/* ---- MessagePack ---- */

static void test_msgpack_formats(void **state)
{
	/* [nil, true, false, 7, -3, 200, -200, 70000, -70000, 2^40, -2^40, 1.5f, 2.25,
	 *  "ab", bin "xyz", {"k": [1]}, ext(5, "q"), str8 "s", uint64 max] */
	static const uint8_t in[] = {
		0xdc, 0x00, 0x13, 0xc0, 0xc3, 0xc2, 0x07, 0xfd, 0xcc, 0xc8, 0xd1, 0xff, 0x38,
		0xce, 0x00, 0x01, 0x11, 0x70, 0xd2, 0xff, 0xfe, 0xee, 0x90, 0xcf, 0, 0, 0x01, 0,
		0, 0, 0, 0, 0xd3, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0xca, 0x3f, 0xc0, 0, 0,
		0xcb, 0x40, 0x02, 0, 0, 0, 0, 0, 0, 0xa2, 'a', 'b', 0xc4, 3, 'x', 'y', 'z',
		0x81, 0xa1, 'k', 0x91, 0x01, 0xd4, 0x05, 'q', 0xd9, 1, 's',
		0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};
	const uint8_t *p = in, *end = in + sizeof(in);
	struct mp_obj o;
	int64_t i;
	double f;

	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_int_equal(o.type, MP_ARRAY);
	assert_int_equal(o.len, 19);
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_int_equal(o.type, MP_NIL);
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(o.type == MP_BOOL && o.v.b);
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(o.type == MP_BOOL && !o.v.b);
	{
		static const int64_t ints[] = { 7, -3, 200, -200, 70000, -70000, 1ll << 40,
						-(1ll << 40) };

		for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
			assert_int_equal(mp__next(&p, end, &o), 0);
			assert_true(mp__int(&o, &i));
			assert_int_equal(i, ints[k]);
		}
	}
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(mp__number(&o, &f) && f == 1.5);
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(mp__number(&o, &f) && f == 2.25);
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(mp__str_is(&o, "ab"));
	assert_false(mp__str_is(&o, "abc"));
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(o.type == MP_BIN && o.len == 3 && !memcmp(o.p, "xyz", 3));
	assert_int_equal(mp__skip(&p, end), 0); /* the map, its array too */
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(o.type == MP_EXT && o.ext_type == 5 && o.len == 1 && o.p[0] == 'q');
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(mp__str_is(&o, "s"));
	assert_int_equal(mp__next(&p, end, &o), 0);
	assert_true(o.type == MP_UINT && o.v.u == UINT64_MAX);
	assert_false(mp__int(&o, &i)); /* past INT64_MAX */
	assert_ptr_equal(p, end);
	/* the whole array skipped at once */
	p = in;
	assert_int_equal(mp__skip(&p, end), 0);
	assert_ptr_equal(p, end);
}

/* Cut at every byte, an object never reads past the end; counts larger than the input, and
 * nesting past MP_DEPTH_MAX, fail instead of running on. */
static void test_msgpack_hostile(void **state)
{
	static const uint8_t in[] = { 0x93, 0xa3, 'a', 'b', 'c', 0xcd, 0x01, 0x00, 0x81, 0xc0,
				      0xcb, 0, 0, 0, 0, 0, 0, 0, 0 };
	static uint8_t deep[MP_DEPTH_MAX + 2];
	static const uint8_t huge[] = { 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0 },
			     bad_str[] = { 0xdb, 0xff, 0xff, 0xff, 0xff, 'x' },
			     never[] = { 0xc1 };
	const uint8_t *p;

	for (size_t n = 0; n < sizeof(in); n++) {
		uint8_t *cut = malloc(n ? n : 1);

		memcpy(cut, in, n);
		p = cut;
		assert_int_equal(mp__skip(&p, cut + n), -1);
		assert_true(p <= cut + n);
		free(cut);
	}
	p = in;
	assert_int_equal(mp__skip(&p, in + sizeof(in)), 0);
	memset(deep, 0x91, sizeof(deep) - 1); /* [[[[...nil]]]] */
	deep[sizeof(deep) - 1] = 0xc0;
	p = deep;
	assert_int_equal(mp__skip(&p, deep + sizeof(deep)), -1);
	p = deep + 2; /* MP_DEPTH_MAX arrays and a nil: fine */
	assert_int_equal(mp__skip(&p, deep + sizeof(deep)), 0);
	p = huge;
	assert_int_equal(mp__skip(&p, huge + sizeof(huge)), -1);
	p = bad_str;
	assert_int_equal(mp__skip(&p, bad_str + sizeof(bad_str)), -1);
	p = never;
	assert_int_equal(mp__skip(&p, never + 1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_cut),
		cmocka_unit_test(test_joined_midstream),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_msgpack_formats),
		cmocka_unit_test(test_msgpack_hostile),
	};

	return cmocka_run_group_tests_name("zmtp", tests, NULL, NULL);
}
