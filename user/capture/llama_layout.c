// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <capstone/capstone.h>
#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

#include "capture/llama_layout.h"

/* A setter is a few dozen bytes (a log call, the store); more is not a setter. */
#define SETTER_MAX_BYTES 256

/* The general-purpose register x86_reg r is part of, 0..15 (rax..r15), or -1. */
static int gpr(unsigned r)
{
	static const unsigned families[16][4] = {
		{ X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL },
		{ X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL },
		{ X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL },
		{ X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL },
		{ X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL },
		{ X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL },
		{ X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL },
		{ X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL },
		{ X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B },
		{ X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B },
		{ X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B },
		{ X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B },
		{ X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B },
		{ X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B },
		{ X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B },
		{ X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B },
	};

	for (int i = 0; i < 16; i++) {
		for (int w = 0; w < 4; w++) {
			if (families[i][w] == r)
				return i;
		}
	}
	return -1;
}

#define BIT(r) (1u << (r))
/* What a call may change (the System V ABI's caller-saved registers). */
#define CALL_CLOBBERS                                                                          \
	(BIT(0) | BIT(1) | BIT(2) | BIT(6) | BIT(7) | BIT(8) | BIT(9) | BIT(10) | BIT(11))

uint32_t llama_layout__store_offset(const uint8_t *code, size_t n)
{
	unsigned ctx = BIT(7), val = BIT(6); /* rdi: the context; rsi: the bool */
	uint32_t found = 0;
	const uint8_t *at = code;
	uint64_t addr = 0;
	cs_insn *insn;
	csh cs;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	while (insn && !found && cs_disasm_iter(cs, &at, &n, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;
		cs_regs rd, wr;
		uint8_t nrd = 0, nwr = 0;

		if (insn->id == X86_INS_RET || insn->id == X86_INS_JMP)
			break; /* the end, or code elsewhere (a tail jump): not followed */
		if (insn->id == X86_INS_CALL) {
			ctx &= ~CALL_CLOBBERS;
			val &= ~CALL_CLOBBERS;
			continue;
		}
		if (insn->id == X86_INS_MOV && x->op_count == 2 && x->operands[0].type == X86_OP_MEM &&
		    x->operands[0].size == 1 && x->operands[1].type == X86_OP_REG) {
			int base = gpr(x->operands[0].mem.base), src = gpr(x->operands[1].reg);

			if (base >= 0 && src >= 0 && x->operands[0].mem.index == X86_REG_INVALID &&
			    (ctx & BIT(base)) && (val & BIT(src)) && x->operands[0].mem.disp > 0 &&
			    x->operands[0].mem.disp < (1 << 20))
				found = (uint32_t)x->operands[0].mem.disp;
			continue;
		}
		if ((insn->id == X86_INS_MOV || insn->id == X86_INS_MOVZX) && x->op_count == 2 &&
		    x->operands[0].type == X86_OP_REG && x->operands[1].type == X86_OP_REG) {
			int dst = gpr(x->operands[0].reg), src = gpr(x->operands[1].reg);

			if (dst >= 0 && src >= 0) {
				bool c = ctx & BIT(src), v = val & BIT(src);

				/* a context copied whole (64 bits); the bool in any width */
				ctx = (ctx & ~BIT(dst)) | (c && x->operands[0].size == 8 ? BIT(dst) : 0);
				val = (val & ~BIT(dst)) | (v ? BIT(dst) : 0);
				continue;
			}
		}
		/* anything else that writes a register: it holds neither any more */
		if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) == CS_ERR_OK) {
			for (uint8_t i = 0; i < nwr; i++) {
				int r = gpr(wr[i]);

				if (r >= 0 && r != 4) {
					ctx &= ~BIT(r);
					val &= ~BIT(r);
				}
			}
		}
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return found;
}

static uint32_t from_file(int fd, uint64_t off)
{
	uint8_t code[SETTER_MAX_BYTES];
	ssize_t n;

	if (!off)
		return 0;
	n = pread(fd, code, sizeof(code), (off_t)off);
	return n > 0 ? llama_layout__store_offset(code, (size_t)n) : 0;
}

uint32_t llama_layout__embeddings_offset(const char *path, uint64_t c_setter,
					 uint64_t member_setter)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t off;

	if (fd < 0)
		return 0;
	/* the C setter stores itself where the member is inlined into it (older llama.cpp) */
	off = from_file(fd, c_setter);
	if (!off)
		off = from_file(fd, member_setter);
	close(fd);
	return off;
}
