// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "capture/procmaps.h"

int procmaps__parse(char *line, struct maps_entry *e)
{
	char perms[8];
	char *path;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64, &e->start, &e->end, perms,
		   &e->offset) != 4 || strlen(perms) < 3)
		return -1;
	e->exec = perms[2] == 'x';
	path = strchr(line, '/');
	if (path)
		path[strcspn(path, "\n")] = 0;
	e->path = path;
	e->deleted = path && strstr(path, " (deleted)");
	return 0;
}

bool procmaps__is_exec_file(const struct maps_entry *e)
{
	return e->exec && e->path && !e->deleted;
}
