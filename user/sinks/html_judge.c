// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The HTML report's judgements (html_judge.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/html_judge.h"
#include "sinks/html_text.h"
#include "sinks/sessions.h"

#define PAGE_MAX ((size_t)-1 >> 1)

void html_consumers__add(struct html_consumers *c, const struct request_metrics *m)
{
	struct html_consumer *p = &c->by[m->consumer];

	p->n++;
	if (m->slo_met >= 0) {
		p->judged++;
		p->met += m->slo_met;
	}
	if (!isnan(m->reading_headroom))
		sample__add(&p->headroom, m->reading_headroom);
}

void html_consumers__free(struct html_consumers *c)
{
	for (int i = 0; i < CONSUMER__COUNT; i++)
		sample__free(&c->by[i].headroom);
}

static const char *ratio(double v, char *buf, size_t n)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.2fx", v);
	return buf;
}

int html_consumers__table(struct buf *out, struct html_consumers *c, const struct judge *j,
			  double span_s)
{
	int err = buf__printf(out, PAGE_MAX,
			      "<table class=\"consumers\"><tr><th>consumer</th><th>requests</th>"
			      "<th>SLOs</th><th>met</th><th>attainment</th><th>goodput</th>"
			      "<th>reading headroom p10</th><th>p50</th></tr>");

	for (int k = 0; k < CONSUMER__COUNT; k++) {
		struct html_consumer *p = &c->by[k];
		char slos[160], esc[sizeof(slos) * 6], a[32], b[32];

		if (!p->n)
			continue;
		judge__slos_text(j, (enum consumer)k, slos, sizeof(slos));
		err |= buf__printf(out, PAGE_MAX,
				   "<tr data-consumer=\"%s\" data-requests=\"%llu\" data-judged=\"%llu\" "
				   "data-met=\"%llu\"><th>%s</th><td>%llu</td><td>%s</td>",
				   consumer__name((enum consumer)k), (unsigned long long)p->n,
				   (unsigned long long)p->judged, (unsigned long long)p->met,
				   consumer__name((enum consumer)k), (unsigned long long)p->n,
				   slos[0] ? html_text__esc(slos, esc, sizeof(esc)) : "none");
		if (p->judged)
			err |= buf__printf(out, PAGE_MAX, "<td>%llu of %llu</td><td>%.1f %%</td>"
					   "<td>%s</td>",
					   (unsigned long long)p->met, (unsigned long long)p->judged,
					   100.0 * (double)p->met / (double)p->judged,
					   span_s > 0 ? (snprintf(a, sizeof(a), "%.3g/s",
								  (double)p->met / span_s), a) : "-");
		else
			err |= buf__printf(out, PAGE_MAX, "<td>-</td><td>-</td><td>-</td>");
		err |= buf__printf(out, PAGE_MAX, "<td>%s</td><td>%s</td></tr>",
				   ratio(sample__pct(&p->headroom, 10), a, sizeof(a)),
				   ratio(sample__pct(&p->headroom, 50), b, sizeof(b)));
	}
	err |= buf__printf(out, PAGE_MAX, "</table><p class=\"measured\">Who reads the replies "
			   "(docs/judgements.md): the SLOs of each consumer, the requests judged "
			   "that met them all, goodput (those a second of the report's span); a "
			   "person's streams' rate over the reading speed (%.3g tokens a second): "
			   "below 1x the reader waits.</p>", j->reading_tps);
	return err ? -1 : 0;
}

struct html_sessions {
	struct session_summary *sum; /* the summary's grouping and samples */
};

struct html_sessions *html_sessions__new(void)
{
	struct html_sessions *s = calloc(1, sizeof(*s));

	if (s && !(s->sum = session_summary__new())) {
		free(s);
		return NULL;
	}
	return s;
}

void html_sessions__free(struct html_sessions *s)
{
	if (!s)
		return;
	session_summary__free(s->sum);
	free(s);
}

void html_sessions__add(struct html_sessions *s, const struct session *ss)
{
	session_summary__add(s->sum, ss);
}

int html_sessions__section(struct buf *out, struct html_sessions *s)
{
	size_t n;
	struct session_group *g = session_summary__groups(s->sum, &n);
	int err = 0;

	if (!n)
		return 0;
	err |= buf__printf(out, PAGE_MAX,
			   "<section id=\"sessions\"><h2>Agent sessions</h2><p class=\"measured\">A "
			   "client's chained calls (a tool's result fed back, a growing conversation, "
			   "a previous response named): how much of its time was the model's, and how "
			   "much its own, between calls (docs/judgements.md).</p><table><tr><th>"
			   "process</th><th>role</th><th>consumer</th><th>sessions</th><th>calls "
			   "p50</th><th>session p50</th><th>p90</th><th>max</th><th>between calls "
			   "p50</th><th>inside calls p50</th></tr>");
	for (size_t i = 0; i < n; i++) {
		struct session_group *r = &g[i];
		char comm[TS_COMM_LEN * 6], t[4][32];

		err |= buf__printf(out, PAGE_MAX,
				   "<tr data-sessions=\"%llu\"><th>%s</th><td>%s</td><td>%s</td>"
				   "<td>%llu</td><td>%.0f</td><td>%s</td><td>%s</td><td>%s</td>"
				   "<td>%s</td><td>%.0f %%</td></tr>",
				   (unsigned long long)r->n, html_text__esc(r->comm, comm, sizeof(comm)),
				   role__name(r->role), consumer__name(r->consumer),
				   (unsigned long long)r->n, sample__pct(&r->calls, 50),
				   html_text__when(sample__pct(&r->total, 50), t[0], 32),
				   html_text__when(sample__pct(&r->total, 90), t[1], 32),
				   html_text__when(sample__max(&r->total), t[2], 32),
				   html_text__when(sample__pct(&r->between, 50), t[3], 32),
				   sample__count(&r->share) ? sample__pct(&r->share, 50) : 0.0);
	}
	err |= buf__printf(out, PAGE_MAX, "</table></section>");
	return err ? -1 : 0;
}
