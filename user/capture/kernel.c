// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What the running kernel has (kernel.h; docs/kernels.md). */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Whether tracepoint name's first argument is a pointer to struct type: its btf_trace_NAME
 * typedef points to a function whose first parameter is the program's context, then the
 * tracepoint's own arguments. */
static bool tracepoint_arg0_is(const char *name, const char *type)
{
	const struct btf *btf = kernel_btf();
	const struct btf_type *t;
	char tname[128];
	__s32 id;

	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	if (!btf || (id = btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF)) <= 0)
		return false;
	t = btf__type_by_id(btf, btf__resolve_type(btf, id)); /* the pointer to the function */
	if (!t || !btf_is_ptr(t) || !(t = btf__type_by_id(btf, t->type)) || !btf_is_func_proto(t) ||
	    btf_vlen(t) < 2)
		return false;
	t = btf__type_by_id(btf, btf__resolve_type(btf, btf_params(t)[1].type));
	if (!t || !btf_is_ptr(t) || !(t = btf__type_by_id(btf, t->type)))
		return false;
	return btf_is_struct(t) && !strcmp(btf__name_by_offset(btf, t->name_off), type);
}

/* Tracepoints that older kernels name otherwise, and the struct both have as their first
 * argument: an older one whose arguments differ cannot stand in (5.10's io_uring_submit_sqe
 * has the ring's context, an opcode and user data, not the request). */
static const char *const tracepoint_aliases[][4] = {
	/* renamed in Linux 6.4; 5.10 and 5.15 pass the ring's context first */
	{ "io_uring_submit_req", "io_uring_submit_sqe", "io_kiocb",
	  "io_uring requests on TCP sockets are not counted" },
};

void kernel__fit_tracepoints(const char *family, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		const char *sec = bpf_program__section_name(prog), *tp, *lost = NULL;
		bool found = false;

		if (strncmp(sec, "tp_btf/", 7))
			continue;
		tp = sec + 7;
		if (kernel_has_tracepoint(tp))
			continue;
		for (size_t i = 0; i < sizeof(tracepoint_aliases) / sizeof(tracepoint_aliases[0]); i++) {
			if (strcmp(tracepoint_aliases[i][0], tp))
				continue;
			lost = tracepoint_aliases[i][3];
			if (tracepoint_arg0_is(tracepoint_aliases[i][1], tracepoint_aliases[i][2]) &&
			    !bpf_program__set_attach_target(prog, 0, tracepoint_aliases[i][1])) {
				found = true;
				break;
			}
		}
		if (found)
			continue;
		bpf_program__set_autoload(prog, false);
		fprintf(stderr, "tokenscope: %s: this kernel has no %s tracepoint%s: %s is not loaded%s%s\n",
			family, tp, lost ? " (nor an older one with its arguments)" : "",
			bpf_program__name(prog), lost ? "; " : "", lost ? lost : "");
	}
}

bool kernel__below_floor(void)
{
	struct utsname u;

	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1)
		return false;
	uname(&u);
	fprintf(stderr, "tokenscope: Linux %s is below what tokenscope needs (5.8): it has no BPF "
			"ring buffer; docs/kernels.md lists the kernels it runs on\n",
		u.release);
	return true;
}

bool kernel__legacy(void)
{
	static int legacy = -1;
	const char *force = getenv("TOKENSCOPE_LEGACY"); /* 1: the 5.10 programs here too */

	/* The default builds' newest needs: bpf_loop and bpf_find_vma (5.17), then task storage
	 * (5.11). Asked one by one, not by version: a distribution's backports count. */
	if (legacy < 0)
		legacy = (force && !strcmp(force, "1")) ||
			 libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, NULL) != 1 ||
			 libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_find_vma, NULL) != 1 ||
			 libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) != 1;
	return legacy;
}

void kernel__forget(void)
{
	btf__free(vmlinux_btf);
	vmlinux_btf = NULL;
}
