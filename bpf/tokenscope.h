/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The event stream: the one seam between the BPF programs and the userspace pipeline.
 *
 * Every record in the ring buffer (and in a recording file, byte for byte) starts with
 * struct ts_event_hdr.  Fixed-size kernel types only, no libc headers: both sides include this.
 * Changing a layout here means bumping TS_RECORDING_VERSION (docs/recording.md).
 */
#ifndef TOKENSCOPE_H
#define TOKENSCOPE_H

#define TS_COMM_LEN 16
#define TS_PATH_LEN 256

/* One data event carries at most TS_CHUNK_MAX payload bytes; a bigger SSL call is split into
 * pieces with offsets, at most TS_MAX_PIECES of them; the rest is counted as truncated. */
#define TS_CHUNK_MAX 8192
#define TS_MAX_PIECES 32

enum ts_event_type {
	TS_EV_TLS_DATA = 1, /* bytes moved by SSL_read*, SSL_write* */
	TS_EV_TLS_FREE = 2, /* SSL_free: the connection is gone */
	TS_EV_EXEC = 3,	    /* a process exec'd: userspace looks for TLS libraries in it */
	TS_EV_EXIT = 4,	    /* a process that moved TLS bytes exited */
	TS_EV_DLOPEN = 5,   /* dlopen returned: userspace rescans the process's mappings */
};

enum ts_dir {
	TS_DIR_READ = 0,  /* SSL_read, SSL_read_ex: timestamped at return */
	TS_DIR_WRITE = 1, /* SSL_write, SSL_write_ex, SSL_write_ex2: timestamped at entry */
};

/* ts_tls_data.flags */
#define TS_F_TRUNCATED (1u << 0) /* the call moved more than TS_MAX_PIECES * TS_CHUNK_MAX bytes */
#define TS_F_READ_FAULT (1u << 1) /* bpf_probe_read_user failed: len bytes are zeros */

struct ts_event_hdr {
	__u32 type; /* enum ts_event_type */
	__u32 size; /* whole record, header included */
	__u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 pid;   /* thread group id */
	__u32 tid;
	char comm[TS_COMM_LEN];
};

struct ts_tls_data {
	struct ts_event_hdr hdr;
	__u64 ssl;	 /* SSL* in the traced process: with pid, the stream key */
	__u64 seq;	 /* per-stream piece sequence: a gap means pieces were lost */
	__u32 dir;	 /* enum ts_dir */
	__u32 flags;	 /* TS_F_* */
	__u32 total_len; /* bytes the call moved */
	__u32 offset;	 /* of this piece within the call */
	__u32 len;	 /* payload bytes that follow */
	__u32 _pad;
	__u8 data[];
};

struct ts_tls_free {
	struct ts_event_hdr hdr;
	__u64 ssl;
};

struct ts_proc {
	struct ts_event_hdr hdr;
	__u32 ppid;
	__u32 exit_code;
	char path[TS_PATH_LEN]; /* exec: the file exec'd; empty otherwise */
};

/* Counters kept in a per-CPU array in BPF, summed by userspace. */
enum ts_counter {
	TS_CNT_DATA_EVENTS = 0, /* pieces sent */
	TS_CNT_DATA_BYTES,	/* payload bytes sent */
	TS_CNT_DROPS,		/* pieces lost: ring buffer full */
	TS_CNT_DROP_BYTES,
	TS_CNT_TRUNCATED,	/* calls larger than the piece budget */
	TS_CNT_TRUNCATED_BYTES, /* bytes not sent for them */
	TS_CNT_READ_FAULTS,	/* user memory that could not be read */
	TS_CNT_OTHER_DROPS,	/* exec/exit/free/dlopen events lost */
	TS_CNT_STALE_CALLS,	/* an SSL call entered while an older one had no return seen */
	TS_CNT__MAX,
};

#endif /* TOKENSCOPE_H */
