// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The background detacher (capture/detacher.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "capture/detacher.h"

#define DETACHER_COMM "tokenscope-det"
#define DETACHER_WAIT_MAX_S 30

/* Is process pid (its /proc entry) a detacher of ours: this executable, run by this user?
 * A name is no proof: any process may call itself tokenscope-det (prctl, /proc/PID/comm). */
static bool ours(const char *pid, const struct stat *self)
{
	char fn[300], line[256];
	struct stat exe;
	bool same_user = false;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%s/exe", pid);
	if (stat(fn, &exe) || exe.st_dev != self->st_dev || exe.st_ino != self->st_ino)
		return false;
	snprintf(fn, sizeof(fn), "/proc/%s/status", pid);
	f = fopen(fn, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned real, effective;

		if (sscanf(line, "Uid: %u %u", &real, &effective) == 2) {
			same_user = real == getuid() && effective == geteuid();
			break;
		}
	}
	if (f)
		fclose(f);
	return same_user;
}

/* Is a detacher (below) of an earlier run still removing its probes? Zombies are done. */
static bool detacher_running(void)
{
	struct dirent *de;
	struct stat self;
	bool found = false;
	DIR *d;

	if (stat("/proc/self/exe", &self))
		return false;
	d = opendir("/proc");
	while (d && !found && (de = readdir(d))) {
		char fn[300], stat_line[128], *close_paren;
		FILE *f;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(fn, sizeof(fn), "/proc/%s/stat", de->d_name);
		f = fopen(fn, "re");
		if (!f)
			continue;
		/* "PID (COMM) STATE ...": the comm may hold spaces and parentheses */
		if (fgets(stat_line, sizeof(stat_line), f) &&
		    (close_paren = strrchr(stat_line, ')')) && close_paren[1] == ' ' &&
		    close_paren[2] != 'Z') {
			*close_paren = 0;
			found = strchr(stat_line, '(') &&
				!strcmp(strchr(stat_line, '(') + 1, DETACHER_COMM) &&
				ours(de->d_name, &self);
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

/*
 * Perf-event probes (the syscall tracepoints; uprobes where uprobe_multi links are missing) go
 * on and come off one at a time under the kernel's event_mutex: attaching while an earlier run
 * still detaches would wait behind its detach, and libraries loaded meanwhile would be probed
 * late. A run started right after another waits for it, as it did when runs detached before
 * they ended.
 */
void detacher__wait_for_earlier(void)
{
	uint64_t start = clock__now_ns();

	if (!detacher_running())
		return;
	fprintf(stderr, "tokenscope: waiting for an earlier run to remove its probes\n");
	while (detacher_running()) {
		if (clock__now_ns() - start > DETACHER_WAIT_MAX_S * 1000000000ull) {
			fprintf(stderr, "tokenscope: still removing after %d s; attaching now\n",
				DETACHER_WAIT_MAX_S);
			return;
		}
		usleep(20000);
	}
}

/* One link's release, in a thread of its own: grace periods wait side by side. */
static void *close_fd(void *fd)
{
	close((int)(intptr_t)fd);
	return NULL;
}

#define DETACH_THREADS 256

/*
 * Removing a probe makes the kernel wait for RCU grace periods: one after the other under its
 * global event_mutex for perf-event probes (syscall tracepoints: 73 ms each on this VM; perf
 * uprobes, where uprobe_multi links are missing: 111 ms each), side by side for uprobe_multi
 * links when they are dropped from threads of their own (48 in ~75 ms). Nothing the user waits
 * for needs it done: a child keeps the links (and the perf events under them) and drops them
 * after this process has ended; this process's own closes only drop references. The child
 * closes every other file first (outputs, the metrics socket), leaves the terminal's session,
 * and calls nothing that may lock after a fork. It starts once the parent has closed the
 * pipe whose write end this returns (-1: there is no child; the caller detaches).
 */
int detacher__start(void)
{
	char dents[4096], path[64], target[32], byte;
	int keep[DETACH_THREADS], nkeep = 0, dir, go[2];
	pthread_t threads[DETACH_THREADS];
	pthread_attr_t attr;
	pid_t pid;
	long n;

	if (pipe(go))
		return -1;
	pid = fork();
	if (pid != 0) {
		close(go[0]);
		if (pid > 0)
			return go[1];
		close(go[1]);
		return -1;
	}
	close(go[1]);
	setsid();
	prctl(PR_SET_NAME, DETACHER_COMM);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	while (dir >= 0 && (n = syscall(SYS_getdents64, dir, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n;) {
			struct {
				unsigned long long ino;
				long long off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(dents + off);
			int fd = atoi(de->name);
			ssize_t len;

			off += de->reclen;
			if (de->name[0] < '0' || de->name[0] > '9' || fd == dir || fd == go[0])
				continue;
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			len = readlink(path, target, sizeof(target) - 1);
			target[len > 0 ? len : 0] = 0;
			if (strcmp(target, "anon_inode:bpf_link") &&
			    strcmp(target, "anon_inode:[perf_event]"))
				close(fd);
			else if (nkeep < DETACH_THREADS)
				keep[nkeep++] = fd;
			/* past that many, the rest go as the child exits, one by one */
		}
	}
	/* The parent's references go first: a link released while the parent still held it
	 * would be released by the parent's close, where the user waits. */
	while (read(go[0], &byte, 1) < 0 && errno == EINTR)
		;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 0; i < nkeep; i++) {
		if (pthread_create(&threads[i], &attr, close_fd, (void *)(intptr_t)keep[i]))
			threads[i] = 0, close(keep[i]);
	}
	for (int i = 0; i < nkeep; i++) {
		if (threads[i])
			pthread_join(threads[i], NULL);
	}
	_exit(0);
}

