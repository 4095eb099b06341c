/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Connections that NAT changed on their way: a client of a Kubernetes Service address writes
 * to 10.96.0.10:80, and its server, DNAT'd to 10.244.1.7:8000, sees another connection.
 * Their records join only through the connection's conntrack entry, whose reply direction
 * says how the server sees it. A live tracer looks each captured TCP socket (and each TLS
 * stream's socket) up once, when it is first seen, in the socket's network namespace (where a
 * rule in the pod's own namespace put it) and then in the tracer's own (where kube-proxy's
 * rules put it), and sends what it found as a record (TS_REC_SOCK_NAT), so that a replay
 * joins the same. A client gone by the time its socket's record is read (curl in a pod
 * exits within milliseconds of its reply) is looked up in its namespace through what still
 * holds it: a name under /run/netns, or a process still in it (the pod's pause container).
 * Only a socket that began its connection (a client: the entry's original
 * direction is its own view) is translated; a server's socket finds the entry by its reply
 * direction and is not. Nothing is looked up while conntrack is not loaded (no NAT can exist,
 * and a query must not load it), nor for a connection to a loopback address unless an
 * interface routes loopback addresses (route_localnet: a port published on 127.0.0.1).
 *
 * Needs CAP_NET_ADMIN (conntrack's netlink), and CAP_SYS_ADMIN to look in another namespace
 * (setns); without them such connections stay unjoined, said once, never joined wrongly.
 */
#ifndef TS_NAT_H
#define TS_NAT_H

struct pipeline;
struct nat;

struct nat *nat__new(void);
void nat__free(struct nat *n);
/* rec: a TS_EV_SOCK_NET or TS_EV_TLS_SOCK record about to be fed to pl: where its connection
 * was translated, the TS_REC_SOCK_NAT record goes to pl first. */
void nat__note(struct nat *n, struct pipeline *pl, const void *rec);

#endif
