// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdio.h>

#include "base/text.h"

int text__hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

const char *text__safe(char *out, size_t n, const char *s)
{
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && o + 9 < n; p++) {
		bool c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f;

		if (*p < 0x20 || *p == 0x7f || c1) {
			o += snprintf(out + o, n - o, "\\x%02x", *p);
			if (c1)
				o += snprintf(out + o, n - o, "\\x%02x", *++p);
		} else {
			out[o++] = (char)*p;
		}
	}
	out[o] = 0;
	return out;
}

const char *text__ascii(char *out, size_t n, const char *s)
{
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < n; p++) {
		if (*p < 0x20 || *p > 0x7e)
			o += snprintf(out + o, n - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = 0;
	return out;
}
