/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The HTTP/1.1 request methods tokenscope captures, written once for the probes
 * (bpf/sock_classify.h compares a socket's first four bytes as one word) and for userspace
 * (proto/http1.c and stream/conn.c match the request line's start):
 * X(the request line's start, its first four bytes).
 */
#ifndef TS_HTTP_METHODS_H
#define TS_HTTP_METHODS_H

#define TS_HTTP_METHODS(X)                                                                        \
	X("GET ", 'G', 'E', 'T', ' ')                                                             \
	X("POST ", 'P', 'O', 'S', 'T')                                                            \
	X("PUT ", 'P', 'U', 'T', ' ')                                                             \
	X("DELETE ", 'D', 'E', 'L', 'E')                                                          \
	X("PATCH ", 'P', 'A', 'T', 'C')                                                           \
	X("HEAD ", 'H', 'E', 'A', 'D')                                                            \
	X("OPTIONS ", 'O', 'P', 'T', 'I')

#endif
