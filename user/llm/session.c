// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Agent sessions: a client's chained calls (session.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/group.h"
#include "llm/session.h"

/* The index: a session by its last conversation's hash (with its client's) and by its last
 * response's id, open addressing with linear probing, deletion by backward shift. At most
 * two keys a session: at most half full. */
#define INDEX_SLOTS (4 * SESSIONS_OPEN_MAX)

struct slot {
	uint64_t key; /* 0: empty */
	struct session *s;
};

struct sessions {
	session_fn fn;
	void *ctx;
	uint64_t idle_ns;
	struct session *oldest, *newest; /* by their last call */
	size_t nopen;
	struct slot index[INDEX_SLOTS];
	uint64_t next_id, next_key;
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
	while (t->oldest) {
		struct session *s = t->oldest;

		t->oldest = s->next;
		session_free(s);
	}
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

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = (a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))) * 0xff51afd7ed558ccdull;

	return (h ^ (h >> 33)) | 1; /* never 0: an empty slot */
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct session *index_get(const struct sessions *t, uint64_t key)
{
	for (size_t i = key & (INDEX_SLOTS - 1); t->index[i].key; i = (i + 1) & (INDEX_SLOTS - 1)) {
		if (t->index[i].key == key)
			return t->index[i].s;
	}
	return NULL;
}

/* key -> s (a newer session of the same key takes its place) */
static void index_put(struct sessions *t, uint64_t key, struct session *s)
{
	size_t i = key & (INDEX_SLOTS - 1);

	while (t->index[i].key && t->index[i].key != key)
		i = (i + 1) & (INDEX_SLOTS - 1);
	t->index[i] = (struct slot){ key, s };
}

/* key's entry goes where it is s's */
static void index_del(struct sessions *t, uint64_t key, const struct session *s)
{
	size_t i = key & (INDEX_SLOTS - 1), j;

	while (t->index[i].key && t->index[i].key != key)
		i = (i + 1) & (INDEX_SLOTS - 1);
	if (!key || t->index[i].key != key || t->index[i].s != s)
		return;
	t->index[i].key = 0;
	/* backward shift: later entries of the run move up to where a probe finds them */
	for (j = (i + 1) & (INDEX_SLOTS - 1); t->index[j].key; j = (j + 1) & (INDEX_SLOTS - 1)) {
		size_t home = t->index[j].key & (INDEX_SLOTS - 1);

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			t->index[i] = t->index[j];
			t->index[j].key = 0;
			i = j;
		}
	}
}

static void unlink_session(struct sessions *t, struct session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		t->oldest = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		t->newest = s->prev;
	s->prev = s->next = NULL;
}

static void append_session(struct sessions *t, struct session *s)
{
	s->prev = t->newest;
	s->next = NULL;
	if (t->newest)
		t->newest->next = s;
	else
		t->oldest = s;
	t->newest = s;
}

static void end_session(struct sessions *t, struct session *s, enum session_end why)
{
	unlink_session(t, s);
	index_del(t, s->conv_key, s);
	index_del(t, s->resp_key, s);
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

/* The session r continues, and by what; NULL for none: the one whose last response r names,
 * else this client's newest whose whole conversation r's begins with, and more (by a tool's
 * result where r feeds back one the last call asked for). One conversation sent again whole
 * (a retry, or two people's same question) is not a chain. */
static struct session *chained(struct sessions *t, const struct request *r, const char *client,
			       uint64_t client_hash, enum session_chain *by)
{
	struct session *s;

	if (r->previous_response_id[0]) {
		s = index_get(t, mix(hash_str(r->previous_response_id), 2));
		if (s && !strcmp(s->response_id, r->previous_response_id)) {
			*by = CHAIN_PREVIOUS_RESPONSE;
			return s;
		}
	}
	for (uint32_t k = r->nconv > 1 ? r->nconv - 1 : 0; k > 0; k--) {
		s = index_get(t, mix(client_hash, r->conv[k - 1]));
		if (s && s->nconv == k && s->conv[k - 1] == r->conv[k - 1] && same_client(s, r, client)) {
			*by = r->tool_result && s->tool_called ? CHAIN_TOOL_RESULT : CHAIN_CONVERSATION;
			return s;
		}
	}
	return NULL;
}

static struct session *open_session(struct sessions *t, const struct request *r,
				    const struct request_metrics *m, const char *client,
				    uint64_t client_hash)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (t->nopen == SESSIONS_OPEN_MAX) {
		/* the least recently called ends; a lone call was no session, and no loss */
		t->evicted += t->oldest->ncalls >= 2;
		end_session(t, t->oldest, SESSION_FULL);
	}
	s->pid = r->pid;
	memcpy(s->comm, r->comm, sizeof(s->comm));
	s->role = r->role;
	snprintf(s->client, sizeof(s->client), "%s", client);
	s->client_hash = client_hash;
	snprintf(s->model, sizeof(s->model), "%s", request__model(r));
	s->consumer = m->consumer;
	s->key = ++t->next_key;
	append_session(t, s);
	t->nopen++;
	return s;
}

static int add_call(struct sessions *t, struct session *s, const struct request *r,
		    const struct request_metrics *m)
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
	s->tool_called = request__called_tool(r);
	if (m->consumer == CONSUMER_AGENT)
		s->consumer = CONSUMER_AGENT;
	if (r->end_ns > s->last_ns)
		s->last_ns = r->end_ns;
	/* what the next call finds it by, and its place among the most recently called */
	index_del(t, s->conv_key, s);
	index_del(t, s->resp_key, s);
	s->conv_key = s->nconv ? mix(s->client_hash, s->conv[s->nconv - 1]) : 0;
	s->resp_key = s->response_id[0] ? mix(hash_str(s->response_id), 2) : 0;
	if (s->conv_key)
		index_put(t, s->conv_key, s);
	if (s->resp_key)
		index_put(t, s->resp_key, s);
	unlink_session(t, s);
	append_session(t, s);
	return 0;
}

void sessions__request(struct sessions *t, const struct request *r, struct request_metrics *m)
{
	char client[SESSION_CLIENT_MAX];
	enum session_chain by = CHAIN_CONVERSATION;
	uint64_t client_hash;
	struct session *s;

	/* a call of a conversation, a tool loop or a chain of responses; not an embedding, nor a
	 * call whose start was not seen */
	if (!r->start_ns || r->api == API_OPENAI_EMBEDDINGS || r->api == API_UNKNOWN ||
	    (!r->nconv && !r->response_id[0] && !r->tools_offered))
		return;
	sessions__tick(t, r->start_ns);
	client_of(r, client, sizeof(client));
	client_hash = mix(hash_str(client), r->role);
	s = chained(t, r, client, client_hash, &by);
	if (s && s->ncalls == SESSION_CALLS_MAX) {
		end_session(t, s, SESSION_FULL);
		s = NULL;
	}
	if (s)
		s->chained[by]++;
	else if (!(s = open_session(t, r, m, client, client_hash)))
		return;
	if (add_call(t, s, r, m))
		return;
	m->session = s->key;
	m->session_call = (uint32_t)(s->ncalls - 1);
}

/* Least recently called first: the idle ones are at the front. */
void sessions__tick(struct sessions *t, uint64_t now)
{
	while (t->oldest && now > t->oldest->last_ns + t->idle_ns)
		end_session(t, t->oldest, SESSION_IDLE);
}

void sessions__exit(struct sessions *t, uint32_t pid)
{
	for (struct session *s = t->oldest, *next; s; s = next) {
		next = s->next;
		if (s->role == ROLE_CLIENT && s->pid == pid)
			end_session(t, s, SESSION_EXIT);
	}
}

void sessions__finish(struct sessions *t)
{
	while (t->oldest)
		end_session(t, t->oldest, SESSION_TRACE_END);
}
