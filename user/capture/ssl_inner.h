/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where OpenSSL's reads and writes are probed for one trap each, not two.
 *
 * libssl's SSL_read, SSL_write and their _ex forms begin with `sub $N,%rsp`, which the
 * kernel's uprobes cannot emulate: every hit of a probe there runs the instruction out of line
 * under a single-step trap, a second trap that costs more than the probe's own (microseconds
 * under a hypervisor: docs/performance.md, Host classes). OpenSSL 1.1.1 and 3.x route both
 * forms of a direction through one inner function, ssl_read_internal(s, buf, num, readbytes)
 * and ssl_write_internal(s, buf, num, written): SSL_read_ex passes its four arguments to it
 * untouched, and SSL_read calls it with its own. That function is static (no symbol), and it
 * begins by pushing the registers it saves: an instruction the kernel emulates.
 *
 * So the inner function is found from the code: the target of SSL_read_ex's first call (or
 * jump), where nothing before it writes an argument register; accepted only where SSL_read
 * calls that same target too, so that every read passes it, and where its first instruction
 * (past an endbr64) is a push. Its arguments and result then read as SSL_read_ex's: 1 for
 * success, the count in *readbytes. Where any of that does not hold (OpenSSL 3.2's
 * SSL_write_ex adds a flags argument, another library, another compiler's layout), nothing is
 * found and the exported functions are probed as before.
 */
#ifndef TS_SSL_INNER_H
#define TS_SSL_INNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The function a wrapper (code[0..n), its first bytes, at file offset at) passes its first
 * four arguments to untouched, by its first call or jump: the target's offset, or 0. */
uint64_t ssl_inner__passed_to(const uint8_t *code, size_t n, uint64_t at);

/* Whether code[0..n) (at file offset at) calls or jumps to target. */
bool ssl_inner__calls(const uint8_t *code, size_t n, uint64_t at, uint64_t target);

/* Where in a function (code[0..n), its first bytes) a uprobe hits an instruction the kernel
 * emulates: 0, or 4 past an endbr64, at a push of a register; -1 where it does not begin so. */
int ssl_inner__emulated_at(const uint8_t *code, size_t n);

/* In the file at path, whose exported outer (SSL_read or SSL_write) and ex (SSL_read_ex or
 * SSL_write_ex) are at those file offsets (0: absent): the offset at which the inner function
 * that both reach is probed, or 0. */
uint64_t ssl_inner__find(const char *path, uint64_t outer, uint64_t ex);

/* The file offsets of SSL_read, SSL_read_ex, SSL_write and SSL_write_ex, in that order (0:
 * absent), moved where ssl_inner__find finds each direction's inner function: the _ex form's
 * offset becomes the inner one's (its arguments and result are the _ex form's), the exported
 * form's 0 (its every call reaches it). Returns the directions moved: bit 0 read, bit 1 write. */
unsigned ssl_inner__move(const char *path, uint64_t off[4]);

#endif
