// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* `tokenscope compare`'s report: each group's changes and evidence, in words or as JSON, and
 * the verdict (compare.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/compare.h"
#include "llm/compare_state.h"

/* ---- the words ---- */

/* "+1.2 s", "-35.0 ms", "-" */
static const char *ms(char *buf, size_t n, double v, bool sign)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (fabs(v) >= 1000)
		snprintf(buf, n, sign ? "%+.2f s" : "%.2f s", v / 1e3);
	else
		snprintf(buf, n, sign ? "%+.1f ms" : "%.1f ms", v);
	return buf;
}

static const char *fig(char *buf, size_t n, double v, const char *fmt)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, fmt, v);
	return buf;
}

static void group_name(const struct cgroup *g, char *buf, size_t n)
{
	snprintf(buf, n, "%s %s %s model=%s", g->comm, g->role, g->api, g->model);
}

/* Why, in words, with the evidence that goes with the cause. */
static void because(const struct change *ch, const struct evidence *eb, const struct evidence *ea,
		    char *buf, size_t n)
{
	char x[32], y[32], z[32], w[32], v[32], u[32], t[32], q[2][32];
	bool waiting = !isnan(eb->waiting) || !isnan(ea->waiting);
	double part = ch->by[ch->cause];

	switch (ch->cause) {
	case CAUSE_CAPACITY:
		snprintf(buf, n, "queueing %s (arrivals %s -> %s/s, concurrency %s -> %s, engine busy "
			 "%s -> %s %%%s%s%s%s): a capacity problem", ms(t, sizeof(t), part, true),
			 fig(x, 32, eb->arrivals, "%.2f"), fig(y, 32, ea->arrivals, "%.2f"),
			 fig(z, 32, eb->concurrency, "%.2f"), fig(w, 32, ea->concurrency, "%.2f"),
			 fig(v, 32, eb->busy * 100, "%.0f"), fig(u, 32, ea->busy * 100, "%.0f"),
			 waiting ? ", waiting " : "", waiting ? fig(q[0], 32, eb->waiting, "%.1f") : "",
			 waiting ? " -> " : "", waiting ? fig(q[1], 32, ea->waiting, "%.1f") : "");
		break;
	case CAUSE_PROMPT:
		snprintf(buf, n, "prefill %s of longer prompts (p50 %s -> %s tokens): a prompt problem",
			 ms(t, sizeof(t), part, true), fig(x, 32, eb->prompt_p50, "%.0f"),
			 fig(y, 32, ea->prompt_p50, "%.0f"));
		break;
	case CAUSE_CACHE:
		snprintf(buf, n, "prefill %s of fewer cached tokens (cached %s -> %s %% of prompts, hits "
			 "%s -> %s %%): a cache problem", ms(t, sizeof(t), part, true),
			 fig(x, 32, eb->cached_share * 100, "%.0f"),
			 fig(y, 32, ea->cached_share * 100, "%.0f"),
			 fig(z, 32, eb->hit_share * 100, "%.0f"), fig(w, 32, ea->hit_share * 100, "%.0f"));
		break;
	case CAUSE_ENGINE:
		snprintf(buf, n, "prefill %s beyond what its tokens explain (prefill p50 %s -> %s at "
			 "%s -> %s uncached tokens): the engine is %s", ms(t, sizeof(t), part, true),
			 ms(x, 32, eb->prefill_p50, false), ms(y, 32, ea->prefill_p50, false),
			 fig(z, 32, eb->uncached_p50, "%.0f"), fig(w, 32, ea->uncached_p50, "%.0f"),
			 part > 0 ? "slower" : "faster");
		break;
	case CAUSE_NETWORK:
		snprintf(buf, n, "emit and network %s: the path after the engine",
			 ms(t, sizeof(t), part, true));
		break;
	case CAUSE_UNKNOWN:
		snprintf(buf, n, ch->judged ? "not split by these records (no engine attribution)"
					    : "too few requests to tell (%zu and %zu; %zu wanted)",
			 ch->nb, ch->na, compare__least(ch->p));
		break;
	default:
		snprintf(buf, n, "within the runs' noise");
	}
}

static void print_change(FILE *out, const struct change *ch, const char *why)
{
	char a[32], b[32], d[32], lo[32], hi[32], k[CAUSE__COUNT][32], o[32];

	if (!ch->judged) {
		fprintf(out, "    ttft p%.0f: %s\n", ch->p, why);
		return;
	}
	fprintf(out, "    ttft p%.0f %s -> %s (%s; 95 %% interval %s .. %s): queue %s, prefill: "
		     "prompt %s, cache %s, engine %s; emit and network %s; other %s: %s\n",
		ch->p, ms(b, 32, ch->before, false), ms(a, 32, ch->after, false),
		ms(d, 32, ch->after - ch->before, true), ms(lo, 32, ch->lo, true),
		ms(hi, 32, ch->hi, true), ms(k[CAUSE_CAPACITY], 32, ch->by[CAUSE_CAPACITY], true),
		ms(k[CAUSE_PROMPT], 32, ch->by[CAUSE_PROMPT], true),
		ms(k[CAUSE_CACHE], 32, ch->by[CAUSE_CACHE], true),
		ms(k[CAUSE_ENGINE], 32, ch->by[CAUSE_ENGINE], true),
		ms(k[CAUSE_NETWORK], 32, ch->by[CAUSE_NETWORK], true), ms(o, 32, ch->other, true),
		cmp_cause__name(ch->cause));
}

static void print_evidence(FILE *out, const struct evidence *b, const struct evidence *a)
{
	char x[8][32];

	fprintf(out, "    load: arrivals %s -> %s/s, concurrency %s -> %s, engine busy %s -> %s %%, "
		     "waiting %s -> %s\n",
		fig(x[0], 32, b->arrivals, "%.2f"), fig(x[1], 32, a->arrivals, "%.2f"),
		fig(x[2], 32, b->concurrency, "%.2f"), fig(x[3], 32, a->concurrency, "%.2f"),
		fig(x[4], 32, b->busy * 100, "%.0f"), fig(x[5], 32, a->busy * 100, "%.0f"),
		fig(x[6], 32, b->waiting, "%.1f"), fig(x[7], 32, a->waiting, "%.1f"));
	fprintf(out, "    prompts: p50 %s -> %s tokens, cached %s -> %s %%, hits %s -> %s %%, ",
		fig(x[0], 32, b->prompt_p50, "%.0f"), fig(x[1], 32, a->prompt_p50, "%.0f"),
		fig(x[2], 32, b->cached_share * 100, "%.0f"), fig(x[3], 32, a->cached_share * 100, "%.0f"),
		fig(x[4], 32, b->hit_share * 100, "%.0f"), fig(x[5], 32, a->hit_share * 100, "%.0f"));
	fprintf(out, "prefill p50 %s -> %s at %s -> %s uncached tokens\n",
		ms(x[6], 32, b->prefill_p50, false), ms(x[7], 32, a->prefill_p50, false),
		fig(x[0], 32, b->uncached_p50, "%.0f"), fig(x[1], 32, a->uncached_p50, "%.0f"));
}

/* JSON numbers: null for NAN. */
static void jnum(FILE *out, const char *key, double v, bool comma)
{
	if (isnan(v))
		fprintf(out, "\"%s\":null%s", key, comma ? "," : "");
	else
		fprintf(out, "\"%s\":%.6g%s", key, v, comma ? "," : "");
}

/* A JSON string of ours: the group's names are the records' (printable, no quotes: a model
 * name may hold any byte, escaped here). */
static void jstr(FILE *out, const char *key, const char *s)
{
	fprintf(out, "\"%s\":\"", key);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputs("\",", out);
}

static void json_change(FILE *out, const struct change *ch)
{
	fprintf(out, "\"p%.0f\":{", ch->p);
	jnum(out, "before_ms", ch->judged ? ch->before : NAN, true);
	jnum(out, "after_ms", ch->judged ? ch->after : NAN, true);
	jnum(out, "change_ms", ch->judged ? ch->after - ch->before : NAN, true);
	jnum(out, "interval_low_ms", ch->judged ? ch->lo : NAN, true);
	jnum(out, "interval_high_ms", ch->judged ? ch->hi : NAN, true);
	jnum(out, "prefill_ms_per_token", ch->judged ? ch->per_token : NAN, true);
	fprintf(out, "\"significant\":%s,\"cause\":\"%s\",\"parts_ms\":{",
		ch->significant ? "true" : "false", cmp_cause__name(ch->cause));
	for (int k = CAUSE_CAPACITY; k < CAUSE__COUNT; k++)
		jnum(out, cmp_cause__name((enum cmp_cause)k), ch->judged ? ch->by[k] : NAN, true);
	jnum(out, "other", ch->judged ? ch->other : NAN, false);
	fputs("}}", out);
}

static void json_evidence(FILE *out, const char *key, const struct evidence *e)
{
	fprintf(out, "\"%s\":{", key);
	jnum(out, "arrivals_per_s", e->arrivals, true);
	jnum(out, "concurrency", e->concurrency, true);
	jnum(out, "engine_busy", e->busy, true);
	jnum(out, "waiting", e->waiting, true);
	jnum(out, "prompt_tokens_p50", e->prompt_p50, true);
	jnum(out, "cached_share", e->cached_share, true);
	jnum(out, "hit_share", e->hit_share, true);
	jnum(out, "prefill_ms_p50", e->prefill_p50, true);
	jnum(out, "uncached_tokens_p50", e->uncached_p50, false);
	fputc('}', out);
}

enum mode { WORDS, JSON, VERDICTS };

/* The report (words, JSON), or only each group's verdict, one line each after prefix. */
/* What one pass of the report carries from group to group. */
struct pass {
	const struct compare *c;
	FILE *out;
	enum mode mode;
	const char *prefix;
	double *tb, *ta; /* room for a side's TTFTs */
	double worst;	 /* the largest significant change so far: the verdict's */
	char verdict[1024];
	enum cmp_cause cause;
	bool first;
	size_t judged;
};

/* One group found on both sides: its changes and evidence, in the pass's mode; the group's
 * verdict (its largest significant change, p99 before p50 at equal size), and the whole's. */
static void group_report(struct pass *p, const struct cgroup *g)
{
	bool json = p->mode == JSON, words = p->mode == WORDS;
	char mine[1024] = "", name[256], why[512], d[32];
	struct change ch[2];
	struct evidence eb, ea;
	double group_worst = 0;
	FILE *out = p->out;

	group_name(g, name, sizeof(name));
	if (!g->side[0].n || !g->side[1].n) {
		if (words)
			fprintf(out, "%s: only %s (%zu requests)\n", name,
				g->side[0].n ? "before" : "after", g->side[0].n + g->side[1].n);
		return;
	}
	compare__evidence(&p->c->s[0], &g->side[0], &eb);
	compare__evidence(&p->c->s[1], &g->side[1], &ea);
	compare__judge(g, 50, &ch[0], p->tb, p->ta);
	compare__judge(g, 99, &ch[1], p->tb, p->ta);
	if (json) {
		fprintf(out, "%s{", p->first ? "" : ",");
		jstr(out, "process", g->comm);
		jstr(out, "role", g->role);
		jstr(out, "api", g->api);
		jstr(out, "model", g->model);
		fprintf(out, "\"before_n\":%zu,\"after_n\":%zu,", g->side[0].n, g->side[1].n);
		json_change(out, &ch[0]);
		fputc(',', out);
		json_change(out, &ch[1]);
		fputc(',', out);
		json_evidence(out, "before", &eb);
		fputc(',', out);
		json_evidence(out, "after", &ea);
		fputc('}', out);
		p->first = false;
	} else if (words) {
		fprintf(out, "%s: %zu -> %zu requests\n", name, g->side[0].n, g->side[1].n);
	}
	for (int k = 0; k < 2; k++) {
		double size = fabs(ch[k].after - ch[k].before);

		p->judged += ch[k].judged;
		because(&ch[k], &eb, &ea, why, sizeof(why));
		if (words)
			print_change(out, &ch[k], why);
		if (!ch[k].significant || size < group_worst)
			continue;
		group_worst = size;
		snprintf(mine, sizeof(mine), "%s: TTFT p%.0f %s: %s", name, ch[k].p,
			 ms(d, sizeof(d), ch[k].after - ch[k].before, true), why);
		if (size >= p->worst) {
			p->worst = size;
			p->cause = ch[k].cause;
			snprintf(p->verdict, sizeof(p->verdict), "%s", mine);
		}
	}
	if (words)
		print_evidence(out, &eb, &ea);
	if (p->mode == VERDICTS && mine[0])
		fprintf(out, "%s%s\n", p->prefix, mine);
}

/* The report (words, JSON), or only each group's verdict, one line each after prefix. */
static int report(struct compare *c, FILE *out, enum mode mode, const char *prefix,
		  enum cmp_cause *cause)
{
	struct pass p = { .c = c, .out = out, .mode = mode, .prefix = prefix,
			  .cause = CAUSE_NONE, .first = true };
	size_t most = 0;

	for (size_t i = 0; i < c->ng; i++)
		for (int s = 0; s < 2; s++)
			most = c->g[i].side[s].n > most ? c->g[i].side[s].n : most;
	p.tb = malloc((most ? most : 1) * sizeof(*p.tb));
	p.ta = malloc((most ? most : 1) * sizeof(*p.ta));
	if (!p.tb || !p.ta) {
		free(p.tb);
		free(p.ta);
		return -1;
	}
	if (mode == JSON)
		fprintf(out, "{\"before_requests\":%llu,\"after_requests\":%llu,\"groups\":[",
			(unsigned long long)c->s[0].requests, (unsigned long long)c->s[1].requests);
	else if (mode == WORDS)
		fprintf(out, "before: %llu requests, after: %llu requests\n",
			(unsigned long long)c->s[0].requests, (unsigned long long)c->s[1].requests);
	for (size_t i = 0; i < c->ng; i++)
		group_report(&p, &c->g[i]);
	if (!p.verdict[0] && p.judged)
		snprintf(p.verdict, sizeof(p.verdict),
			 "TTFT within the runs' noise at every percentile judged: none");
	if (!p.verdict[0]) {
		snprintf(p.verdict, sizeof(p.verdict),
			 "no group has %d requests with a TTFT on each side: too few to tell", CMP_LEAST);
		/* (p99 wants 100: a group judged at p50 alone gives a verdict above) */
		p.cause = CAUSE_UNKNOWN;
	}
	if (mode == JSON) {
		fprintf(out, "],\"cause\":\"%s\",", cmp_cause__name(p.cause));
		jstr(out, "verdict", p.verdict);
		fprintf(out, "\"resamples\":%d,\"floor_ms\":%g,\"floor_share\":%g}\n", CMP_RESAMPLES,
			CMP_FLOOR_MS, CMP_FLOOR_SHARE);
	} else if (mode == WORDS) {
		fprintf(out, "verdict: %s\n", p.verdict);
	} else if (p.cause == CAUSE_NONE || p.cause == CAUSE_UNKNOWN) {
		fprintf(out, "%s%s\n", prefix, p.verdict); /* no group's change: the whole's word */
	}
	free(p.tb);
	free(p.ta);
	*cause = p.cause;
	return 0;
}

int compare__report(struct compare *c, FILE *out, bool json, enum cmp_cause *cause)
{
	return report(c, out, json ? JSON : WORDS, "", cause);
}

int compare__verdicts(struct compare *c, FILE *out, const char *prefix, enum cmp_cause *cause)
{
	return report(c, out, VERDICTS, prefix, cause);
}

int compare__verdict(struct compare *c, char *buf, size_t n, enum cmp_cause *cause)
{
	char *text = NULL, *v;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int err;

	if (!f)
		return -1;
	err = compare__report(c, f, false, cause);
	fclose(f);
	v = text ? strstr(text, "\nverdict: ") : NULL;
	if (err || !v) {
		free(text);
		return -1;
	}
	v += strlen("\nverdict: ");
	v[strcspn(v, "\n")] = 0;
	snprintf(buf, n, "%s", v);
	free(text);
	return 0;
}
