/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the libFuzzer targets share: the input cut into pieces the way captures cut bytes. */
#ifndef TS_FUZZ_H
#define TS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The input as [u8 len][len bytes]... pieces (a length past the end takes the rest): each
 * call hands one piece to fn, with its index. */
static inline void fuzz_pieces(const uint8_t *data, size_t size,
			       void (*fn)(void *ctx, size_t i, uint8_t *p, size_t n), void *ctx)
{
	uint8_t buf[256];
	size_t i = 0;

	while (size) {
		size_t n = data[0];

		data++;
		size--;
		if (n > size)
			n = size;
		for (size_t k = 0; k < n; k++)
			buf[k] = data[k];
		fn(ctx, i++, buf, n);
		data += n;
		size -= n;
	}
}

#endif
