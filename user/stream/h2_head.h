/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An HTTP/2 header block as h2conn.c reads it: the fields that matter, copied out of the HPACK
 * decoder field by field (h2_head__field is its callback), the query string cut from the path.
 */
#ifndef TS_H2_HEAD_H
#define TS_H2_HEAD_H

#include <stdbool.h>

#include "proto/hpack.h"
#include "proto/http1.h"
#include "llm/request.h"

/* One header block's fields that matter, copied out of the decoder. */
struct h2_head {
	char method[HTTP_METHOD_MAX], path[HTTP_PATH_MAX], ctype[64], encoding[24];
	char grpc_encoding[16], grpc_status[8], grpc_message[REQ_ERROR_MAX];
	char traceparent[HTTP_TRACEPARENT_ROOM], tracestate[HTTP_TRACESTATE_ROOM];
	char user_agent[HTTP_USER_AGENT_MAX];
	int status;
	bool has_method, has_path, has_status, partial;
};

/* hpack__decode's field callback; ctx: the struct h2_head, zeroed before the block. */
void h2_head__field(void *ctx, const struct hpack_field *f);
/* A gRPC content type: application/grpc, alone or with +proto, +json or parameters. */
bool h2_head__is_grpc(const char *ctype);

#endif
