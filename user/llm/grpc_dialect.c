// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "proto/grpc.h"
#include "llm/grpc_dialect.h"

#define TRITON_SERVICE "/inference.GRPCInferenceService/"

/* Field numbers of Triton's grpc_service.proto (ModelStreamInferResponse and below). */
enum {
	STREAM_ERROR_MESSAGE = 1, /* ModelStreamInferResponse.error_message */
	STREAM_INFER_RESPONSE = 2,
	RESP_MODEL_NAME = 1, /* ModelInferResponse */
	RESP_PARAMETERS = 4,
	RESP_OUTPUTS = 5,
	RESP_RAW_OUTPUT_CONTENTS = 6,
	TENSOR_NAME = 1, /* InferOutputTensor */
	TENSOR_CONTENTS = 5,
	CONTENTS_BYTES = 8, /* InferTensorContents.bytes_contents */
	PARAM_KEY = 1,	    /* map entry */
	PARAM_VALUE = 2,
	PARAM_BOOL = 1, /* InferParameter.bool_param */
	REQ_MODEL_NAME = 1, /* ModelInferRequest */
};

enum api grpc_dialect__from_path(const char *path)
{
	if (!strncmp(path, TRITON_SERVICE, strlen(TRITON_SERVICE)) &&
	    (!strcmp(path + strlen(TRITON_SERVICE), "ModelStreamInfer") ||
	     !strcmp(path + strlen(TRITON_SERVICE), "ModelInfer")))
		return API_TRITON;
	return API_GRPC;
}

static bool is_name(const struct pb_field *f, const char *want)
{
	return f->wire == PB_LEN && f->len == strlen(want) && !memcmp(f->p, want, f->len);
}

/* Text bytes in a BYTES tensor's serialized elements (each a 4-byte little-endian length). */
static size_t raw_bytes_text(const uint8_t *p, size_t n)
{
	size_t total = 0;

	while (n >= 4) {
		uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			     (uint32_t)p[3] << 24;

		if (k > n - 4)
			return total + (n - 4);
		total += k;
		p += 4 + k;
		n -= 4 + k;
	}
	return total;
}

/* Is the map entry parameters[key] a bool that is true? */
static bool param_true(const uint8_t *entry, size_t n, const char *key)
{
	const uint8_t *p = entry, *end = entry + n, *v;
	struct pb_field f, g;
	bool match = false;
	size_t vn = 0;

	v = NULL;
	while (pb__next(&p, end, &f) == 1) {
		if (f.num == PARAM_KEY && is_name(&f, key))
			match = true;
		else if (f.num == PARAM_VALUE && f.wire == PB_LEN)
			v = f.p, vn = f.len;
	}
	if (!match || !v)
		return false;
	p = v;
	while (pb__next(&p, v + vn, &g) == 1) {
		if (g.num == PARAM_BOOL && g.wire == PB_VARINT)
			return g.v != 0;
	}
	return false;
}

/* One ModelInferResponse: text in its text_output tensor (raw contents, else typed ones). */
static void triton_response(struct request *r, const uint8_t *m, size_t n, uint64_t ts)
{
	const uint8_t *p = m, *end = m + n;
	struct pb_field f;
	int outputs = 0, text_index = -1, raw = 0;
	size_t text = 0;
	bool final = false;

	while (pb__next(&p, end, &f) == 1) {
		if (f.wire != PB_LEN)
			continue;
		if (f.num == RESP_MODEL_NAME && f.len && f.len < REQ_MODEL_MAX) {
			request__set_str(&r->response_model, (const char *)f.p, f.len);
		} else if (f.num == RESP_PARAMETERS) {
			final |= param_true(f.p, f.len, "triton_final_response");
		} else if (f.num == RESP_OUTPUTS) {
			const uint8_t *q = f.p;
			struct pb_field t;
			bool named = false;

			while (pb__next(&q, f.p + f.len, &t) == 1) {
				if (t.num == TENSOR_NAME && is_name(&t, "text_output"))
					named = true;
				else if (t.num == TENSOR_CONTENTS && t.wire == PB_LEN && named) {
					const uint8_t *c = t.p;
					struct pb_field b;

					while (pb__next(&c, t.p + t.len, &b) == 1)
						if (b.num == CONTENTS_BYTES && b.wire == PB_LEN)
							text += b.len;
				}
			}
			if (named)
				text_index = outputs;
			outputs++;
		} else if (f.num == RESP_RAW_OUTPUT_CONTENTS) {
			if (raw++ == text_index)
				text += raw_bytes_text(f.p, f.len);
		}
	}
	if (text)
		request__token(r, ts);
	if (final)
		r->stream_end_seen = true;
}

void grpc_dialect__response_message(struct request *r, const uint8_t *data, size_t len,
				    uint64_t ts)
{
	const uint8_t *p, *end;
	struct pb_field f;

	if (!data) {
		r->lossy = true; /* a message we could not read may have held tokens */
		request__error(r, "grpc_message_unreadable");
		return;
	}
	if (r->api != API_TRITON) {
		if (len)
			request__token(r, ts);
		return;
	}
	if (r->path && strstr(r->path, "/ModelInfer") && !strstr(r->path, "Stream")) {
		triton_response(r, data, len, ts); /* unary: the message is the response itself */
		return;
	}
	p = data;
	end = data + len;
	while (pb__next(&p, end, &f) == 1) {
		if (f.wire != PB_LEN)
			continue;
		if (f.num == STREAM_ERROR_MESSAGE && f.len)
			request__error(r, "api_error:triton"); /* its text can echo the input */
		else if (f.num == STREAM_INFER_RESPONSE)
			triton_response(r, f.p, f.len, ts);
	}
	if (p != end)
		request__error(r, "malformed_protobuf");
}

void grpc_dialect__request_message(struct request *r, const uint8_t *data, size_t len)
{
	const uint8_t *name;
	size_t n;

	if (!data || r->api != API_TRITON || r->model[0])
		return;
	name = pb__bytes(data, len, REQ_MODEL_NAME, &n);
	if (name && n && n < REQ_MODEL_MAX)
		request__set_str(&r->model, (const char *)name, n);
}

static const char *const code_names[] = {
	"ok", "cancelled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
	"already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
	"aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
	"unauthenticated",
};

void grpc_dialect__status(struct request *r, const char *status, size_t slen, const char *msg,
			  size_t mlen)
{
	char text[REQ_ERROR_MAX], safe[REQ_ERROR_MAX];
	unsigned code = 0;
	size_t i, o = 0;

	for (i = 0; i < slen && i < 4; i++) {
		if (status[i] < '0' || status[i] > '9')
			break;
		code = code * 10 + (unsigned)(status[i] - '0');
	}
	if (!slen || i != slen) {
		request__error(r, "grpc_status_malformed");
		return;
	}
	r->grpc_status = (int)code;
	if (!code)
		return;
	/* grpc-message is percent-encoded UTF-8 (gRPC's HTTP/2 protocol document) */
	for (i = 0; i < mlen && o + 1 < sizeof(text); i++) {
		if (msg[i] == '%' && i + 2 < mlen && text__hex_digit(msg[i + 1]) >= 0 && text__hex_digit(msg[i + 2]) >= 0) {
			text[o++] = (char)(text__hex_digit(msg[i + 1]) << 4 | text__hex_digit(msg[i + 2]));
			i += 2;
		} else {
			text[o++] = msg[i];
		}
	}
	text[o] = 0;
	for (i = 0; i < o; i++) /* a message cut mid-character must still be valid UTF-8 */
		if ((unsigned char)text[i] >= 0x80)
			text[i] = '?';
	text__safe(safe, sizeof(safe), text);
	if (code < sizeof(code_names) / sizeof(code_names[0]))
		request__error(r, "grpc_%s%s%s", code_names[code], *safe ? ": " : "", safe);
	else
		request__error(r, "grpc_status_%u%s%s", code, *safe ? ": " : "", safe);
}
