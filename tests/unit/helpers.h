/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Unit-test helpers: scripted conversations turned into ring-buffer records, fed to the real
 * pipeline whole, split at every byte boundary, byte by byte and in random pieces. */
#ifndef TS_TEST_HELPERS_H
#define TS_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "llm/request.h"
#include "stream/pipeline.h"

#define MS 1000000ull

/* One SSL call: direction, time, bytes. */
struct seg {
	bool write;
	uint64_t ts;
	const char *data;
	size_t len; /* 0: strlen(data) */
};

enum split { SPLIT_WHOLE, SPLIT_AT, SPLIT_BYTES, SPLIT_RANDOM };

/* Collected results of one run. */
struct run {
	struct pipeline *pl;
	char *json[64];	   /* jsonl__request_json of each finished request */
	struct request reqs[64]; /* shallow copies (gaps not kept) */
	size_t n;
	uint32_t pid;	   /* stream key of the records run__data makes (default 100, 0xabc) */
	uint64_t ssl;
	uint64_t seqs[8][2]; /* next sequence number per ssl */
	/* every byte run__data fed, as the pipeline left it (what a recording holds), per
	 * direction ([1]: written) */
	uint8_t *tape[2];
	size_t ntape[2], tapecap[2]; /* grown by doubling: a flood feeds tens of thousands */
};

/* A conversation under construction: segments whose text the script owns. */
struct script {
	struct seg s[128];
	char *owned[128];
	size_t n;
};

/* Append a segment (printf-style). */
void script__add(struct script *sc, bool write, uint64_t ts, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Append binary bytes. */
void script__bytes(struct script *sc, bool write, uint64_t ts, const void *data, size_t len);
/* Append one HTTP chunk (read side) holding payload. */
void script__chunk(struct script *sc, uint64_t ts, const char *payload);
void script__free(struct script *sc);

void run__init(struct run *r);
void run__free(struct run *r);
/* Feed one data record for (pid 100, ssl 0xabc) with the next sequence number. */
void run__data(struct run *r, bool write, uint64_t ts, const void *data, size_t len);
/* Feed the conversation; with SPLIT_AT, every segment is cut at byte k (when longer). */
void run__script(struct run *r, const struct seg *s, size_t n, enum split how, size_t k,
		 unsigned seed);
void run__finish(struct run *r, uint64_t ts);
/* Record time moves on to ts with nothing else (the counters' record a live run feeds each
 * second): finished requests held to keep their order are reported once it passes theirs. */
void run__tick(struct run *r, uint64_t ts);

/* Runs the script every way it can be split and checks that the requests' JSON never
 * changes. Returns the JSON of the whole-run requests joined by '\n' (caller frees). */
char *run_all_splits(const struct seg *s, size_t n, size_t *nreq);

/* Extract a numeric field from a JSON object string; NAN when null or missing. */
double json_num(const char *json, const char *key);
/* A string field; "" when null or missing. Static buffer. */
const char *json_str(const char *json, const char *key);
/* A boolean field: 1, 0, or -1 for null/missing. */
int json_bool(const char *json, const char *key);

#endif
