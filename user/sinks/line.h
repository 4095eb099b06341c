/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The text line of each finished request (role, process, API, model, path, TTFT, TPOT, the
 * split where attributed), as a run prints it to standard output. */
#ifndef TS_LINE_H
#define TS_LINE_H

#include "sinks/sink.h"

/* self: the FILE * the lines go to. */
extern const struct sink_ops line_sink;

#endif
