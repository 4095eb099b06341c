// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <capstone/capstone.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "capture/ssl_inner.h"

/* A wrapper's call comes within its first few instructions (SSL_read_ex: two) */
#define WRAPPER_MAX_INSNS 6
/* SSL_read and SSL_write call it within a few dozen instructions */
#define OUTER_BYTES 256

/* The x86-64 argument registers a wrapper must leave alone: rdi, rsi, rdx, rcx, in any width */
static bool argument_register(unsigned r)
{
	switch (r) {
	case X86_REG_RDI: case X86_REG_EDI: case X86_REG_DI: case X86_REG_DIL:
	case X86_REG_RSI: case X86_REG_ESI: case X86_REG_SI: case X86_REG_SIL:
	case X86_REG_RDX: case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL:
	case X86_REG_RCX: case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL:
		return true;
	default:
		return false;
	}
}

/* A direct call's or jump's target, or 0 (an indirect one, or another instruction). */
static uint64_t direct_target(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;

	if ((insn->id != X86_INS_CALL && insn->id != X86_INS_JMP) || x->op_count != 1 ||
	    x->operands[0].type != X86_OP_IMM)
		return 0;
	return (uint64_t)x->operands[0].imm;
}

static bool writes_argument(csh cs, const cs_insn *insn)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;

	if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return true; /* cannot say: not a wrapper */
	for (uint8_t i = 0; i < nwr; i++) {
		if (argument_register(wr[i]))
			return true;
	}
	return false;
}

uint64_t ssl_inner__passed_to(const uint8_t *code, size_t n, uint64_t at)
{
	uint64_t found = 0;
	cs_insn *insn;
	csh cs;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	for (int i = 0; insn && i < WRAPPER_MAX_INSNS && cs_disasm_iter(cs, &code, &n, &at, insn);
	     i++) {
		if (insn->id == X86_INS_CALL || insn->id == X86_INS_JMP) {
			found = direct_target(insn);
			break;
		}
		/* a branch, a return, or a write of an argument before the call: not a wrapper
		 * that passes them on */
		if (cs_insn_group(cs, insn, CS_GRP_JUMP) || cs_insn_group(cs, insn, CS_GRP_RET) ||
		    cs_insn_group(cs, insn, CS_GRP_INT) || cs_insn_group(cs, insn, CS_GRP_IRET) ||
		    writes_argument(cs, insn))
			break;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return found;
}

bool ssl_inner__calls(const uint8_t *code, size_t n, uint64_t at, uint64_t target)
{
	bool found = false;
	cs_insn *insn;
	csh cs;

	if (!target || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return false;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	while (insn && !found && cs_disasm_iter(cs, &code, &n, &at, insn)) {
		found = direct_target(insn) == target;
		/* the first return or jump away ends the path swept: past it may lie another
		 * function (SSL_read_ex follows SSL_read), whose call would prove nothing */
		if (insn->id == X86_INS_RET || insn->id == X86_INS_JMP)
			break;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return found;
}

int ssl_inner__emulated_at(const uint8_t *code, size_t n)
{
	static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	size_t at = n >= 4 && !memcmp(code, endbr64, 4) ? 4 : 0;

	/* push r64: 50+r, or 41 50+r for r8..r15 */
	if (at < n && code[at] >= 0x50 && code[at] <= 0x57)
		return (int)at;
	if (at + 1 < n && code[at] == 0x41 && code[at + 1] >= 0x50 && code[at + 1] <= 0x57)
		return (int)at;
	return -1;
}

/* The executable segment's bytes in the file that hold offset off: [*lo, *hi). */
static bool exec_segment(int fd, uint64_t off, uint64_t *lo, uint64_t *hi)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	bool found = false;
	GElf_Phdr ph;

	if (!elf)
		return false;
	if (!elf_getphdrnum(elf, &nph)) {
		for (size_t i = 0; i < nph && !found; i++) {
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			found = off >= ph.p_offset && off < ph.p_offset + ph.p_filesz;
			*lo = ph.p_offset;
			*hi = ph.p_offset + ph.p_filesz;
		}
	}
	elf_end(elf);
	return found;
}

/* n bytes at off, where the segment [lo, hi) holds them all (fewer at its end) */
static size_t code_at(int fd, uint8_t *code, size_t n, uint64_t off, uint64_t lo, uint64_t hi)
{
	ssize_t got;

	if (off < lo || off >= hi)
		return 0;
	if (n > hi - off)
		n = hi - off;
	got = pread(fd, code, n, (off_t)off);
	return got > 0 ? (size_t)got : 0;
}

uint64_t ssl_inner__find(const char *path, uint64_t outer, uint64_t ex)
{
	uint8_t code[OUTER_BYTES];
	uint64_t lo = 0, hi = 0, inner = 0;
	size_t n;
	int fd, skip;

	if (!outer || !ex || elf_version(EV_CURRENT) == EV_NONE)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (!exec_segment(fd, ex, &lo, &hi))
		goto out;
	/* the calls' targets are file offsets where the three lie in one segment, as here */
	n = code_at(fd, code, 64, ex, lo, hi);
	inner = n ? ssl_inner__passed_to(code, n, ex) : 0;
	n = inner ? code_at(fd, code, sizeof(code), outer, lo, hi) : 0;
	if (!n || !ssl_inner__calls(code, n, outer, inner)) {
		inner = 0;
		goto out;
	}
	n = code_at(fd, code, 16, inner, lo, hi);
	skip = n ? ssl_inner__emulated_at(code, n) : -1;
	inner = skip < 0 ? 0 : inner + (uint64_t)skip;
out:
	close(fd);
	return inner;
}

unsigned ssl_inner__move(const char *path, uint64_t off[4])
{
	unsigned moved = 0;

	for (int d = 0; d < 2; d++) {
		uint64_t inner = ssl_inner__find(path, off[2 * d], off[2 * d + 1]);

		if (inner) {
			off[2 * d] = 0;
			off[2 * d + 1] = inner;
			moved |= 1u << d;
		}
	}
	return moved;
}
