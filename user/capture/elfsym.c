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
 * A symbol table's functions named in names. A large binary (node: 150 000 symbols, nearly
 * all C++ names beginning "_Z") is read in a few milliseconds: a name is compared only when
 * its first byte is one a wanted name begins with, and read from the string table directly
 * (elf_strptr checks its section each time). Comparing each symbol with every name took
 * 50 ms on node, which a program's first requests waited for (docs/performance.md).
 */
static int scan_symtab(Elf *elf, Elf_Scn *scn, const char *const names[], size_t n,
		       uint64_t offsets[])
{
	bool first[256] = { false };
	GElf_Shdr sh, strsh;
	Elf_Data *data, *strdata;
	Elf_Scn *strscn;
	const char *strtab;
	int found = 0;

	if (!gelf_getshdr(scn, &sh) || !(data = elf_getdata(scn, NULL)) || !sh.sh_entsize ||
	    !(strscn = elf_getscn(elf, sh.sh_link)) || !gelf_getshdr(strscn, &strsh) ||
	    !(strdata = elf_getdata(strscn, NULL)) || !strdata->d_buf || !strdata->d_size)
		return 0;
	strtab = strdata->d_buf;
	for (size_t k = 0; k < n; k++)
		first[(unsigned char)names[k][0]] = true;
	for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		if (GELF_ST_BIND(sym.st_info) == STB_LOCAL || sym.st_name >= strdata->d_size)
			continue;
		name = strtab + sym.st_name;
		if (!first[(unsigned char)name[0]] ||
		    !memchr(name, 0, strdata->d_size - sym.st_name))
			continue;
		for (size_t k = 0; k < n; k++) {
			if (!offsets[k] && !strcmp(name, names[k])) {
				offsets[k] = vaddr_to_offset(elf, sym.st_value);
				found += offsets[k] != 0;
			}
		}
	}
	return found;
}

int elfsym__offsets(const char *path, const char *const names[], size_t n, uint64_t offsets[])
{
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd, found = 0;

	memset(offsets, 0, n * sizeof(offsets[0]));
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
	/* .dynsym first: exported symbols are what other code calls. */
	for (int pass = 0; pass < 2; pass++) {
		Elf64_Word want = pass == 0 ? SHT_DYNSYM : SHT_SYMTAB;

		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) && sh.sh_type == want)
				found += scan_symtab(elf, scn, names, n, offsets);
		}
	}
	elf_end(elf);
	close(fd);
	return found;
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
