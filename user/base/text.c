// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdio.h>

#include "base/text.h"

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
