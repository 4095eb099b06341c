// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"
#include "base/text.h"

int outfile__open(struct outfile *o, const char *path)
{
	char safe[TEXT_SAFE_MAX(256)];
	const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	struct stat st;

	*o = (struct outfile){ .path = path, .fd = -1 };
	text__safe(safe, sizeof(safe), path);
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
	free(o->buf);
	free(o->ends);
	o->buf = NULL;
	o->ends = NULL;
	o->len = o->cap = o->endcap = 0;
	if (o->fd < 0)
		return;
	close(o->fd);
	if (o->created)
		unlink(o->path);
	o->fd = -1;
	o->created = false;
}

#define OUTFILE_BUF (64u << 10)

static const char *records(uint64_t n)
{
	return n == 1 ? "record" : "records";
}

/* The first write error, after done bytes of the buffer went out: the file is cut back to the
 * whole records among them, and that is said once. */
static void failed(struct outfile *o, int err, size_t done)
{
	char safe[TEXT_SAFE_MAX(256)];
	uint64_t whole = 0;

	while (whole < o->nbuf && o->ends[whole] <= done)
		whole++;
	if (whole) {
		o->kept += o->ends[whole - 1];
		o->written += whole;
	}
	o->err = err ? err : EIO;
	o->lost += o->nbuf - whole;
	o->nbuf = 0;
	o->len = 0;
	text__safe(safe, sizeof(safe), o->path);
	if (ftruncate(o->fd, (off_t)o->kept))
		fprintf(stderr, "tokenscope: ERROR: writing %s failed (%s), and cutting it back to "
				"its last whole record failed too: its last record may be cut\n",
			safe, strerror(o->err));
	else
		fprintf(stderr, "tokenscope: ERROR: writing %s failed (%s): it keeps its first %llu "
				"%s, each whole; nothing more is written to it (the records not "
				"written are counted; tokenscope will exit 1)\n",
			safe, strerror(o->err), (unsigned long long)o->written, records(o->written));
}

int outfile__flush(struct outfile *o)
{
	size_t done = 0;

	if (o->err)
		return -1;
	while (done < o->len) {
		ssize_t n = write(o->fd, o->buf + done, o->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			failed(o, n < 0 ? errno : ENOSPC, done);
			return -1;
		}
		done += (size_t)n;
	}
	o->kept += o->len;
	o->written += o->nbuf;
	o->len = 0;
	o->nbuf = 0;
	return 0;
}

int outfile__no_memory(struct outfile *o)
{
	if (!outfile__flush(o))
		failed(o, ENOMEM, 0);
	o->lost++;
	return -1;
}

int outfile__record(struct outfile *o, const void *rec, size_t len, bool flush)
{
	if (o->err || o->fd < 0) {
		o->lost++;
		return -1;
	}
	if (o->len + len > o->cap && o->len && outfile__flush(o)) {
		o->lost++;
		return -1;
	}
	if (o->len + len > o->cap) {
		size_t cap = o->cap ? o->cap : OUTFILE_BUF;
		char *b;

		while (cap < o->len + len)
			cap *= 2;
		if (!(b = realloc(o->buf, cap)))
			return outfile__no_memory(o);
		o->buf = b;
		o->cap = cap;
	}
	if (o->nbuf == o->endcap) {
		size_t cap = o->endcap ? 2 * o->endcap : 256, *e = realloc(o->ends, cap * sizeof(*e));

		if (!e)
			return outfile__no_memory(o);
		o->ends = e;
		o->endcap = cap;
	}
	memcpy(o->buf + o->len, rec, len);
	o->len += len;
	o->ends[o->nbuf++] = o->len;
	/* a record larger than the usual buffer is not kept around */
	return flush || o->len >= OUTFILE_BUF ? outfile__flush(o) : 0;
}

int outfile__close(struct outfile *o)
{
	char safe[TEXT_SAFE_MAX(256)];
	int err = 0;

	if (o->fd < 0)
		return 0;
	outfile__flush(o);
	if (close(o->fd) && !o->err) { /* NFS, say: what was written may not all be there */
		o->err = errno;
	}
	o->fd = -1;
	free(o->buf);
	free(o->ends);
	o->buf = NULL;
	o->ends = NULL;
	o->len = o->cap = o->endcap = 0;
	if (o->err) {
		text__safe(safe, sizeof(safe), o->path);
		fprintf(stderr, "tokenscope: ERROR: %llu %s not written to %s (%s); it holds "
				"the first %llu, each whole\n",
			(unsigned long long)o->lost, o->lost == 1 ? "record was" : "records were",
			safe, strerror(o->err), (unsigned long long)o->written);
		err = -1;
	}
	return err;
}

int outfile__write_whole(const char *path, const void *p, size_t len)
{
	struct outfile f = { .fd = -1 };

	if (!p || outfile__open(&f, path) || outfile__start(&f)) {
		fprintf(stderr, "tokenscope: cannot write %s\n", path);
		outfile__close(&f);
		return -1;
	}
	outfile__record(&f, p, len, true);
	return outfile__close(&f);
}
