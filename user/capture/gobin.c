// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <capstone/capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/gobin.h"

static const char *const FUNC_NAMES[2] = { "crypto/tls.(*Conn).Read", "crypto/tls.(*Conn).Write" };

/* The largest function decoded (Read and Write are a few hundred bytes). */
#define FUNC_MAX_BYTES (1u << 20)

struct file {
	int fd;
	Elf *elf;
	char *why;
	size_t nwhy;
};

static int fail(struct file *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f->why && f->nwhy) {
		va_start(ap, fmt);
		vsnprintf(f->why, f->nwhy, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* A section's bytes by name (NULL when absent or empty). */
static const uint8_t *section(struct file *f, const char *name, GElf_Shdr *sh, size_t *size)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(f->elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(f->elf, scn))) {
		const char *n;
		Elf_Data *d;

		if (!gelf_getshdr(scn, sh) || !(n = elf_strptr(f->elf, shstrndx, sh->sh_name)) ||
		    strcmp(n, name))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || sh->sh_type == SHT_NOBITS)
			return NULL;
		*size = d->d_size;
		return d->d_buf;
	}
	return NULL;
}

/* n bytes at link-time address vaddr, from the section holding them: 0, or -1. */
static int read_vaddr(struct file *f, uint64_t vaddr, void *out, size_t n)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(f->elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || vaddr < sh.sh_addr ||
		    vaddr - sh.sh_addr + n > sh.sh_size)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || vaddr - sh.sh_addr + n > d->d_size)
			return -1;
		memcpy(out, (const uint8_t *)d->d_buf + (vaddr - sh.sh_addr), n);
		return 0;
	}
	return -1;
}

/* The file offset of a link-time address in a loaded segment (0: none). */
static uint64_t file_offset(struct file *f, uint64_t vaddr)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(f->elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

static uint64_t le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* ---- the Go version, from the build info ---- */

static int uvarint(const uint8_t *p, size_t n, uint64_t *v, size_t *used)
{
	uint64_t x = 0;

	for (size_t i = 0; i < n && i < 10; i++) {
		x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = x;
			*used = i + 1;
			return 0;
		}
	}
	return -1;
}

/*
 * .go.buildinfo: "\xff Go buildinf:", pointer size, flags; since Go 1.18 (flags & 2) the
 * version follows at 32 as a varint-prefixed string; before, a pointer to the version's
 * string header (pointer, length) does (Go's debug/buildinfo reads it the same way).
 */
static int go_version(struct file *f, struct gobin *g)
{
	static const char magic[] = "\xff Go buildinf:";
	GElf_Shdr sh;
	size_t size, used;
	const uint8_t *d = section(f, ".go.buildinfo", &sh, &size);
	uint64_t len, hdr[2];
	unsigned ps;

	if (!d || size < 32 || memcmp(d, magic, 14))
		return fail(f, -ENOEXEC, "not a Go executable (no Go build info)");
	ps = d[14];
	if ((ps != 4 && ps != 8) || d[15] & 1)
		return fail(f, -ENOEXEC, "a Go build info of pointer size %u%s", ps,
			    d[15] & 1 ? ", big-endian" : "");
	if (d[15] & 2) {
		if (uvarint(d + 32, size - 32, &len, &used) || len >= sizeof(g->version) ||
		    32 + used + len > size)
			return fail(f, -EBADMSG, "its build info's version does not read");
		memcpy(g->version, d + 32 + used, len);
		g->version[len] = 0;
	} else {
		uint8_t raw[16];

		if (read_vaddr(f, le(d + 16, ps), raw, 2 * ps))
			return fail(f, -EBADMSG, "its build info's version pointer leads nowhere");
		hdr[0] = le(raw, ps);
		hdr[1] = le(raw + ps, ps);
		if (hdr[1] >= sizeof(g->version) || read_vaddr(f, hdr[0], g->version, hdr[1]))
			return fail(f, -EBADMSG, "its build info's version does not read");
		g->version[hdr[1]] = 0;
	}
	for (const char *c = g->version; *c; c++) {
		if (*c <= ' ' || *c > '~') { /* said below: keep the line printable */
			g->version[0] = 0;
			return fail(f, -EBADMSG, "its build info's version is not text");
		}
	}
	if (sscanf(g->version, "go%d.%d", &g->major, &g->minor) != 2)
		return fail(f, -EBADMSG, "Go version '%s' does not read as goMAJOR.MINOR", g->version);
	if (g->major < 1 || (g->major == 1 && g->minor < GOBIN_MIN_MINOR))
		return fail(f, -ENOTSUP, "built by %s: Go before 1.%d passes arguments on the stack, "
					 "which these probes do not read", g->version, GOBIN_MIN_MINOR);
	return 0;
}

/* ---- the functions: .symtab, else the function table ---- */

static int from_symtab(struct file *f, struct gobin_func *out[2])
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int found = 0;

	while ((scn = elf_nextscn(f->elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !(name = elf_strptr(f->elf, sh.sh_link, s.st_name)))
				continue;
			for (int k = 0; k < 2; k++) {
				if (!out[k]->vaddr && !strcmp(name, FUNC_NAMES[k])) {
					out[k]->vaddr = s.st_value;
					out[k]->size = s.st_size;
					found++;
				}
			}
		}
	}
	return found;
}

/* The function table's layout, by its magic (Go's runtime/symtab.go, debug/gosym). */
struct pcln {
	const uint8_t *d;
	size_t size;
	unsigned ps;
	bool go118; /* 1.18+: 32-bit entry offsets from textStart; 1.16-1.17: addresses */
	uint64_t nfunc, text, names, funcs;
};

static int pcln_header(struct file *f, struct pcln *p, uint64_t text_addr)
{
	uint32_t magic = (uint32_t)le(p->d, 4);
	const uint8_t *h = p->d + 8;

	p->ps = p->d[7];
	if (p->size < 8 + 8 * 8 || (p->ps != 4 && p->ps != 8))
		return fail(f, -EBADMSG, "its function table is too short");
	p->go118 = magic == 0xfffffff0 || magic == 0xfffffff1;
	if (!p->go118 && magic != 0xfffffffa)
		return fail(f, -EBADMSG, "its function table's magic 0x%x is not Go 1.16+'s", magic);
	p->nfunc = le(h, p->ps);
	if (p->go118) {
		p->text = le(h + 2 * p->ps, p->ps);
		p->names = le(h + 3 * p->ps, p->ps);
		p->funcs = le(h + 7 * p->ps, p->ps);
		/* PIE: the header's textStart is relocated at load and may read 0 in the file */
		if (!p->text)
			p->text = text_addr;
	} else {
		p->names = le(h + 2 * p->ps, p->ps);
		p->funcs = le(h + 6 * p->ps, p->ps);
	}
	if (p->names >= p->size || p->funcs >= p->size ||
	    p->nfunc > (p->size - p->funcs) / (p->go118 ? 8 : 2 * p->ps))
		return fail(f, -EBADMSG, "its function table's offsets point outside it");
	return 0;
}

/* Entry i of the function table: its address and its _func's offset. */
static void pcln_entry(const struct pcln *p, uint64_t i, uint64_t *addr, uint64_t *func)
{
	size_t w = p->go118 ? 4 : p->ps;
	const uint8_t *e = p->d + p->funcs + i * 2 * w;

	*addr = p->go118 ? p->text + le(e, 4) : le(e, w);
	*func = i < p->nfunc ? le(e + w, w) : 0;
}

static int from_pclntab(struct file *f, struct gobin_func *out[2])
{
	GElf_Shdr sh, text_sh;
	struct pcln p = { 0 };
	size_t text_size;
	int found = 0, err;

	p.d = section(f, ".gopclntab", &sh, &p.size);
	if (!p.d)
		p.d = section(f, ".data.rel.ro.gopclntab", &sh, &p.size);
	if (!p.d)
		return fail(f, -EBADMSG, "stripped, and no Go function table (.gopclntab) either");
	if (!section(f, ".text", &text_sh, &text_size))
		return fail(f, -EBADMSG, "no .text section");
	err = pcln_header(f, &p, text_sh.sh_addr);
	if (err)
		return err;
	for (uint64_t i = 0; i < p.nfunc && found < 2; i++) {
		uint64_t addr, next, func, nameoff;
		const char *name;

		pcln_entry(&p, i, &addr, &func);
		if (p.funcs + func + (p.go118 ? 8 : p.ps + 4) > p.size)
			return fail(f, -EBADMSG, "function table entry %llu points outside it",
				    (unsigned long long)i);
		nameoff = le(p.d + p.funcs + func + (p.go118 ? 4 : p.ps), 4);
		if (p.names + nameoff >= p.size)
			continue;
		name = (const char *)p.d + p.names + nameoff;
		if (!memchr(name, 0, p.size - p.names - nameoff))
			continue; /* a name not ended inside the table is no name */
		for (int k = 0; k < 2; k++) {
			const uint8_t *fd = p.d + p.funcs + func;

			if (out[k]->vaddr || strcmp(name, FUNC_NAMES[k]))
				continue;
			/* the _func says its entry too: the two must agree */
			if ((p.go118 ? p.text + le(fd, 4) : le(fd, p.ps)) != addr)
				return fail(f, -EBADMSG, "%s: the function table disagrees on its entry",
					    name);
			pcln_entry(&p, i + 1, &next, &func);
			fd = p.d + p.funcs + func;
			if (i + 1 < p.nfunc && (p.funcs + func + 8 > p.size ||
						(p.go118 ? p.text + le(fd, 4) : le(fd, p.ps)) != next))
				return fail(f, -EBADMSG, "%s: the function table disagrees on its end",
					    name);
			out[k]->vaddr = addr;
			out[k]->size = next > addr ? next - addr : 0;
			found++;
		}
	}
	return found;
}

/* ---- return instructions ---- */

/*
 * Does the code begin as a Go function that may grow its stack does: comparing SP (or, for a
 * large frame, SP minus the frame in R12) with g.stackguard0 at 0x10(R14)? A table that led
 * anywhere else must not get probes.
 */
static bool go_prologue(const uint8_t *c, size_t n)
{
	static const uint8_t cmp_sp[] = { 0x49, 0x3b, 0x66, 0x10 };  /* CMPQ 0x10(R14), SP */
	static const uint8_t cmp_r12[] = { 0x4d, 0x3b, 0x66, 0x10 }; /* CMPQ 0x10(R14), R12 */

	if (n >= 4 && !memcmp(c, cmp_sp, 4))
		return true;
	/* LEAQ -frame(SP), R12 (4c 8d a4 24 disp32, or 4c 8d 64 24 disp8), then the compare */
	if (n >= 12 && c[0] == 0x4c && c[1] == 0x8d && c[3] == 0x24 && (c[2] == 0xa4 || c[2] == 0x64)) {
		size_t lea = c[2] == 0xa4 ? 8 : 5;

		return !memcmp(c + lea, cmp_r12, 4);
	}
	return false;
}

static int find_rets(struct file *f, csh cs, const char *name, struct gobin_func *fn)
{
	uint8_t *code;
	const uint8_t *at;
	size_t left;
	uint64_t addr = fn->vaddr;
	cs_insn *insn;
	int err = 0;

	fn->offset = file_offset(f, fn->vaddr);
	if (!fn->offset || !fn->size || fn->size > FUNC_MAX_BYTES)
		return fail(f, -EBADMSG, "%s: no code in the file (size %llu)", name,
			    (unsigned long long)fn->size);
	code = malloc(fn->size);
	insn = cs_malloc(cs);
	if (!code || !insn) {
		free(code);
		cs_free(insn, 1);
		return fail(f, -ENOMEM, "out of memory");
	}
	if (pread(f->fd, code, fn->size, (off_t)fn->offset) != (ssize_t)fn->size) {
		err = fail(f, -EBADMSG, "%s: its code is cut short", name);
		goto out;
	}
	if (!go_prologue(code, fn->size)) {
		err = fail(f, -EBADMSG, "%s: its entry is not a Go function's stack check", name);
		goto out;
	}
	at = code;
	left = fn->size;
	/* instruction by instruction from the entry: a 0xc3 inside another instruction (an
	 * immediate, a displacement) is never taken for a RET */
	for (size_t i = 0; cs_disasm_iter(cs, &at, &left, &addr, insn); i++) {
		/* the stack check's jump is its second or third instruction (go_prologue) */
		if (i < 3 && !fn->body && insn->id == X86_INS_JBE)
			fn->body = fn->offset + (addr - fn->vaddr); /* addr: the next instruction */
		if (insn->id != X86_INS_RET)
			continue;
		if (fn->nrets == GOBIN_MAX_RETS) {
			err = fail(f, -EBADMSG, "%s: more than %d returns", name, GOBIN_MAX_RETS);
			goto out;
		}
		fn->rets[fn->nrets++] = fn->offset + (insn->address - fn->vaddr);
	}
	if (left) /* a byte that is no instruction: the rest cannot be trusted */
		err = fail(f, -EBADMSG, "%s: undecodable code at +%llu", name,
			   (unsigned long long)(fn->size - left));
	else if (!fn->nrets)
		err = fail(f, -EBADMSG, "%s: no return instruction", name);
	else if (!fn->body)
		err = fail(f, -EBADMSG, "%s: no stack check's jump where Go puts it", name);
out:
	cs_free(insn, 1);
	free(code);
	return err;
}

int gobin__inspect(const char *path, struct gobin *g, char *why, size_t n)
{
	struct file f = { .fd = -1, .why = why, .nwhy = n };
	struct gobin_func *funcs[2] = { &g->read, &g->write };
	GElf_Ehdr eh;
	csh cs = 0;
	int err, found;

	memset(g, 0, sizeof(*g));
	if (why && n)
		why[0] = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return fail(&f, -EINVAL, "libelf: %s", elf_errmsg(-1));
	f.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f.fd < 0)
		return fail(&f, -errno, "cannot open it: %s", strerror(errno));
	/* its sections as they lie in the page cache, not read into copies */
	f.elf = elf_begin(f.fd, ELF_C_READ_MMAP, NULL);
	if (!f.elf || !gelf_getehdr(f.elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64) {
		err = fail(&f, -ENOEXEC, "not an x86-64 ELF file");
		goto out;
	}
	g->pie = eh.e_type == ET_DYN;
	err = go_version(&f, g);
	if (err)
		goto out;
	found = from_symtab(&f, funcs);
	g->has_symtab = found > 0;
	if (found < 2)
		found = from_pclntab(&f, funcs);
	if (found < 0) {
		err = found;
		goto out;
	}
	if (!g->read.vaddr || !g->write.vaddr) {
		err = fail(&f, -ENOENT, "does not link crypto/tls (no (*Conn).Read and .Write)");
		goto out;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		err = fail(&f, -ENOMEM, "capstone: cannot open an x86-64 decoder");
		goto out;
	}
	err = find_rets(&f, cs, FUNC_NAMES[0], &g->read);
	if (!err)
		err = find_rets(&f, cs, FUNC_NAMES[1], &g->write);
	cs_close(&cs);
out:
	if (f.elf)
		elf_end(f.elf);
	if (f.fd >= 0)
		close(f.fd);
	return err;
}
