/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Recording files: the event stream, byte for byte as the ring buffer delivered it (after
 * credential masking), behind a small header. Format: docs/recording.md.
 */
#ifndef TS_RECORDING_H
#define TS_RECORDING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/types.h>

#include "base/outfile.h"
#include "tokenscope.h"

#define TS_RECORDING_MAGIC "TSCOPE\r\n" /* 8 bytes; the CRLF catches text-mode mangling */
#define TS_RECORDING_VERSION 1

/* Records that only recordings carry (userspace-made, never from BPF). */
enum ts_rec_type {
	TS_REC_COUNTERS = 100, /* struct ts_rec_counters: the BPF counters (each second, and at
				  the end) */
	TS_REC_PROC_TREE = 101, /* struct ts_rec_proc_tree: a process's ancestors, read from /proc
				   when it was first seen */
	TS_REC_PROC_IDENTITY = 102, /* struct ts_rec_proc_identity: a process's container and pod,
				       read from /proc when it was first seen (where it has one) */
	TS_REC_SOCK_NAT = 103, /* struct ts_rec_sock_nat: a connection NAT changed on its way,
				  from its conntrack entry (capture/nat.c) */
	TS_REC__END, /* one past the last: every type from 100 below it has its row */
};

/* Which stream a struct ts_rec_sock_nat is about. */
enum ts_nat_stream { TS_NAT_TCP = 0, TS_NAT_TLS = 1, TS_NAT_GO_TLS = 2 };

/* A connection that NAT changed on its way (a DNAT'd Service address): its ends as the far
 * side sees them, from its conntrack entry's reply direction, looked up once when its stream
 * was first seen. Sent before the stream's next record. */
struct ts_rec_sock_nat {
	struct ts_event_hdr hdr; /* pid: the stream's process */
	__u64 id;		 /* the stream's: its socket's inode (tcp) or its SSL* (tls) */
	__u32 stream;		 /* enum ts_nat_stream */
	__u32 netns;		 /* where the entry was found */
	/* laddr:lport this end and raddr:rport the other, as the other end sees them */
	struct ts_sock_addr after;
};

#define TS_REC_MAX_ANCESTORS 16

struct ts_rec_proc_tree {
	struct ts_event_hdr hdr; /* pid: the process */
	__u32 n;		 /* ancestors known */
	__u32 pad;
	__u32 ancestors[TS_REC_MAX_ANCESTORS]; /* parent first, up to init (1) */
};

/* A process's container and pod (capture/identity.h); each string NUL-terminated, "" when
 * unknown. */
struct ts_rec_proc_identity {
	struct ts_event_hdr hdr; /* pid: the process */
	char container_id[72];	 /* 64 hex digits */
	char runtime[16];	 /* containerd, cri-o, docker, podman, cgroupfs */
	char pod_uid[40];
	char pod_name[64];	 /* its HOSTNAME, which Kubernetes sets to the pod's name */
	char k8s_namespace[64];	 /* its service account's namespace */
};

struct ts_rec_counters {
	struct ts_event_hdr hdr;
	__u64 counters[TS_CNT__MAX];
};

struct ts_rec_file_header {
	char magic[8];
	__u32 version;
	__u32 header_size;  /* sizeof this struct: readers skip what they do not know */
	__u64 start_mono_ns; /* CLOCK_MONOTONIC when recording began */
	__u64 start_real_ns; /* CLOCK_REALTIME at the same moment */
	__u32 chunk_max;     /* TS_CHUNK_MAX of the writer */
	__u32 counters;	     /* TS_CNT__MAX of the writer */
};

/* docs/recording.md documents these layouts. */
TS_LAYOUT(ts_rec_file_header, 40);
TS_FIELD(ts_rec_file_header, version, 8);
TS_FIELD(ts_rec_file_header, start_mono_ns, 16);
TS_FIELD(ts_rec_file_header, chunk_max, 32);
TS_FIELD(ts_rec_counters, counters, 40);
TS_LAYOUT(ts_rec_proc_tree, 112);
TS_LAYOUT(ts_rec_proc_identity, 296);
TS_LAYOUT(ts_rec_sock_nat, 96);
TS_FIELD(ts_rec_sock_nat, after, 56);

struct recording;

/* A recording written to out, an empty file of mode 0600 (it holds decrypted payloads:
 * outfile.h): writes the header. out is closed by recording__close; NULL on failure. */
struct recording *recording__create(struct outfile *out);
/* Returns 0, or -1 when the record could not be written (outfile.h: said once, counted). */
int recording__write(struct recording *r, const void *rec, size_t size);
/* Returns -1 when any write failed (the count of records not written is said). */
int recording__close(struct recording *r);

/* Reads every record, in order, into fn, front to back (a pipe works; path "-" is standard
 * input). Returns 0, or -1 with a message on stderr when the file is not a recording of a
 * supported version, its header is corrupt, or it ends inside a record. */
typedef int (*recording_fn)(void *ctx, void *rec, size_t size);
/* Called once the header was read and found good, before the first record (may be NULL):
 * nonzero stops the replay with -1. */
typedef int (*recording_ready_fn)(void *ctx, const struct ts_rec_file_header *h);
int recording__replay(const char *path, recording_ready_fn ready, recording_fn fn, void *ctx);
/* The same from an open stream, named path in messages. */
int recording__replay_stream(FILE *f, const char *path, recording_ready_fn ready,
			     recording_fn fn, void *ctx);

#endif
