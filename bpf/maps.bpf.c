// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The maps the probe families share, and no program: the ring buffer, the counters and the
 * pid filter (common.bpf.h) and the TLS socket link (tls_link.bpf.h). Loaded first, in a few
 * milliseconds (no verifier work), so that every family's object can take these maps and all
 * of them load at the same time (user/capture/families.c): their verifier's work is most of
 * tokenscope's start (docs/performance.md, Start).
 */
#define TS_MAPS_ONLY /* no program: common.bpf.h leaves its functions out */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "tls_link.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
