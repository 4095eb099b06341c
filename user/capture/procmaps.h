/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* /proc/PID/maps lines: "start-end perms offset dev inode path". */
#ifndef TS_PROCMAPS_H
#define TS_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

struct maps_entry {
	uint64_t start, end, offset;
	bool exec;	  /* mapped executable */
	bool deleted;	  /* the file was removed or replaced since it was mapped */
	const char *path; /* inside the line (its newline cut off); NULL for anonymous mappings */
};

/* Parse one line in place. Returns 0, or -1 for a line that is not a mapping. */
int procmaps__parse(char *line, struct maps_entry *e);
/* A line worth keeping to find files later: an executable mapping of a file that is still
 * there. */
bool procmaps__is_exec_file(const struct maps_entry *e);

#endif
