/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The probe families (TLS, CUDA, plaintext TCP, llama.cpp), one BPF object each, and their
 * builds for older kernels (sock_core: CO-RE reads for 6.1; *_legacy: 5.10's programs): which
 * build this kernel wants, opening and loading them so that they share the first one's ring
 * buffer, counters and pid filter, and attaching their tracepoint and tp_btf programs. Their
 * uprobes are attach.c's; their live-side work on a record (what needs the running process)
 * is done here for live.c.
 */
#ifndef TS_FAMILIES_H
#define TS_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture/live.h"

/* Builds in the table (families.c): the shared maps, tls, cuda, sock, sock_core, llama, and
 * the five legacy. */
#define FAMILY_BUILDS 11

struct attacher;
struct bpf_link;
struct bpf_object;
struct cuda_names;
struct pipeline;

struct families {
	void *skel[FAMILY_BUILDS]; /* NULL: that build is not loaded */
	bool uprobe_multi;	    /* uprobes as uprobe_multi links (attach.h); set before load */
	struct bpf_link **links;   /* auto-attached programs of every family */
	size_t nlinks, linkcap;
	uint64_t load_ns[FAMILY_BUILDS]; /* how long each build took to open and load */
};
/* Each loaded build's name and load time, "tls 120 ms, sock 80 ms" (for -v). */
void families__say_load_times(const struct families *fs, char *out, size_t n);

/* What a family's live-side work on a record uses. */
struct family_work {
	struct cuda_names *cuda_names;
	struct pipeline *pl;
};

/* Open, filter (o's -p, -c), share the maps, load and configure each build this kernel wants.
 * A family that is not optional (TLS) and fails: -1, said on stderr; the others are said
 * and left out. */
int families__load(struct families *fs, const struct live_opts *o);
/* Tracepoints and tp_btf programs attach by their section name. -1 when one that is not
 * optional cannot (said). */
int families__attach_auto(struct families *fs);
/* Each loaded family's programs to the attacher, for its uprobe sets. */
void families__add_uprobe_sets(const struct families *fs, struct attacher *att);
/* The object that holds the shared maps (events, counters, pids): the first loaded. */
struct bpf_object *families__owner(const struct families *fs);
/* The fd of the map name of the first loaded family that has one; -1: none. */
int families__map_fd(const struct families *fs, const char *name);
/* The loaded build of family name, in words ("plaintext TCP (CO-RE reads)"); NULL: none. */
const char *families__loaded(const struct families *fs, const char *name);
/* A record's live-side work, before and after the pipeline has it: the hooks of the loaded
 * families (CUDA's kernel names), which see every record but the bytes of a stream (TLS and
 * socket pieces, most of all records: no hook reads them). */
void families__before(const struct families *fs, const struct family_work *w, void *rec,
		      size_t size);
void families__after(const struct families *fs, const struct family_work *w, const void *rec);
/* Links, then builds (the later hold references to the first one's maps). */
void families__destroy(struct families *fs);

/* The kernel ring's share of room_mb (-b), in MiB: 4, more with more than 16 CPUs, a power of
 * two at most 32 and at most room_mb. The reader's backlog (backlog.h) holds the rest. */
long families__ring_mb(long room_mb);

#endif
