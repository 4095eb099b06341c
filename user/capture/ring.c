// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/bpf.h>

#include "capture/ring.h"

int ring__init_mem(struct ring *r, unsigned long *consumer_pos, const unsigned long *producer_pos,
		   const uint8_t *data, size_t size, size_t bounce_cap, ring_fn fn, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->epoll_fd = -1;
	if (!size || (size & (size - 1)) || size % 8)
		return -EINVAL;
	r->bounce = malloc(bounce_cap ? bounce_cap : 1);
	if (!r->bounce)
		return -ENOMEM;
	r->consumer_pos = consumer_pos;
	r->producer_pos = producer_pos;
	r->data = data;
	r->size = size;
	r->bounce_cap = bounce_cap;
	r->fn = fn;
	r->ctx = ctx;
	return 0;
}

int ring__open(struct ring *r, int map_fd, size_t size, size_t bounce_cap, ring_fn fn, void *ctx)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct epoll_event ev = { .events = EPOLLIN };
	void *cons, *prod;
	int err;

	/* the consumer page, writable; then the producer page and the data, read-only, once */
	cons = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (cons == MAP_FAILED)
		return -errno;
	prod = mmap(NULL, page + size, PROT_READ, MAP_SHARED, map_fd, (off_t)page);
	if (prod == MAP_FAILED) {
		err = -errno;
		munmap(cons, page);
		return err;
	}
	err = ring__init_mem(r, cons, prod, (const uint8_t *)prod + page, size, bounce_cap, fn, ctx);
	r->cons_map = cons;
	r->prod_map = prod;
	r->cons_len = page;
	r->prod_len = page + size;
	if (err)
		goto fail;
	r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epoll_fd < 0 || epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, map_fd, &ev)) {
		err = -errno;
		goto fail;
	}
	return 0;
fail:
	ring__close(r);
	return err;
}

void ring__close(struct ring *r)
{
	if (r->epoll_fd >= 0)
		close(r->epoll_fd);
	if (r->cons_map)
		munmap(r->cons_map, r->cons_len);
	if (r->prod_map)
		munmap(r->prod_map, r->prod_len);
	free(r->bounce);
	memset(r, 0, sizeof(*r));
	r->epoll_fd = -1;
}

long ring__consume(struct ring *r)
{
	unsigned long cons = __atomic_load_n(r->consumer_pos, __ATOMIC_ACQUIRE), prod;
	size_t mask = r->size - 1;
	long n = 0;

	for (;;) {
		prod = __atomic_load_n(r->producer_pos, __ATOMIC_ACQUIRE);
		if (cons >= prod)
			return n;
		while (cons < prod) {
			size_t at = cons & mask;
			/* headers are 8-byte aligned in a power-of-two area: never split */
			uint32_t hdr = __atomic_load_n((const uint32_t *)(r->data + at), __ATOMIC_ACQUIRE);
			uint32_t len = hdr & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);

			if (hdr & BPF_RINGBUF_BUSY_BIT)
				return n; /* still being written: the rest waits for it */
			if (!(hdr & BPF_RINGBUF_DISCARD_BIT)) {
				size_t start = (at + BPF_RINGBUF_HDR_SZ) & mask;

				int refused;

				if (start + len <= r->size) {
					refused = r->fn(r->ctx, r->data + start, len);
				} else {
					size_t first = r->size - start, want = len;

					if (want > r->bounce_cap)
						want = r->bounce_cap;
					memcpy(r->bounce, r->data + start, first < want ? first : want);
					if (want > first)
						memcpy(r->bounce + first, r->data, want - first);
					refused = r->fn(r->ctx, r->bounce, len);
				}
				if (refused)
					return n; /* left in the ring, and what follows it */
				n++;
			}
			cons += (BPF_RINGBUF_HDR_SZ + (unsigned long)len + 7) & ~7ul;
			/* each record's space goes back at once, as libbpf does */
			__atomic_store_n(r->consumer_pos, cons, __ATOMIC_RELEASE);
		}
	}
}

long ring__poll(struct ring *r, int timeout_ms)
{
	struct epoll_event ev;

	if (epoll_wait(r->epoll_fd, &ev, 1, timeout_ms) < 0)
		return -errno;
	return ring__consume(r);
}
