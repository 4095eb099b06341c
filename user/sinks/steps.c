// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"
#include "base/text.h"
#include "engine/cuda_steps.h"
#include "engine/llama_models.h"
#include "engine/llama_steps.h"
#include "sinks/steps.h"

/* The steps of one stream: a process's CUDA steps, or one llama.cpp context's. */
struct step_group {
	enum step_source source;
	uint32_t pid;
	uint64_t context;
	char comm[TS_COMM_LEN];
	char model[LLAMA_MODEL_NAME_MAX]; /* its model's name, where its making was seen */
	uint64_t n, bound, failed, first_ns, last_ns;
	struct sample step_ms, launches; /* CUDA: launches per step */
	/* llama.cpp */
	struct sample tokens, seqs;	   /* per step that did work */
	uint64_t kind_n[STEP_KIND__N];
	uint64_t kind_ns[STEP_KIND__N];
	uint32_t max_seqs; /* the most sequences one step carried */
	bool draft;	   /* a draft model's context: speculating requests' attribution says */
	struct step_group *next;
};

struct step_summary {
	struct step_group *groups; /* in the order first seen */
};

struct step_summary *step_summary__new(void)
{
	return calloc(1, sizeof(struct step_summary));
}

void step_summary__free(struct step_summary *ss)
{
	if (!ss)
		return;
	while (ss->groups) {
		struct step_group *sg = ss->groups;

		ss->groups = sg->next;
		sample__free(&sg->step_ms);
		sample__free(&sg->launches);
		sample__free(&sg->tokens);
		sample__free(&sg->seqs);
		free(sg);
	}
	free(ss);
}

bool step_summary__any(const struct step_summary *ss)
{
	return ss->groups != NULL;
}

void step_summary__draft(struct step_summary *ss, uint32_t pid, uint64_t ctx)
{
	for (struct step_group *sg = ss->groups; sg; sg = sg->next) {
		if (sg->source == STEP_SOURCE_LLAMA && sg->pid == pid && sg->context == ctx)
			sg->draft = true;
	}
}

static struct step_group *group_of(struct step_summary *ss, const struct engine_step *s)
{
	struct step_group **link = &ss->groups, *sg;

	for (; *link; link = &(*link)->next) {
		sg = *link;
		if (sg->source == s->source && sg->pid == s->pid && sg->context == s->context)
			return sg;
	}
	sg = calloc(1, sizeof(*sg));
	if (!sg)
		return NULL;
	sg->source = s->source;
	sg->pid = s->pid;
	sg->context = s->context;
	memcpy(sg->comm, s->comm, sizeof(sg->comm));
	sg->first_ns = s->start_ns;
	*link = sg;
	return sg;
}

void step_summary__add(struct step_summary *ss, const struct engine_step *s)
{
	struct step_group *sg = group_of(ss, s);
	uint64_t dur = s->end_ns >= s->start_ns ? s->end_ns - s->start_ns : 0;

	if (!sg)
		return;
	if (s->model && !sg->model[0])
		snprintf(sg->model, sizeof(sg->model), "%s", s->model);
	sg->n++;
	sg->bound += s->end_bound;
	if (s->start_ns && s->start_ns < sg->first_ns)
		sg->first_ns = s->start_ns;
	if (s->host_seen_ns > sg->last_ns)
		sg->last_ns = s->host_seen_ns;
	if (s->failed) {
		sg->failed++;
		return;
	}
	if (s->start_ns && s->end_ns >= s->start_ns)
		sample__add(&sg->step_ms, (double)dur / 1e6);
	if (s->cuda)
		sample__add(&sg->launches, s->cuda->launches + s->cuda->graph_launches);
	if (s->source == STEP_SOURCE_LLAMA) {
		enum step_kind k = step__kind(s);

		sample__add(&sg->tokens, s->tokens);
		sample__add(&sg->seqs, s->nseqs);
		sg->kind_n[k]++;
		sg->kind_ns[k] += dur;
		if (s->nseqs > sg->max_seqs)
			sg->max_seqs = s->nseqs;
	}
}

static void print_cuda(struct step_group *sg, FILE *out, const char *comm, double span)
{
	fprintf(out, "%s[%u] gpu steps=%llu (%llu with completion bounded) steps/s=%.1f\n", comm,
		sg->pid, (unsigned long long)sg->n, (unsigned long long)sg->bound,
		span > 0 ? (double)sg->n / span : 0.0);
	sample__print(out, "step_ms", &sg->step_ms);
	sample__print(out, "launches/step", &sg->launches);
}

/* Batch occupancy: the sequences a step carried, against the most any step of the context
 * carried (the engine's sequences are not known from outside). */
static void print_llama(struct step_group *sg, FILE *out, const char *comm, double span)
{
	uint64_t worked = sg->n - sg->failed;

	fprintf(out, "%s[%u] llama.cpp context 0x%llx%s%s%s steps=%llu (failed %llu) steps/s=%.1f\n",
		comm, sg->pid, (unsigned long long)sg->context, sg->model[0] ? " model " : "",
		sg->model, sg->draft ? " (drafts for speculative decoding)" : "", (unsigned long long)sg->n, (unsigned long long)sg->failed,
		span > 0 ? (double)worked / span : 0.0);
	fprintf(out, "    time by kind:");
	for (int k = STEP_KIND_DECODE; k < STEP_KIND__N; k++) {
		if (sg->kind_n[k])
			fprintf(out, " %s %llu steps %.1f ms", step_kind__name(k),
				(unsigned long long)sg->kind_n[k], (double)sg->kind_ns[k] / 1e6);
	}
	fprintf(out, "\n");
	sample__print(out, "step_ms", &sg->step_ms);
	sample__print(out, "tokens/step", &sg->tokens);
	sample__print(out, "seqs/step", &sg->seqs);
}

void step_summary__print(struct step_summary *ss, FILE *out)
{
	for (int source = STEP_SOURCE_CUDA; source <= STEP_SOURCE_LLAMA; source++) {
		for (struct step_group *sg = ss->groups; sg; sg = sg->next) {
			double span = (double)(sg->last_ns - sg->first_ns) / 1e9;
			char comm[TS_COMM_LEN * 8];

			if ((int)sg->source != source)
				continue;
			text__safe(comm, sizeof(comm), sg->comm);
			if (source == STEP_SOURCE_CUDA)
				print_cuda(sg, out, comm, span);
			else
				print_llama(sg, out, comm, span);
		}
	}
}

static json_t *kernels_json(const struct engine_step *es)
{
	const struct cuda_step *s = es->cuda;
	json_t *ks = json_array();
	char buf[64];

	for (uint32_t i = 0; i < s->nkernels; i++) {
		const struct ts_kernel_sample *k = &s->k[i];
		json_t *kj = json_object();

		json_object_set_new(kj, "name", json_string(cuda_steps__kernel_name(
							es->cuda_names, s->pid, k, buf, sizeof(buf))));
		json_object_set_new(kj, "count", json_integer(k->count));
		if (!(k->flags & TS_KS_GRAPH)) {
			json_object_set_new(kj, "grid", json_pack("[iii]", k->grid[0], k->grid[1],
								  k->grid[2]));
			json_object_set_new(kj, "block", json_pack("[iii]", k->block[0], k->block[1],
								   k->block[2]));
		}
		json_array_append_new(ks, kj);
	}
	return ks;
}

static json_t *cuda_json(const struct engine_step *es)
{
	const struct cuda_step *s = es->cuda;
	json_t *o = json_object();
	char hex[32];

	snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)s->stream);
	json_object_set_new(o, "type", json_string("gpu_step"));
	json_object_set_new(o, "pid", json_integer(s->pid));
	json_object_set_new(o, "tid", json_integer(s->tid));
	json_object_set_new(o, "comm", json_string(s->comm));
	json_object_set_new(o, "stream", json_string(hex));
	json_object_set_new(o, "launches", json_integer(s->launches));
	json_object_set_new(o, "graph_launches", json_integer(s->graph_launches));
	json_object_set_new(o, "copies", json_integer(s->copies));
	json_object_set_new(o, "first_launch_ns", json_integer((json_int_t)s->first_launch_ns));
	json_object_set_new(o, "gpu_done_ns", json_integer((json_int_t)s->gpu_done_ns));
	json_object_set_new(o, "host_seen_ns", json_integer((json_int_t)s->host_seen_ns));
	json_object_set_new(o, "done_bound", json_boolean(s->done_bound));
	json_object_set_new(o, "kernels", kernels_json(es));
	json_object_set_new(o, "other_launches", json_integer(s->other_launches));
	return o;
}

static json_t *llama_json(const struct engine_step *s)
{
	const struct ts_llama_step *r = s->llama;
	json_t *o = json_object(), *seqs = json_array();
	char hex[32];

	snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)r->ctx);
	json_object_set_new(o, "type", json_string("engine_step"));
	json_object_set_new(o, "source", json_string("llama.cpp"));
	json_object_set_new(o, "pid", json_integer(s->pid));
	json_object_set_new(o, "tid", json_integer(s->tid));
	json_object_set_new(o, "comm", json_string(s->comm));
	json_object_set_new(o, "context", json_string(hex));
	json_object_set_new(o, "model", s->model ? json_string(s->model) : json_null());
	json_object_set_new(o, "call", json_string(llama_steps__call(r)));
	json_object_set_new(o, "start_ns", json_integer((json_int_t)s->start_ns));
	json_object_set_new(o, "end_ns", json_integer((json_int_t)s->end_ns));
	json_object_set_new(o, "duration_ms", json_real((double)(s->end_ns - s->start_ns) / 1e6));
	json_object_set_new(o, "result", json_integer(r->result));
	json_object_set_new(o, "did_work", json_boolean(!s->failed));
	json_object_set_new(o, "kind", json_string(step_kind__name(step__kind(s))));
	json_object_set_new(o, "tokens", json_integer(r->n_tokens));
	json_object_set_new(o, "outputs", json_integer(r->outputs));
	for (uint32_t i = 0; i < s->nseqs; i++) {
		const struct step_seq *q = &s->seqs[i];
		json_t *qj = json_object();

		json_object_set_new(qj, "seq", json_integer(q->seq));
		json_object_set_new(qj, "tokens", json_integer(q->tokens));
		if (!(r->flags & TS_LLAMA_NO_POS)) {
			json_object_set_new(qj, "first_pos", json_integer(q->first_pos));
			json_object_set_new(qj, "last_pos", json_integer(q->last_pos));
			if (q->rewound_from > 0) /* cells past first_pos were removed */
				json_object_set_new(qj, "rewound_from", json_integer(q->rewound_from));
		}
		json_object_set_new(qj, "outputs", json_integer(q->outputs));
		json_array_append_new(seqs, qj);
	}
	json_object_set_new(o, "sequences", seqs);
	json_object_set_new(o, "positions_known", json_boolean(!(r->flags & TS_LLAMA_NO_POS)));
	json_object_set_new(o, "other_sequence_tokens", json_integer(r->other_seq_tokens));
	json_object_set_new(o, "shared_tokens", json_integer(r->shared_tokens));
	json_object_set_new(o, "unread_tokens", json_integer(r->unread_tokens));
	return o;
}

char *steps__json(const struct engine_step *s)
{
	json_t *o = s->cuda ? cuda_json(s) : s->llama ? llama_json(s) : NULL;
	char *out;

	if (!o)
		return NULL;
	out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(o);
	return out;
}
