/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The uprobe sets: which family's programs go on which functions of which files (attach.c
 * examines each file once for all of them). A new uprobe family is one entry in uprobe_sets
 * (uprobe_sets.c) and its object in user/capture/families.c.
 */
#ifndef TS_UPROBE_SETS_H
#define TS_UPROBE_SETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One uprobe: the function, the program at its entry, the program at its return (either may
 * be NULL). Programs are named as in their family's bpf/FAMILY.bpf.c. */
struct uprobe_spec {
	const char *sym;
	const char *enter;
	const char *ret;
};

enum { SET_TLS, SET_DLOPEN, SET_CUDA, SET_LLAMA, SET_GO_TLS, SET__N };

struct uprobe_set {
	const char *name;   /* shown in the start line and with -v */
	const char *family; /* the BPF object holding the programs */
	const struct uprobe_spec *probes;
	size_t n;
	bool (*wants)(const char *base, const uint64_t *off); /* does this file get them */
};

extern const struct uprobe_set uprobe_sets[SET__N];

/* The most symbols all sets look up together (uprobe_sets.c checks it at compile time). */
#define UPROBE_SETS_MAX_SYMS 96

/* The places in the TLS set of OpenSSL's reads and writes (attach.c moves them inward:
 * ssl_inner.h). */
enum { TLS_READ, TLS_READ_EX, TLS_WRITE, TLS_WRITE_EX };

/* The places in llama.cpp's set of the symbols attach.c reads. */
enum { LLAMA_DECODE, LLAMA_ENCODE, LLAMA_SET_EMBEDDINGS = 7, LLAMA_MEMBER_SET_EMBEDDINGS };

#endif
