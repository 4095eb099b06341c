/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUDA family's kernel names (bpf/cuda.bpf.c includes this): a driver handle
 * (cuModuleGetFunction's CUfunction, cuLibraryGetKernel's CUkernel, and cuKernelGetFunction's
 * CUfunction for a CUkernel) is sent with its name, or with the handle it aliases, once per
 * call that makes one, as a TS_EV_GPU_KNAME record; launches then name kernels by handle
 * (user/capture/cuda_names.c, user/engine/cuda_steps.c). The call's arguments wait by thread
 * from entry to return; a thread that dies inside one is cleaned up by cuda_thread_exit.
 */
#ifndef TS_CUDA_KNAMES_BPF_H
#define TS_CUDA_KNAMES_BPF_H

/* cuModuleGetFunction / cuLibraryGetKernel arguments, entry to return. */
struct name_call {
	__u64 out;
	__u64 name;  /* const char * (0 for cuKernelGetFunction) */
	__u64 alias; /* cuKernelGetFunction: the CUkernel */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct name_call);
} cuda_name_calls SEC(".maps");

/* cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name),
 * cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name) */
SEC("uprobe") int cu_get_function(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call c = { .out = PT_REGS_PARM1(ctx), .name = PT_REGS_PARM3(ctx) };

	if (!ts_traced(pt >> 32))
		return 0;
	bpf_map_update_elem(&cuda_name_calls, &tid, &c, BPF_ANY);
	return 0;
}

/* cuKernelGetFunction(CUfunction *f, CUkernel k): the same kernel under another handle */
SEC("uprobe") int cu_kernel_get_function(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call c = { .out = PT_REGS_PARM1(ctx), .alias = PT_REGS_PARM2(ctx) };

	if (!ts_traced(pt >> 32))
		return 0;
	bpf_map_update_elem(&cuda_name_calls, &tid, &c, BPF_ANY);
	return 0;
}

SEC("uretprobe") int cu_get_function_ret(struct pt_regs *ctx)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pt;
	struct name_call *c = bpf_map_lookup_elem(&cuda_name_calls, &tid);
	struct ts_gpu_kname *e;
	__u64 handle = 0;

	if (!c)
		return 0;
	if (PT_REGS_RC(ctx) == 0 && !bpf_probe_read_user(&handle, sizeof(handle), (void *)c->out) &&
	    handle) {
		e = ts_reserve(TS_EV_GPU_KNAME, sizeof(*e), TS_CNT_GPU_DROPS);
		if (e) {
			e->id = handle;
			e->alias = c->alias;
			e->flags = 0;
			e->_pad = 0;
			e->name[0] = 0;
			if (c->name &&
			    bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)c->name) < 0)
				e->name[0] = 0;
			bpf_ringbuf_submit(e, ts_submit_flags());
		}
	}
	bpf_map_delete_elem(&cuda_name_calls, &tid);
	return 0;
}

#endif
