// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The yardstick of `make bench`: a uprobe that does nothing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int bare(void *ctx)
{
	return 0;
}
