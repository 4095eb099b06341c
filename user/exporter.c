// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The /metrics endpoint (exporter.h). */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter.h"

#define CONNECTIONS_MAX 64	  /* scrapers at once; more are refused, not queued */
#define CONNECTION_TIMEOUT_S 10	  /* a slow or half-open client is dropped after this */
#define CONNECTION_MEMORY (32 << 10) /* a request head larger than this is refused (431) */

struct exporter {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	char *text;
	size_t len;
};

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
	e->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
					MHD_USE_ERROR_LOG,
				(uint16_t)port, NULL, NULL, on_request, e, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTIONS_MAX,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
				MHD_OPTION_END);
	if (!e->d) {
		fprintf(stderr, "tokenscope: cannot serve metrics on %s:%u (in use?)\n", addr, port);
		pthread_mutex_destroy(&e->mu);
		free(e);
		return NULL;
	}
	return e;
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
	MHD_stop_daemon(e->d);
	pthread_mutex_destroy(&e->mu);
	free(e->text);
	free(e);
}
