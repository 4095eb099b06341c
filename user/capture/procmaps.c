// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include <linux/types.h>

#include "capture/procmaps.h"

int procmaps__parse(char *line, struct maps_entry *e)
{
	char perms[8];
	unsigned major, minor;
	char *path;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &e->start,
		   &e->end, perms, &e->offset, &major, &minor, &e->ino) != 7 || strlen(perms) < 3)
		return -1;
	e->dev = (uint64_t)major << 32 | minor;
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

/* include/uapi/linux/fs.h since 6.11 (Debian 12's headers are older) */
struct ts_procmap_query {
	__u64 size;
	__u64 query_flags;
	__u64 query_addr;
	__u64 vma_start, vma_end, vma_flags, vma_page_size, vma_offset;
	__u64 inode;
	__u32 dev_major, dev_minor;
	__u32 vma_name_size, build_id_size;
	__u64 vma_name_addr, build_id_addr;
};
#define TS_PROCMAP_QUERY _IOWR('f', 17, struct ts_procmap_query)
#define TS_QUERY_VMA_EXECUTABLE 0x04
#define TS_QUERY_COVERING_OR_NEXT_VMA 0x10
#define TS_QUERY_FILE_BACKED_VMA 0x20

static int query(int fd, uint64_t addr, struct ts_procmap_query *q, char *name, size_t cap)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	q->query_flags = TS_QUERY_COVERING_OR_NEXT_VMA | TS_QUERY_VMA_EXECUTABLE |
			 TS_QUERY_FILE_BACKED_VMA;
	q->query_addr = addr;
	if (name) {
		q->vma_name_addr = (__u64)(uintptr_t)name;
		q->vma_name_size = (__u32)cap;
	}
	return ioctl(fd, TS_PROCMAP_QUERY, q);
}

int procmaps__next_exec(int maps_fd, uint64_t *from, struct maps_entry *e)
{
	struct ts_procmap_query q;

	if (query(maps_fd, *from, &q, NULL, 0))
		return errno == ENOENT ? 0 : -1;
	*from = q.vma_end;
	*e = (struct maps_entry){ .start = q.vma_start, .end = q.vma_end, .offset = q.vma_offset,
				  .dev = (uint64_t)q.dev_major << 32 | q.dev_minor,
				  .ino = q.inode, .exec = true };
	return 1;
}

int procmaps__name(int maps_fd, uint64_t addr, char *buf, size_t cap)
{
	struct ts_procmap_query q;

	if (cap < 2 || query(maps_fd, addr, &q, buf, cap) || !q.vma_name_size ||
	    q.vma_start > addr)
		return -1;
	buf[cap - 1] = 0;
	return 0;
}
