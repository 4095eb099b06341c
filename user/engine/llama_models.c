// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/llama_models.h"
#include "base/buf.h"
#include "engine/step.h"

void llama_models__free(struct llama_models *m)
{
	free(m->v);
	*m = (struct llama_models){ 0 };
}

/* The entry of (pid, ptr) as a model (is_context false) or a context, or NULL. */
static struct llama_model_entry *find(const struct llama_models *m, uint32_t pid, uint64_t ptr,
				      bool is_context)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].pid == pid && m->v[i].ptr == ptr && m->v[i].is_context == is_context)
			return &m->v[i];
	}
	return NULL;
}

/* (pid, ptr)'s entry, made where there was none: a pointer llama.cpp freed and gave again is
 * the newer thing's. */
static struct llama_model_entry *put(struct llama_models *m, uint32_t pid, uint64_t ptr,
				     bool is_context)
{
	struct llama_model_entry *e = find(m, pid, ptr, is_context);

	if (e)
		return e;
	if (!array__reserve((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)))
		return NULL;
	e = &m->v[m->n++];
	*e = (struct llama_model_entry){ .pid = pid, .ptr = ptr, .is_context = is_context };
	return e;
}

/* A split's suffix, "-00001-of-00003": its length at the end of name[0..n), or 0. */
static size_t split_suffix(const char *name, size_t n)
{
	static const char shape[] = "-99999-of-99999";
	size_t len = sizeof(shape) - 1;

	if (n <= len)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = name[n - len + i];

		if (shape[i] == '9' ? !isdigit((unsigned char)c) : c != shape[i])
			return 0;
	}
	return len;
}

/* The model name in s: [*from, *from + *len). */
static void name_span(const char *s, const char **from, size_t *len)
{
	const char *base = strrchr(s, '/');
	size_t n;

	base = base ? base + 1 : s;
	n = strlen(base);
	if (n > 5 && !strcasecmp(base + n - 5, ".gguf"))
		n -= 5;
	n -= split_suffix(base, n);
	*from = base;
	*len = n;
}

void llama_model__name(const char *path, char *out)
{
	const char *from;
	size_t n;

	name_span(path, &from, &n);
	if (n >= LLAMA_MODEL_NAME_MAX)
		n = LLAMA_MODEL_NAME_MAX - 1;
	memcpy(out, from, n);
	out[n] = 0;
}

uint64_t llama_model__key(const char *name)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	const char *from;
	size_t n;

	if (!name)
		return 0;
	name_span(name, &from, &n);
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)tolower((unsigned char)from[i]);
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

int llama_models__model(struct llama_models *m, const struct ts_llama_model *rec)
{
	char path[TS_LLAMA_PATH_LEN];
	struct llama_model_entry *e;

	if (!rec->model)
		return 0; /* the load failed: nothing to name */
	memcpy(path, rec->path, sizeof(path));
	path[sizeof(path) - 1] = 0;
	e = put(m, rec->hdr.pid, rec->model, false);
	if (!e)
		return -1;
	llama_model__name(path, e->name);
	return 0;
}

int llama_models__context(struct llama_models *m, const struct ts_llama_context *rec)
{
	struct llama_model_entry *e;

	if (!rec->ctx || !rec->model)
		return 0; /* it failed */
	e = put(m, rec->hdr.pid, rec->ctx, true);
	if (!e)
		return -1;
	e->model = rec->model;
	memset(e->next_pos, 0, sizeof(e->next_pos)); /* a new context of a freed one's pointer */
	return 0;
}

void llama_models__exit(struct llama_models *m, uint32_t pid)
{
	size_t k = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].pid != pid)
			m->v[k++] = m->v[i];
	}
	m->n = k;
}

const char *llama_models__name_of(const struct llama_models *m, uint32_t pid, uint64_t ctx)
{
	const struct llama_model_entry *c = find(m, pid, ctx, true), *model;

	if (!c || !c->model)
		return NULL;
	model = find(m, pid, c->model, false);
	return model && model->name[0] ? model->name : NULL;
}

int llama_models__positions(struct llama_models *m, struct engine_step *s)
{
	struct llama_model_entry *c = put(m, s->pid, s->context, true);

	if (!c)
		return -1;
	for (uint32_t i = 0; i < s->nseqs; i++) {
		struct step_seq *q = &s->seqs[i];
		int32_t *next;

		if (q->seq < 0 || q->seq >= TS_LLAMA_SEQS || q->first_pos < 0)
			continue;
		next = &c->next_pos[q->seq];
		if (q->first_pos < *next)
			q->rewound_from = *next;
		/* a step that verified drafted tokens expects to keep its own token only: the
		 * rejected drafts after it are removed as a matter of course */
		if (q->outputs > 1 && q->outputs <= q->tokens)
			*next = q->first_pos + (int32_t)(q->tokens - q->outputs) + 1;
		else
			*next = q->last_pos + 1;
	}
	return 0;
}
