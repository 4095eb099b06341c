// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* OTLP/HTTP's sending side (otlp_export.h): a queue, a thread, a POST per batch. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/buf.h"
#include "sinks/otlp_export.h"

#define SEND_EVERY_MS 1000 /* a batch leaves this long after its first part, or when full */
#define RETRY_FIRST_MS 500
#define RETRY_MAX_MS 30000
#define TRIES_MAX 5 /* then the batch is given up on (counted) */

struct part {
	struct part *next;
	size_t len;
	uint64_t nspans;
	uint8_t bytes[];
};

struct otlp_export {
	struct otlp_endpoint ep;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct part *head, **tail;
	size_t queued; /* bytes */
	bool stopping;
	struct timespec stop_by; /* CLOCK_REALTIME: past it, no more tries */
	struct otlp_counts n;
	SSL_CTX *ssl;
};

/* ---- the endpoint ---- */

static void percent_decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		unsigned v;

		if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1) {
			*o++ = (char)v;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

static int parse_headers(const char *spec, struct otlp_endpoint *ep, char *err, size_t n)
{
	char copy[2048], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", spec);
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (!eq || eq == kv || ep->nheaders == OTLP_HEADERS_MAX) {
			snprintf(err, n, "OTEL_EXPORTER_OTLP_HEADERS: want name=value,... (at most %d)",
				 OTLP_HEADERS_MAX);
			return -1;
		}
		*eq = 0;
		snprintf(ep->headers[ep->nheaders][0], sizeof(ep->headers[0][0]), "%s", kv);
		snprintf(ep->headers[ep->nheaders][1], sizeof(ep->headers[0][1]), "%s", eq + 1);
		percent_decode(ep->headers[ep->nheaders][1]);
		/* a name or value with a line break would write another header line */
		if (strpbrk(ep->headers[ep->nheaders][0], "\r\n: ") ||
		    strpbrk(ep->headers[ep->nheaders][1], "\r\n")) {
			snprintf(err, n, "OTEL_EXPORTER_OTLP_HEADERS: a name or value not allowed");
			return -1;
		}
		ep->nheaders++;
	}
	return 0;
}

/* OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT: whole milliseconds, 1
 * to 10 minutes; neither set: OTLP_TIMEOUT_MS_DEFAULT. */
static int parse_timeout(struct otlp_endpoint *ep, char *err, size_t n)
{
	const char *name = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", *env = getenv(name);
	unsigned long v;
	char *end;

	if (!env || !*env)
		env = getenv(name = "OTEL_EXPORTER_OTLP_TIMEOUT");
	ep->timeout_ms = OTLP_TIMEOUT_MS_DEFAULT;
	if (!env || !*env)
		return 0;
	errno = 0;
	v = strtoul(env, &end, 10);
	if (*env < '0' || *env > '9' || *end || errno || v < 1 || v > 600000) {
		snprintf(err, n, "%s '%.32s': want milliseconds, 1 to 600000", name, env);
		return -1;
	}
	ep->timeout_ms = (unsigned)v;
	return 0;
}

int otlp_endpoint__parse(const char *url, struct otlp_endpoint *ep, char *err, size_t n)
{
	char buf[1024];
	const char *env, *rest, *slash, *colon;

	memset(ep, 0, sizeof(*ep));
	if (!url || !*url || !strcmp(url, "env")) {
		size_t l;

		if ((env = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && *env) {
			snprintf(buf, sizeof(buf), "%s", env); /* used as it is */
		} else if ((env = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) && *env) {
			/* a base: the signal's path appended */
			snprintf(buf, sizeof(buf), "%s", env);
			l = strlen(buf);
			while (l && buf[l - 1] == '/')
				buf[--l] = 0;
			snprintf(buf + l, sizeof(buf) - l, "/v1/traces");
		} else {
			snprintf(buf, sizeof(buf), "http://localhost:4318/v1/traces");
		}
	} else {
		snprintf(buf, sizeof(buf), "%s", url);
	}
	if (!strncmp(buf, "http://", 7)) {
		rest = buf + 7;
	} else if (!strncmp(buf, "https://", 8)) {
		rest = buf + 8;
		ep->tls = true;
	} else {
		snprintf(err, n, "OTLP endpoint '%s': want http:// or https://", buf);
		return -1;
	}
	slash = strchr(rest, '/');
	snprintf(ep->path, sizeof(ep->path), "%s", slash ? slash : "/v1/traces");
	if (!slash)
		slash = rest + strlen(rest);
	colon = memchr(rest, ':', (size_t)(slash - rest));
	if (rest[0] == '[') /* [v6]:port */
		colon = memchr(rest, ']', (size_t)(slash - rest)) ? strchr(strchr(rest, ']'), ':')
								  : NULL;
	snprintf(ep->host, sizeof(ep->host), "%.*s",
		 (int)((colon && colon < slash ? colon : slash) - rest), rest);
	if (ep->host[0] == '[') {
		memmove(ep->host, ep->host + 1, strlen(ep->host));
		ep->host[strcspn(ep->host, "]")] = 0;
	}
	snprintf(ep->port, sizeof(ep->port), "%.*s",
		 colon && colon < slash ? (int)(slash - colon - 1) : 0, colon ? colon + 1 : "");
	if (!ep->port[0])
		snprintf(ep->port, sizeof(ep->port), "%s", ep->tls ? "443" : "80");
	if (!ep->host[0] || strpbrk(ep->path, "\r\n ")) {
		snprintf(err, n, "OTLP endpoint '%s': no host, or a path not allowed", buf);
		return -1;
	}
	if (parse_timeout(ep, err, n))
		return -1;
	env = getenv("OTEL_EXPORTER_OTLP_HEADERS");
	return env && *env ? parse_headers(env, ep, err, n) : 0;
}

/* ---- one POST ---- */

struct conn {
	int fd;
	SSL *ssl;
};

static int wait_fd(int fd, short events, unsigned timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	return poll(&p, 1, (int)timeout_ms) == 1 ? 0 : -1;
}

static int dial(struct otlp_export *x, struct conn *c)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	struct timeval tv = { x->ep.timeout_ms / 1000, (x->ep.timeout_ms % 1000) * 1000 };
	int fd = -1;

	c->ssl = NULL;
	if (getaddrinfo(x->ep.host, x->ep.port, &hints, &ai))
		return -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, a->ai_addr, a->ai_addrlen)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return -1;
	c->fd = fd;
	if (!x->ep.tls)
		return 0;
	c->ssl = SSL_new(x->ssl);
	if (!c->ssl || !SSL_set_fd(c->ssl, fd) || !SSL_set_tlsext_host_name(c->ssl, x->ep.host) ||
	    !SSL_set1_host(c->ssl, x->ep.host) || SSL_connect(c->ssl) != 1) {
		SSL_free(c->ssl);
		close(fd);
		return -1;
	}
	return 0;
}

static void hang_up(struct conn *c)
{
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	close(c->fd);
}

static int put_all(struct conn *c, const char *p, size_t n)
{
	while (n) {
		ssize_t w = c->ssl ? SSL_write(c->ssl, p, (int)(n > (1u << 30) ? 1u << 30 : n))
				   : send(c->fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The answer's status, and its Retry-After in ms (0: none). */
static int answer(struct conn *c, unsigned *retry_ms)
{
	char buf[2048];
	size_t got = 0;
	int status = -1;
	const char *ra;

	*retry_ms = 0;
	while (got < sizeof(buf) - 1 && !strstr(buf, "\r\n\r\n")) {
		ssize_t r = c->ssl ? SSL_read(c->ssl, buf + got, (int)(sizeof(buf) - 1 - got))
				   : recv(c->fd, buf + got, sizeof(buf) - 1 - got, 0);

		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = 0;
	}
	buf[got] = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	if ((ra = strcasestr(buf, "\r\nretry-after:")))
		*retry_ms = (unsigned)atoi(ra + 14) * 1000u;
	return status;
}

/* POST the body: its HTTP status, or -1 when the collector could not be reached or said
 * nothing. */
static int post(struct otlp_export *x, const struct buf *body, unsigned *retry_ms)
{
	struct conn c;
	struct buf head = { 0 };
	int status = -1;

	*retry_ms = 0;
	if (dial(x, &c))
		return -1;
	buf__printf(&head, 1 << 16,
		    "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-protobuf\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\nUser-Agent: tokenscope\r\n",
		    x->ep.path, x->ep.host, body->len);
	for (size_t i = 0; i < x->ep.nheaders; i++)
		buf__printf(&head, 1 << 16, "%s: %s\r\n", x->ep.headers[i][0], x->ep.headers[i][1]);
	buf__printf(&head, 1 << 16, "\r\n");
	if (!head.overflow && !put_all(&c, head.p, head.len) && !put_all(&c, body->p, body->len) &&
	    !wait_fd(c.fd, POLLIN, x->ep.timeout_ms))
		status = answer(&c, retry_ms);
	buf__free(&head);
	hang_up(&c);
	return status;
}

/* ---- the thread ---- */

static bool past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Waits ms (with the lock held), or less when stop wakes it. */
static void pause_ms(struct otlp_export *x, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	if (x->stopping && (until.tv_sec > x->stop_by.tv_sec ||
			    (until.tv_sec == x->stop_by.tv_sec && until.tv_nsec > x->stop_by.tv_nsec)))
		until = x->stop_by;
	pthread_cond_timedwait(&x->wake, &x->lock, &until);
}

static void say_error(struct otlp_export *x, const char *what)
{
	if (!x->n.last_error[0])
		fprintf(stderr, "tokenscope: otlp: %s (%s://%s:%s%s); spans are queued and "
				"retried, dropped past the queue's bound (counted)\n",
			what, x->ep.tls ? "https" : "http", x->ep.host, x->ep.port, x->ep.path);
	snprintf(x->n.last_error, sizeof(x->n.last_error), "%s", what);
}

/* Sends one batch, with retries: whether it was taken (or refused for good). */
static void send_batch(struct otlp_export *x, struct buf *body, uint64_t nspans)
{
	unsigned delay = RETRY_FIRST_MS, retry_ms;
	char what[64];

	for (int tries = 0; tries < TRIES_MAX; tries++) {
		int status = post(x, body, &retry_ms);

		pthread_mutex_lock(&x->lock);
		x->n.posts++;
		if (status >= 200 && status < 300) {
			x->n.spans_sent += nspans;
			pthread_mutex_unlock(&x->lock);
			return;
		}
		snprintf(what, sizeof(what), status < 0 ? "the collector did not answer"
							: "the collector answered %d", status);
		say_error(x, what);
		/* refused for good (400, 401, 404...): retrying sends the same */
		if (status >= 0 && status != 429 && status != 502 && status != 503 && status != 504)
			break;
		if (x->stopping && past(&x->stop_by)) {
			pthread_mutex_unlock(&x->lock);
			break;
		}
		x->n.retries++;
		if (retry_ms > delay)
			delay = retry_ms < RETRY_MAX_MS ? retry_ms : RETRY_MAX_MS;
		pause_ms(x, delay);
		pthread_mutex_unlock(&x->lock);
		delay = delay * 2 < RETRY_MAX_MS ? delay * 2 : RETRY_MAX_MS;
	}
	pthread_mutex_lock(&x->lock);
	x->n.failures++;
	x->n.spans_dropped += nspans;
	pthread_mutex_unlock(&x->lock);
}

static void *run(void *arg)
{
	struct otlp_export *x = arg;
	struct buf body = { 0 };

	pthread_mutex_lock(&x->lock);
	for (;;) {
		uint64_t nspans = 0;
		struct timespec until;

		while (!x->head && !x->stopping)
			pthread_cond_wait(&x->wake, &x->lock);
		if (!x->head || (x->stopping && past(&x->stop_by)))
			break; /* what is left is dropped by stop, counted */
		/* the first part waits for more, up to SEND_EVERY_MS or a batch's worth */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += SEND_EVERY_MS / 1000;
		while (!x->stopping && x->queued < OTLP_BATCH_MAX &&
		       pthread_cond_timedwait(&x->wake, &x->lock, &until) != ETIMEDOUT)
			;
		buf__reset(&body);
		while (x->head && body.len + x->head->len <= OTLP_BATCH_MAX) {
			struct part *p = x->head;

			x->head = p->next;
			if (!x->head)
				x->tail = &x->head;
			x->queued -= p->len;
			if (buf__add(&body, p->bytes, p->len, OTLP_BATCH_MAX))
				x->n.spans_dropped += p->nspans;
			else
				nspans += p->nspans;
			free(p);
		}
		pthread_mutex_unlock(&x->lock);
		if (nspans)
			send_batch(x, &body, nspans);
		pthread_mutex_lock(&x->lock);
	}
	pthread_mutex_unlock(&x->lock);
	buf__free(&body);
	return NULL;
}

struct otlp_export *otlp_export__start(const struct otlp_endpoint *ep)
{
	struct otlp_export *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->ep = *ep;
	x->tail = &x->head;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->wake, NULL);
	if (ep->tls) {
		x->ssl = SSL_CTX_new(TLS_client_method());
		if (!x->ssl || !SSL_CTX_set_default_verify_paths(x->ssl)) {
			SSL_CTX_free(x->ssl);
			free(x);
			return NULL;
		}
		SSL_CTX_set_verify(x->ssl, SSL_VERIFY_PEER, NULL);
		/* a CA of the operator's own, as the OpenTelemetry exporters take it */
		if (getenv("OTEL_EXPORTER_OTLP_CERTIFICATE"))
			SSL_CTX_load_verify_locations(x->ssl, getenv("OTEL_EXPORTER_OTLP_CERTIFICATE"),
						      NULL);
	}
	if (pthread_create(&x->thread, NULL, run, x)) {
		SSL_CTX_free(x->ssl);
		free(x);
		return NULL;
	}
	return x;
}

void otlp_export__send(struct otlp_export *x, const void *bytes, size_t len, uint64_t nspans)
{
	struct part *p = NULL;

	pthread_mutex_lock(&x->lock);
	if (x->queued + len <= OTLP_QUEUE_MAX && len <= OTLP_BATCH_MAX)
		p = malloc(sizeof(*p) + len);
	if (!p) {
		x->n.spans_dropped += nspans;
		pthread_mutex_unlock(&x->lock);
		return;
	}
	p->next = NULL;
	p->len = len;
	p->nspans = nspans;
	memcpy(p->bytes, bytes, len);
	*x->tail = p;
	x->tail = &p->next;
	x->queued += len;
	if (x->queued >= OTLP_BATCH_MAX)
		pthread_cond_signal(&x->wake);
	else if (x->head == p)
		pthread_cond_signal(&x->wake); /* a first part starts the batch's clock */
	pthread_mutex_unlock(&x->lock);
}

void otlp_export__stop(struct otlp_export *x)
{
	if (!x)
		return;
	pthread_mutex_lock(&x->lock);
	x->stopping = true;
	clock_gettime(CLOCK_REALTIME, &x->stop_by);
	x->stop_by.tv_sec += x->ep.timeout_ms / 1000;
	x->stop_by.tv_nsec += (long)(x->ep.timeout_ms % 1000) * 1000000;
	if (x->stop_by.tv_nsec >= 1000000000) {
		x->stop_by.tv_sec++;
		x->stop_by.tv_nsec -= 1000000000;
	}
	pthread_cond_broadcast(&x->wake);
	pthread_mutex_unlock(&x->lock);
	/* past stop_by no batch is tried again: a collector that does not answer holds the
	 * last POST to its timeout (ep.timeout_ms), no longer */
	pthread_join(x->thread, NULL);
	pthread_mutex_lock(&x->lock);
	for (struct part *p = x->head, *next; p; p = next) {
		next = p->next;
		x->n.spans_dropped += p->nspans;
		free(p);
	}
	x->head = NULL;
	x->tail = &x->head;
	pthread_mutex_unlock(&x->lock);
}

void otlp_export__counts(struct otlp_export *x, struct otlp_counts *out)
{
	pthread_mutex_lock(&x->lock);
	*out = x->n;
	pthread_mutex_unlock(&x->lock);
}

void otlp_export__free(struct otlp_export *x)
{
	if (!x)
		return;
	SSL_CTX_free(x->ssl);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->wake);
	free(x);
}
