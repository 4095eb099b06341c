// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Agent sessions: a client's chained calls (session.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/group.h"
#include "llm/session.h"

struct sessions {
	session_fn fn;
	void *ctx;
	uint64_t idle_ns;
	struct session **open; /* oldest first */
	size_t nopen, cap;
	uint64_t next_id;
	uint64_t evicted;
};

static const char *const chain_names[CHAIN__COUNT] = {
	[CHAIN_PREVIOUS_RESPONSE] = "previous_response_id",
	[CHAIN_TOOL_RESULT] = "tool_result",
	[CHAIN_CONVERSATION] = "conversation",
};

const char *session_chain__name(enum session_chain c)
{
	return c < CHAIN__COUNT ? chain_names[c] : "";
}

const char *session_end__name(enum session_end e)
{
	static const char *const names[] = { [SESSION_IDLE] = "idle", [SESSION_EXIT] = "exit",
					     [SESSION_TRACE_END] = "trace_end",
					     [SESSION_FULL] = "full" };

	return e <= SESSION_FULL ? names[e] : "";
}

struct sessions *sessions__new(session_fn fn, void *ctx)
{
	struct sessions *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->fn = fn;
	t->ctx = ctx;
	t->idle_ns = SESSION_IDLE_NS_DEFAULT;
	return t;
}

static void session_free(struct session *s)
{
	free(s->calls);
	free(s->conv);
	free(s);
}

void sessions__free(struct sessions *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nopen; i++)
		session_free(t->open[i]);
	free(t->open);
	free(t);
}

void sessions__set_idle(struct sessions *t, uint64_t idle_ns)
{
	t->idle_ns = idle_ns;
}

uint64_t sessions__evicted(const struct sessions *t)
{
	return t->evicted;
}

/* ---- a session's figures ---- */

static int by_start(const void *a, const void *b)
{
	const struct session_call *x = a, *y = b;

	return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

void session__times(const struct session *s, struct session_times *t)
{
	uint64_t first = UINT64_MAX, last = 0, covered_to = 0;
	struct session_call *c = malloc(s->ncalls * sizeof(*c));

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < s->ncalls; i++) {
		const struct session_call *k = &s->calls[i];

		first = k->start_ns < first ? k->start_ns : first;
		last = k->end_ns > last ? k->end_ns : last;
		if (!t->slowest || k->end_ns - k->start_ns > t->slowest->end_ns - t->slowest->start_ns)
			t->slowest = k;
	}
	if (!s->ncalls || !c) {
		free(c);
		return;
	}
	t->total_ns = last - first;
	/* inside calls: their union, in start order; each stretch is the first token's wait
	 * until the call's first token, then streaming (a stretch another call already covers
	 * counts once, as streaming) */
	memcpy(c, s->calls, s->ncalls * sizeof(*c));
	qsort(c, s->ncalls, sizeof(*c), by_start);
	for (size_t i = 0; i < s->ncalls; i++) {
		uint64_t from = c[i].start_ns > covered_to ? c[i].start_ns : covered_to;
		uint64_t first_tok = c[i].first_ns ? c[i].first_ns : c[i].end_ns;

		if (c[i].end_ns <= from)
			continue;
		if (first_tok > from)
			t->ttft_ns += (first_tok < c[i].end_ns ? first_tok : c[i].end_ns) - from;
		t->model_ns += c[i].end_ns - from;
		covered_to = c[i].end_ns;
	}
	t->streaming_ns = t->model_ns - t->ttft_ns;
	t->between_ns = t->total_ns - t->model_ns;
	free(c);
}

/* ---- open sessions ---- */

/* Whose calls these are: a client's own process; for a server's records, its peer's host
 * (its port changes with each connection) and the server process. */
static void client_of(const struct request *r, char *buf, size_t n)
{
	if (r->role == ROLE_CLIENT) {
		snprintf(buf, n, "pid %u", r->pid);
		return;
	}
	const char *colon = strrchr(r->peer, ':');
	int host = colon && strncmp(r->peer, "unix:", 5) ? (int)(colon - r->peer) : (int)strlen(r->peer);

	snprintf(buf, n, "%.*s>%u", host, r->peer, r->pid);
}

static void end_session(struct sessions *t, size_t i, enum session_end why)
{
	struct session *s = t->open[i];

	memmove(&t->open[i], &t->open[i + 1], (t->nopen - i - 1) * sizeof(*t->open));
	t->nopen--;
	if (s->ncalls >= 2) {
		s->id = ++t->next_id;
		s->end = why;
		t->fn(t->ctx, s);
	}
	session_free(s);
}

static bool same_client(const struct session *s, const struct request *r, const char *client)
{
	return s->role == r->role && !strcmp(s->client, client);
}

/* The session r continues, and by what; NULL for none. */
static struct session *chained(struct sessions *t, const struct request *r, const char *client,
			       enum session_chain *by)
{
	if (r->previous_response_id[0]) {
		for (size_t i = t->nopen; i-- > 0;) {
			if (!strcmp(t->open[i]->response_id, r->previous_response_id)) {
				*by = CHAIN_PREVIOUS_RESPONSE;
				return t->open[i];
			}
		}
	}
	/* the newest session of this client whose whole conversation r's begins with: by a
	 * tool's result where r feeds back one the last call asked for */
	for (size_t i = t->nopen; i-- > 0;) {
		struct session *s = t->open[i];

		if (!same_client(s, r, client))
			continue;
		/* longer: one conversation sent again (a retry, or two people's same question) is
		 * not a chain */
		if (s->nconv && r->nconv > s->nconv && r->conv[s->nconv - 1] == s->conv[s->nconv - 1]) {
			*by = r->tool_result && s->tool_called ? CHAIN_TOOL_RESULT : CHAIN_CONVERSATION;
			return s;
		}
	}
	return NULL;
}

static bool called_tool(const struct request *r)
{
	return r->tool_called || !strcmp(r->finish_reason, "tool_calls") ||
	       !strcmp(r->finish_reason, "function_call") || !strcmp(r->finish_reason, "tool_use");
}

static struct session *open_session(struct sessions *t, const struct request *r,
				    const struct request_metrics *m, const char *client)
{
	struct session *s = calloc(1, sizeof(*s));
	struct session **v;

	if (!s)
		return NULL;
	if (t->nopen == SESSIONS_OPEN_MAX) {
		t->evicted++;
		end_session(t, 0, SESSION_FULL);
	}
	if (t->nopen == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;

		v = realloc(t->open, cap * sizeof(*v));
		if (!v) {
			free(s);
			return NULL;
		}
		t->open = v;
		t->cap = cap;
	}
	s->pid = r->pid;
	memcpy(s->comm, r->comm, sizeof(s->comm));
	s->role = r->role;
	snprintf(s->client, sizeof(s->client), "%s", client);
	snprintf(s->model, sizeof(s->model), "%s", request__model(r));
	s->consumer = m->consumer;
	t->open[t->nopen++] = s;
	return s;
}

static int add_call(struct session *s, const struct request *r, const struct request_metrics *m)
{
	uint64_t *conv = NULL;

	if (s->ncalls == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct session_call *v = realloc(s->calls, cap * sizeof(*v));

		if (!v)
			return -1;
		s->calls = v;
		s->cap = cap;
	}
	if (r->nconv && !(conv = malloc(r->nconv * sizeof(*conv))))
		return -1;
	if (conv)
		memcpy(conv, r->conv, r->nconv * sizeof(*conv));
	free(s->conv);
	s->conv = conv;
	s->nconv = conv ? r->nconv : 0;
	s->calls[s->ncalls++] = (struct session_call){ r->id, r->start_ns, r->first_token_ns,
						       r->end_ns > r->start_ns ? r->end_ns : r->start_ns };
	snprintf(s->response_id, sizeof(s->response_id), "%s", r->response_id);
	s->tool_called = called_tool(r);
	if (m->consumer == CONSUMER_AGENT)
		s->consumer = CONSUMER_AGENT;
	if (r->end_ns > s->last_ns)
		s->last_ns = r->end_ns;
	return 0;
}

void sessions__request(struct sessions *t, const struct request *r, const struct request_metrics *m)
{
	char client[SESSION_CLIENT_MAX];
	enum session_chain by = CHAIN_CONVERSATION;
	struct session *s;

	/* a call of a conversation, a tool loop or a chain of responses; not an embedding, nor a
	 * call whose start was not seen */
	if (!r->start_ns || r->api == API_OPENAI_EMBEDDINGS || r->api == API_UNKNOWN ||
	    (!r->nconv && !r->response_id[0] && !r->tools_offered))
		return;
	sessions__tick(t, r->start_ns);
	client_of(r, client, sizeof(client));
	s = chained(t, r, client, &by);
	if (s && s->ncalls == SESSION_CALLS_MAX) {
		size_t i;

		for (i = 0; t->open[i] != s; i++)
			;
		end_session(t, i, SESSION_FULL);
		s = NULL;
	}
	if (s)
		s->chained[by]++;
	else if (!(s = open_session(t, r, m, client)))
		return;
	add_call(s, r, m);
}

void sessions__tick(struct sessions *t, uint64_t now)
{
	for (size_t i = 0; i < t->nopen;) {
		if (now > t->open[i]->last_ns + t->idle_ns)
			end_session(t, i, SESSION_IDLE);
		else
			i++;
	}
}

void sessions__exit(struct sessions *t, uint32_t pid)
{
	for (size_t i = 0; i < t->nopen;) {
		if (t->open[i]->role == ROLE_CLIENT && t->open[i]->pid == pid)
			end_session(t, i, SESSION_EXIT);
		else
			i++;
	}
}

void sessions__finish(struct sessions *t)
{
	while (t->nopen)
		end_session(t, 0, SESSION_TRACE_END);
}
