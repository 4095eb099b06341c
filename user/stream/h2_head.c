// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An HTTP/2 header block's fields that matter (h2_head.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stream/h2_head.h"

static void copy_value(char *dst, size_t cap, const struct hpack_field *f)
{
	size_t n = f->vlen < cap - 1 ? f->vlen : cap - 1;

	memcpy(dst, f->value, n);
	dst[n] = 0;
}

static bool name_is(const struct hpack_field *f, const char *want)
{
	return f->nlen == strlen(want) && !memcmp(f->name, want, f->nlen);
}

void h2_head__field(void *ctx, const struct hpack_field *f)
{
	struct h2_head *hd = ctx;

	if (!f->known) {
		hd->partial = true;
		return;
	}
	if (name_is(f, ":method")) {
		copy_value(hd->method, sizeof(hd->method), f);
		hd->has_method = true;
	} else if (name_is(f, ":path")) {
		char *q;

		copy_value(hd->path, sizeof(hd->path), f);
		q = strchr(hd->path, '?'); /* the query string may carry keys */
		if (q)
			*q = 0;
		hd->has_path = true;
	} else if (name_is(f, ":status")) {
		char v[8];

		copy_value(v, sizeof(v), f);
		hd->status = atoi(v);
		hd->has_status = hd->status >= 100 && hd->status <= 999;
	} else if (name_is(f, "content-type")) {
		copy_value(hd->ctype, sizeof(hd->ctype), f);
	} else if (name_is(f, "content-encoding")) {
		copy_value(hd->encoding, sizeof(hd->encoding), f);
	} else if (name_is(f, "grpc-encoding")) {
		copy_value(hd->grpc_encoding, sizeof(hd->grpc_encoding), f);
	} else if (name_is(f, "grpc-status")) {
		copy_value(hd->grpc_status, sizeof(hd->grpc_status), f);
	} else if (name_is(f, "grpc-message")) {
		copy_value(hd->grpc_message, sizeof(hd->grpc_message), f);
	} else if (name_is(f, "traceparent")) {
		copy_value(hd->traceparent, sizeof(hd->traceparent), f);
	} else if (name_is(f, "tracestate")) {
		http__append_list(hd->tracestate, sizeof(hd->tracestate), (const char *)f->value,
				  f->vlen);
	} else if (name_is(f, "user-agent")) {
		copy_value(hd->user_agent, sizeof(hd->user_agent), f);
	}
}

bool h2_head__is_grpc(const char *ctype)
{
	return !strncasecmp(ctype, "application/grpc", 16) &&
	       (!ctype[16] || ctype[16] == '+' || ctype[16] == ';');
}
