// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Prometheus exposition of known requests: exact lines, label escaping, buckets
 * cumulative and +Inf equal to _count, HELP and TYPE on every family, the series limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sinks/metrics.h"

#define MS 1000000ull

static struct request *server_request(const char *model, uint64_t ttft_ms)
{
	struct request *r = request__new();

	assert_non_null(r);
	r->role = ROLE_SERVER;
	r->api = API_OPENAI_CHAT;
	snprintf(r->comm, sizeof(r->comm), "vllm");
	assert_true(request__set_str(&r->model, model, strlen(model)));
	snprintf(r->local, sizeof(r->local), "127.0.0.1:8000");
	r->status = 200;
	r->stream = 1;
	r->start_ns = 1000 * MS;
	request__token(r, r->start_ns + ttft_ms * MS);
	request__token(r, r->start_ns + ttft_ms * MS + 20 * MS);
	r->end_ns = r->last_token_ns + 1 * MS;
	r->response_done = true;
	r->stream_end_seen = true;
	return r;
}

static const char *render(struct metrics *m, struct buf *b)
{
	assert_int_equal(metrics__render(m, NULL, b), 0);
	return b->p;
}

static void test_server_histogram_lines(void **state)
{
	struct metrics *m = metrics__new(10, NULL);
	struct request *r = server_request("llama", 30); /* TTFT 30 ms, TPOT 20 ms */
	struct request_metrics rm;
	struct buf b = { 0 };
	const char *t;

	request__metrics(r, &rm);
	metrics__request(m, r, &rm);
	t = render(m, &b);
#define L "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"llama\"," \
	  "gen_ai_response_model=\"\",server_address=\"127.0.0.1\",server_port=\"8000\",error_type=\"\"," \
	  "process=\"vllm\",network_protocol_version=\"1.1\",k8s_namespace_name=\"\",k8s_pod_name=\"\"," \
	  "container_id=\"\""
	assert_non_null(strstr(t, "# HELP gen_ai_server_time_to_first_token_seconds "));
	assert_non_null(strstr(t, "# TYPE gen_ai_server_time_to_first_token_seconds histogram\n"));
	/* 0.03 s: above 0.02, at or below 0.04 */
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_bucket{" L ",le=\"0.02\"} 0\n"));
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_bucket{" L ",le=\"0.04\"} 1\n"));
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_bucket{" L ",le=\"+Inf\"} 1\n"));
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_sum{" L "} 0.029999999999999999\n"));
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_count{" L "} 1\n"));
	/* TPOT 0.02 s on the server buckets: first above 0.01, at 0.025 */
	assert_non_null(strstr(t, "gen_ai_server_time_per_output_token_seconds_bucket{" L ",le=\"0.01\"} 0\n"));
	assert_non_null(strstr(t, "gen_ai_server_time_per_output_token_seconds_bucket{" L ",le=\"0.025\"} 1\n"));
	/* the token-usage buckets print as integers */
	assert_non_null(strstr(t, "# TYPE gen_ai_client_token_usage histogram\n"));
	assert_non_null(strstr(t, "tokenscope_ttft_seconds_count{process=\"vllm\",role=\"server\","
				  "gen_ai_request_model=\"llama\",cache=\"unknown\"} 1\n"));
	assert_non_null(strstr(t, "tokenscope_metrics_series_dropped_total 0\n"));
	request__free(r);
	buf__free(&b);
	metrics__free(m);
}

/* A server in a pod: its namespace, pod and container are labels (OpenTelemetry's resource
 * attributes, as Prometheus names them); past the series limit, pod and container fold with
 * the models. */
static void test_pod_labels(void **state)
{
	struct metrics *m = metrics__new(1, NULL);
	struct request *r = server_request("llama", 30), *r2 = server_request("qwen", 30);
	struct request_metrics rm;
	struct buf b = { 0 };
	const char *t;

	(void)state;
	snprintf(r->k8s_namespace, sizeof(r->k8s_namespace), "inference");
	snprintf(r->pod_name, sizeof(r->pod_name), "vllm-0");
	snprintf(r->container_id, sizeof(r->container_id), "%s",
		 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	/* another pod's, of another model: past the limit of one series */
	memcpy(r2->k8s_namespace, r->k8s_namespace, sizeof(r->k8s_namespace));
	memcpy(r2->container_id, r->container_id, sizeof(r->container_id));
	snprintf(r2->pod_name, sizeof(r2->pod_name), "vllm-1");
	request__metrics(r, &rm);
	metrics__request(m, r, &rm);
	metrics__request(m, r2, &rm);
	t = render(m, &b);
	assert_non_null(strstr(t, "gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="
				  "\"chat\",gen_ai_provider_name=\"openai\",gen_ai_request_model=\"llama\","
				  "gen_ai_response_model=\"\",server_address=\"127.0.0.1\",server_port=\"8000\","
				  "error_type=\"\",process=\"vllm\",network_protocol_version=\"1.1\","
				  "k8s_namespace_name=\"inference\",k8s_pod_name=\"vllm-0\",container_id="
				  "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"} 1\n"));
	assert_non_null(strstr(t, "gen_ai_request_model=\"other\",gen_ai_response_model=\"other\","
				  "server_address=\"127.0.0.1\",server_port=\"8000\",error_type=\"\","
				  "process=\"vllm\",network_protocol_version=\"1.1\","
				  "k8s_namespace_name=\"inference\",k8s_pod_name=\"other\","
				  "container_id=\"other\"} 1\n"));
	request__free(r2);
	request__free(r);
	buf__free(&b);
	metrics__free(m);
}

/* A server on a Unix socket: server_address is the socket's path, no port, and the inode that
 * names one connection is in no label. */
static void test_unix_server_address(void **state)
{
	struct metrics *m = metrics__new(10, NULL);
	struct request *r = server_request("llama", 30);
	struct request_metrics rm;
	struct buf b = { 0 };
	const char *t;

	snprintf(r->local, sizeof(r->local), "unix:/run/vllm/api.sock#123456");
	request__metrics(r, &rm);
	metrics__request(m, r, &rm);
	t = render(m, &b);
	assert_non_null(strstr(t, "server_address=\"/run/vllm/api.sock\",server_port=\"\","));
	assert_null(strstr(t, "123456"));
	request__free(r);
	buf__free(&b);
	metrics__free(m);
}

/* Every family has HELP and TYPE; in each histogram series the buckets never decrease and
 * +Inf equals _count. */
static void test_well_formed(void **state)
{
	struct metrics *m = metrics__new(10, NULL);
	struct buf b = { 0 };
	const char *t;
	char prev_series[1024] = "";
	unsigned long long prev = 0;

	for (int i = 0; i < 20; i++) {
		struct request *r = server_request("llama", 5 + (uint64_t)i * 97 % 3000);
		struct request_metrics rm;

		request__metrics(r, &rm);
		metrics__request(m, r, &rm);
		request__free(r);
	}
	t = render(m, &b);
	for (const char *line = t; *line;) {
		const char *nl = strchr(line, '\n');
		char buf[1024], *le;
		unsigned long long v;

		assert_non_null(nl);
		snprintf(buf, sizeof(buf), "%.*s", (int)(nl - line), line);
		if (!strncmp(buf, "# TYPE ", 7)) {
			char help[300];

			snprintf(help, sizeof(help), "# HELP %.*s ", (int)(strchr(buf + 7, ' ') - buf - 7),
				 buf + 7);
			assert_non_null(strstr(t, help));
		}
		le = strstr(buf, ",le=\"");
		if (le && strstr(buf, "_bucket{")) {
			assert_int_equal(sscanf(strrchr(buf, ' ') + 1, "%llu", &v), 1);
			*le = 0;
			if (!strcmp(buf, prev_series))
				assert_true(v >= prev);
			snprintf(prev_series, sizeof(prev_series), "%s", buf);
			prev = v;
			if (strstr(le + 1, "+Inf")) {
				char count_line[1100];

				/* the series' _count line carries the same number */
				snprintf(count_line, sizeof(count_line), "%.*s_count%s} %llu\n",
					 (int)(strstr(buf, "_bucket{") - buf), buf,
					 strstr(buf, "_bucket{") + 7, v);
				assert_non_null(strstr(t, count_line));
			}
		}
		line = nl + 1;
	}
	buf__free(&b);
	metrics__free(m);
}

/* Quotes, backslashes and newlines in a label value are escaped; past the series limit, new
 * models are folded into "other" and counted. */
static void test_escaping_and_limit(void **state)
{
	struct metrics *m = metrics__new(2, NULL);
	const char *models[] = { "a\"b", "c\\d", "e\nf", "g" };
	struct buf b = { 0 };
	const char *t;

	for (size_t i = 0; i < 4; i++) {
		struct request *r = server_request(models[i], 30);
		struct request_metrics rm;

		request__metrics(r, &rm);
		metrics__request(m, r, &rm);
		request__free(r);
	}
	t = render(m, &b);
	assert_non_null(strstr(t, "gen_ai_request_model=\"a\\\"b\""));
	assert_non_null(strstr(t, "gen_ai_request_model=\"c\\\\d\""));
	assert_null(strstr(t, "gen_ai_request_model=\"e\\nf\"")); /* the third model: folded */
	assert_non_null(strstr(t, "gen_ai_request_model=\"other\""));
	assert_null(strstr(t, "\"g\""));
	assert_null(strstr(t, "e\nf"));
	assert_non_null(strstr(t, "tokenscope_metrics_series_dropped_total "));
	assert_null(strstr(t, "tokenscope_metrics_series_dropped_total 0\n"));
	buf__free(&b);
	metrics__free(m);
}

/* The sum of the values of every line that begins with prefix. */
static double sum_lines(const char *t, const char *prefix)
{
	double sum = 0;

	for (const char *l = t; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *labels_end = strchr(l, '}');

		/* the value follows the labels' "} " */
		if (!strncmp(l, prefix, strlen(prefix)) && labels_end)
			sum += strtod(labels_end + 2, NULL);
	}
	return sum;
}

/*
 * Random model names from four process and role groups, 600 each (issue 38, case 4: about
 * 27 KB a label set made a 65 MB exposition, past the 64 MiB cut, and /metrics froze). The
 * exposition stays whole and under its budget, every request is counted (the folded ones
 * in "other"), and the fold is said once on stderr.
 */
static void test_many_models(void **state)
{
	static const char *const comms[] = { "vllm", "sglang", "gateway", "agent" };
	struct metrics *m = metrics__new(METRICS_MAX_SERIES_DEFAULT, NULL);
	struct buf b = { 0 };
	char said[4096] = "";
	const char *t;
	FILE *err = tmpfile();
	int saved = dup(2);
	unsigned seed = 38;
	size_t n[2] = { 0 }, lines = 0;

	assert_non_null(err);
	fflush(stderr);
	dup2(fileno(err), 2);
	for (int g = 0; g < 4; g++) {
		for (int i = 0; i < 600; i++) {
			char model[64];
			struct request *r;
			struct request_metrics rm;

			snprintf(model, sizeof(model), "random-%08x-%08x", rand_r(&seed), rand_r(&seed));
			r = server_request(model, 30);
			snprintf(r->comm, sizeof(r->comm), "%s", comms[g]);
			r->role = g % 2 ? ROLE_CLIENT : ROLE_SERVER;
			assert_true(request__set_str(&r->response_model, model, strlen(model)));
			request__metrics(r, &rm);
			metrics__request(m, r, &rm);
			n[g % 2]++;
			request__free(r);
		}
	}
	t = render(m, &b);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(err);
	while (fgets(said, sizeof(said), err))
		lines += strstr(said, "metrics: more label sets") != NULL;
	fclose(err);
	assert_true(b.len < (32u << 20) + (1u << 20));
	assert_non_null(strstr(t, "gen_ai_request_model=\"other\""));
	assert_null(strstr(t, "tokenscope_metrics_series_dropped_total 0\n"));
	assert_float_equal(sum_lines(t, "gen_ai_server_request_duration_seconds_count{"), n[0], 0);
	assert_float_equal(sum_lines(t, "gen_ai_client_operation_duration_seconds_count{"), n[1], 0);
	assert_true(sum_lines(t, "gen_ai_server_request_duration_seconds_count{"
				 "gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"openai\","
				 "gen_ai_request_model=\"other\"") > 0);
	assert_int_equal(lines, 1);
	buf__free(&b);
	metrics__free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_histogram_lines),
		cmocka_unit_test(test_pod_labels),
		cmocka_unit_test(test_unix_server_address),
		cmocka_unit_test(test_well_formed),
		cmocka_unit_test(test_escaping_and_limit),
		cmocka_unit_test(test_many_models),
	};

	return cmocka_run_group_tests_name("metrics_export", tests, NULL, NULL);
}
