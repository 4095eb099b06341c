// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The /metrics endpoint (exporter.h). */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/clock.h"
#include "sinks/exporter.h"

/*
 * Slow clients must not starve scrapers. Each connection gets REQUEST_TIME_MAX_S from its
 * start (or from its last reply, on keep-alive) to a complete request, however slowly it
 * trickles bytes in (MHD's own timeout counts idle time only: a header line a second is never
 * idle). And when SLOTS connections are open, a new one is let in and the one waiting longest
 * is dropped, so a scraper that connects is served while any number of slow clients hold on.
 * Dropping is a shutdown() from the thread that runs MHD (below), never a close: MHD sees
 * the end, closes the socket itself and says so, and no descriptor is shut twice.
 */
#define SLOTS 256		      /* connections served at once */
#define MHD_LIMIT (2 * SLOTS)	      /* MHD's own: room for those dropped until it has closed them */
#define REQUEST_TIME_MAX_S 5	      /* to finish a request */
#define CONNECTION_TIMEOUT_S 10	      /* idle keep-alive connections */
#define CONNECTION_MEMORY (32 << 10) /* a request head larger than this is refused (431) */
#define RUN_WAIT_MS 200		      /* how often overdue connections are looked for */

struct slot {
	MHD_socket fd;
	uint64_t since_ns; /* the connection's start, or its last reply */
	bool used, dropped;
};

struct exporter {
	struct MHD_Daemon *d;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t mu; /* the text: published by the capture loop, read by scrapes */
	char *text;
	size_t len;
	/* the MHD thread's own */
	struct slot slots[MHD_LIMIT];
	unsigned live; /* used and not dropped */
};

static void drop(struct exporter *e, struct slot *s)
{
	shutdown(s->fd, SHUT_RDWR);
	s->dropped = true;
	e->live--;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct exporter *e = cls;
	struct slot *s = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (s) {
			if (!s->dropped)
				e->live--;
			s->used = false;
		}
		return;
	}
	for (size_t i = 0; i < MHD_LIMIT; i++) {
		const union MHD_ConnectionInfo *ci;

		if (e->slots[i].used)
			continue;
		ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			return;
		e->slots[i] = (struct slot){ .fd = ci->connect_fd, .since_ns = clock__now_ns(),
					     .used = true };
		e->live++;
		*socket_context = &e->slots[i];
		return;
	}
}

/* A reply went out: the next request on this connection has its own time. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct slot *s = ci ? ci->socket_context : NULL;

	if (s)
		s->since_ns = clock__now_ns();
}

/* Before each accept: full, so the connection waiting longest makes room. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct exporter *e = cls;
	struct slot *oldest = NULL;

	if (e->live < SLOTS)
		return MHD_YES;
	for (size_t i = 0; i < MHD_LIMIT; i++) {
		struct slot *s = &e->slots[i];

		if (s->used && !s->dropped && (!oldest || s->since_ns < oldest->since_ns))
			oldest = s;
	}
	if (oldest)
		drop(e, oldest);
	return MHD_YES;
}

static void *serve(void *arg)
{
	struct exporter *e = arg;

	while (!atomic_load(&e->stop)) {
		uint64_t now;

		MHD_run_wait(e->d, RUN_WAIT_MS);
		now = clock__now_ns();
		for (size_t i = 0; i < MHD_LIMIT; i++) {
			struct slot *s = &e->slots[i];

			if (s->used && !s->dropped &&
			    now - s->since_ns > REQUEST_TIME_MAX_S * 1000000000ull)
				drop(e, s);
		}
	}
	return NULL;
}

int exporter__parse(const char *spec, char *addr, size_t addrn, unsigned *port)
{
	const char *colon = strrchr(spec, ':');
	const char *p = colon ? colon + 1 : spec;
	char *end;
	unsigned long v = strtoul(p, &end, 10);
	struct in_addr ia;

	if (end == p || *end || !v || v > 65535)
		return -1;
	if (colon) {
		snprintf(addr, addrn, "%.*s", (int)(colon - spec), spec);
		if (inet_pton(AF_INET, addr, &ia) != 1)
			return -1;
	} else {
		snprintf(addr, addrn, "127.0.0.1");
	}
	*port = (unsigned)v;
	return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
			     const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								   MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	struct exporter *e = cls;
	enum MHD_Result ret;

	(void)version;
	(void)upload;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET /metrics\n", 13);
	if (*upload_size) { /* a GET with a body: ignore it */
		*upload_size = 0;
		return MHD_YES;
	}
	if (!*state) { /* the head only: answer when it is complete */
		*state = e;
		return MHD_YES;
	}
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found: try /metrics\n", 24);
	pthread_mutex_lock(&e->mu);
	ret = reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", e->text ? e->text : "",
		    e->text ? e->len : 0);
	pthread_mutex_unlock(&e->mu);
	return ret;
}

struct exporter *exporter__start(const char *spec)
{
	struct exporter *e = calloc(1, sizeof(*e));
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char addr[64];
	unsigned port;

	if (!e)
		return NULL;
	if (exporter__parse(spec, addr, sizeof(addr), &port)) {
		fprintf(stderr, "tokenscope: --metrics wants [ADDR:]PORT (IPv4), not '%s'\n", spec);
		free(e);
		return NULL;
	}
	inet_pton(AF_INET, addr, &sa.sin_addr);
	sa.sin_port = htons((uint16_t)port);
	pthread_mutex_init(&e->mu, NULL);
	/* MHD runs in this module's own thread (serve), so that dropping a connection happens
	 * where MHD closes them */
	e->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t)port, on_accept, e,
				on_request, e, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)MHD_LIMIT,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, e,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, e, MHD_OPTION_END);
	if (!e->d) {
		fprintf(stderr, "tokenscope: cannot serve metrics on %s:%u (in use?)\n", addr, port);
		goto fail;
	}
	if (pthread_create(&e->thread, NULL, serve, e)) {
		fprintf(stderr, "tokenscope: cannot start the metrics thread\n");
		MHD_stop_daemon(e->d);
		goto fail;
	}
	return e;
fail:
	pthread_mutex_destroy(&e->mu);
	free(e);
	return NULL;
}

void exporter__publish(struct exporter *e, const char *text, size_t len)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return; /* the previous text stays served */
	memcpy(copy, text, len);
	copy[len] = 0;
	pthread_mutex_lock(&e->mu);
	free(e->text);
	e->text = copy;
	e->len = len;
	pthread_mutex_unlock(&e->mu);
}

void exporter__stop(struct exporter *e)
{
	if (!e)
		return;
	atomic_store(&e->stop, true);
	pthread_join(e->thread, NULL);
	MHD_stop_daemon(e->d);
	pthread_mutex_destroy(&e->mu);
	free(e->text);
	free(e);
}
