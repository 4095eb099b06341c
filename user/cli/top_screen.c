// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <curses.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/text.h"
#include "llm/dialect.h"
#include "sinks/top.h"
#include "stream/pipeline.h"
#include "cli/top_screen.h"

#define REFRESH_NS 1000000000ull
#define MIN_COLS 80
#define MIN_LINES 12
#define FILTER_MAX 64

enum { PAIR_RED = 1, PAIR_DIM };

enum { X_ROLE = 100, X_API, X_MODEL, X_TAIL };

/* The request table's columns: the model's width is what is left; the lowest priorities go
 * first when the terminal is narrow. */
struct column {
	int col; /* an enum top_col, or X_*: the columns that are not sort keys */
	const char *head;
	int width;
	bool right;
	int priority;
};

static const struct column columns[] = {
	{ TOP_COL_NAME, "process", 18, false, 100 },
	{ X_ROLE, "role", 6, false, 30 },
	{ X_API, "api", 18, false, 40 },
	{ X_MODEL, "model", 8, false, 100 },
	{ TOP_COL_DONE, "done", 6, true, 90 },
	{ TOP_COL_RPS, "req/s", 6, true, 60 },
	{ TOP_COL_FLIGHT, "flight", 7, true, 80 },
	{ TOP_COL_TTFT50, "ttft50", 7, true, 95 },
	{ TOP_COL_TTFT90, "ttft90", 7, true, 50 },
	{ TOP_COL_TTFT99, "ttft99", 7, true, 90 },
	{ TOP_COL_TPOT50, "tpot50", 6, true, 55 },
	{ TOP_COL_TPOT99, "tpot99", 6, true, 85 },
	{ TOP_COL_GAP, "gapmax", 7, true, 45 },
	{ TOP_COL_HIT, "hit%", 4, true, 65 },
	{ TOP_COL_SLO, "slo%", 4, true, 62 },
	{ TOP_COL_GOOD, "good/s", 6, true, 58 },
	{ TOP_COL_READ, "read", 5, true, 35 },
	{ X_TAIL, "ttft tail", TOP_TAIL_BAR, false, 70 },
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))
#define MODEL_MAX_WIDTH 40

struct top_screen {
	struct top *top;
	struct pipeline *pl;
	const char *replay; /* the recording's name; NULL: live */
	double speed;
	bool colour;
	/* what the user chose */
	enum top_window window;
	enum top_col sort;
	bool reverse, paused, details;
	bool editing; /* typing a filter after `/` */
	char filter[FILTER_MAX + 1], typed[FILTER_MAX + 1];
	size_t selected_group; /* TOP_ALL_GROUPS: the first row */
	/* what is shown */
	struct top_view view;  /* as top__view made it */
	struct top_row *shown; /* its rows sorted and filtered */
	size_t nshown, capshown;
	uint64_t view_ns; /* the time the view is of */
	uint64_t next_refresh_ns;
	/* a replay's clock: record time v0 at wall time wall0, minus the time spent paused */
	uint64_t v0, wall0, paused_at, paused_ns, last_ts;
	bool ended;
	/* stderr while the screen is up */
	FILE *said;
	int saved_stderr;
};

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = 1;
}

int top_screen__check(void)
{
	if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
		fprintf(stderr, "tokenscope: top needs a terminal on standard input and output (for "
				"lines or files, run tokenscope without top: -o FILE, --metrics)\n");
		return -1;
	}
	return 0;
}

/* ---- figures as text ---- */

/* Milliseconds in at most 7 characters: 12.3, 1234, 123.4s. */
static void fmt_ms(char *out, size_t n, double ms)
{
	if (isnan(ms))
		snprintf(out, n, "-");
	else if (ms < 1000)
		snprintf(out, n, "%.1f", ms);
	else if (ms < 100000)
		snprintf(out, n, "%.0f", ms);
	else
		snprintf(out, n, "%.1fs", ms / 1000);
}

static void fmt_num(char *out, size_t n, double v, const char *f)
{
	if (isnan(v))
		snprintf(out, n, "-");
	else
		snprintf(out, n, f, v);
}

static void cell_text(const struct column *c, const struct top_row *r, char *out, size_t n)
{
	switch (c->col) {
	case TOP_COL_NAME: snprintf(out, n, "%s", r->name); break;
	case X_ROLE: snprintf(out, n, "%s", role__name(r->role)); break;
	case X_API: snprintf(out, n, "%s", api__name(r->api)); break;
	case X_MODEL: snprintf(out, n, "%s", r->model[0] ? r->model : "-"); break;
	case TOP_COL_DONE: snprintf(out, n, "%llu", (unsigned long long)r->done); break;
	case TOP_COL_RPS: fmt_num(out, n, r->rps, r->rps < 100 ? "%.2f" : "%.0f"); break;
	case TOP_COL_FLIGHT:
		snprintf(out, n, "%llu/%llu", (unsigned long long)r->in_flight,
			 (unsigned long long)r->waiting);
		break;
	case TOP_COL_TTFT50: fmt_ms(out, n, r->ttft[0]); break;
	case TOP_COL_TTFT90: fmt_ms(out, n, r->ttft[1]); break;
	case TOP_COL_TTFT99: fmt_ms(out, n, r->ttft[2]); break;
	case TOP_COL_TPOT50: fmt_ms(out, n, r->tpot[0]); break;
	case TOP_COL_TPOT99: fmt_ms(out, n, r->tpot[1]); break;
	case TOP_COL_GAP: fmt_ms(out, n, r->gap_max); break;
	case TOP_COL_HIT: fmt_num(out, n, r->hit_share, "%.0f"); break;
	case TOP_COL_SLO: fmt_num(out, n, r->slo_share, "%.0f"); break;
	case TOP_COL_GOOD: fmt_num(out, n, r->goodput, r->goodput < 100 ? "%.2f" : "%.0f"); break;
	case TOP_COL_READ: fmt_num(out, n, r->headroom, "%.1fx"); break;
	case X_TAIL: snprintf(out, n, "%s", r->tail[0] ? r->tail : "-"); break;
	default: out[0] = 0;
	}
}

/* Which columns fit in cols, and the model's width. */
static int fit_columns(int cols, bool shown[NCOLUMNS])
{
	int width = 0, model = 0;

	for (size_t i = 0; i < NCOLUMNS; i++) {
		shown[i] = true;
		width += columns[i].width + 1;
	}
	while (width - 1 > cols) {
		size_t drop = NCOLUMNS;

		for (size_t i = 0; i < NCOLUMNS; i++) {
			if (shown[i] && columns[i].priority < 100 &&
			    (drop == NCOLUMNS || columns[i].priority < columns[drop].priority))
				drop = i;
		}
		if (drop == NCOLUMNS)
			return -1;
		shown[drop] = false;
		width -= columns[drop].width + 1;
	}
	model = columns[3].width + (cols - (width - 1));
	return model > MODEL_MAX_WIDTH ? MODEL_MAX_WIDTH : model;
}

/* ---- drawing ---- */

/* s at (y, x), cut to width (or to the line's end), padded (right-aligned if right). */
static void put(int y, int x, int width, const char *s, bool right)
{
	int len = (int)strlen(s);

	if (width < 0)
		width = COLS - x;
	if (width <= 0 || y >= LINES)
		return;
	if (len > width)
		len = width;
	mvprintw(y, x, right ? "%*.*s" : "%-*.*s", width, len, s);
}

/* s at the cursor, as much as the line has room for (never wrapped). */
static void add_cut(const char *s)
{
	int room = COLS - getcurx(stdscr);

	if (room > 0)
		addnstr(s, room);
}

static void red(struct top_screen *s, bool on)
{
	if (s->colour)
		(on ? attron : attroff)(COLOR_PAIR(PAIR_RED));
	else
		(on ? attron : attroff)(A_BOLD);
}

static void draw_header(struct top_screen *s, int *y)
{
	const struct top_view *v = &s->view;
	unsigned long long up = v->uptime_ns / 1000000000ull;
	/* cut to the millisecond, never rounded up: what ended at or before it is in the window */
	double clock_s = (double)(v->as_of_ns / 1000000ull) / 1e3;
	char line[512], lag[32] = "", mode[64];

	if (v->lag_ns >= 100000000ull)
		snprintf(lag, sizeof(lag), ", to %.1fs ago", (double)v->lag_ns / 1e9);
	attron(A_BOLD);
	if (s->replay)
		snprintf(mode, sizeof(mode), "replay x%g%s", s->speed,
			 s->ended ? " (end of recording)" : "");
	snprintf(line, sizeof(line), "tokenscope top  %s  up %llu:%02llu:%02llu  clock %.3f  "
		 "window %s%s%s", s->replay ? mode : "live", up / 3600, up / 60 % 60, up % 60, clock_s,
		 top_window__name(s->window), lag,
		 v->window_cut ? " (partly: only the newest are kept)" : "");
	put((*y)++, 0, -1, line, false);
	attroff(A_BOLD);
	move(*y, 0);
	snprintf(line, sizeof(line), "events/s %.0f  ", v->events_per_s);
	add_cut(line);
	snprintf(line, sizeof(line), "drops %llu", (unsigned long long)v->drops);
	if (v->drops)
		red(s, true);
	add_cut(line);
	if (v->drops)
		red(s, false);
	snprintf(line, sizeof(line), "  lost %llu  req/s %.2f  in flight %llu (%llu before their "
		 "first token)%s", (unsigned long long)v->lost, isnan(v->rps) ? 0.0 : v->rps,
		 (unsigned long long)v->in_flight, (unsigned long long)v->waiting,
		 s->paused ? "  PAUSED" : "");
	add_cut(line);
	(*y)++;
	/* why TTFT changed against the run's first minute (sinks/top_judge.h); the sessions */
	if (v->change[0]) {
		red(s, true);
		put((*y)++, 0, -1, v->change, false);
		red(s, false);
	}
	for (size_t i = 0; i < v->nsessions; i++) {
		const struct top_session_row *r = &v->sessions[i];

		snprintf(line, sizeof(line), "sessions %s: %llu, p50 %.0f calls, %.2fs long, %.0f%% "
			 "inside calls", r->name, (unsigned long long)r->n, r->calls_p50,
			 r->total_p50_ms / 1e3, r->share_p50);
		put((*y)++, 0, -1, line, false);
	}
	(*y)++;
}

static void draw_requests(struct top_screen *s, int *y, int last)
{
	bool shown[NCOLUMNS];
	int model = fit_columns(COLS, shown), x = 0;
	char cell[TOP_LINE_MAX];

	attron(A_BOLD | A_UNDERLINE);
	for (size_t i = 0; i < NCOLUMNS; i++) {
		int w = columns[i].col == X_MODEL ? model : columns[i].width;

		if (!shown[i])
			continue;
		if (columns[i].col == (int)s->sort)
			attron(A_REVERSE);
		put(*y, x, w, columns[i].head, columns[i].right);
		attroff(A_REVERSE);
		x += w + 1;
	}
	attroff(A_BOLD | A_UNDERLINE);
	(*y)++;
	for (size_t r = 0; r < s->nshown && *y < last; r++, (*y)++) {
		const struct top_row *row = &s->shown[r];
		bool sel = row->group == s->selected_group;

		x = 0;
		if (sel)
			attron(A_REVERSE);
		for (size_t i = 0; i < NCOLUMNS; i++) {
			int w = columns[i].col == X_MODEL ? model : columns[i].width;

			if (!shown[i])
				continue;
			cell_text(&columns[i], row, cell, sizeof(cell));
			put(*y, x, w, cell, columns[i].right);
			put(*y, x + w, 1, " ", false); /* the gap too: a selected row is one bar */
			x += w + 1;
		}
		attroff(A_REVERSE);
	}
	if (!s->nshown && *y < last)
		put((*y)++, 0, -1, s->filter[0] ? "  (no group matches the filter)"
						: "  (no LLM API requests yet)", false);
	(*y)++;
}

static void draw_engines(struct top_screen *s, int *y, int last)
{
	const struct top_view *v = &s->view;
	char line[512], sh[3][16], batch[16];

	if (!v->nengines || *y >= last)
		return;
	attron(A_BOLD | A_UNDERLINE);
	put((*y)++, 0, -1, "engine                 source     steps  steps/s  busy%  prefill%  "
			   "decode%  mixed%  batch", false);
	attroff(A_BOLD | A_UNDERLINE);
	for (size_t i = 0; i < v->nengines && *y < last; i++) {
		const struct top_engine_row *e = &v->engines[i];

		fmt_num(sh[0], sizeof(sh[0]), e->prefill_share, "%.0f");
		fmt_num(sh[1], sizeof(sh[1]), e->decode_share, "%.0f");
		fmt_num(sh[2], sizeof(sh[2]), e->mixed_share, "%.0f");
		fmt_num(batch, sizeof(batch), e->batch_p50, "%.0f");
		snprintf(line, sizeof(line), "%-22.22s %-9s %6llu %8.1f %6.0f %9s %8s %7s %6s",
			 e->name, e->source, (unsigned long long)e->steps,
			 isnan(e->steps_per_s) ? 0.0 : e->steps_per_s, isnan(e->busy) ? 0.0 : e->busy,
			 sh[0], sh[1], sh[2], batch);
		put((*y)++, 0, -1, line, false);
	}
	(*y)++;
}

/* Engines' queue depth, from their scheduler's stats on their engine wire; the table is
 * named by the wire ("vllm scheduler"), or "engine" where rows of several wires share it. */
static void draw_sched(struct top_screen *s, int *y, int last)
{
	const struct top_view *v = &s->view;
	const char *wire;
	char line[256], kv[16], head[32];

	if (!v->nsched || *y >= last)
		return;
	wire = v->sched[0].wire;
	for (size_t i = 1; i < v->nsched; i++) {
		if (strcmp(v->sched[i].wire, wire))
			wire = "engine";
	}
	snprintf(head, sizeof(head), "%s scheduler", wire);
	snprintf(line, sizeof(line), "%-22.22s engine  running  waiting  kv%%    as of", head);
	attron(A_BOLD | A_UNDERLINE);
	put((*y)++, 0, -1, line, false);
	attroff(A_BOLD | A_UNDERLINE);
	for (size_t i = 0; i < v->nsched && *y < last; i++) {
		const struct top_sched_row *q = &v->sched[i];

		fmt_num(kv, sizeof(kv), q->kv_cache_usage * 100.0, "%.0f");
		snprintf(line, sizeof(line), "%-22.22s %6u %8llu %8llu %4s %6.1fs ago", q->name,
			 q->engine, (unsigned long long)q->running, (unsigned long long)q->waiting,
			 kv, (double)q->age_ns / 1e9);
		put((*y)++, 0, -1, line, false);
	}
	(*y)++;
}

static void draw_slow(struct top_screen *s, int *y, int last)
{
	const struct top_view *v = &s->view;

	if (*y >= last)
		return;
	attron(A_BOLD | A_UNDERLINE);
	put((*y)++, 0, -1, s->details ? "its slow requests (TTFT at or above its window p90), "
					"newest first"
				      : "slow requests (TTFT at or above their group's window p90), "
					"newest first", false);
	attroff(A_BOLD | A_UNDERLINE);
	for (size_t i = 0; i < v->nslow && *y < last; i++)
		put((*y)++, 0, -1, v->slow[i].line, false);
	if (!v->nslow && *y < last)
		put((*y)++, 0, -1, "  (none: a group needs 10 requests in the window)", false);
}

/* The newest line tokenscope said on stderr while the screen was up ("" when none). */
static void last_said(struct top_screen *s, char *out, size_t n)
{
	char buf[512];
	long end;
	size_t got;
	char *line;

	out[0] = 0;
	fflush(stderr);
	if (!s->said || fseek(s->said, 0, SEEK_END) || (end = ftell(s->said)) <= 0)
		return;
	fseek(s->said, end > (long)sizeof(buf) - 1 ? end - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	got = fread(buf, 1, sizeof(buf) - 1, s->said);
	buf[got] = 0;
	while (got && buf[got - 1] == '\n')
		buf[--got] = 0;
	line = strrchr(buf, '\n');
	text__ascii(out, n, line ? line + 1 : buf);
}

static void draw_footer(struct top_screen *s)
{
	char line[512], said[256];
	const char *how = s->sort == TOP_COL_NAME ? (s->reverse ? "z-a" : "a-z")
						  : (s->reverse ? "smallest first" : "largest first");

	last_said(s, said, sizeof(said));
	if (said[0]) {
		attron(COLOR_PAIR(PAIR_DIM));
		put(LINES - 2, 0, -1, said, false);
		attroff(COLOR_PAIR(PAIR_DIM));
	}
	if (s->editing)
		snprintf(line, sizeof(line), "filter: %s_   (Enter to apply, Esc to clear)", s->typed);
	else
		snprintf(line, sizeof(line), "q quit  w window  s/S sort  r reverse  / filter  p pause"
			 "  Enter details  arrows select | sort %s (%s)%s%s", top_col__name(s->sort),
			 how, s->filter[0] ? " | filter " : "", s->filter);
	attron(A_REVERSE);
	put(LINES - 1, 0, COLS, line, false);
	attroff(A_REVERSE);
}

/* The shown rows: the view's, filtered and sorted as the user chose. */
static void arrange(struct top_screen *s)
{
	struct top_view v = s->view;

	if (s->capshown < v.nrows) {
		struct top_row *n = realloc(s->shown, v.nrows * sizeof(*n));

		if (!n)
			return;
		s->shown = n;
		s->capshown = v.nrows;
	}
	if (v.nrows)
		memcpy(s->shown, v.rows, v.nrows * sizeof(*v.rows));
	v.rows = s->shown;
	top_view__filter(&v, s->details ? NULL : s->filter);
	top_view__sort(&v, s->sort, s->reverse);
	s->nshown = v.nrows;
	if (s->details) { /* the selected group only */
		size_t kept = 0;

		for (size_t i = 0; i < s->nshown; i++) {
			if (s->shown[i].group == s->selected_group)
				s->shown[kept++] = s->shown[i];
		}
		s->nshown = kept;
	}
}

static void draw(struct top_screen *s)
{
	int y = 0, last = LINES - 2;
	char msg[128];

	erase();
	if (COLS < MIN_COLS || LINES < MIN_LINES) {
		snprintf(msg, sizeof(msg), "terminal too small: top needs %dx%d, this one is %dx%d",
			 MIN_COLS, MIN_LINES, COLS, LINES);
		put(0, 0, -1, msg, false);
		refresh();
		return;
	}
	arrange(s);
	draw_header(s, &y);
	draw_requests(s, &y, last);
	if (!s->details) {
		draw_engines(s, &y, last);
		draw_sched(s, &y, last);
		if (y < last)
			put(y++, 0, -1, "ttft tail: B queued behind engine work, I queued idle, P prefill, "
					"E emit (requests at or above the TTFT p90)", false);
		y++;
	}
	draw_slow(s, &y, last);
	draw_footer(s);
	refresh();
}

/* ---- views and keys ---- */

/* A new view at time now (record time). */
static void take_view(struct top_screen *s, uint64_t now)
{
	size_t only = s->details ? s->selected_group : TOP_ALL_GROUPS;

	if (top__view(s->top, s->pl, now, s->window, only, &s->view))
		top_view__free(&s->view); /* no memory: an empty view, tried again next second */
	s->view_ns = now;
}

/* The selection one row up (-1) or down (+1) from the selected one. */
static void move_selection(struct top_screen *s, int by)
{
	size_t at = 0;

	if (!s->nshown)
		return;
	while (at < s->nshown && s->shown[at].group != s->selected_group)
		at++;
	if (at == s->nshown)
		at = 0;
	else if (by < 0 && at > 0)
		at--;
	else if (by > 0 && at + 1 < s->nshown)
		at++;
	s->selected_group = s->shown[at].group;
}

/* A key while a filter is being typed. */
static void filter_key(struct top_screen *s, int c)
{
	size_t n = strlen(s->typed);

	if (c == '\r' || c == '\n' || c == KEY_ENTER) {
		memcpy(s->filter, s->typed, sizeof(s->filter));
		s->editing = false;
	} else if (c == 27) { /* Esc: no filter */
		s->filter[0] = s->typed[0] = 0;
		s->editing = false;
	} else if ((c == KEY_BACKSPACE || c == 127 || c == 8) && n) {
		s->typed[n - 1] = 0;
	} else if (c >= 0x20 && c < 0x7f && n < FILTER_MAX) { /* printable ASCII only */
		s->typed[n] = (char)c;
		s->typed[n + 1] = 0;
	}
}

enum key_effect { KEY_NONE, KEY_REDRAW, KEY_NEW_VIEW, KEY_QUIT };

static enum key_effect key(struct top_screen *s, int c)
{
	if (s->editing) {
		filter_key(s, c);
		return KEY_REDRAW;
	}
	switch (c) {
	case 'q': case 'Q': return KEY_QUIT;
	case 'w': s->window = (s->window + 1) % TOP_W__COUNT; return KEY_NEW_VIEW;
	case 's': case '>': s->sort = (s->sort + 1) % TOP_COL__COUNT; return KEY_REDRAW;
	case 'S': case '<':
		s->sort = (s->sort + TOP_COL__COUNT - 1) % TOP_COL__COUNT;
		return KEY_REDRAW;
	case 'r': s->reverse = !s->reverse; return KEY_REDRAW;
	case '/':
		s->editing = true;
		memcpy(s->typed, s->filter, sizeof(s->typed));
		return KEY_REDRAW;
	case 'p': case ' ':
		s->paused = !s->paused;
		return KEY_REDRAW;
	case KEY_UP: case 'k': move_selection(s, -1); return KEY_REDRAW;
	case KEY_DOWN: case 'j': move_selection(s, 1); return KEY_REDRAW;
	case '\r': case '\n': case KEY_ENTER:
		if (!s->details && s->selected_group == TOP_ALL_GROUPS)
			move_selection(s, 0);
		s->details = !s->details && s->nshown;
		return KEY_NEW_VIEW;
	case 27: /* Esc: out of the details */
		s->details = false;
		return KEY_NEW_VIEW;
	case KEY_RESIZE: return KEY_REDRAW;
	default: return KEY_NONE;
	}
}

/* The keys that came (none waited for). Returns 1 when the user quit. */
static int read_keys(struct top_screen *s, uint64_t now)
{
	int c;

	if (interrupted)
		return 1;
	while ((c = getch()) != ERR) {
		switch (key(s, c)) {
		case KEY_QUIT: return 1;
		case KEY_NEW_VIEW: /* paused: the figures stay of the time they were taken */
			take_view(s, s->paused ? s->view_ns : now);
			draw(s);
			break;
		case KEY_REDRAW: draw(s); break;
		case KEY_NONE: break;
		}
	}
	return 0;
}

/* ---- start, stop ---- */

struct top_screen *top_screen__start(struct top *t, struct pipeline *pl, const char *replay,
				     double speed)
{
	struct top_screen *s = calloc(1, sizeof(*s));
	const char *no_colour = getenv("NO_COLOR");

	if (!s) {
		fprintf(stderr, "tokenscope: out of memory\n");
		return NULL;
	}
	*s = (struct top_screen){ .top = t, .pl = pl, .replay = replay, .speed = speed,
				  .window = TOP_W60S, .sort = TOP_COL_DONE,
				  .selected_group = TOP_ALL_GROUPS, .saved_stderr = -1 };
	/* newterm, not initscr: a terminal it cannot drive is said, not exited on */
	if (!newterm(NULL, stdout, stdin)) {
		fprintf(stderr, "tokenscope: top cannot drive this terminal (TERM=%s)\n",
			getenv("TERM") ? getenv("TERM") : "");
		free(s);
		return NULL;
	}
	/* what is said on stderr meanwhile goes to a file, and to stderr after the screen */
	fflush(stderr);
	s->said = tmpfile();
	if (s->said && (s->saved_stderr = dup(STDERR_FILENO)) >= 0)
		dup2(fileno(s->said), STDERR_FILENO);
	if (replay) {
		signal(SIGINT, on_interrupt);
		signal(SIGTERM, on_interrupt);
	}
	ESCDELAY = 25;
	cbreak(); /* Ctrl-C stays a signal */
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	s->colour = has_colors() && !(no_colour && *no_colour);
	if (s->colour) {
		start_color();
		use_default_colors();
		init_pair(PAIR_RED, COLOR_RED, -1);
		init_pair(PAIR_DIM, COLOR_YELLOW, -1);
	}
	if (!replay) {
		uint64_t now = clock__now_ns();

		top__set_start(t, now);
		take_view(s, now);
		draw(s);
		s->next_refresh_ns = now + REFRESH_NS;
	}
	return s;
}

void top_screen__stop(struct top_screen *s)
{
	char buf[4096];
	size_t n;

	if (!s)
		return;
	endwin();
	fflush(stderr);
	if (s->saved_stderr >= 0) {
		dup2(s->saved_stderr, STDERR_FILENO);
		close(s->saved_stderr);
	}
	if (s->said) {
		rewind(s->said);
		while ((n = fread(buf, 1, sizeof(buf), s->said)) > 0)
			fwrite(buf, 1, n, stderr);
		fclose(s->said);
	}
	top_view__free(&s->view);
	free(s->shown);
	free(s);
}

/* ---- live ---- */

int top_screen__poll(struct top_screen *s, uint64_t consumed_ns)
{
	uint64_t now = consumed_ns;

	if (read_keys(s, now))
		return 1;
	if (now >= s->next_refresh_ns) {
		s->next_refresh_ns = now + REFRESH_NS;
		if (!s->paused) {
			take_view(s, now);
			draw(s);
		}
	}
	return 0;
}

/* ---- replay ---- */

/* The replay's clock: record time, at the chosen speed, standing still while paused. */
static uint64_t replay_now(struct top_screen *s, uint64_t wall)
{
	uint64_t paused = s->paused_ns + (s->paused ? wall - s->paused_at : 0);

	return s->v0 + (uint64_t)((double)(wall - s->wall0 - paused) * s->speed);
}

/* Waits (reading keys) until the replay's clock reaches t. Returns 1 when the user quit. */
static int wait_until(struct top_screen *s, uint64_t t)
{
	for (;;) {
		uint64_t wall = clock__now_ns(), now = replay_now(s, wall);
		bool was_paused = s->paused;
		uint64_t left_ns;

		if (read_keys(s, now))
			return 1;
		if (was_paused != s->paused) {
			if (s->paused)
				s->paused_at = wall;
			else
				s->paused_ns += wall - s->paused_at;
		}
		if (!s->paused && now >= t)
			return 0;
		left_ns = s->paused ? 50000000ull : (uint64_t)((double)(t - now) / s->speed);
		napms(left_ns > 50000000ull ? 50 : (int)(left_ns / 1000000) + 1);
	}
}

int top_screen__pace(struct top_screen *s, uint64_t ts)
{
	/* views at fixed record times, one a second of wall time: two replays show the same */
	uint64_t period = (uint64_t)(s->speed * (double)REFRESH_NS);

	if (!s->v0) {
		s->v0 = ts;
		s->wall0 = clock__now_ns();
		s->next_refresh_ns = ts + period;
		top__set_start(s->top, ts);
		take_view(s, ts);
		draw(s);
	}
	if (ts > s->last_ts)
		s->last_ts = ts;
	while (ts >= s->next_refresh_ns) {
		if (wait_until(s, s->next_refresh_ns))
			return 1;
		take_view(s, s->next_refresh_ns);
		draw(s);
		s->next_refresh_ns += period;
	}
	return wait_until(s, ts);
}

void top_screen__hold(struct top_screen *s)
{
	s->ended = true;
	s->paused = false;
	take_view(s, s->last_ts);
	draw(s);
	while (!read_keys(s, s->last_ts))
		napms(50);
}
