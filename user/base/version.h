/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* tokenscope's version: --version, the man page, the OTLP instrumentation scope. */
#ifndef TS_VERSION_H
#define TS_VERSION_H

#define TS_VERSION "0.1.0"
#define TS_VERSION_DATE "2026-12-04" /* the man page's date */

#endif
