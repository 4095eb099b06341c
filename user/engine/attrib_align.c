// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which step produced each token event (attrib_state.h): one the host saw complete before
 * it, placed so that a request's events are on successive steps (attrib_align_tokens), which
 * undoes the delay of a server that writes late; a stream interval puts them on a grid.
 * Finished requests' first tokens are placed so at once (attrib__finished), for the requests
 * attributed after them.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/attrib_state.h"

/* Index of the latest step seen complete at or before t; n when none. */
size_t attrib_latest_seen(const struct window_step *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid].seen <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : n;
}

static int by_size(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;

	return a < b ? -1 : a > b;
}

static int by_mark(const void *x, const void *y)
{
	const struct token_mark *a = x, *b = y;

	return a->step < b->step ? -1 : a->step > b->step;
}

/* The step of the window that produced first token f: the one its own alignment found, else
 * the latest seen complete before it. n when none. */
static size_t step_of(const struct first_token *f, const struct window_step *v, size_t n)
{
	size_t k = attrib_latest_seen(v, n, f->ft);

	if (k == n || !f->step_start)
		return k;
	for (size_t back = 0; back < 256 && back <= k; back++) {
		if (v[k - back].start == f->step_start)
			return k - back;
	}
	return k;
}

/* The latest step seen before the engine's own output of first token f, where it began
 * after f's arrival (attrib_engine_output_bound); n when there is none. */
static size_t first_output_step(const struct first_token *f, const struct window_step *v, size_t n)
{
	size_t k;

	if (!f->engine_output || f->engine_output < f->arrival || f->engine_output > f->ft)
		return n;
	k = attrib_latest_seen(v, n, f->engine_output);
	return k < n && v[k].start >= f->arrival ? k : n;
}

/* The first tokens of this engine's requests written in [v[0].seen, to], on their steps. A
 * request still streaming is not aligned yet: its first token is put as far behind the latest
 * step seen before it as the aligned ones around it were (the HTTP server's delay). */
void attrib_place_first_tokens(struct attrib *a, const struct engine_procs *e, uint32_t own_pid,
			       struct window_step *v, size_t n, uint64_t to)
{
	size_t f = 0, hi = a->nfts, m = 0, nlags = 0, lag = 0, lags[64];

	a->nmarks = 0;
	while (n && f < hi) {
		size_t mid = (f + hi) / 2;

		if (a->fts[mid].ft < v[0].seen)
			f = mid + 1;
		else
			hi = mid;
	}
	for (size_t pass = 0; pass < 2; pass++) {
		for (size_t i = f; n && i < a->nfts && a->fts[i].ft <= to; i++) {
			const struct first_token *ft = &a->fts[i];
			size_t k, ls, ke;

			if (!attrib_serves(a, ft->http_pid, own_pid, e) || (pass == 0) != !!ft->step_start)
				continue;
			ls = attrib_latest_seen(v, n, ft->ft);
			if (ls == n)
				continue;
			k = ft->step_start ? step_of(ft, v, n) : ls - (lag < ls ? lag : ls);
			if (pass == 0 && nlags < 64)
				lags[nlags++] = ls - k;
			/* not aligned yet, but the engine said when it had the token: that bounds
			 * its step better than the server's typical delay */
			ke = pass == 1 ? first_output_step(ft, v, n) : n;
			if (ke < n)
				k = ke;
			if (!array__reserve((void **)&a->marks, &a->capmarks, a->nmarks + 1,
					    sizeof(*a->marks)))
				continue;
			a->marks[a->nmarks++] =
				(struct token_mark){ k, i, ls, ft->step_start || ke < n };
		}
		if (pass == 0 && nlags) {
			qsort(lags, nlags, sizeof(*lags), by_size);
			lag = lags[nlags / 2];
		}
	}
	if (a->nmarks)
		qsort(a->marks, a->nmarks, sizeof(*a->marks), by_mark);
	for (size_t k = 0; k < n; k++) {
		v[k].mk_lo = m;
		while (m < a->nmarks && a->marks[m].step == k)
			m++;
		v[k].mk_hi = m;
	}
	/* where an unaligned first token came from is a guess: any step between the latest seen
	 * before it and as far back as the HTTP server was seen to lag may be it */
	for (size_t i = 0; i < a->nmarks; i++) {
		size_t ls = a->marks[i].latest_seen, back = nlags ? lags[nlags - 1] + 1 : 2;

		for (size_t k = ls > back ? ls - back : 0; !a->marks[i].aligned && k <= ls; k++)
			v[k].maybe_first = true;
	}
}

#define GRID_MAX 64 /* stream intervals looked for: 2 .. GRID_MAX - 1 steps */

/* The stream interval of events 1 .. ne - 2 (not the first token's, not the last, which may
 * be a remainder), placed lag steps behind their latest seen steps: the commonest spacing k
 * of at least two thirds of the spacings, and the commonest step number modulo k of at least
 * two thirds of the events. Returns k (0: no interval found) and the phase. */
static size_t stream_grid(const size_t *q, size_t ne, size_t lag, size_t *phase)
{
	uint32_t count[GRID_MAX] = { 0 };
	size_t m = ne >= 2 ? ne - 2 : 0, k = 2;

	if (m < 4)
		return 0;
	for (size_t i = 1; i + 1 < ne - 1; i++) {
		size_t d = q[i + 1] - q[i];

		if (d < GRID_MAX)
			count[d]++;
	}
	for (size_t d = 3; d < GRID_MAX; d++) {
		if (count[d] > count[k])
			k = d;
	}
	if (3 * count[k] < 2 * (m - 1))
		return 0;
	memset(count, 0, sizeof(count));
	for (size_t i = 1; i < ne - 1; i++)
		count[(q[i] - (q[i] >= lag ? lag : q[i])) % k]++;
	*phase = 0;
	for (size_t p = 1; p < k; p++) {
		if (count[p] > count[*phase])
			*phase = p;
	}
	return 3 * count[*phase] >= 2 * m ? k : 0;
}

/*
 * Whether, with no token count, the events say the server fell further behind as it went
 * rather than that they carry several tokens each: two middle events written after the same
 * latest seen step (the second's tokens came from a step no later than the first's: a
 * server that merges what has piled up would have sent them together, one that keeps up
 * with a stream interval would not have written twice), and no stream interval's grid.
 * Then each event carries one token and the growing delay is the server's (its receiver of
 * the engine's outputs starved on a loaded host).
 */
static bool lag_grew(const size_t *q, size_t ne)
{
	size_t phase, same = 0;

	for (size_t i = 1; i + 2 < ne; i++)
		same += q[i + 1] == q[i];
	return same && !stream_grid(q, ne, 0, &phase);
}

/*
 * The first token's step no later than the latest step seen complete before the engine's own
 * output of it (vLLM's engine wire: the outputs message leaves once the engine has the step's
 * tokens, however late the HTTP server then writes), where that step began after arrival.
 * Returns the lesser of it and s0.
 */
size_t attrib_engine_output_bound(const struct window_step *v, size_t n, const struct request *r,
				  size_t s0)
{
	size_t k;

	if (!r->engine_output_ns || r->engine_output_ns < r->start_ns ||
	    r->engine_output_ns > r->first_token_ns)
		return s0; /* none, or another clock's (a container's time namespace) */
	k = attrib_latest_seen(v, n, r->engine_output_ns);
	return k < s0 && v[k].start >= r->start_ns ? k : s0;
}

/*
 * Which of the engine's outputs for the request (vLLM's engine wire: one a step, with that
 * step's tokens) each token event carried last, into o: one output per event, or the stream's
 * own count of tokens so far at every event (usage on every chunk) against the outputs' token
 * counts, each event ending on a whole output (a late server merges whole outputs). False
 * where neither says so, or the counts do not fit the outputs.
 */
static bool outputs_carried(const struct request *r, size_t *o)
{
	size_t ne = r->token_events, j = 0;
	uint64_t sum = 0;

	if (!ne || r->engine_outs < ne)
		return false;
	if (r->engine_outs == ne) {
		for (size_t i = 0; i < ne; i++)
			o[i] = i;
		return true;
	}
	if (!r->event_tokens || !r->engine_out_tokens)
		return false;
	for (size_t i = 0; i < ne; i++) {
		uint64_t so_far = i < r->event_tokens_cap ? r->event_tokens[i] : 0;

		while (j < r->engine_outs && sum + r->engine_out_tokens[j] < so_far)
			sum += r->engine_out_tokens[j++];
		if (!so_far || j == r->engine_outs || sum + r->engine_out_tokens[j] != so_far)
			return false;
		o[i] = j;
		sum += r->engine_out_tokens[j++];
	}
	return true;
}

/*
 * Each event on the step of the output it carried last (outputs_carried): output j was made
 * at engine time out_ts[j], right after the step that made its tokens, so the event's step is
 * the latest the host saw complete by then, however late the server wrote it. A step whose
 * end the host saw only after the output was made (a tensor-parallel rank's late end) leaves
 * that the step before, which the previous event has: then the output's step is the next one,
 * where it is the only step begun by the time the output was made. False where it cannot be
 * (an output made after its event was written or before the request arrived: another
 * clock's; two events on one step otherwise).
 */
static bool align_by_outputs(const struct window_step *v, size_t n, const struct request *r,
			     size_t *q)
{
	size_t ne = r->token_events;
	uint64_t t = r->first_token_ns;

	if (!outputs_carried(r, q))
		return false;
	for (size_t i = 0; i < ne; i++) {
		uint64_t made = r->engine_out_ts[q[i]];
		size_t k;

		if (i)
			t += r->gaps_ns[i - 1];
		if (made > t || made < r->start_ns)
			return false;
		k = attrib_latest_seen(v, n, made);
		if (k < n && i && k <= q[i - 1]) {
			k = q[i - 1] + 1; /* seen late: the only step begun by then after the last */
			if (k >= n || v[k].start > made || (k + 1 < n && v[k + 1].start <= made))
				return false;
		}
		if (k == n || (!i && v[k].start < r->start_ns))
			return false;
		q[i] = k;
	}
	return true;
}

/*
 * More engine outputs than events and nothing to say which event carried which (a server
 * fallen behind merged them, and its chunks state no count): what bounds each event's last
 * output. Event i (from 0) carried at least i + 1 outputs, the ones after it at least one
 * each, and none made after it was written. Each event is moved into its bounds' steps (the
 * nearest to where it was, still one step after the other), and is inferred (inferred[i])
 * where they are more than one step. Where the bounds do not hold together (another clock's,
 * or steps they cannot order), q is left as it was and every event is inferred. Nothing
 * changes where there are no such outputs.
 */
void attrib_bound_by_outputs(const struct window_step *v, size_t n, const struct request *r,
			     size_t *q, bool *inferred)
{
	size_t ne = r->token_events, nout = r->engine_outs, hi = 0;
	uint64_t t = r->first_token_ns;
	size_t *b, *slo, *shi;

	if (!ne || nout <= ne || !r->engine_out_ts || !(b = malloc(3 * ne * sizeof(*b))))
		return;
	slo = b + ne;
	shi = slo + ne;
	for (size_t i = 0; i < ne; i++) {
		size_t most = nout - (ne - i); /* the later events' at least one each */

		if (i)
			t += r->gaps_ns[i - 1];
		while (hi + 1 < nout && r->engine_out_ts[hi + 1] <= t)
			hi++;
		if (r->engine_out_ts[i] > t)
			goto apart;
		slo[i] = attrib_latest_seen(v, n, r->engine_out_ts[i]);
		shi[i] = attrib_latest_seen(v, n, r->engine_out_ts[hi < most ? hi : most]);
		if (slo[i] == n || shi[i] == n)
			goto apart;
		b[i] = q[i] < slo[i] ? slo[i] : q[i] > shi[i] ? shi[i] : q[i];
	}
	for (size_t i = ne - 1; i-- > 0;) { /* each before the next, */
		if (b[i] >= b[i + 1])
			b[i] = b[i + 1] > slo[i] ? b[i + 1] - 1 : slo[i];
	}
	for (size_t i = 1; i < ne; i++) { /* and after the one before */
		if (b[i] <= b[i - 1])
			b[i] = b[i - 1] + 1;
		if (b[i] > shi[i])
			goto apart;
	}
	memcpy(q, b, ne * sizeof(*q));
	for (size_t i = 0; i < ne; i++)
		inferred[i] = slo[i] != shi[i];
	free(b);
	return;
apart:
	free(b);
	for (size_t i = 0; i < ne; i++)
		inferred[i] = true;
}

/*
 * Which step produced each token event (q[0]: the first token's). A token written at t comes
 * from a step the host saw complete before t, at the latest the latest one (ls). An HTTP
 * server that falls behind writes later than that, so its latest is too late. But a running
 * request gets one token per engine step (continuous batching that runs prefills and decodes
 * in the same steps, as vLLM V1), so event i comes from i steps after the first token's:
 * ls[j] - j, for every event j, bounds where the first token's step s0 can be, and the event
 * written with the least delay sets it. Then:
 *   - one token per event (usage says so, or the events follow the steps one to one): event i
 *     comes from step s0 + i;
 *   - several (a stream interval, merged outputs): each event is as late behind its latest
 *     seen step as the first (or, with a token count, the last, if less) was, and the last
 *     one ends on s0 + tokens - 1 when usage gives the count. With a stream interval of k
 *     steps, the events between are k steps apart (merged ones a multiple): one that fell
 *     off that grid (the server a step behind for a moment) goes back down onto it.
 * With no token count, one token per event is taken when the same server's requests that
 * had one streamed so (server_every_token: a stream interval is the server's setting, and a
 * server that falls behind its engine, writing ever later, looks like one), or when the
 * events say so themselves (lag_grew).
 * moved[i]: event i was moved off its latest seen step. Returns false when that is not
 * consistent with a first step that began after arrival.
 */
static bool align_by_writes(const struct window_step *v, size_t n, const struct request *r,
			    bool server_every_token, size_t *q, bool *moved)
{
	size_t ne = r->token_events, s0 = n, lag, grid, phase = 0;
	/* the steps that made its tokens: the engine's outputs, where its wire was read (a
	 * step's tokens are one output: speculative decoding's several too), else usage's
	 * tokens, one a step */
	bool known = r->engine_outs >= ne || (r->output_tokens.set && r->output_tokens.v >= ne);
	uint64_t total = r->engine_outs >= ne ? r->engine_outs : known ? r->output_tokens.v : ne;
	uint64_t t = r->first_token_ns;
	bool one_each;

	for (size_t i = 0; i < ne; i++) {
		size_t ls;

		if (i)
			t += r->gaps_ns[i - 1];
		ls = attrib_latest_seen(v, n, t);
		if (ls == n || ls < i)
			return false;
		q[i] = ls;
		if (ls - i < s0)
			s0 = ls - i;
	}
	s0 = attrib_engine_output_bound(v, n, r, s0);
	one_each = known ? total == ne
			 : server_every_token || ne < 3 || (q[ne - 1] - q[0]) * 2 < 3 * (ne - 1) ||
				   lag_grew(q, ne);
	if (one_each) {
		for (size_t i = 0; i < ne; i++) {
			if (i == 0 && v[s0].start < r->start_ns)
				return false;
			moved[i] = s0 + i != q[i];
			q[i] = s0 + i;
		}
		return true;
	}
	if (known) {
		if (q[ne - 1] + 1 < total)
			return false;
		if (q[ne - 1] + 1 - total < s0)
			s0 = q[ne - 1] + 1 - total;
	}
	if (v[s0].start < r->start_ns)
		return false;
	/* how far behind its latest seen step the server wrote: known for the first event and,
	 * with a token count, the last; the smaller is taken (a delay at the start of a stream
	 * does not last) */
	lag = q[0] - s0;
	if (known && q[ne - 1] - (s0 + total - 1) < lag)
		lag = q[ne - 1] - (s0 + total - 1);
	grid = stream_grid(q, ne, lag, &phase);
	for (size_t i = 0; i < ne; i++) {
		size_t want = q[i] - (q[i] >= lag ? lag : q[i]);

		if (i == 0)
			want = s0;
		else if (i == ne - 1 && known)
			want = s0 + total - 1;
		else if (grid && i < ne - 1) {
			size_t above = (want % grid + grid - phase) % grid; /* steps past the grid */

			if (above <= want)
				want -= above;
		}
		if (want > q[i])
			want = q[i];
		if (i && want <= q[i - 1])
			want = q[i - 1] + 1;
		if (want > q[i])
			return false;
		moved[i] = want != q[i];
		q[i] = want;
	}
	return true;
}

/*
 * Which step produced each token event, into q: by the engine's outputs where they say which
 * event carried which (align_by_outputs); else by the server's writes (align_by_writes),
 * then kept within what the engine's outputs allow (attrib_bound_by_outputs). inferred[i]
 * (where not NULL): event i's step is inferred, not known: moved off its latest seen step
 * where no outputs bound it, else bounded to more than one step. Returns false where the
 * writes do not place the events (then the latest-seen rule is used throughout).
 */
bool attrib_align_tokens(const struct window_step *v, size_t n, const struct request *r,
			 bool server_every_token, size_t *q, bool *inferred)
{
	size_t ne = r->token_events;
	bool *moved = inferred ? inferred : malloc((ne ? ne : 1) * sizeof(*moved)), ok = true;

	if (!moved)
		return false;
	memset(moved, 0, ne * sizeof(*moved));
	if (!align_by_outputs(v, n, r, q) &&
	    (ok = align_by_writes(v, n, r, server_every_token, q, moved)))
		attrib_bound_by_outputs(v, n, r, q, moved);
	if (moved != inferred)
		free(moved);
	return ok;
}

/* Whether most of this server's requests with a token count had one token per event. */
bool attrib_server_every_token(const struct attrib *a, uint32_t http_pid)
{
	for (size_t i = 0; i < a->nstyles; i++) {
		const struct http_style *s = &a->styles[i];

		if (s->http_pid == http_pid)
			return s->every_token >= 2 && s->every_token >= 4 * s->several;
	}
	return false;
}

/* A finished request with usage's token count: how its server streams. */
static void note_style(struct attrib *a, const struct request *r)
{
	struct http_style *s = NULL;

	if (!r->output_tokens.set || r->token_events < 3 || r->output_tokens.v < r->token_events)
		return;
	for (size_t i = 0; i < a->nstyles && !s; i++) {
		if (a->styles[i].http_pid == r->pid)
			s = &a->styles[i];
	}
	if (!s) {
		if (!array__reserve((void **)&a->styles, &a->capstyles, a->nstyles + 1,
				    sizeof(*a->styles)))
			return;
		s = &a->styles[a->nstyles++];
		*s = (struct http_style){ .http_pid = r->pid };
	}
	if (r->output_tokens.v == r->token_events)
		s->every_token++;
	else
		s->several++;
}

void attrib__finished(struct attrib *a, const struct request *r)
{
	struct attribution at = { 0 };
	uint64_t end = r->end_ns > r->last_token_ns ? r->end_ns : r->last_token_ns;
	uint64_t from = r->start_ns > LOOKBACK_NS ? r->start_ns - LOOKBACK_NS : 0;
	size_t lo = 0, hi = a->nfts, *q;
	struct window_step *v = NULL;
	long n;

	if (r->api == API_OPENAI_EMBEDDINGS) {
		if (r->role == ROLE_SERVER && !attrib_is_client(a, r->pid) &&
		    array__reserve((void **)&a->embeds, &a->capembeds, a->nembeds + 1,
				   sizeof(*a->embeds)))
			a->embeds[a->nembeds++] = (struct embed_call){ r->start_ns, end, r->id, r->pid };
		return;
	}
	if (!r->first_token_ns || r->lossy)
		return;
	note_style(a, r);
	while (lo < hi) { /* its entry: by first token time, then id */
		size_t mid = (lo + hi) / 2;

		if (a->fts[mid].ft < r->first_token_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo < a->nfts && a->fts[lo].ft == r->first_token_ns && a->fts[lo].id != r->id)
		lo++;
	if (lo == a->nfts || a->fts[lo].id != r->id)
		return;
	/* for the requests attributed after it: whose prompt its usage names (attrib_seqs.c) */
	a->fts[lo].end = end;
	a->fts[lo].has_usage = r->input_tokens.set;
	a->fts[lo].input_tokens = r->input_tokens.v;
	if (attrib_find_engine(a, r, end, &at))
		return;
	n = attrib_gather_steps(a, &at, from, end, &v, at.error, sizeof(at.error));
	q = n > 0 ? calloc(r->token_events, sizeof(*q)) : NULL;
	if (q && attrib_align_tokens(v, (size_t)n, r, attrib_server_every_token(a, r->pid), q,
				     NULL))
		a->fts[lo].step_start = v[attrib_engine_output_bound(v, (size_t)n, r, q[0])].start;
	free(q);
	free(v);
}
