/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The files tokenscope writes (-o, -r): often run as root, often in shared directories such
 * as /tmp, so never through a symlink and never into someone else's file; and a previous
 * output is not emptied until the run has started (a run that fails at start leaves it as it
 * was, and removes a file it had just created).
 *
 * Records are written whole or not at all. A write error (a full disk, a quota, EIO) is said
 * at once, in one line; the file is cut back to its last whole record and nothing more is
 * written to it (a later record after a gap would read as a complete file); every record not
 * written is counted, and outfile__close reports the count and fails, so the run exits 1.
 */
#ifndef TS_OUTFILE_H
#define TS_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outfile {
	const char *path;
	int fd;	      /* -1: not open */
	bool created; /* this run created the file (removed if the run never starts) */
	/* written through outfile__record */
	char *buf;	  /* whole records not yet written */
	size_t len, cap;
	uint64_t nbuf;	  /* records in buf */
	size_t *ends;	  /* where each of them ends in buf */
	size_t endcap;
	uint64_t kept;	  /* bytes in the file, whole records only */
	uint64_t written; /* records in the file */
	uint64_t lost;	  /* records not written after a write error */
	int err;	  /* the first write error (errno); 0: none */
};

/* Open path for writing, or create it mode 0600, without changing its contents. Refuses a
 * symlink, anything but a regular file, and a file another user owns, with one line on stderr
 * saying which. Returns 0 or -1. */
int outfile__open(struct outfile *o, const char *path);
/* The run has started: empty the file (mode 0600). Returns 0 or -1 (errno set). */
int outfile__start(struct outfile *o);
/* The run never started: close, and remove the file if this run created it. */
void outfile__abandon(struct outfile *o);

/* One record (a JSON line with its newline, a recording's record), buffered; written now
 * when flush is set or the buffer is full. -1 once the file has failed (the record counted as
 * lost). */
int outfile__record(struct outfile *o, const void *rec, size_t len, bool flush);
/* No memory for a record (to buffer it, or to build it): what was buffered goes out, then the
 * file fails as on a write error, the record counted as lost (a record left out would make
 * the file wrong, not short). Returns -1. */
int outfile__no_memory(struct outfile *o);
/* Write what is buffered. -1: the file failed, now or before. */
int outfile__flush(struct outfile *o);
/* A file written at the end as one record, whole or not at all (a reader, such as
 * node_exporter's textfile collector, finds all of it or an empty file): --metrics-file,
 * --html. p NULL: the content could not be made (out of memory). Returns 0, or -1 having
 * said why. */
int outfile__write_whole(const char *path, const void *p, size_t len);
/* Flush and close (the file is kept). -1, with one line saying how many records were not
 * written, when any write failed. */
int outfile__close(struct outfile *o);

#endif
