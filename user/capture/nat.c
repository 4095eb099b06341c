// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Connections that NAT changed, from their conntrack entries (capture/nat.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libnetfilter_conntrack/libnetfilter_conntrack.h>

#include "base/clock.h"
#include "capture/nat.h"
#include "stream/pipeline.h"
#include "stream/recording.h"

#define NAT_HANDLES 16
/* A handle into another namespace holds that namespace: let go once unused so long. */
#define NAT_IDLE_NS (60ull * 1000000000ull)
/* How often whether conntrack is loaded is looked at again. */
#define NAT_MODULE_RECHECK_NS (1000000000ull)

/* How long a namespace that nothing was found to hold is not searched for again. */
#define NAT_SEARCH_AGAIN_NS (1000000000ull)

/* Connections looked up lately, as their socket saw them: the other end of one (the same
 * addresses reversed, in the same namespace) is its server's socket, not a translation. */
#define NAT_LOOKED 64

struct looked_up {
	uint32_t netns;
	struct ts_sock_addr a;
};

struct ns_handle {
	uint32_t netns;
	struct nfct_handle *h;
	uint64_t used_ns;
};

struct nat {
	uint32_t own_netns;
	int own_fd; /* the tracer's own namespace, to come back to after a setns */
	struct ns_handle hs[NAT_HANDLES];
	bool off;	    /* conntrack is not ours to read (said once) */
	bool other_off;	    /* other namespaces are not ours to enter (said once) */
	bool loaded;	    /* nf_conntrack is loaded */
	uint64_t checked_ns; /* when that was last looked at */
	bool localnet;	     /* an interface routes loopback addresses (route_localnet) */
	struct looked_up looked[NAT_LOOKED];
	unsigned nlooked; /* looked up so far: the next goes to looked[nlooked % NAT_LOOKED] */
	uint32_t unfound_netns; /* the namespace last searched for in vain (holder_of), and when */
	uint64_t unfound_ns;
	/* the lookup in progress */
	const struct ts_sock_addr *query;
	bool found;
	struct ts_sock_addr reply;
};

struct nat *nat__new(void)
{
	struct nat *n = calloc(1, sizeof(*n));
	struct stat st;

	if (!n)
		return NULL;
	n->own_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (n->own_fd < 0 || fstat(n->own_fd, &st)) {
		n->off = true; /* no /proc: nothing to look up with */
		return n;
	}
	n->own_netns = (uint32_t)st.st_ino;
	return n;
}

void nat__free(struct nat *n)
{
	if (!n)
		return;
	for (int i = 0; i < NAT_HANDLES; i++) {
		if (n->hs[i].h)
			nfct_close(n->hs[i].h);
	}
	if (n->own_fd >= 0)
		close(n->own_fd);
	free(n);
}

/* Whether an interface lets loopback addresses be routed (route_localnet), which a DNAT of
 * a loopback address to another host needs (podman's and CNI's ports published on
 * 127.0.0.1, kube-proxy's NodePorts on localhost). */
static bool any_route_localnet(void)
{
	DIR *d = opendir("/proc/sys/net/ipv4/conf");
	struct dirent *e;
	bool on = false;

	if (!d)
		return false;
	while (!on && (e = readdir(d))) {
		char path[300], v = '0';
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/route_localnet", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			on = read(fd, &v, 1) == 1 && v == '1';
			close(fd);
		}
	}
	closedir(d);
	return on;
}

/* Without conntrack loaded no connection can have been translated, and a query would load it
 * (netlink asks for its module): nothing is looked up then. Looked at again each second, with
 * whether a loopback address can be translated. */
static bool conntrack_loaded(struct nat *n, uint64_t now)
{
	if (!n->checked_ns || now - n->checked_ns >= NAT_MODULE_RECHECK_NS) {
		n->checked_ns = now;
		n->loaded = !access("/sys/module/nf_conntrack", F_OK);
		n->localnet = n->loaded && any_route_localnet();
	}
	return n->loaded;
}

/* The entry the query asked for, where its original direction is the socket's own view (the
 * socket began the connection: a client): its reply direction, whose source is the server as
 * it really is and whose destination the client as the server sees it. A query also finds an
 * entry by its reply direction (the socket accepted the connection: a server, which sees its
 * peer as NAT left it): not a translation of its own. Every message of the answer is read
 * (NFCT_CB_CONTINUE), so that none is left on the socket for the next query to take. */
static int on_entry(enum nf_conntrack_msg_type type, struct nf_conntrack *ct, void *data)
{
	struct nat *n = data;
	struct ts_sock_addr *r = &n->reply;
	const struct ts_sock_addr *q = n->query;

	(void)type;
	if (n->found || nfct_get_attr_u8(ct, ATTR_L3PROTO) != q->family ||
	    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC)) != q->lport ||
	    ntohs(nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST)) != q->rport)
		return NFCT_CB_CONTINUE;
	memset(r, 0, sizeof(*r));
	r->family = q->family;
	if (q->family == AF_INET) {
		uint32_t osrc = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC),
			 odst = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST),
			 src = nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC),
			 dst = nfct_get_attr_u32(ct, ATTR_REPL_IPV4_DST);

		if (memcmp(&osrc, q->laddr, 4) || memcmp(&odst, q->raddr, 4))
			return NFCT_CB_CONTINUE;
		memcpy(r->raddr, &src, sizeof(src));
		memcpy(r->laddr, &dst, sizeof(dst));
	} else {
		const void *osrc = nfct_get_attr(ct, ATTR_ORIG_IPV6_SRC),
			   *odst = nfct_get_attr(ct, ATTR_ORIG_IPV6_DST),
			   *src = nfct_get_attr(ct, ATTR_REPL_IPV6_SRC),
			   *dst = nfct_get_attr(ct, ATTR_REPL_IPV6_DST);

		if (!osrc || !odst || !src || !dst || memcmp(osrc, q->laddr, 16) ||
		    memcmp(odst, q->raddr, 16))
			return NFCT_CB_CONTINUE;
		memcpy(r->raddr, src, sizeof(r->raddr));
		memcpy(r->laddr, dst, sizeof(r->laddr));
	}
	r->rport = ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC));
	r->lport = ntohs(nfct_get_attr_u16(ct, ATTR_REPL_PORT_DST));
	n->found = true;
	return NFCT_CB_CONTINUE;
}

static struct nfct_handle *open_handle(struct nat *n)
{
	struct nfct_handle *h = nfct_open(CONNTRACK, 0);

	if (h)
		nfct_callback_register(h, NFCT_T_ALL, on_entry, n);
	return h;
}

/* An open file of namespace netns, dir/NAME/under for an entry of dir (/run/netns/NAME with
 * under "", /proc/PID/ns/net with "/ns/net"); -1 where none is. */
static int ns_file_in(const char *dir, const char *under, uint32_t netns)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int fd = -1;

	if (!d)
		return -1;
	while (fd < 0 && (e = readdir(d))) {
		char path[300];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s%s", dir, e->d_name, under);
		if (!stat(path, &st) && (uint32_t)st.st_ino == netns)
			fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	closedir(d);
	return fd;
}

/* The namespace of a process gone by the time its socket's record is read (a short-lived
 * client: curl in a pod exits within milliseconds of its reply), through what still holds
 * it: a name `ip netns` or a CNI plugin mounted (/run/netns), or any process still in it (a
 * pod's pause container). The /proc walk is a stat a process, so a namespace not found is
 * not searched for again within a second. */
static int holder_of(struct nat *n, uint32_t netns, uint64_t now)
{
	int fd;

	if (n->unfound_netns == netns && now - n->unfound_ns < NAT_SEARCH_AGAIN_NS)
		return -1;
	fd = ns_file_in("/run/netns", "", netns);
	if (fd < 0)
		fd = ns_file_in("/proc", "/ns/net", netns);
	if (fd < 0) {
		n->unfound_netns = netns;
		n->unfound_ns = now;
	}
	return fd;
}

/* A conntrack handle in namespace netns, which process pid is in: the tracer's own, or
 * opened inside the other (setns on this thread, and back). NULL: not to be had. */
static struct nfct_handle *handle_for(struct nat *n, uint32_t netns, uint32_t pid, uint64_t now)
{
	struct ns_handle *slot = NULL;
	struct nfct_handle *h;
	char path[64];
	struct stat st;
	int fd;

	for (int i = 0; i < NAT_HANDLES; i++) {
		struct ns_handle *s = &n->hs[i];

		if (s->h && s->netns == netns) {
			s->used_ns = now;
			return s->h;
		}
		if (s->h && s->netns != n->own_netns && now - s->used_ns >= NAT_IDLE_NS) {
			nfct_close(s->h);
			s->h = NULL;
		}
		if (!s->h && !slot)
			slot = s;
		else if (s->h && s->netns != n->own_netns &&
			 (!slot || (slot->h && s->used_ns < slot->used_ns)))
			slot = s; /* the least recently used, should all be taken */
	}
	if (!slot)
		return NULL;
	if (netns == n->own_netns) {
		h = open_handle(n);
		if (!h) {
			n->off = true;
			fprintf(stderr, "tokenscope: conntrack cannot be reached (netlink: %s): "
					"connections through NAT are not joined to their servers\n",
				strerror(errno));
		}
	} else {
		if (n->other_off)
			return NULL;
		snprintf(path, sizeof(path), "/proc/%u/ns/net", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st) || (uint32_t)st.st_ino != netns)) {
			close(fd); /* the socket is not in its process's namespace (any more) */
			fd = -1;
		}
		if (fd < 0)
			fd = holder_of(n, netns, now);
		if (fd < 0)
			return NULL;
		if (setns(fd, CLONE_NEWNET)) {
			close(fd);
			if (errno == EPERM) {
				n->other_off = true;
				fprintf(stderr, "tokenscope: cannot enter other network namespaces "
						"(CAP_SYS_ADMIN): NAT inside a pod's own namespace is not "
						"looked up; such connections stay unjoined\n");
			}
			return NULL;
		}
		close(fd);
		h = open_handle(n);
		if (setns(n->own_fd, CLONE_NEWNET)) {
			/* cannot happen with the rights that got us out; never go on elsewhere */
			perror("tokenscope: back to its own network namespace");
			abort();
		}
	}
	if (!h)
		return NULL;
	if (slot->h)
		nfct_close(slot->h);
	*slot = (struct ns_handle){ .netns = netns, .h = h, .used_ns = now };
	return h;
}

/* Looks a's connection up (a as its own end sees it: the entry's original direction) in
 * netns; 1 found (n->reply), 0 not, -1 conntrack not readable. */
static int lookup(struct nat *n, uint32_t netns, uint32_t pid, const struct ts_sock_addr *a,
		  uint64_t now)
{
	struct nfct_handle *h = handle_for(n, netns, pid, now);
	struct nf_conntrack *ct;
	int rc;

	if (!h || !(ct = nfct_new()))
		return 0;
	nfct_set_attr_u8(ct, ATTR_L3PROTO, (uint8_t)a->family);
	if (a->family == AF_INET) {
		uint32_t src, dst;

		memcpy(&src, a->laddr, sizeof(src));
		memcpy(&dst, a->raddr, sizeof(dst));
		nfct_set_attr_u32(ct, ATTR_IPV4_SRC, src);
		nfct_set_attr_u32(ct, ATTR_IPV4_DST, dst);
	} else {
		nfct_set_attr(ct, ATTR_IPV6_SRC, a->laddr);
		nfct_set_attr(ct, ATTR_IPV6_DST, a->raddr);
	}
	nfct_set_attr_u8(ct, ATTR_L4PROTO, IPPROTO_TCP);
	nfct_set_attr_u16(ct, ATTR_PORT_SRC, htons(a->lport));
	nfct_set_attr_u16(ct, ATTR_PORT_DST, htons(a->rport));
	n->query = a;
	n->found = false;
	rc = nfct_query(h, NFCT_Q_GET, ct);
	nfct_destroy(ct);
	if (rc < 0 && errno == EPERM)
		return -1;
	return rc == 0 && n->found;
}

/* A connection to a loopback address: no lookup unless an interface routes loopback
 * addresses (a query per connection is a short-lived client's largest cost but one). */
static bool loopback_peer(const struct ts_sock_addr *a)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6lo[16] = { [15] = 1 };

	if (a->family == AF_INET)
		return a->raddr[0] == 127;
	return !memcmp(a->raddr, v6lo, 16) || (!memcmp(a->raddr, v4mapped, 12) && a->raddr[12] == 127);
}

/* Whether a is the other end of a connection looked up lately in netns (else a is
 * remembered): the two ends see each other as each sees itself, which no translation leaves
 * so, and neither end's lookup can find one. Both ends of a connection within a host are
 * captured: the server's socket (its entry's reply direction, on_entry) is not looked up, a
 * query a connection spared. */
static bool other_end_looked_up(struct nat *n, uint32_t netns, const struct ts_sock_addr *a)
{
	for (unsigned i = 0; i < NAT_LOOKED && i < n->nlooked; i++) {
		const struct looked_up *l = &n->looked[i];

		if (l->netns == netns && l->a.family == a->family && l->a.lport == a->rport &&
		    l->a.rport == a->lport && !memcmp(l->a.laddr, a->raddr, sizeof(a->raddr)) &&
		    !memcmp(l->a.raddr, a->laddr, sizeof(a->laddr)))
			return true;
	}
	n->looked[n->nlooked++ % NAT_LOOKED] = (struct looked_up){ netns, *a };
	return false;
}

void nat__note(struct nat *n, struct pipeline *pl, const void *rec)
{
	const struct ts_event_hdr *h = rec;
	struct ts_rec_sock_nat out = { 0 };
	const struct ts_sock_addr *a;
	uint64_t now = clock__now_ns();
	uint32_t netns;
	int rc;

	if (h->type == TS_EV_SOCK_NET && h->size >= sizeof(struct ts_sock_net)) {
		const struct ts_sock_net *e = rec;

		a = &e->addr;
		netns = e->netns;
		out.id = e->sock;
		out.stream = TS_NAT_TCP;
		out.hdr.pid = e->owner;
	} else if (h->type == TS_EV_TLS_SOCK && h->size >= sizeof(struct ts_tls_sock)) {
		const struct ts_tls_sock *e = rec;

		a = &e->addr;
		netns = e->netns;
		out.id = e->ssl;
		out.stream = e->flags & TS_F_GO_TLS ? TS_NAT_GO_TLS : TS_NAT_TLS;
		out.hdr.pid = h->pid;
	} else {
		return;
	}
	if (n->off || (a->family != AF_INET && a->family != AF_INET6) ||
	    !conntrack_loaded(n, now) || (loopback_peer(a) && !n->localnet) ||
	    other_end_looked_up(n, netns, a))
		return;
	/* in the socket's namespace (a rule in the pod's own), then in the tracer's (the node's:
	 * kube-proxy's rules) */
	rc = lookup(n, netns, h->pid, a, now);
	if (!rc && netns != n->own_netns) {
		netns = n->own_netns;
		rc = lookup(n, netns, h->pid, a, now);
	}
	if (rc < 0) {
		n->off = true;
		fprintf(stderr, "tokenscope: conntrack is not readable (CAP_NET_ADMIN): connections "
				"through NAT (a Service address) are not joined to their servers\n");
		return;
	}
	if (rc == 0 || (!memcmp(n->reply.laddr, a->laddr, sizeof(a->laddr)) &&
			!memcmp(n->reply.raddr, a->raddr, sizeof(a->raddr)) &&
			n->reply.lport == a->lport && n->reply.rport == a->rport))
		return; /* not translated */
	out.hdr.type = TS_REC_SOCK_NAT;
	out.hdr.size = sizeof(out);
	out.hdr.ts_ns = h->ts_ns;
	memcpy(out.hdr.comm, h->comm, sizeof(out.hdr.comm));
	out.hdr.tid = h->tid;
	out.netns = netns;
	out.after = n->reply;
	pipeline__feed(pl, &out, sizeof(out));
}
