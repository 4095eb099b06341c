/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Text that is safe on a terminal or in a text file. What comes from traced traffic or
 * processes (model names, paths, error types, command names, file names) could carry escape
 * sequences that retitle, recolour or rewrite the reader's terminal.
 */
#ifndef TS_TEXT_H
#define TS_TEXT_H

#include <stddef.h>

/* s with control bytes (C0, DEL, and C1 as UTF-8: 0xC2 0x80-0x9F) written as \xNN; the rest
 * is kept. Cut to fit out, which TEXT_SAFE_MAX(len) bytes always suffice for. Returns out. */
#define TEXT_SAFE_MAX(len) ((len) * 4 + 16)
const char *text__safe(char *out, size_t n, const char *s);
/* s with every byte outside printable ASCII written as \xNN, for a terminal's fixed-width
 * columns (a UTF-8 byte is one \xNN each). Cut as text__safe. Returns out. */
const char *text__ascii(char *out, size_t n, const char *s);
/* The value of hex digit c (either case), or -1. */
int text__hex_digit(char c);

#endif
