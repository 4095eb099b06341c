/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tokenscope top`'s terminal: ncurses, keys, the layout of sinks/top.h's figures, the pace of
 * a replay. Live, the capture loop calls top_screen__poll at each wake-up; replayed, the
 * replay calls top_screen__pace before each record, which waits for the record's time.
 *
 * While the screen is up, what tokenscope says on stderr (warnings: drops, probes) is kept
 * in a file, its newest line shown above the key line, and all of it written to stderr
 * after the screen is gone.
 */
#ifndef TS_TOP_SCREEN_H
#define TS_TOP_SCREEN_H

#include <stdbool.h>
#include <stdint.h>

struct top;
struct pipeline;
struct top_screen;

/* Can the view run here (stdin and stdout terminals)? Says why not, in one line, when not. */
int top_screen__check(void);
/* replay: the name of the recording (NULL: live); speed: its pace (1: as recorded). NULL
 * (said why) when the terminal cannot be driven, or without memory. */
struct top_screen *top_screen__start(struct top *t, struct pipeline *pl, const char *replay,
				     double speed);
/* Live: the keys that came, and a redraw once a second, of the time consumed_ns (every
 * record made before it has been fed). Returns 1 when the user quit. */
int top_screen__poll(struct top_screen *s, uint64_t consumed_ns);
/* Replay: waits until the record of time ts is due (keys read, the view redrawn once a
 * second meanwhile). Returns 1 when the user quit. */
int top_screen__pace(struct top_screen *s, uint64_t ts);
/* Replay: the recording has ended (the pipeline finished): its last view, until `q`. */
void top_screen__hold(struct top_screen *s);
/* The screen gone, stderr as it was, with what was said meanwhile (NULL: nothing). */
void top_screen__stop(struct top_screen *s);

#endif
