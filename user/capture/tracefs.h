/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Classic tracepoints (SEC("tracepoint/CATEGORY/NAME"), e.g. the syscall ones) attached on
 * hosts where tracefs is not mounted: libbpf reads the event id from a mounted tracefs only.
 */
#ifndef TS_TRACEFS_H
#define TS_TRACEFS_H

#include <stddef.h>

struct bpf_program;

/* How many tracepoints prog's section names: "tracepoint/CATEGORY/NAME[,NAME...]" (one
 * program on several tracepoints of a category is verified once). */
size_t tracefs__count(const struct bpf_program *prog);
/* The k-th tracepoint a section names ("tracepoint/CATEGORY/NAME[,NAME...]"): its category
 * and name; -1 with errno ENOENT past the last, EINVAL for a section that names none. */
int tracefs__nth(const char *sec, size_t k, char *category, size_t ncat, char *name,
		 size_t nname);
/* Attach prog to the k-th tracepoint its section names; NULL with errno set on failure. */
struct bpf_link *tracefs__attach(struct bpf_program *prog, size_t k);
/* The same, to the tracepoint CATEGORY/NAME whatever the section says. */
struct bpf_link *tracefs__attach_to(struct bpf_program *prog, const char *category,
				    const char *name);
/* Forget the tracefs directory found or mounted for the attachments (they stay). */
void tracefs__release(void);

#endif
