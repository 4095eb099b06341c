/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A TLS stream and the socket under it (the userspace half of bpf/tls_link.bpf.h): the
 * socket lends the stream its addresses, a fork's copy of an SSL object on the same socket
 * carries the same connection, and TLS streams left by a dead process end with their socket.
 */
#ifndef TS_TLS_LINK_H
#define TS_TLS_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "stream/streams.h"
#include "tokenscope.h"

/* A TS_EV_TLS_SOCK record: its stream (made if new) is on e->sock, with its addresses.
 * Returns false without memory. */
bool tls_link__sock(struct streams *t, const struct ts_tls_sock *e);
/* The plaintext socket sock closed (by_exit: as its last process died): the TLS streams of
 * dead processes on it end with it. */
void tls_link__end_orphans(struct streams *t, uint64_t sock, uint64_t ts, bool by_exit);

#endif
