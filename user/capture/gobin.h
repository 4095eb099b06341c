/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go executables: what probing crypto/tls in one needs, read from the file alone.
 *   - the Go version, from the build info (.go.buildinfo);
 *   - crypto/tls.(*Conn).Read and (*Conn).Write: through the symbol table, or through the
 *     function table (.gopclntab; .data.rel.ro.gopclntab in PIE builds) when it is stripped;
 *   - each function's return instructions, by decoding its machine code (capstone): Go moves
 *     goroutine stacks, so a uretprobe (which rewrites the return address) would crash the
 *     program; an uprobe on every RET stands in for it.
 * All as file offsets, where uprobes attach.
 */
#ifndef TS_GOBIN_H
#define TS_GOBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GOBIN_MAX_RETS 32

struct gobin_func {
	uint64_t vaddr, size; /* as linked */
	uint64_t offset;      /* file offset of its entry */
	/* file offset of the first instruction after its stack check (CMP; JBE morestack): the
	 * place for an entry probe. At the entry itself a call that grows its stack is seen
	 * twice (morestack runs the function again from its entry); past the check once, with
	 * the arguments still in their registers. */
	uint64_t body;
	uint64_t rets[GOBIN_MAX_RETS]; /* file offsets of its RET instructions */
	size_t nrets;
};

struct gobin {
	char version[32]; /* "go1.19.8" */
	int major, minor;
	bool has_symtab; /* functions found through .symtab (else .gopclntab) */
	bool pie;
	struct gobin_func read, write; /* crypto/tls.(*Conn).Read, .Write */
};

/* Go's register ABI (arguments and results in registers, g in R14) came with Go 1.17. */
#define GOBIN_MIN_MINOR 17

/*
 * Reads path. Returns 0 with g filled; -ENOEXEC when it is not a Go executable (or not
 * x86-64); -ENOTSUP when its Go is older than 1.17 (g->version says which); -ENOENT when it
 * does not link crypto/tls's Conn.Read and Conn.Write; -EBADMSG when its tables or code do
 * not read as they should; another -errno when the file cannot be read. why (n bytes) gets
 * one line saying what went wrong, when it is not 0.
 */
int gobin__inspect(const char *path, struct gobin *g, char *why, size_t n);

#endif
