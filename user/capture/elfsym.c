// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "capture/elfsym.h"

/* A symbol's address is a virtual address; uprobes want the offset in the file. */
static uint64_t vaddr_to_offset(Elf *elf, uint64_t vaddr)
{
	size_t nph = 0;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &nph))
		return 0;
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

/*
 * The wanted names, hashed (GNU hash, the one DT_GNU_HASH tables use), in an open-addressing
 * table, and their first 8 bytes in a bitmap: a symbol's name is hashed only when its first 8
 * bytes may be a wanted name's, and compared only on a hash match. Comparing each symbol with
 * every name took 50 ms on node's 184 000 symbols (docs/decisions/performance-log.md); so
 * did a first-byte filter, once a wanted name began with "_Z" as node's 123 000 C++ names
 * do.
 */
#define WANT_SLOTS 512 /* a power of two, at least twice the most names asked for */
#define PREFIX_BITS 4096

struct wanted {
	const char *const *names;
	uint64_t *offsets;
	size_t n, left;	      /* left: names not found yet */
	uint32_t hash[WANT_SLOTS];
	int16_t slot[WANT_SLOTS]; /* index into names, -1: empty */
	uint64_t prefixes[PREFIX_BITS / 64];
};

/* A name's first 8 bytes (fewer when it is shorter, or end comes first), as a number. */
static uint64_t prefix8(const char *s, const char *end)
{
	uint64_t v = 0;

	for (int i = 0; i < 8 && s + i < end && s[i]; i++)
		v |= (uint64_t)(unsigned char)s[i] << (8 * i);
	return v;
}

static uint32_t prefix_bit(uint64_t prefix)
{
	return (uint32_t)((prefix * 0x9e3779b97f4a7c15ull) >> 52); /* 12 bits: PREFIX_BITS */
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* offsets[] as they stand: a name whose offset is set is not looked for again. */
static int wanted_init(struct wanted *w, const char *const names[], size_t n, uint64_t offsets[])
{
	if (n > WANT_SLOTS / 2)
		return -E2BIG;
	w->names = names;
	w->offsets = offsets;
	w->n = w->left = n;
	memset(w->slot, 0xff, sizeof(w->slot));
	memset(w->prefixes, 0, sizeof(w->prefixes));
	for (size_t k = 0; k < n; k++) {
		const char *end = names[k] + strlen(names[k]);
		uint32_t h = gnu_hash(names[k]), i = h, bit = prefix_bit(prefix8(names[k], end));

		w->left -= offsets[k] != 0;
		while (w->slot[i & (WANT_SLOTS - 1)] >= 0)
			i++;
		w->slot[i & (WANT_SLOTS - 1)] = (int16_t)k;
		w->hash[i & (WANT_SLOTS - 1)] = h;
		w->prefixes[bit / 64] |= 1ull << (bit % 64);
	}
	return 0;
}

/* The symbol name (its hash h) is wanted: its value, a virtual address, recorded. */
static void wanted_found(Elf *elf, struct wanted *w, const char *name, uint32_t h, uint64_t value)
{
	for (uint32_t i = h; w->slot[i & (WANT_SLOTS - 1)] >= 0; i++) {
		size_t k = (size_t)w->slot[i & (WANT_SLOTS - 1)];

		if (w->hash[i & (WANT_SLOTS - 1)] != h || w->offsets[k] || strcmp(name, w->names[k]))
			continue;
		w->offsets[k] = vaddr_to_offset(elf, value);
		w->left -= w->offsets[k] != 0;
	}
}

/* A symbol that can be probed: a defined, non-local function. */
static bool probeable(const GElf_Sym *sym)
{
	return GELF_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_shndx != SHN_UNDEF &&
	       sym->st_value && GELF_ST_BIND(sym->st_info) != STB_LOCAL;
}

/* A symbol table and its string table, checked once. */
struct symtab {
	Elf_Data *syms, *strs;
	size_t count;
};

static bool symtab_open(Elf *elf, Elf_Scn *scn, struct symtab *t)
{
	GElf_Shdr sh;
	Elf_Scn *strscn;

	if (!gelf_getshdr(scn, &sh) || !sh.sh_entsize || !(t->syms = elf_getdata(scn, NULL)) ||
	    !(strscn = elf_getscn(elf, sh.sh_link)) || !(t->strs = elf_getdata(strscn, NULL)) ||
	    !t->strs->d_buf || !t->strs->d_size)
		return false;
	t->count = t->syms->d_size / sh.sh_entsize;
	return true;
}

/* Every symbol of a table, each name hashed as it is read (bounded by the string table). */
static void scan_symtab(Elf *elf, const struct symtab *t, struct wanted *w)
{
	const char *strtab = t->strs->d_buf, *end = strtab + t->strs->d_size;

	for (size_t i = 0; i < t->count && w->left; i++) {
		const char *name, *p;
		uint32_t h = 5381, bit;
		GElf_Sym sym;

		if (!gelf_getsym(t->syms, (int)i, &sym) || !probeable(&sym) ||
		    sym.st_name >= t->strs->d_size)
			continue;
		name = strtab + sym.st_name;
		bit = prefix_bit(prefix8(name, end));
		if (!(w->prefixes[bit / 64] & 1ull << (bit % 64)))
			continue;
		for (p = name; p < end && *p; p++)
			h = h * 33 + (unsigned char)*p;
		if (p < end && w->slot[h & (WANT_SLOTS - 1)] >= 0)
			wanted_found(elf, w, name, h, sym.st_value);
	}
}

/*
 * The dynamic symbols through their GNU hash table (what the dynamic linker reads): each name
 * looked up in its bucket's chain, not the whole table. Returns false when the table is absent
 * or does not hold together, and the caller scans. Every index is checked: a probed file may be
 * anything a process executes.
 */
static bool lookup_gnu_hash(Elf *elf, Elf_Scn *dynsym, const struct symtab *t, struct wanted *w)
{
	Elf_Scn *scn = NULL;
	Elf_Data *d = NULL;
	const uint32_t *hdr, *buckets, *chain;
	uint32_t nbuckets, symoffset, bloom_words;
	size_t words, nchain;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_HASH &&
		    elf_getscn(elf, sh.sh_link) == dynsym) {
			d = elf_getdata(scn, NULL);
			break;
		}
	}
	if (!d || !d->d_buf || d->d_size < 16 || gelf_getclass(elf) != ELFCLASS64 ||
	    (uintptr_t)d->d_buf % 8)
		return false;
	hdr = d->d_buf;
	words = d->d_size / 4;
	nbuckets = hdr[0];
	symoffset = hdr[1];
	bloom_words = hdr[2] * 2; /* 64-bit bloom words, counted in 32-bit ones */
	if (!nbuckets || (size_t)4 + bloom_words + nbuckets > words || symoffset > t->count)
		return false;
	buckets = hdr + 4 + bloom_words;
	chain = buckets + nbuckets;
	nchain = words - (size_t)(chain - hdr);
	for (size_t k = 0; k < w->n; k++) {
		uint32_t h = gnu_hash(w->names[k]), i = buckets[h % nbuckets];

		if (w->offsets[k] || i < symoffset)
			continue;
		for (; i < t->count && (size_t)(i - symoffset) < nchain; i++) {
			uint32_t ch = chain[i - symoffset];
			const char *strs = t->strs->d_buf;
			GElf_Sym sym;

			if ((ch | 1) == (h | 1) && gelf_getsym(t->syms, (int)i, &sym) &&
			    probeable(&sym) && sym.st_name < t->strs->d_size &&
			    memchr(strs + sym.st_name, 0, t->strs->d_size - sym.st_name))
				wanted_found(elf, w, strs + sym.st_name, h, sym.st_value);
			if (w->offsets[k] || (ch & 1))
				break;
		}
	}
	return true;
}

enum { DYNSYM = 1, SYMTAB = 2 }; /* the tables a lookup reads */

/* The names still missing from offsets[], looked up in the tables asked for: .dynsym first
 * (exported symbols are what other code calls), then .symtab (a static binary's, or a
 * library's hidden ones). */
static int lookup(const char *path, const char *const names[], size_t n, uint64_t offsets[],
		  unsigned tables)
{
	struct wanted w;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd, err;

	if ((err = wanted_init(&w, names, n, offsets)))
		return err;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(fd);
		return -ENOEXEC;
	}
	for (unsigned table = DYNSYM; table <= SYMTAB && w.left; table <<= 1) {
		Elf64_Word want = table == DYNSYM ? SHT_DYNSYM : SHT_SYMTAB;

		scn = NULL;
		while ((tables & table) && (scn = elf_nextscn(elf, scn)) && w.left) {
			struct symtab t;
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !symtab_open(elf, scn, &t))
				continue;
			if (want != SHT_DYNSYM || !lookup_gnu_hash(elf, scn, &t, &w))
				scan_symtab(elf, &t, &w);
		}
	}
	elf_end(elf);
	close(fd);
	return (int)(n - w.left);
}

/* A lookup from nothing found: offsets[] cleared first (after the count is checked). */
static int fresh_lookup(const char *path, const char *const names[], size_t n,
			uint64_t offsets[], unsigned tables)
{
	if (n > WANT_SLOTS / 2)
		return -E2BIG;
	memset(offsets, 0, n * sizeof(offsets[0]));
	return lookup(path, names, n, offsets, tables);
}

int elfsym__offsets(const char *path, const char *const names[], size_t n, uint64_t offsets[])
{
	return fresh_lookup(path, names, n, offsets, DYNSYM | SYMTAB);
}

int elfsym__dynamic_offsets(const char *path, const char *const names[], size_t n,
			    uint64_t offsets[])
{
	return fresh_lookup(path, names, n, offsets, DYNSYM);
}

int elfsym__static_offsets(const char *path, const char *const names[], size_t n,
			   uint64_t offsets[])
{
	return lookup(path, names, n, offsets, SYMTAB);
}

/* File offset back to a virtual address, through the executable segment that maps it. */
static int offset_to_vaddr(Elf *elf, uint64_t off, uint64_t *vaddr)
{
	size_t nph = 0;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &nph))
		return -1;
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
			*vaddr = off - ph.p_offset + ph.p_vaddr;
			return 0;
		}
	}
	return -1;
}

int elfsym__name_at(const char *path, uint64_t file_off, char *out, size_t n)
{
	Elf_Scn *scn = NULL;
	uint64_t vaddr;
	int fd, rc = -1;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || offset_to_vaddr(elf, file_off, &vaddr))
		goto out;
	for (int pass = 0; pass < 2 && rc; pass++) {
		Elf64_Word want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;

		scn = NULL;
		while (rc && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *data;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize ||
			    !(data = elf_getdata(scn, NULL)))
				continue;
			for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				const char *name;

				if (!gelf_getsym(data, (int)i, &sym) ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
				    vaddr < sym.st_value || vaddr >= sym.st_value + (sym.st_size ? sym.st_size : 1))
					continue;
				name = elf_strptr(elf, sh.sh_link, sym.st_name);
				if (name && *name) {
					snprintf(out, n, "%s", name);
					rc = 0;
					break;
				}
			}
		}
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}
