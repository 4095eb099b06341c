// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "report.h"

int outfile__open(struct outfile *o, const char *path)
{
	char safe[REPORT_SAFE_MAX(256)];
	const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	struct stat st;

	*o = (struct outfile){ .path = path, .fd = -1 };
	report__text_safe(safe, sizeof(safe), path);
	/* A new file, created here and now; else the existing one, never through a symlink
	 * (O_NOFOLLOW) and without blocking on a FIFO (O_NONBLOCK). */
	o->fd = open(path, flags | O_CREAT | O_EXCL, 0600);
	if (o->fd >= 0) {
		o->created = true;
	} else if (errno == EEXIST) {
		o->fd = open(path, flags);
	}
	if (o->fd < 0) {
		if (errno == ELOOP)
			fprintf(stderr, "tokenscope: refusing to write %s: it is a symbolic link\n",
				safe);
		else if (errno == ENXIO) /* O_NONBLOCK on a FIFO nobody reads */
			fprintf(stderr, "tokenscope: refusing to write %s: not a regular file\n",
				safe);
		else
			fprintf(stderr, "tokenscope: cannot create %s: %s\n", safe, strerror(errno));
		return -1;
	}
	if (fstat(o->fd, &st)) {
		fprintf(stderr, "tokenscope: cannot create %s: %s\n", safe, strerror(errno));
		goto refuse;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "tokenscope: refusing to write %s: not a regular file\n", safe);
		goto refuse;
	}
	if (st.st_uid != geteuid()) {
		fprintf(stderr, "tokenscope: refusing to write %s: owned by uid %u, not by this user "
				"(%u)\n",
			safe, (unsigned)st.st_uid, (unsigned)geteuid());
		goto refuse;
	}
	/* blocking writes from here on */
	if (fcntl(o->fd, F_SETFL, fcntl(o->fd, F_GETFL) & ~O_NONBLOCK)) {
		fprintf(stderr, "tokenscope: cannot create %s: %s\n", safe, strerror(errno));
		goto refuse;
	}
	return 0;
refuse:
	outfile__abandon(o);
	return -1;
}

int outfile__start(struct outfile *o)
{
	if (o->fd < 0)
		return 0;
	/* an existing file keeps its mode otherwise */
	return ftruncate(o->fd, 0) || fchmod(o->fd, 0600) ? -1 : 0;
}

void outfile__abandon(struct outfile *o)
{
	if (o->fd < 0)
		return;
	close(o->fd);
	if (o->created)
		unlink(o->path);
	o->fd = -1;
	o->created = false;
}
