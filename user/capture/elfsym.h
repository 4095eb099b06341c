/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Exported function symbols of an ELF file, as the file offsets uprobes attach at. */
#ifndef TS_ELFSYM_H
#define TS_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Look up each name in names[] among the file's defined function symbols (.dynsym, then
 * .symtab) and store its file offset in offsets[i], or 0 when absent.
 * Returns how many were found, or -errno when the file is not a readable ELF file (-E2BIG:
 * more than 256 names asked for at once).
 */
int elfsym__offsets(const char *path, const char *const names[], size_t n, uint64_t offsets[]);

/* The same in .dynsym alone: through its GNU hash table, microseconds even for node, whose
 * .symtab takes milliseconds to scan. */
int elfsym__dynamic_offsets(const char *path, const char *const names[], size_t n,
			    uint64_t offsets[]);

/* The names still 0 in offsets[] (after elfsym__dynamic_offsets) looked up in .symtab, the
 * others kept: the two calls give what elfsym__offsets gives. */
int elfsym__static_offsets(const char *path, const char *const names[], size_t n,
			   uint64_t offsets[]);

/* The function symbol (.symtab, then .dynsym) covering a file offset of an executable
 * segment: its raw (mangled) name. Returns 0, or -1 when none does. */
int elfsym__name_at(const char *path, uint64_t file_off, char *out, size_t n);

#endif
