/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The files tokenscope writes (-o, -r): often run as root, often in shared directories such
 * as /tmp, so never through a symlink and never into someone else's file; and a previous
 * output is not emptied until the run has started (a run that fails at start leaves it as it
 * was, and removes a file it had just created).
 */
#ifndef TS_OUTFILE_H
#define TS_OUTFILE_H

#include <stdbool.h>

struct outfile {
	const char *path;
	int fd;	      /* -1: not open */
	bool created; /* this run created the file (removed if the run never starts) */
};

/* Open path for writing, or create it mode 0600, without changing its contents. Refuses a
 * symlink, anything but a regular file, and a file another user owns, with one line on stderr
 * saying which. Returns 0 or -1. */
int outfile__open(struct outfile *o, const char *path);
/* The run has started: empty the file (mode 0600). Returns 0 or -1 (errno set). */
int outfile__start(struct outfile *o);
/* The run never started: close, and remove the file if this run created it. */
void outfile__abandon(struct outfile *o);

#endif
