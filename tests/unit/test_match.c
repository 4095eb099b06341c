// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Client <-> server matching: directly by the connection's addresses, through a proxy's
 * upstream call, and nothing when the connection is not the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/request.h"
#include "stream/match.h"

#define MS 1000000ull

static struct request *req(uint64_t id, uint32_t pid, enum role role, const char *local,
			   const char *peer, uint64_t start, uint64_t first, uint64_t end)
{
	struct request *r = request__new();

	assert_non_null(r);
	r->id = id;
	r->pid = pid;
	r->role = role;
	snprintf(r->local, sizeof(r->local), "%s", local);
	snprintf(r->peer, sizeof(r->peer), "%s", peer);
	r->start_ns = start;
	r->first_token_ns = first;
	r->end_ns = end;
	return r;
}

/* An HTTP/2 request's record on stream id, for model. */
static struct request *h2req(uint64_t id, uint32_t pid, enum role role, const char *local,
			     const char *peer, uint32_t stream_id, const char *model, uint64_t start,
			     uint64_t first, uint64_t end)
{
	struct request *r = req(id, pid, role, local, peer, start, first, end);

	r->http_version = 2;
	r->stream_id = stream_id;
	assert_true(request__set_str(&r->model, model, strlen(model)));
	return r;
}

#define STREAMS 40

/*
 * 40 streams at once on one HTTP/2 connection, straight to the server and through a proxy
 * whose upstream calls are HTTP/1.1 connections of their own. Their times all overlap, and the
 * servers' records finish in another order than the clients': each client must name the
 * record of its own stream (and, through the proxy, of its own model), never a neighbour's.
 */
static void test_h2_streams(void **state)
{
	for (int proxied = 0; proxied < 2; proxied++) {
		struct match *m = match__new();
		struct request *srv[STREAMS], *cli[STREAMS], *up[STREAMS] = { 0 }, *back[STREAMS] = { 0 };

		for (int i = 0; i < STREAMS; i++) {
			char model[32], upl[32];
			uint32_t sid = 2 * (uint32_t)i + 1;
			/* stream i starts at 100 + i/4 ms: within a millisecond of three others */
			uint64_t t = (100 + (uint64_t)i / 4) * MS;

			snprintf(model, sizeof(model), "m-%d", i);
			snprintf(upl, sizeof(upl), "127.0.0.1:%d", 6000 + i);
			srv[i] = h2req(100 + i, 30, ROLE_SERVER, "127.0.0.1:443", "127.0.0.1:5000", sid,
				       model, t + MS / 2, t + 40 * MS, t + 90 * MS);
			cli[i] = h2req(200 + i, 40, ROLE_CLIENT, "127.0.0.1:5000", "127.0.0.1:443", sid,
				       model, t, t + 41 * MS, t + 91 * MS);
			if (proxied) {
				/* the proxy's upstream call and the upstream server's record: every call
				 * at one time, with one first token, so that only the model tells them */
				up[i] = req(300 + i, 30, ROLE_CLIENT, upl, "127.0.0.1:8000", 112 * MS,
					    130 * MS, 200 * MS);
				back[i] = req(400 + i, 10, ROLE_SERVER, "127.0.0.1:8000", upl, 112 * MS,
					      129 * MS, 200 * MS);
				assert_true(request__set_str(&up[i]->model, model, strlen(model)));
				assert_true(request__set_str(&back[i]->model, model, strlen(model)));
			}
		}
		for (int i = 0; i < STREAMS; i++) {
			if (proxied) {
				match__request(m, back[STREAMS - 1 - i]);
				match__request(m, up[STREAMS - 1 - i]);
			}
			match__request(m, srv[(i * 7) % STREAMS]); /* servers end out of order */
		}
		for (int i = 0; i < STREAMS; i++)
			match__request(m, cli[i]);
		for (int i = 0; i < STREAMS; i++) {
			assert_int_equal(cli[i]->server_id, proxied ? 400 + i : 100 + i);
			request__free(srv[i]);
			request__free(cli[i]);
			request__free(up[i]);
			request__free(back[i]);
		}
		match__free(m);
	}
}

static void test_direct(void **state)
{
	struct match *m = match__new();
	struct request *s = req(2, 10, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:5000", 101 * MS,
				150 * MS, 300 * MS);
	struct request *c = req(1, 20, ROLE_CLIENT, "127.0.0.1:5000", "127.0.0.1:8000", 100 * MS,
				152 * MS, 301 * MS);
	struct request *other = req(3, 21, ROLE_CLIENT, "127.0.0.1:5001", "127.0.0.1:8000",
				    100 * MS, 160 * MS, 302 * MS);

	match__request(m, s); /* the server ends first */
	match__request(m, c);
	match__request(m, other);
	assert_int_equal(c->server_id, 2);
	assert_true(c->upstream_set);
	assert_int_equal(c->upstream_ns, (int64_t)(52 * MS) - (int64_t)(49 * MS));
	assert_int_equal(other->server_id, 0); /* another connection */
	assert_false(other->upstream_set);
	request__free(s);
	request__free(c);
	request__free(other);
	match__free(m);
}

/* The client of server record i (of those fed by kept_servers), fed: its server_id. */
static uint64_t client_of(struct match *m, int i)
{
	char local[32];
	struct request *c;
	uint64_t id;

	snprintf(local, sizeof(local), "127.0.0.1:%d", 10000 + i);
	c = req(100000 + (uint64_t)i, 20, ROLE_CLIENT, local, "127.0.0.1:8000",
		(1000 + (uint64_t)i) * MS - MS / 2, (1051 + (uint64_t)i) * MS, (1101 + (uint64_t)i) * MS);
	match__request(m, c);
	id = c->server_id;
	request__free(c);
	return id;
}

/* The last 8192 finished requests are kept, the clients' among them: a client finds its
 * server's record among them, wherever in the kept span, and not once 8192 came after it.
 * Fed one at a time, past the growth of the kept ring (from 16, doubled) and its wrap. */
static void test_kept(void **state)
{
	struct match *m = match__new();
	const int servers = 8192 + 100;

	assert_non_null(m);
	for (int i = 0; i < servers; i++) {
		char peer[32];
		struct request *s;

		snprintf(peer, sizeof(peer), "127.0.0.1:%d", 10000 + i);
		s = req(1 + (uint64_t)i, 10, ROLE_SERVER, "127.0.0.1:8000", peer,
			(1000 + (uint64_t)i) * MS, (1050 + (uint64_t)i) * MS, (1100 + (uint64_t)i) * MS);
		match__request(m, s);
		request__free(s);
		if (i == 15 || i == 16 || i == 200) /* at the first growth, and before a wrap */
			assert_int_equal(client_of(m, i - 1), (uint64_t)i);
	}
	/* 8295 fed (the three clients above among them), then a client each: the 8192 kept when
	 * the third below is fed begin with the 107th fed, server 104 */
	assert_int_equal(client_of(m, servers - 1), (uint64_t)servers);
	assert_int_equal(client_of(m, 5000), 5001);
	assert_int_equal(client_of(m, 104), 105);
	assert_int_equal(client_of(m, 103), 0); /* 8192 came after it */
	assert_int_equal(client_of(m, 50), 0);
	match__free(m);
}

/* client -> proxy (pid 30: a server that is also a client) -> server; two requests in flight
 * through the proxy at once, told apart by their first tokens. */
static void test_through_proxy(void **state)
{
	struct match *m = match__new();
	struct request *r[] = {
		/* the upstream server's two requests */
		req(5, 10, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:6001", 102 * MS, 150 * MS,
		    300 * MS),
		req(6, 10, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:6002", 103 * MS, 170 * MS,
		    300 * MS),
		/* the proxy's upstream calls */
		req(3, 30, ROLE_CLIENT, "127.0.0.1:6001", "127.0.0.1:8000", 101 * MS, 151 * MS,
		    301 * MS),
		req(4, 30, ROLE_CLIENT, "127.0.0.1:6002", "127.0.0.1:8000", 102 * MS, 171 * MS,
		    301 * MS),
		/* the proxy's server side: the second client's request first */
		req(7, 30, ROLE_SERVER, "127.0.0.1:443", "127.0.0.1:5002", 101 * MS, 172 * MS,
		    302 * MS),
		req(8, 30, ROLE_SERVER, "127.0.0.1:443", "127.0.0.1:5001", 100 * MS, 152 * MS,
		    302 * MS),
		/* the clients */
		req(1, 40, ROLE_CLIENT, "127.0.0.1:5001", "127.0.0.1:443", 99 * MS, 153 * MS,
		    303 * MS),
		req(2, 41, ROLE_CLIENT, "127.0.0.1:5002", "127.0.0.1:443", 100 * MS, 174 * MS,
		    303 * MS),
	};

	for (size_t i = 0; i < 8; i++)
		match__request(m, r[i]);
	assert_int_equal(r[2]->server_id, 5); /* the proxy's own calls, directly */
	assert_int_equal(r[3]->server_id, 6);
	assert_int_equal(r[6]->server_id, 5); /* through the proxy */
	assert_int_equal(r[7]->server_id, 6);
	assert_int_equal(r[6]->upstream_ns, (int64_t)(54 * MS) - (int64_t)(48 * MS));
	for (size_t i = 0; i < 8; i++)
		request__free(r[i]);
	match__free(m);
}

/*
 * Two requests through nginx under a CPU hog (CI): its upstream calls began late, 103's
 * 2.67 ms after its request, 106's 2.14 ms after its own; 103's call began just 0.12 ms
 * after 106's request and brought its first token 0.09 ms before 106's. By times alone that
 * call fits 106 best, and 106's client named 103's server record. The token events tell
 * them apart: 8 through 103, 7 through 106.
 */
static void test_proxy_events(void **state)
{
	struct request *r[] = {
		/* the upstream server's records */
		req(115, 10, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:6001", 622500000, 691500000,
		    707500000),
		req(122, 10, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:6002", 624500000, 691600000,
		    706200000),
		/* nginx's upstream calls */
		req(110, 30, ROLE_CLIENT, "127.0.0.1:6001", "127.0.0.1:8000", 622440000, 691530000,
		    707610000),
		req(117, 30, ROLE_CLIENT, "127.0.0.1:6002", "127.0.0.1:8000", 624460000, 691620000,
		    706270000),
		/* nginx's server side */
		req(106, 30, ROLE_SERVER, "127.0.0.1:443", "127.0.0.1:5002", 622320000, 691620000,
		    706360000),
		req(103, 30, ROLE_SERVER, "127.0.0.1:443", "127.0.0.1:5001", 619770000, 691540000,
		    707680000),
		/* the clients, in the order their streams ended */
		req(98, 40, ROLE_CLIENT, "127.0.0.1:5002", "127.0.0.1:443", 618340000, 691690000,
		    708740000),
		req(95, 40, ROLE_CLIENT, "127.0.0.1:5001", "127.0.0.1:443", 615740000, 691720000,
		    709110000),
	};
	static const uint64_t events[] = { 8, 7, 8, 7, 7, 8, 7, 8 };

	for (int counted = 0; counted < 2; counted++) {
		struct match *m = match__new();

		for (size_t i = 0; i < 8; i++) {
			r[i]->token_events = counted ? events[i] : 0;
			r[i]->server_id = 0;
			match__request(m, r[i]);
		}
		/* without the counts (all alike), times cross them: what the penalty mends */
		assert_int_equal(r[6]->server_id, counted ? 122 : 115);
		assert_int_equal(r[7]->server_id, counted ? 115 : 103);
		match__free(m);
	}
	for (size_t i = 0; i < 8; i++)
		request__free(r[i]);
}

/*
 * Network namespaces: two pods each with a server on 127.0.0.1:8000 and a client that took
 * the same port (each namespace has its own), at the same time; a client in one namespace and
 * a server in another over a veth pair (10.78.0.x); and a client of a Service address that a
 * DNAT rule sent to that server, joined through its ends after NAT.
 */
static void test_network_namespaces(void **state)
{
	const uint32_t ns_a = 4026532174u, ns_b = 4026532239u, ns_c = 4026532304u,
		       ns_d = 4026532369u;
	struct match *m = match__new();
	struct request *r[] = {
		req(2, 850, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:41001", 101 * MS, 150 * MS,
		    300 * MS),
		req(4, 851, ROLE_SERVER, "127.0.0.1:8000", "127.0.0.1:41001", 101 * MS, 151 * MS,
		    301 * MS),
		req(1, 911, ROLE_CLIENT, "127.0.0.1:41001", "127.0.0.1:8000", 100 * MS, 152 * MS,
		    302 * MS),
		req(3, 912, ROLE_CLIENT, "127.0.0.1:41001", "127.0.0.1:8000", 100 * MS, 153 * MS,
		    303 * MS),
		/* veth */
		req(6, 852, ROLE_SERVER, "10.78.0.2:8000", "10.78.0.1:58458", 401 * MS, 450 * MS,
		    500 * MS),
		req(5, 922, ROLE_CLIENT, "10.78.0.1:58458", "10.78.0.2:8000", 400 * MS, 451 * MS,
		    501 * MS),
		/* DNAT'd: the client wrote to 10.96.78.10:80 */
		req(8, 852, ROLE_SERVER, "10.78.0.2:8000", "10.78.0.1:60870", 601 * MS, 650 * MS,
		    700 * MS),
		req(7, 924, ROLE_CLIENT, "10.78.0.1:60870", "10.96.78.10:80", 600 * MS, 651 * MS,
		    701 * MS),
	};
	const uint32_t ns[] = { ns_a, ns_b, ns_a, ns_b, ns_d, ns_c, ns_d, ns_c };

	for (size_t i = 0; i < 8; i++)
		r[i]->netns = ns[i];
	snprintf(r[7]->nat_local, sizeof(r[7]->nat_local), "10.78.0.1:60870");
	snprintf(r[7]->nat_peer, sizeof(r[7]->nat_peer), "10.78.0.2:8000");
	for (size_t i = 0; i < 8; i++)
		match__request(m, r[i]);
	/* by addresses alone both would take the newest server record (4): never across */
	assert_int_equal(r[2]->server_id, 2);
	assert_int_equal(r[3]->server_id, 4);
	assert_int_equal(r[5]->server_id, 6);
	assert_int_equal(r[7]->server_id, 8);
	match__free(m);

	/* a namespace's loopback, or its own address, never leaves it: no server of another */
	m = match__new();
	r[1]->netns = ns_b;
	r[2]->netns = ns_a;
	r[2]->server_id = 0;
	match__request(m, r[1]);
	match__request(m, r[2]);
	assert_int_equal(r[2]->server_id, 0);
	match__free(m);
	for (size_t i = 0; i < 8; i++)
		request__free(r[i]);

	assert_true(conn_addr__may_meet(ns_a, ns_a, "127.0.0.1:1", "127.0.0.1:2"));
	assert_true(conn_addr__may_meet(0, ns_a, "127.0.0.1:1", "127.0.0.1:2")); /* unknown */
	assert_false(conn_addr__may_meet(ns_a, ns_b, "127.0.0.1:1", "127.0.0.1:2"));
	assert_false(conn_addr__may_meet(ns_a, ns_b, "[::1]:1", "[::1]:2"));
	assert_false(conn_addr__may_meet(ns_a, ns_b, "[::ffff:127.0.0.1]:1",
					 "[::ffff:127.0.0.1]:2"));
	assert_false(conn_addr__may_meet(ns_a, ns_b, "10.0.0.5:1", "10.0.0.5:2")); /* its own */
	assert_true(conn_addr__may_meet(ns_a, ns_b, "10.0.0.5:1", "10.0.0.6:2"));
	assert_true(conn_addr__may_meet(ns_a, ns_b, "[fd00::1]:1", "[fd00::2]:2"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_direct),
		cmocka_unit_test(test_kept),
		cmocka_unit_test(test_through_proxy),
		cmocka_unit_test(test_h2_streams),
		cmocka_unit_test(test_proxy_events),
		cmocka_unit_test(test_network_namespaces),
	};

	return cmocka_run_group_tests_name("match", tests, NULL, NULL);
}
