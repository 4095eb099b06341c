// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The yardsticks of `make bench`: a uprobe and a tracepoint program that do nothing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int bare(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int bare_ret(void *ctx)
{
	return 0;
}

/* Attached by bench/sockbench.c to the enter and exit tracepoints of read and write. */
SEC("tracepoint/syscalls/sys_enter_read")
int bare_tp(void *ctx)
{
	return 0;
}
