// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Workloads for the plaintext part of `make bench`, timed with CLOCK_MONOTONIC:
 *   sockbench pipe N        N iterations of write(120 bytes) + read through a pipe
 *   sockbench tcp N         the same over loopback TCP whose first bytes are not HTTP (the
 *                           socket tokenscope ignores after its first call)
 *   sockbench http N        the same over loopback TCP after an HTTP request head: every
 *                           write and read is captured (120 bytes, an SSE event's size)
 *   sockbench bulk BYTES    BYTES over loopback TCP, not HTTP, 64 KiB per call: MB/s
 *   sockbench bare CMD...   run CMD with an empty tracepoint program on the enter and exit of
 *                           read and write (every process): the yardstick, on the very
 *                           tracepoints whose tracing cost is compared with it
 *   sockbench floor CMD...  run CMD under the floor capturer (bench/floor.bpf.c) on the same
 *                           four tracepoints, its ring drained here as a tracer would; fails
 *                           where it captured nothing
 * Prints nanoseconds per iteration (bulk: MB/s).
 */
#include <bpf/libbpf.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bare.skel.h"
#include "capture/tracefs.h"
#include "floor.skel.h"

#define MSG 120

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* A connected loopback TCP pair: fds[0] connects, fds[1] was accepted. */
static void tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		die("listen");
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	fds[1] = accept(l, NULL, NULL);
	if (fds[1] < 0)
		die("accept");
	close(l);
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void read_full(int fd, char *buf, size_t n)
{
	while (n) {
		ssize_t r = read(fd, buf, n);

		if (r <= 0)
			die("read");
		buf += r;
		n -= r;
	}
}

/* N write + read pairs from fds[0] to fds[1], after first (sent and read once, untimed). */
static double pingpong(int fds[2], long n, const char *first)
{
	char buf[MSG], in[4096];
	double t0;

	if (first) {
		size_t len = strlen(first);

		if (write(fds[0], first, len) != (ssize_t)len)
			die("write");
		read_full(fds[1], in, len);
	}
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "data: {\"t\":1}", 13);
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (write(fds[0], buf, sizeof(buf)) != sizeof(buf))
			die("write");
		read_full(fds[1], in, sizeof(buf));
	}
	return (now_ns() - t0) / n;
}

static int bulk(long total)
{
	static char buf[64 << 10];
	int fds[2];
	long got = 0;
	double t0;
	pid_t child;

	tcp_pair(fds);
	memset(buf, 0xff, sizeof(buf)); /* never HTTP, never TLS */
	child = fork();
	if (child == 0) {
		for (long sent = 0; sent < total;) {
			ssize_t w = write(fds[0], buf, total - sent < (long)sizeof(buf) ? total - sent
										: (long)sizeof(buf));
			if (w <= 0)
				_exit(1);
			sent += w;
		}
		_exit(0);
	}
	close(fds[0]);
	t0 = now_ns();
	while (got < total) {
		ssize_t r = read(fds[1], buf, sizeof(buf));

		if (r <= 0)
			break;
		got += r;
	}
	waitpid(child, NULL, 0);
	printf("%.1f\n", got / ((now_ns() - t0) / 1e9) / 1e6);
	return got == total ? 0 : 1;
}

/* enter on the enter tracepoints of read and write, exit on their exits, into links[4]; false
 * (said) where one does not attach */
static bool attach_rw(struct bpf_program *enter, struct bpf_program *exit,
		      struct bpf_link *links[4])
{
	static const char *const tps[] = { "sys_enter_read", "sys_exit_read", "sys_enter_write",
					   "sys_exit_write" };

	for (int i = 0; i < 4; i++) {
		links[i] = tracefs__attach_to(i % 2 ? exit : enter, "syscalls", tps[i]);
		if (!links[i]) {
			fprintf(stderr, "sockbench: cannot attach to %s\n", tps[i]);
			return false;
		}
	}
	return true;
}

static int bare(char **cmd)
{
	struct bpf_link *links[4] = { 0 };
	struct bare_bpf *skel = bare_bpf__open_and_load();
	int status = 1;
	pid_t child;

	if (!skel) {
		fprintf(stderr, "sockbench: cannot load the bare program (root?)\n");
		return 1;
	}
	if (!attach_rw(skel->progs.bare_tp, skel->progs.bare_tp, links))
		goto out;
	child = fork();
	if (child == 0) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	if (child > 0)
		waitpid(child, &status, 0);
out:
	for (int i = 0; i < 4; i++)
		bpf_link__destroy(links[i]);
	bare_bpf__destroy(skel);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int counted(void *ctx, void *data, size_t size)
{
	(*(unsigned long *)ctx)++;
	return 0;
}

/* CMD under the floor capturer: what any tracer that copies each call's bytes pays. */
static int floor_run(char **cmd)
{
	struct bpf_link *links[4] = { 0 };
	struct floor_bpf *skel = floor_bpf__open_and_load();
	struct ring_buffer *rb = NULL;
	unsigned long records = 0;
	int status = 1;
	pid_t child;

	if (!skel) {
		fprintf(stderr, "sockbench: cannot load the floor capturer (root?)\n");
		return 1;
	}
	if (!attach_rw(skel->progs.floor_enter, skel->progs.floor_exit, links))
		goto out;
	rb = ring_buffer__new(bpf_map__fd(skel->maps.floor_ring), counted, &records, NULL);
	if (!rb)
		goto out;
	child = fork();
	if (child == 0) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	while (child > 0 && waitpid(child, &status, WNOHANG) == 0) {
		usleep(20000); /* the records wake no one: drained every 20 ms */
		ring_buffer__consume(rb);
	}
	ring_buffer__consume(rb);
	if (!records) {
		fprintf(stderr, "sockbench: the floor capturer captured nothing\n");
		status = 1 << 8;
	}
out:
	ring_buffer__free(rb);
	for (int i = 0; i < 4; i++)
		bpf_link__destroy(links[i]);
	floor_bpf__destroy(skel);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	int fds[2];
	long n;

	if (argc >= 3 && !strcmp(argv[1], "bare"))
		return bare(argv + 2);
	if (argc >= 3 && !strcmp(argv[1], "floor"))
		return floor_run(argv + 2);
	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: sockbench pipe|tcp|unix|http N | bulk BYTES | bare|floor CMD...\n");
		return 2;
	}
	if (!strcmp(argv[1], "bulk"))
		return bulk(n);
	if (!strcmp(argv[1], "pipe")) {
		int p[2];

		if (pipe(p))
			die("pipe");
		fds[0] = p[1];
		fds[1] = p[0];
		printf("%.0f\n", pingpong(fds, n, NULL));
	} else if (!strcmp(argv[1], "tcp")) {
		tcp_pair(fds);
		printf("%.0f\n", pingpong(fds, n, "\xff\xfe binary protocol hello"));
	} else if (!strcmp(argv[1], "unix")) {
		/* a Unix stream socket that carries no HTTP (journald, D-Bus, a runtime's own):
		 * the plaintext family decides it on its first call and ignores it after */
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			die("socketpair");
		printf("%.0f\n", pingpong(fds, n, "\xff\xfe binary protocol hello"));
	} else if (!strcmp(argv[1], "http")) {
		tcp_pair(fds);
		printf("%.0f\n", pingpong(fds, n, "POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n"
						  "Content-Type: application/json\r\n"
						  "Content-Length: 999999999\r\n\r\n"));
	} else {
		fprintf(stderr, "sockbench: unknown mode %s\n", argv[1]);
		return 2;
	}
	return 0;
}
