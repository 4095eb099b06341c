// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the running kernel has (kernel.h; docs/kernels.md). */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "capture/kernel.h"

/* Its BTF, read once while the families load (kernel__forget). */
static struct btf *vmlinux_btf;

static const struct btf *kernel_btf(void)
{
	if (!vmlinux_btf)
		vmlinux_btf = btf__load_vmlinux_btf();
	return vmlinux_btf;
}

static bool kernel_has(const char *name, int kind)
{
	const struct btf *btf = kernel_btf();

	return btf && btf__find_by_name_kind(btf, name, kind) > 0;
}

bool kernel__has_kfunc(const char *name)
{
	return kernel_has(name, BTF_KIND_FUNC);
}

/* A tp_btf tracepoint's type, btf_trace_NAME, is in the kernel's BTF when it has one. */
static bool kernel_has_tracepoint(const char *name)
{
	char type[128];

	snprintf(type, sizeof(type), "btf_trace_%s", name);
	return kernel_has(type, BTF_KIND_TYPEDEF);
}

/* Tracepoints that older kernels name otherwise, with the same first arguments. */
static const char *const tracepoint_aliases[][2] = {
	{ "io_uring_submit_req", "io_uring_submit_sqe" }, /* renamed in Linux 6.4 */
};

void kernel__fit_tracepoints(const char *family, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		const char *sec = bpf_program__section_name(prog), *tp;
		bool found = false;

		if (strncmp(sec, "tp_btf/", 7))
			continue;
		tp = sec + 7;
		if (kernel_has_tracepoint(tp))
			continue;
		for (size_t i = 0; i < sizeof(tracepoint_aliases) / sizeof(tracepoint_aliases[0]); i++) {
			if (!strcmp(tracepoint_aliases[i][0], tp) &&
			    kernel_has_tracepoint(tracepoint_aliases[i][1]) &&
			    !bpf_program__set_attach_target(prog, 0, tracepoint_aliases[i][1])) {
				found = true;
				break;
			}
		}
		if (found)
			continue;
		bpf_program__set_autoload(prog, false);
		fprintf(stderr, "tokenscope: %s: this kernel has no %s tracepoint: %s is not "
				"loaded\n", family, tp, bpf_program__name(prog));
	}
}

bool kernel__below_floor(void)
{
	struct utsname u;
	char missing[160] = "";
	size_t n = 0;

	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
		n += (size_t)snprintf(missing + n, sizeof(missing) - n, ", the BPF ring buffer (5.8)");
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) != 1 && n < sizeof(missing))
		n += (size_t)snprintf(missing + n, sizeof(missing) - n,
				      ", task storage in tracing programs (5.11)");
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, BPF_FUNC_loop, NULL) != 1 &&
	    n < sizeof(missing))
		n += (size_t)snprintf(missing + n, sizeof(missing) - n, ", bpf_loop (5.17)");
	if (!n)
		return false;
	uname(&u);
	fprintf(stderr, "tokenscope: Linux %s is below what tokenscope needs (5.17): it has no %s; "
			"docs/kernels.md lists the kernels it runs on\n",
		u.release, missing + 2);
	return true;
}

void kernel__forget(void)
{
	btf__free(vmlinux_btf);
	vmlinux_btf = NULL;
}
