/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Live capture: open and load every probe family (one BPF object each, sharing the first one's
 * ring buffer, counters and pid filter), attach them, and feed the ring buffer's records to the
 * pipeline until told to stop. The table of probe families is in families.c.
 */
#ifndef TS_LIVE_H
#define TS_LIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct pipeline;
struct recording;

struct live_opts {
	const pid_t *pids; /* -p: only these processes (npids 0: all) */
	int npids;
	const char *comm;  /* -c: only processes with this command name (NULL: all) */
	/* --namespace, --pod, --container: only processes whose identity (capture/identity.h)
	 * matches each given (NULL: any); decided when a process is first seen */
	const char *k8s_namespace, *pod, *container;
	const uint16_t *ports; /* --port: plaintext sockets with one of these local or peer ports */
	int nports;
	bool no_plaintext; /* --no-plaintext: TLS (and CUDA) only */
	long ringbuf_mb;   /* room for records, a power of two (live__default_ringbuf_mb() unless
			    * -b): the kernel's ring (families__ring_mb) and the reader's backlog */
	long duration_s;   /* 0: until SIGINT or SIGTERM */
	int verbose;	   /* 1: probed files; 2: libbpf's debug output too */
	/* Called once every probe is attached, before the first record is read: the run has
	 * started (outputs may be emptied now). Nonzero ends the run with an error. */
	int (*started)(void *ctx);
	void *started_ctx;
	/* Called about once a second from the capture loop, after the kernel counters were read
	 * (NULL: none): --metrics publishes then. */
	void (*tick)(void *ctx);
	/* Called at each wake-up of the capture loop (at least every 20 ms), after the records
	 * that came were consumed (NULL: none): `tokenscope top` reads its keys and redraws.
	 * consumed_ns: every record the probes made before it has been fed (CLOCK_MONOTONIC).
	 * Nonzero ends the run as Ctrl-C does. */
	int (*poll)(void *ctx, uint64_t consumed_ns);
};

/* Can live tracing start on this machine (privileges, BTF, the -p processes exist)? Prints
 * the reason on stderr and returns -1 when not. Touches nothing, so callers check it before
 * creating any output file. */
int live__check(const struct live_opts *o);
/* Trace until SIGINT, SIGTERM or the duration, every record into pl (which records it when
 * it has a recording). Returns 0, or 1 with a message on stderr. */
int live__run(const struct live_opts *o, struct pipeline *pl);

/* The room for records without -b, in MiB: 32 per CPU, within 8 and 256, at most 1/256 of
 * the memory, a power of two. */
long live__default_ringbuf_mb(void);

#endif
