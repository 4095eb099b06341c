/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* `tokenscope compare BEFORE AFTER [--json]` (llm/compare.h). */
#ifndef TS_COMPARE_CMD_H
#define TS_COMPARE_CMD_H

/* argv[0] is "compare". Returns the exit status. */
int compare_cmd__main(int argc, char **argv);

#endif
