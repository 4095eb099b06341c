/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Capture health: what the pipeline consumed, lost, could not read and reported, counted in
 * each of its rooms (the stream table, the connections, the settle queue, the step sources)
 * and said in the summary, the metrics and the HTML report.
 */
#ifndef TS_HEALTH_H
#define TS_HEALTH_H

#include <stdint.h>

#include <linux/types.h>

#include "engine/engine_wire.h"
#include "stream/conn.h"
#include "tokenscope.h"

struct health {
	__u64 bpf[TS_CNT__MAX];  /* kernel-side counters (drops, truncations, ...) */
	uint64_t events;	    /* data events consumed */
	uint64_t bytes;		    /* payload bytes consumed */
	uint64_t bad_events;	    /* records too short or of unknown type */
	uint64_t lost_pieces;	    /* sequence gaps seen per stream */
	uint64_t streams;	    /* connections seen */
	uint64_t streams_http1;
	uint64_t streams_http2;	    /* HTTP/2 connections (h2 below says more) */
	uint64_t streams_other;	    /* non-HTTP: unsupported */
	/* each engine wire's messages, in the order of engine_wires[] (engine/engine_wire.h) */
	struct engine_wire_counts engine_wires[ENGINE_WIRES_MAX];
	uint64_t streams_zmtp;	    /* ZeroMQ connections (engine wires and others) */
	uint64_t streams_nat;	    /* connections NAT changed on their way (TS_REC_SOCK_NAT) */
	struct conn_counts conn;    /* malformed, unsupported encodings, lack of memory... */
	uint64_t streams_aged_out;  /* streams let go after a long idle time (end never seen) */
	uint64_t sock_table_full;   /* counter reads that found the plaintext socket table full */
	uint64_t sock_not_captured; /* socket calls (or their tails) not captured: budget, no
				       user buffer */
	uint64_t recording_errors;  /* records that could not be written to the recording */
	uint64_t requests;	    /* LLM requests reported */
	uint64_t requests_incomplete;
	uint64_t sessions;	   /* agent sessions reported (llm/session.h) */
	uint64_t sessions_evicted; /* ended early: too many open at once */
	uint64_t other_http;	    /* HTTP exchanges that were not LLM API calls */
	uint64_t gpu_marks;	    /* CUDA ordering/sync marks consumed */
	uint64_t gpu_steps;	    /* CUDA steps reported */
	uint64_t llama_steps;	    /* llama.cpp steps reported (llama_decode/llama_encode calls) */
	uint64_t failed_steps;	    /* of either, those that did no work (an error returned) */
	uint64_t gpu_unobserved;    /* steps whose completion the host never observed */
	uint64_t attributed;	    /* server requests whose TTFT was split */
	uint64_t not_attributed;    /* server requests with attribution null (and why) */
	struct h2_counts h2;
	/* --otlp's sending side (sinks/otlp_export.h), as the command line last read it */
	struct {
		bool on;
		uint64_t spans_sent, spans_dropped, retries, failures;
	} otlp;
};

#endif
