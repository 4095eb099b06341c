/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* /proc/PID/maps lines: "start-end perms offset dev inode path". */
#ifndef TS_PROCMAPS_H
#define TS_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

struct maps_entry {
	uint64_t start, end, offset;
	uint64_t dev;	  /* the file's device and inode as the kernel names them here */
	uint64_t ino;
	bool exec;	  /* mapped executable */
	bool deleted;	  /* the file was removed or replaced since it was mapped */
	const char *path; /* inside the line (its newline cut off); NULL for anonymous mappings */
};

/* Parse one line in place. Returns 0, or -1 for a line that is not a mapping. */
int procmaps__parse(char *line, struct maps_entry *e);
/* A line worth keeping to find files later: an executable mapping of a file that is still
 * there. */
bool procmaps__is_exec_file(const struct maps_entry *e);

/* Linux 6.11's PROCMAP_QUERY on an open /proc/PID/maps: the process's executable file
 * mappings one ioctl each, without the kernel writing out the text of every other mapping
 * (most of what a dlopen's rescan cost). The next one at or after *from into e (no path:
 * procmaps__name), *from moved past it: 1; 0 at the end; -1 where the kernel has no such
 * query (older than 6.11: read the text) or on an error (errno). */
int procmaps__next_exec(int maps_fd, uint64_t *from, struct maps_entry *e);
/* The file mapped at addr, as maps would name it (" (deleted)" included): 0, or -1. */
int procmaps__name(int maps_fd, uint64_t addr, char *buf, size_t cap);

#endif
