// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A simulated inference engine on the CUDA driver API (run on the stand-in libcuda.so.1).
 *
 * Continuous batching: requests arrive on a schedule; each step either prefills newly
 * admitted requests (cost grows with their uncached prompt tokens; a prefix-cache hit cuts
 * it; optionally chunked) or decodes one token for every running request (cost grows with
 * the batch). Decode runs eagerly or as one CUDA graph launch. After each step the sampled
 * token ids are copied to the host:
 *   sync mode:  copy on the main stream, cuStreamSynchronize (llama.cpp), or with
 *               --ctx-sync cuCtxSynchronize (a device-wide sync: every stream hands over);
 *   async mode: event on the main stream, the copy stream waits for it, copies, records an
 *               event, and the host synchronizes on that event one step later (vLLM V1).
 *
 * usage: engine [--async | --ctx-sync] [--graphs] [--chunk TOKENS] [--requests N] [--seed S]
 *               [--wait FILE] --truth FILE
 * --wait: "loading the model" lasts until FILE exists (up to a minute), not a fixed 0.3 s:
 * a harness that must see every step waits for the tracer's probes on libcuda first.
 * Ground truth, one JSON object per line: every step (launches, first/last launch time,
 * GPU start/end, host-visible time) and every request (arrival, first token, tokens).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vcuda.h"

#define CHECK(x)                                                                          \
	do {                                                                              \
		CUresult r_ = (x);                                                        \
		if (r_) {                                                                 \
			fprintf(stderr, "engine: %s failed: %d\n", #x, r_);               \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

#define MAX_REQ 256
#define MAX_BATCH 8
#define MAX_STEPS 4096

struct req {
	int id;
	uint64_t arrival_ns;
	int prompt, cached, output;
	int prefilled; /* prompt tokens computed so far */
	int generated;
	int first_token_step;
	uint64_t first_token_ns;
	int state; /* 0 waiting, 1 prefilling, 2 decoding, 3 done */
};

struct step {
	int kind; /* 0 prefill, 1 decode */
	int launches, graph_launches, batch;
	uint64_t first_launch_ns, last_launch_ns, gpu_end_ns, host_seen_ns;
	uint64_t first_launch_ret_ns; /* when the first launch call returned */
	uint64_t sync_call_ns;	      /* when the host called the sync that observed the step */
	CUevent main_done, copy_done;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static CUfunction k_prefill_attn, k_prefill_mlp, k_decode_attn, k_decode_mlp;
static CUstream main_s, copy_s;
static CUdeviceptr dev_tokens;
static int32_t host_tokens[MAX_BATCH];
/* Durations the kernels read when they run (device memory, in a real engine). */
static uint32_t d_prefill_attn, d_prefill_mlp, d_decode_attn, d_decode_mlp;
static struct step steps[MAX_STEPS];
static int nsteps;

static void launch(struct step *st, CUfunction f, uint32_t *dur, unsigned grid)
{
	void *params[] = { dur, &dev_tokens };
	uint64_t t = now_ns();

	if (!st->first_launch_ns)
		st->first_launch_ns = t;
	st->last_launch_ns = t;
	CHECK(cuLaunchKernel(f, grid, 1, 1, 128, 1, 1, 0, main_s, params, NULL));
	if (!st->first_launch_ret_ns)
		st->first_launch_ret_ns = now_ns();
	st->launches++;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "async", no_argument, NULL, 'a' },	 { "graphs", no_argument, NULL, 'g' },
		{ "chunk", required_argument, NULL, 'c' }, { "requests", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },  { "truth", required_argument, NULL, 't' },
		{ "wait", required_argument, NULL, 'w' },  { "ctx-sync", no_argument, NULL, 'x' },
		{},
	};
	int async = 0, graphs = 0, chunk = 0, nreq = 12, c, done = 0, ctx_sync = 0;
	unsigned seed = 1;
	const char *truth = NULL, *wait = NULL;
	struct req reqs[MAX_REQ];
	CUgraphExec decode_graph = NULL;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	uint64_t t0;
	FILE *out;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a': async = 1; break;
		case 'g': graphs = 1; break;
		case 'c': chunk = atoi(optarg); break;
		case 'n': nreq = atoi(optarg); break;
		case 's': seed = (unsigned)atoi(optarg); break;
		case 't': truth = optarg; break;
		case 'w': wait = optarg; break;
		case 'x': ctx_sync = 1; break;
		default: return 2;
		}
	}
	if (!truth || nreq < 1 || nreq > MAX_REQ || (async && ctx_sync))
		return 2;
	out = fopen(truth, "w");
	if (!out)
		return 1;

	/* phase: device, kernels, streams (after "loading the model": a real engine takes
	 * seconds before it touches the GPU; tracers attach to its libraries meanwhile) */
	{
		struct timespec ts = { 0, wait ? 10000000 : 300000000 };

		for (int i = 0; !i || (wait && access(wait, F_OK) && i < 6000); i++)
			nanosleep(&ts, NULL);
	}
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, "virtual"));
	CHECK(cuModuleGetFunction(&k_prefill_attn, mod, "prefill_attn"));
	CHECK(cuModuleGetFunction(&k_prefill_mlp, mod, "prefill_mlp"));
	CHECK(cuModuleGetFunction(&k_decode_attn, mod, "decode_attn"));
	CHECK(cuModuleGetFunction(&k_decode_mlp, mod, "decode_mlp"));
	CHECK(cuStreamCreate(&main_s, 0));
	CHECK(cuStreamCreate(&copy_s, 0));
	CHECK(cuMemAlloc_v2(&dev_tokens, sizeof(host_tokens)));
	if (graphs) {
		/* decode as one graph: captured once, its kernels read their durations at run time */
		struct step scratch = { 0 };
		CUgraph g;

		CHECK(cuStreamBeginCapture_v2(main_s, 0));
		launch(&scratch, k_decode_attn, &d_decode_attn, 8);
		launch(&scratch, k_decode_mlp, &d_decode_mlp, 8);
		CHECK(cuStreamEndCapture(main_s, &g));
		CHECK(cuGraphInstantiateWithFlags(&decode_graph, g, 0));
	}

	/* phase: the request schedule */
	srand(seed);
	t0 = now_ns();
	for (int i = 0; i < nreq; i++) {
		reqs[i] = (struct req){ .id = i, .first_token_step = -1 };
		reqs[i].arrival_ns = t0 + (uint64_t)i * (4 + rand() % 8) * 1000000ull;
		reqs[i].prompt = 128 << (rand() % 5);		/* 128 .. 2048 */
		reqs[i].cached = rand() % 2 ? reqs[i].prompt / 2 : 0; /* prefix-cache hit */
		reqs[i].output = 3 + rand() % 6;
	}

	/* phase: steps until every request is done */
	while (done < nreq && nsteps < MAX_STEPS) {
		struct step *st = &steps[nsteps];
		int running = 0, tokens = 0, admitted = 0;
		uint64_t now = now_ns();

		memset(st, 0, sizeof(*st));
		for (int i = 0; i < nreq; i++) {
			if (reqs[i].state == 0 && reqs[i].arrival_ns <= now && admitted + running < MAX_BATCH)
				reqs[i].state = 1;
			running += reqs[i].state == 1 || reqs[i].state == 2;
			admitted += reqs[i].state == 1;
		}
		if (!running) {
			/* idle: wait for the next arrival */
			struct timespec ts = { 0, 200000 };

			nanosleep(&ts, NULL);
			continue;
		}
		if (admitted) {
			/* prefill the admitted requests' uncached prompt (in chunks if asked) */
			st->kind = 0;
			for (int i = 0; i < nreq; i++) {
				int need, take;

				if (reqs[i].state != 1)
					continue;
				need = reqs[i].prompt - reqs[i].cached - reqs[i].prefilled;
				take = chunk && need > chunk ? chunk : need;
				reqs[i].prefilled += take;
				tokens += take;
				st->batch++;
			}
			d_prefill_attn = 300 + tokens / 2; /* microseconds */
			d_prefill_mlp = 200 + tokens / 4;
			launch(st, k_prefill_attn, &d_prefill_attn, 16);
			launch(st, k_prefill_mlp, &d_prefill_mlp, 16);
		} else {
			st->kind = 1;
			st->batch = running;
			d_decode_attn = 400 + 60 * running;
			d_decode_mlp = 300 + 40 * running;
			if (graphs) {
				uint64_t t = now_ns();

				st->first_launch_ns = st->last_launch_ns = t;
				CHECK(cuGraphLaunch(decode_graph, main_s));
				st->first_launch_ret_ns = now_ns();
				st->graph_launches = 1;
			} else {
				launch(st, k_decode_attn, &d_decode_attn, 8);
				launch(st, k_decode_mlp, &d_decode_mlp, 8);
			}
		}

		/* phase: hand the sampled tokens to the host */
		if (!async) {
			CHECK(cuMemcpyDtoHAsync_v2(host_tokens, dev_tokens, sizeof(host_tokens), main_s));
			st->sync_call_ns = now_ns();
			CHECK(ctx_sync ? cuCtxSynchronize() : cuStreamSynchronize(main_s));
			st->host_seen_ns = now_ns();
			st->gpu_end_ns = vgpu_stream_idle_ns(main_s);
		} else {
			CHECK(cuEventCreate(&st->main_done, 0));
			CHECK(cuEventCreate(&st->copy_done, 0));
			CHECK(cuEventRecord(st->main_done, main_s));
			CHECK(cuStreamWaitEvent(copy_s, st->main_done, 0));
			CHECK(cuMemcpyDtoHAsync_v2(host_tokens, dev_tokens, sizeof(host_tokens), copy_s));
			CHECK(cuEventRecord(st->copy_done, copy_s));
			if (nsteps > 0) { /* one step late */
				struct step *prev = &steps[nsteps - 1];

				prev->sync_call_ns = now_ns();
				CHECK(cuEventSynchronize(prev->copy_done));
				prev->host_seen_ns = now_ns();
				prev->gpu_end_ns = vgpu_event_done_ns(prev->main_done);
			}
		}

		/* phase: the step's effect on requests (known once the step's tokens are in) */
		for (int i = 0; i < nreq; i++) {
			struct req *r = &reqs[i];

			if (st->kind == 0 && r->state == 1 && r->prefilled >= r->prompt - r->cached) {
				r->state = 2;
				r->generated = 1; /* prefill produces the first token */
				r->first_token_step = nsteps;
			} else if (st->kind == 1 && r->state == 2) {
				r->generated++;
			}
			if (r->state == 2 && r->generated >= r->output) {
				r->state = 3;
				done++;
			}
		}
		nsteps++;
	}
	if (async && nsteps) {
		struct step *last = &steps[nsteps - 1];

		last->sync_call_ns = now_ns();
		CHECK(cuEventSynchronize(last->copy_done));
		last->host_seen_ns = now_ns();
		last->gpu_end_ns = vgpu_event_done_ns(last->main_done);
	}

	/* phase: ground truth */
	for (int i = 0; i < nsteps; i++) {
		struct step *st = &steps[i];

		fprintf(out,
			"{\"type\":\"step\",\"step\":%d,\"kind\":\"%s\",\"batch\":%d,\"launches\":%d,"
			"\"graph_launches\":%d,\"first_launch_ns\":%llu,\"first_launch_ret_ns\":%llu,"
			"\"last_launch_ns\":%llu,\"gpu_end_ns\":%llu,\"sync_call_ns\":%llu,"
			"\"host_seen_ns\":%llu}\n",
			i, st->kind ? "decode" : "prefill", st->batch, st->launches, st->graph_launches,
			(unsigned long long)st->first_launch_ns,
			(unsigned long long)st->first_launch_ret_ns,
			(unsigned long long)st->last_launch_ns, (unsigned long long)st->gpu_end_ns,
			(unsigned long long)st->sync_call_ns, (unsigned long long)st->host_seen_ns);
	}
	for (int i = 0; i < nreq; i++) {
		struct req *r = &reqs[i];

		fprintf(out,
			"{\"type\":\"request\",\"id\":%d,\"arrival_ns\":%llu,\"prompt\":%d,\"cached\":%d,"
			"\"output\":%d,\"first_token_step\":%d}\n",
			r->id, (unsigned long long)r->arrival_ns, r->prompt, r->cached, r->output,
			r->first_token_step);
	}
	fclose(out);
	printf("engine: %d steps, %d requests\n", nsteps, nreq);
	return 0;
}
