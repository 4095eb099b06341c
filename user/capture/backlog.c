// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/clock.h"
#include "capture/backlog.h"

/* Chunks are mapped and unmapped whole, so that a burst's memory goes back when it is read;
 * a few stay mapped for the next ones (warm in cache, no system call). A record is at most a
 * data record's size (8 KiB of bytes and its header), far below a chunk. */
#define CHUNK_SIZE (256u << 10)
#define KEEP_FREE 4

struct chunk {
	struct chunk *next; /* set (release) once the filler writes no more here */
	size_t used;	    /* bytes of whole records: stored by the filler (release) */
};

#define CHUNK_DATA (CHUNK_SIZE - sizeof(struct chunk))

/* Each record: its size, 4 bytes of padding, its bytes, padded to 8. */
#define REC_HDR 8u
#define REC_SPACE(size) (REC_HDR + (((size) + 7) & ~(size_t)7))

struct backlog {
	struct ring *ring;
	size_t cap_chunks;
	/* the filler's */
	struct chunk *tail;
	bool full;	   /* the last pass stopped at a record there was no room for */
	uint64_t appended; /* records appended so far: atomic, stored after each (release) */
	/* the taker's */
	struct chunk *head;
	size_t read;
	uint64_t taken; /* records handed over so far */
	/* both: */
	uint64_t drained_ns; /* atomic: when the last whole pass began */
	size_t in_use;	     /* chunks in the queue; under lock */
	size_t peak;
	struct chunk *pool[KEEP_FREE]; /* under lock */
	int npool;
	pthread_mutex_t lock;
	pthread_cond_t space; /* a chunk was given back */
	int wake_fd;	      /* eventfd: the taker's, written after a pass that took records */
	int stop_fd;	      /* eventfd in the ring's epoll set: the thread's */
	bool stop;	      /* atomic */
	bool running;
	int poll_ms, idle_ms;
	pthread_t thread;
};

static struct chunk *chunk_map(void)
{
	void *p = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* A chunk for the filler: from the pool, or mapped; NULL past the cap or out of memory. */
static struct chunk *chunk_get(struct backlog *b)
{
	struct chunk *c = NULL;

	pthread_mutex_lock(&b->lock);
	if (b->in_use < b->cap_chunks) {
		c = b->npool ? b->pool[--b->npool] : NULL;
		if (!c)
			c = chunk_map();
		if (c) {
			b->in_use++;
			if (b->in_use > b->peak)
				b->peak = b->in_use;
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (c) {
		c->next = NULL;
		c->used = 0;
	}
	return c;
}

static void chunk_put(struct backlog *b, struct chunk *c)
{
	pthread_mutex_lock(&b->lock);
	b->in_use--;
	if (b->npool < KEEP_FREE) {
		b->pool[b->npool++] = c;
		c = NULL;
	}
	pthread_cond_signal(&b->space);
	pthread_mutex_unlock(&b->lock);
	if (c)
		munmap(c, CHUNK_SIZE);
}

/* The ring's fn: a record appended, or (nonzero) left in the ring when there is no room. */
static int append(void *ctx, const void *data, size_t size)
{
	struct backlog *b = ctx;
	struct chunk *t = b->tail, *n;
	uint8_t *at;

	if (REC_SPACE(size) > CHUNK_DATA)
		size = CHUNK_DATA - REC_HDR; /* cannot happen (see CHUNK_SIZE); cut, as the ring cuts */
	if (t->used + REC_SPACE(size) > CHUNK_DATA) {
		n = chunk_get(b);
		if (!n) {
			b->full = true;
			return -1;
		}
		__atomic_store_n(&t->next, n, __ATOMIC_RELEASE);
		b->tail = t = n;
	}
	at = (uint8_t *)(t + 1) + t->used;
	*(uint32_t *)at = (uint32_t)size;
	memcpy(at + REC_HDR, data, size);
	__atomic_store_n(&t->used, t->used + REC_SPACE(size), __ATOMIC_RELEASE);
	__atomic_store_n(&b->appended, b->appended + 1, __ATOMIC_RELEASE);
	return 0;
}

struct backlog *backlog__new(struct ring *r, size_t cap)
{
	struct backlog *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->ring = r;
	b->cap_chunks = cap / CHUNK_SIZE;
	if (b->cap_chunks < 2) /* one being read, one being filled */
		b->cap_chunks = 2;
	b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->space, NULL);
	b->head = b->tail = chunk_get(b);
	if (b->wake_fd < 0 || b->stop_fd < 0 || !b->head) {
		backlog__free(b);
		return NULL;
	}
	r->fn = append;
	r->ctx = b;
	return b;
}

long backlog__pass(struct backlog *b)
{
	uint64_t began = clock__now_ns();
	long n;

	b->full = false;
	n = ring__consume(b->ring);
	/* a pass cut short by a full backlog left records committed before it began */
	if (!b->full)
		__atomic_store_n(&b->drained_ns, began, __ATOMIC_RELEASE);
	if (n > 0) {
		uint64_t one = 1;

		if (write(b->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is already set (EAGAIN only at its maximum): the taker wakes */
		}
	}
	return n;
}

int backlog__next_wait(int ms, long took, int poll_ms, int idle_ms)
{
	if (took > 0 || idle_ms <= poll_ms)
		return poll_ms;
	return ms < idle_ms / 2 ? ms * 2 : idle_ms;
}

static void *drain(void *arg)
{
	struct backlog *b = arg;
	struct epoll_event ev;
	int ms = b->poll_ms;

	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		if (b->full) {
			/* the ring has records (epoll would not wait): wait for room instead */
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += (long)b->poll_ms * 1000000L;
			until.tv_sec += until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			pthread_mutex_lock(&b->lock);
			if (b->in_use >= b->cap_chunks)
				pthread_cond_timedwait(&b->space, &b->lock, &until);
			pthread_mutex_unlock(&b->lock);
		} else if (epoll_wait(b->ring->epoll_fd, &ev, 1, ms) < 0 && errno != EINTR) {
			break; /* cannot happen with a valid epoll set; the taker drains at the end */
		}
		ms = backlog__next_wait(ms, backlog__pass(b), b->poll_ms, b->idle_ms);
	}
	return NULL;
}

int backlog__start(struct backlog *b, int poll_ms, int idle_ms)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = b->stop_fd };
	sigset_t all, old;
	int err;

	b->poll_ms = poll_ms;
	b->idle_ms = idle_ms;
	backlog__pass(b); /* what came before: drained_ns holds from the first take on */
	if (epoll_ctl(b->ring->epoll_fd, EPOLL_CTL_ADD, b->stop_fd, &ev))
		return -errno;
	/* signals go to the caller's thread, whose waits they end */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&b->thread, NULL, drain, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		epoll_ctl(b->ring->epoll_fd, EPOLL_CTL_DEL, b->stop_fd, NULL);
		return -err;
	}
	b->running = true;
	return 0;
}

void backlog__stop(struct backlog *b)
{
	uint64_t one = 1;

	if (!b || !b->running)
		return;
	__atomic_store_n(&b->stop, true, __ATOMIC_RELEASE);
	if (write(b->stop_fd, &one, sizeof(one)) < 0) {
		/* set already */
	}
	pthread_mutex_lock(&b->lock);
	pthread_cond_signal(&b->space);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	epoll_ctl(b->ring->epoll_fd, EPOLL_CTL_DEL, b->stop_fd, NULL);
	b->running = false;
}

void backlog__free(struct backlog *b)
{
	struct chunk *c, *next;

	if (!b)
		return;
	backlog__stop(b);
	for (c = b->head; c; c = next) {
		next = c->next;
		munmap(c, CHUNK_SIZE);
	}
	while (b->npool)
		munmap(b->pool[--b->npool], CHUNK_SIZE);
	if (b->wake_fd >= 0)
		close(b->wake_fd);
	if (b->stop_fd >= 0)
		close(b->stop_fd);
	pthread_cond_destroy(&b->space);
	pthread_mutex_destroy(&b->lock);
	if (b->ring && b->ring->ctx == b)
		b->ring->fn = NULL;
	free(b);
}

int backlog__wait(struct backlog *b, int timeout_ms)
{
	struct pollfd p = { .fd = b->wake_fd, .events = POLLIN };
	uint64_t count;
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return -errno;
	if (n && read(b->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return -errno;
	return n > 0;
}

void backlog__mark(struct backlog *b, struct backlog_mark *m)
{
	/* the stamp first: every record of a pass that began before it is counted below */
	m->drained_ns = __atomic_load_n(&b->drained_ns, __ATOMIC_ACQUIRE);
	m->records = __atomic_load_n(&b->appended, __ATOMIC_ACQUIRE);
}

long backlog__take(struct backlog *b, const struct backlog_mark *upto, backlog_fn fn, void *ctx)
{
	uint64_t last = upto ? upto->records : UINT64_MAX;
	long n = 0;

	for (;;) {
		struct chunk *h = b->head, *next;
		size_t used = __atomic_load_n(&h->used, __ATOMIC_ACQUIRE);

		while (b->read < used && b->taken < last) {
			uint8_t *at = (uint8_t *)(h + 1) + b->read;
			uint32_t size = *(const uint32_t *)at;

			fn(ctx, at + REC_HDR, size);
			b->read += REC_SPACE(size);
			b->taken++;
			n++;
		}
		if (b->taken >= last)
			break;
		next = __atomic_load_n(&h->next, __ATOMIC_ACQUIRE);
		if (!next)
			break;
		/* the filler wrote its last record here before it linked the next chunk */
		if (b->read < __atomic_load_n(&h->used, __ATOMIC_ACQUIRE))
			continue;
		b->head = next;
		b->read = 0;
		chunk_put(b, h);
	}
	return n;
}

size_t backlog__peak(const struct backlog *b)
{
	return b->peak * (size_t)CHUNK_SIZE;
}
