/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What gRPC calls mean for a request record. Messages are read without a schema, by field
 * number (proto/grpc.h):
 * - Triton's inference.GRPCInferenceService/ModelStreamInfer (the TensorRT-LLM and vLLM
 *   backends): the request's model_name, and per response a token event when its text_output
 *   tensor holds text; the triton_final_response parameter ends the stream.
 * - any other method: each non-empty response message is a token event.
 * Wire layout and field numbers: docs/apis.md.
 */
#ifndef TS_GRPC_DIALECT_H
#define TS_GRPC_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "llm/request.h"

/* The API of a gRPC call from its path ("/package.Service/Method"). */
enum api grpc_dialect__from_path(const char *path);
/* One request message (data NULL: it could not be read). */
void grpc_dialect__request_message(struct request *r, const uint8_t *data, size_t len);
/* One response message, complete at ts (data NULL: it could not be read). */
void grpc_dialect__response_message(struct request *r, const uint8_t *data, size_t len,
				    uint64_t ts);
/* The call's grpc-status (digits) and grpc-message (percent-encoded) trailers. */
void grpc_dialect__status(struct request *r, const char *status, size_t slen, const char *msg,
			  size_t mlen);

#endif
