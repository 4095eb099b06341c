// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * llama.cpp's own steps, for the kernel matrix: the prebuilt llama.cpp that node-llama-cpp
 * ships (its libllama and ggml CPU backends), driven from C so that a guest without node can
 * run it. A prompt of PROMPT tokens in one llama_decode, then DECODES steps of one token,
 * each sampled greedily from the last logits.
 *
 * usage: llama_step MODEL.gguf PROMPT DECODES [BACKENDS_DIR [PORT_FILE TRUTH_FILE]]
 * (BACKENDS_DIR: where the libggml-cpu-*.so are; by default beside the executable). With
 * LLAMA_STEP_WAIT=FILE in the environment it decodes nothing until FILE exists (at most 60 s):
 * a test's go-ahead once its tracer has probed the library.
 *
 * With PORT_FILE and TRUTH_FILE it is a server of one request: it listens on 127.0.0.1 (the
 * port written to PORT_FILE, whole), reads one HTTP/1.1 chat completion, and answers it as an
 * OpenAI stream (SSE, chunked): the prompt's step, a token, then each decode's step and its
 * token, the usage, [DONE]. TRUTH_FILE gets its own CLOCK_MONOTONIC readings, one JSON line:
 * when it had the request, each step's call (before and after), each token's write.
 * prints one JSON line: {"steps": N, "prompt": PROMPT, "decodes": DECODES, "failed": F}
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "llama.h"

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- the one-request server ---- */

struct server {
	int fd;
	FILE *truth;
	uint64_t step_ns[2][64]; /* each step's call: before, after */
	uint64_t token_ns[64];	 /* each token's write, before it */
	int nsteps, ntokens;
};

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			exit(1);
		p += w;
		n -= (size_t)w;
	}
}

/* One SSE event as one chunk. */
static void send_event(struct server *sv, const char *json)
{
	char ev[512], chunk[600];
	int n = snprintf(ev, sizeof(ev), "data: %s\n\n", json);
	int m = snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", n, ev);

	write_all(sv->fd, chunk, (size_t)m);
}

static void send_token(struct server *sv)
{
	if (sv->ntokens < 64)
		sv->token_ns[sv->ntokens++] = now_ns();
	send_event(sv, "{\"id\":\"chatcmpl-k\",\"object\":\"chat.completion.chunk\","
		       "\"model\":\"tiny\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
		       "\"t\"},\"finish_reason\":null}]}");
}

/* Listen, write the port whole, take one connection and read its request; returns the
 * connection, with the time the request was all read in *recv_ns. */
static int serve_one(const char *port_file, uint64_t *recv_ns)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	char tmp[4096], req[8192];
	size_t have = 0;
	int l = socket(AF_INET, SOCK_STREAM, 0), c;
	FILE *f;

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &alen))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d", ntohs(a.sin_port)) < 0 || fclose(f) || rename(tmp, port_file))
		return -1;
	c = accept(l, NULL, NULL);
	close(l);
	while (c >= 0 && have < sizeof(req) - 1) {
		ssize_t r = read(c, req + have, sizeof(req) - 1 - have);
		char *end, *cl;

		if (r <= 0)
			return -1;
		have += (size_t)r;
		req[have] = 0;
		end = strstr(req, "\r\n\r\n");
		cl = strcasestr(req, "content-length:");
		if (end && (!cl || (size_t)(end + 4 - req) + strtoul(cl + 15, NULL, 10) <= have))
			break;
	}
	*recv_ns = now_ns();
	return c;
}

static int decode(struct server *sv, struct llama_context *ctx, struct llama_batch b)
{
	int rc;

	if (sv && sv->nsteps < 64)
		sv->step_ns[0][sv->nsteps] = now_ns();
	rc = llama_decode(ctx, b);
	if (sv && sv->nsteps < 64)
		sv->step_ns[1][sv->nsteps++] = now_ns();
	return rc;
}

static void write_truth(struct server *sv, uint64_t recv_ns, int prompt)
{
	fprintf(sv->truth, "{\"recv_ns\": %llu, \"prompt\": %d, \"steps\": [", (unsigned long long)recv_ns,
		prompt);
	for (int i = 0; i < sv->nsteps; i++)
		fprintf(sv->truth, "%s[%llu, %llu]", i ? ", " : "",
			(unsigned long long)sv->step_ns[0][i], (unsigned long long)sv->step_ns[1][i]);
	fprintf(sv->truth, "], \"token_ns\": [");
	for (int i = 0; i < sv->ntokens; i++)
		fprintf(sv->truth, "%s%llu", i ? ", " : "", (unsigned long long)sv->token_ns[i]);
	fprintf(sv->truth, "]}\n");
	fclose(sv->truth);
}

int main(int argc, char **argv)
{
	struct server server = { .fd = -1 }, *sv = NULL;
	uint64_t recv_ns = 0;
	struct llama_model_params mp;
	struct llama_context_params cp;
	struct llama_model *model;
	struct llama_context *ctx;
	llama_token toks[256];
	int prompt, decodes, steps = 0, failed = 0;

	if ((argc != 4 && argc != 5 && argc != 7) || (prompt = atoi(argv[2])) < 1 || prompt > 256 || (decodes = atoi(argv[3])) < 0) {
		fprintf(stderr, "usage: llama_step MODEL.gguf PROMPT(1-256) DECODES [BACKENDS_DIR "
				"[PORT_FILE TRUTH_FILE]]\n");
		return 2;
	}
	if (argc >= 5) /* the CPU backend that fits this CPU, of those built */
		ggml_backend_load_all_from_path(argv[4]);
	else
		ggml_backend_load_all();
	llama_backend_init();
	mp = llama_model_default_params();
	model = llama_model_load_from_file(argv[1], mp);
	if (!model) {
		fprintf(stderr, "llama_step: cannot load %s\n", argv[1]);
		return 1;
	}
	cp = llama_context_default_params();
	cp.n_ctx = 512;
	cp.n_batch = 256;
	cp.n_threads = cp.n_threads_batch = 1;
	ctx = llama_init_from_model(model, cp);
	if (!ctx) {
		fprintf(stderr, "llama_step: no context\n");
		return 1;
	}
	for (int i = 0; getenv("LLAMA_STEP_WAIT") && access(getenv("LLAMA_STEP_WAIT"), F_OK); i++) {
		if (i == 6000) {
			fprintf(stderr, "llama_step: no go-ahead\n");
			return 1;
		}
		usleep(10000);
	}
	if (argc == 7) {
		sv = &server;
		sv->truth = fopen(argv[6], "w");
		sv->fd = sv->truth ? serve_one(argv[5], &recv_ns) : -1;
		if (sv->fd < 0) {
			fprintf(stderr, "llama_step: cannot serve\n");
			return 1;
		}
		static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
					   "Transfer-Encoding: chunked\r\n\r\n";

		write_all(sv->fd, head, strlen(head));
	}
	for (int i = 0; i < prompt; i++)
		toks[i] = 1 + i % 50;
	failed += decode(sv, ctx, llama_batch_get_one(toks, prompt)) != 0;
	steps++;
	if (sv)
		send_token(sv);
	for (int i = 0; i < decodes; i++) {
		const float *logits = llama_get_logits_ith(ctx, -1);
		int n = llama_vocab_n_tokens(llama_model_get_vocab(model)), best = 0;
		llama_token t;

		for (int k = 1; logits && k < n; k++)
			best = logits[k] > logits[best] ? k : best;
		t = best;
		failed += decode(sv, ctx, llama_batch_get_one(&t, 1)) != 0;
		steps++;
		if (sv)
			send_token(sv);
	}
	if (sv) {
		char usage[256];

		snprintf(usage, sizeof(usage),
			 "{\"id\":\"chatcmpl-k\",\"object\":\"chat.completion.chunk\",\"model\":"
			 "\"tiny\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
			 "\"length\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
			 "\"total_tokens\":%d}}", prompt, decodes + 1, prompt + decodes + 1);
		send_event(sv, usage);
		send_event(sv, "[DONE]");
		write_all(sv->fd, "0\r\n\r\n", 5);
		close(sv->fd);
		write_truth(sv, recv_ns, prompt);
	}
	printf("{\"steps\": %d, \"prompt\": %d, \"decodes\": %d, \"failed\": %d}\n", steps, prompt,
	       decodes, failed);
	llama_free(ctx);
	llama_model_free(model);
	return failed ? 1 : 0;
}
