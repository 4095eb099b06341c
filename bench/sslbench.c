// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Workloads for `make bench`, timed with CLOCK_MONOTONIC:
 *   sslbench ssl N CERT KEY   N round trips of SSL_write (client, 120 bytes, an SSE event's
 *                             size) + SSL_read (server) through real libssl over a memory BIO
 *                             pair: two probed SSL calls per iteration, no sockets
 *   sslbench bare LIB SYMBOLS CMD...  run CMD with a uprobe that does nothing attached to
 *                             each of SYMBOLS (comma-separated) in LIB (every process): the
 *                             yardstick, measured on the very entry points whose tracing
 *                             cost is compared with it
 *   sslbench pair LIB SYMBOLS CMD...  the same with an empty uretprobe beside each uprobe:
 *                             the yardstick for probes that take the entry and the return
 *   SYMBOLS "tokenscope": where tokenscope probes OpenSSL's reads and writes in LIB (the
 *                             inner function of each direction where user/capture/ssl_inner.c
 *                             finds it, else SSL_read and SSL_read_ex, SSL_write and
 *                             SSL_write_ex)
 * Prints nanoseconds per iteration.
 */
#include <bpf/libbpf.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bare.skel.h"
#include "capture/elfsym.h"
#include "capture/gobin.h"
#include "capture/ssl_inner.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

#define MAX_BARE 8

/* Run cmd under the probes (NULL: an attach failed, run nothing), then take them off. The
 * command's exit status, or 1. */
static int run_probed(struct bare_bpf *skel, struct bpf_link **links, int nlinks, char **cmd)
{
	int status = 1 << 8; /* exit status 1 */
	pid_t child = cmd ? fork() : -1;

	if (child == 0) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	if (child > 0)
		waitpid(child, &status, 0);
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	bare_bpf__destroy(skel);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* tokenscope's places for OpenSSL's reads and writes in lib (user/capture/attach.c), as
 * SYMBOLS: "0x..." file offsets. */
static void tokenscope_places(const char *lib, char *out, size_t n)
{
	static const char *const names[] = { "SSL_read", "SSL_read_ex", "SSL_write",
					     "SSL_write_ex" };
	uint64_t off[4] = { 0 };
	size_t len = 0;

	elfsym__offsets(lib, names, 4, off);
	ssl_inner__move(lib, off);
	out[0] = 0;
	for (int k = 0; k < 4 && len < n; k++) {
		if (off[k])
			len += (size_t)snprintf(out + len, n - len, "%s0x%llx", len ? "," : "",
						(unsigned long long)off[k]);
	}
}

static int bare_probe(const char *lib, const char *syms, bool with_return, char **cmd)
{
	struct bare_bpf *skel = bare_bpf__open_and_load();
	struct bpf_link *links[2 * MAX_BARE] = { 0 };
	char names[256], *save = NULL;
	int nlinks = 0;

	if (!skel) {
		fprintf(stderr, "sslbench: cannot load the bare uprobe (root?)\n");
		return 1;
	}
	if (!strcmp(syms, "tokenscope"))
		tokenscope_places(lib, names, sizeof(names));
	else
		snprintf(names, sizeof(names), "%s", syms);
	for (char *sym = strtok_r(names, ",", &save); sym && nlinks < 2 * MAX_BARE;
	     sym = strtok_r(NULL, ",", &save)) {
		for (int ret = 0; ret <= (int)with_return; ret++) {
			bool at = !strncmp(sym, "0x", 2); /* a file offset */
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = at ? NULL : sym,
				    .retprobe = ret);
			struct bpf_program *prog = ret ? skel->progs.bare_ret : skel->progs.bare;

			links[nlinks] = bpf_program__attach_uprobe_opts(
				prog, -1, lib, at ? strtoull(sym, NULL, 16) : 0, &opts);
			if (!links[nlinks]) {
				fprintf(stderr, "sslbench: cannot attach to %s in %s\n", sym, lib);
				goto out;
			}
			nlinks++;
		}
	}
	return run_probed(skel, links, nlinks, cmd);
out:
	return run_probed(skel, links, nlinks, NULL);
}

static int pump(SSL *c, SSL *s)
{
	for (int i = 0; i < 1000; i++) {
		int rc = SSL_do_handshake(c), rs = SSL_do_handshake(s);

		if (rc == 1 && rs == 1)
			return 0;
	}
	return -1;
}

static int bench_ssl(long n, const char *cert, const char *key)
{
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method()), *sctx = SSL_CTX_new(TLS_server_method());
	char msg[120], buf[256];
	BIO *bc, *bs;
	SSL *c, *s;
	double t0;

	memset(msg, 'x', sizeof(msg));
	if (SSL_CTX_use_certificate_file(sctx, cert, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(sctx, key, SSL_FILETYPE_PEM) != 1) {
		fprintf(stderr, "sslbench: cannot load %s / %s\n", cert, key);
		return 1;
	}
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	BIO_new_bio_pair(&bc, 1 << 16, &bs, 1 << 16);
	SSL_set_bio(c, bc, bc);
	SSL_set_bio(s, bs, bs);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	if (pump(c, s)) {
		fprintf(stderr, "sslbench: handshake failed\n");
		return 1;
	}
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (SSL_write(c, msg, sizeof(msg)) != (int)sizeof(msg) ||
		    SSL_read(s, buf, sizeof(buf)) != (int)sizeof(msg)) {
			fprintf(stderr, "sslbench: round trip %ld failed\n", i);
			return 1;
		}
	}
	printf("%.1f\n", (now_ns() - t0) / n);
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	return 0;
}

/* Go's crypto/tls: empty uprobes where tokenscope puts its own (user/capture/gobin.c): past the
 * stack check of (*Conn).Read and Write and on each of their RETs. */
static int go_bare_probe(const char *binary, char **cmd)
{
	struct bare_bpf *skel = bare_bpf__open_and_load();
	const struct gobin_func *funcs[2];
	struct bpf_link *links[2 * (GOBIN_MAX_RETS + 1)];
	int nlinks = 0;
	struct gobin g;
	char why[256];

	if (!skel || gobin__inspect(binary, &g, why, sizeof(why))) {
		fprintf(stderr, "sslbench: %s\n", skel ? why : "cannot load the bare uprobe (root?)");
		bare_bpf__destroy(skel);
		return 1;
	}
	funcs[0] = &g.read;
	funcs[1] = &g.write;
	for (int f = 0; f < 2; f++) {
		for (size_t i = 0; i <= funcs[f]->nrets; i++) {
			uint64_t off = i < funcs[f]->nrets ? funcs[f]->rets[i] : funcs[f]->body;

			links[nlinks] = bpf_program__attach_uprobe(skel->progs.bare, false, -1, binary,
								   off);
			if (!links[nlinks]) {
				fprintf(stderr, "sslbench: cannot attach at +%llu in %s\n",
					(unsigned long long)off, binary);
				goto out;
			}
			nlinks++;
		}
	}
	return run_probed(skel, links, nlinks, cmd);
out:
	return run_probed(skel, links, nlinks, NULL);
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (argc >= 5 && !strcmp(argv[1], "ssl") && n > 0)
		return bench_ssl(n, argv[3], argv[4]);
	if (argc >= 5 && (!strcmp(argv[1], "bare") || !strcmp(argv[1], "pair")))
		return bare_probe(argv[2], argv[3], !strcmp(argv[1], "pair"), argv + 4);
	if (argc >= 4 && !strcmp(argv[1], "gobare"))
		return go_bare_probe(argv[2], argv + 3);
	fprintf(stderr, "usage: sslbench ssl N CERT KEY | sslbench bare|pair LIB SYMBOLS CMD... | "
			"sslbench gobare GO_BINARY CMD...\n");
	return 2;
}
