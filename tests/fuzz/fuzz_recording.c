// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The recording reader, and every record it yields through the pipeline. */
#include <stdio.h>
#include <stdlib.h>

#include "stream/pipeline.h"
#include "stream/recording.h"
#include "sinks/jsonl.h"

static void on_request(void *ctx, const struct request *r, const struct request_metrics *m)
{
	free(jsonl__request_json(r, m));
}

static int on_record(void *ctx, void *rec, size_t size)
{
	pipeline__feed(ctx, rec, size);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "rb");
	struct pipeline *pl = pipeline__new(on_request, NULL, NULL);

	if (f && pl) {
		recording__replay_stream(f, "fuzz", NULL, on_record, pl);
		pipeline__finish(pl, 0);
	}
	if (f)
		fclose(f);
	pipeline__free(pl);
	return 0;
}
