// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * llama.cpp's engine steps: uprobes on llama_decode and llama_encode (libllama.so under any
 * name, or a binary that links llama.cpp and keeps the symbol).
 *
 *   int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch);
 *
 * One call is one step. Its batch (56 bytes, passed in memory: at entry it starts at sp + 8)
 * is read at entry, CHUNK tokens at a time, and summed per sequence id: tokens, first and
 * last position, outputs asked for. Nothing per token leaves the kernel; one TS_EV_LLAMA_STEP record goes at the
 * call's return, with its result. A call made inside a probed call on the same thread (a shim
 * that exports llama_decode and calls the real one) is the same step: only the outermost one
 * is recorded.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* struct llama_batch (include/llama.h), as it lies on the stack at entry. */
struct llama_batch {
	__s32 n_tokens;
	__s32 _pad;
	__u64 token;	/* llama_token * */
	__u64 embd;	/* float * */
	__u64 pos;	/* llama_pos * */
	__u64 n_seq_id; /* int32_t * */
	__u64 seq_id;	/* llama_seq_id ** */
	__u64 logits;	/* int8_t * */
};

/* A call in progress on a thread, from entry to return. */
struct llama_call {
	__u32 depth; /* probed calls open on the thread: the outermost is the step */
	__u32 _pad;
	__u64 seqs_seen; /* bit per sequence id that has its entry in rec.seqs */
	struct ts_llama_step rec;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct llama_call);
} llama_calls SEC(".maps");

/* Processes that made a step: only their exits are reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} llama_pids SEC(".maps");

/* Tokens read at a time: one read per array, then their sequence ids. 64, not 32: a 512-token
 * prefill's entry 4.0 -> 3.3-3.6 us (bpf_stats), once the chunk's loops had no branch inside
 * for the verifier to multiply (read_chunk; 32 had been kept for its verification time). */
#define CHUNK 64
/* Each token's sequence ids are an allocation of their own (llama_batch_init: one malloc per
 * token), which the allocator lays out evenly spaced: then a chunk's ids are read at once. */
#define MAX_STRIDE 32
#define MAX_CHUNKS (TS_LLAMA_MAX_TOKENS / CHUNK)

/* The batch being read at entry, between steps of the loops: per-CPU, as an entry program
 * runs on one CPU to its end. The call is built here and copied into llama_calls once read. */
struct llama_scratch {
	struct llama_call call;
	struct llama_batch b;
	__u32 done;	   /* tokens read */
	__s32 last_seq;	   /* the last token's first sequence id */
	/* the chunk being read (read_token's) */
	__u64 stride;	   /* bytes between the tokens' sequence ids, 0: one read per token */
	__u32 failed;	   /* a token's sequence id could not be read */
	__u32 entry_flags; /* the entry program's, for llama_step_enter */
	__u64 embeddings_at; /* where the context keeps its embeddings flag, + 1 (0: unknown) */
	__u8 slot[TS_LLAMA_SEQS]; /* a seen sequence id's entry in rec.seqs */
	__s32 pos[CHUNK];
	__s32 nseq[CHUNK];
	__u64 seqp[CHUNK];
	__s8 logits[CHUNK];
	__u8 ids[CHUNK * MAX_STRIDE]; /* a chunk's sequence ids, when they lie evenly spaced */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct llama_scratch);
} llama_scratch SEC(".maps");

/* A call whose return was never seen (its thread died inside it) is forgotten after this. */
#define STALE_NS (600ull * 1000000000ull)

/* n tokens of sequence seq at positions first..last, outs of them asking for an output: its
 * entry, started where the sequence first appears in the call (the record stays compact). */
static __always_inline void add_tokens(struct llama_scratch *s, __s32 seq, __s32 first,
				       __s32 last, __u32 n, __u32 outs)
{
	struct ts_llama_step *r = &s->call.rec;
	struct ts_llama_seq *q;

	s->last_seq = seq;
	r->outputs += outs;
	if (seq < 0 || seq >= TS_LLAMA_SEQS) {
		r->other_seq_tokens += n;
		return;
	}
	if (!(s->call.seqs_seen & (1ull << seq))) {
		s->call.seqs_seen |= 1ull << seq;
		s->slot[seq & (TS_LLAMA_SEQS - 1)] = (__u8)r->nseqs;
		q = &r->seqs[r->nseqs++ & (TS_LLAMA_SEQS - 1)];
		q->seq = seq;
		q->first_pos = first;
		q->tokens = 0;
		q->outputs = 0;
	} else {
		q = &r->seqs[s->slot[seq & (TS_LLAMA_SEQS - 1)] & (TS_LLAMA_SEQS - 1)];
	}
	q->tokens += n;
	q->last_pos = last;
	q->outputs += outs;
}

static __always_inline void add_token(struct llama_scratch *s, __s32 seq, __s32 pos, bool out)
{
	add_tokens(s, seq, pos, pos, 1, out);
}

/* n entries of elem bytes from a batch array, starting at entry `from` (an absent array
 * reads as nothing). */
static __always_inline long read_part(void *dst, __u64 arr, __u64 from, __u64 n, __u64 elem)
{
	__u64 size = n * elem;

	if (!arr)
		return 0;
	/* the bound must be checked on the register the call gets, not on a copy of it */
	barrier_var(size);
	if (size > CHUNK * elem)
		return -1;
	return bpf_probe_read_user(dst, size, (void *)(arr + from * elem));
}

/* The chunk's first sequence ids, evenly spaced by stride bytes from the first token's. */
static __always_inline long read_ids(struct llama_scratch *s, __u64 n, __u64 stride)
{
	__u64 size = (n - 1) * stride + 4;

	barrier_var(size);
	if (size > sizeof(s->ids))
		return -1;
	return bpf_probe_read_user(s->ids, size, (void *)s->seqp[0]);
}

/*
 * Token i of the chunk: its first sequence id, summed into its sequence. A loop step, not a
 * loop body: this kernel verifies a callback until its states converge, and a 32-token loop
 * with add_token's branches inside read_chunk took 3.8 s of verification per program
 * (tokenscope's start went from 0.5 to 8 s).
 */
TS_LOOP_STEP(read_token)
{
	__u32 zero = 0;
	struct llama_scratch *s = bpf_map_lookup_elem(&llama_scratch, &zero);
	__s32 seq = 0;

	if (!s || i >= CHUNK)
		return 1;
	if (s->stride)
		seq = *(__s32 *)&s->ids[(i * s->stride) & (CHUNK * MAX_STRIDE - 4)];
	else if (s->b.seq_id && s->seqp[i] &&
		 bpf_probe_read_user(&seq, sizeof(seq), (void *)s->seqp[i])) {
		s->failed = 1;
		return 1;
	}
	if (s->b.n_seq_id && s->nseq[i] > 1)
		s->call.rec.shared_tokens++;
	add_token(s, seq, s->b.pos ? s->pos[i] : -1, s->b.logits && s->logits[i]);
	return 0;
}

/*
 * v's sign bit, as 0 or 1. In assembly: clang turns the same shift in C back into a comparison,
 * and BPF has no conditional set, so into a branch; and every branch on the chunk's length
 * inside one_sequence's loops gives the verifier a state of its own for each length, per loop
 * (a million instructions, refused).
 */
static __always_inline __u64 sign_bit(__s64 v)
{
	asm volatile("%[v] >>= 63" : [v] "+r"(v));
	return v;
}

/* All ones when i < n (both below 2^32), else 0. */
static __always_inline __u64 below64(__u64 i, __u64 n)
{
	return -sign_bit((__s64)i - (__s64)n);
}

static __always_inline __u32 below(__u64 i, __u64 n)
{
	return (__u32)below64(i, n);
}

/*
 * A chunk of n tokens that all go to one sequence, each to it alone (a prompt's, the common
 * case), summed at once: as add_token would, token by token, but with no loop step per token (a
 * 512-token prefill was 512 steps, most of its probe's cost). Its ids were read evenly spaced
 * (or the batch has none: all sequence 0). Returns 0, having changed nothing, for any other
 * chunk. A global function, verified once on its own.
 */
__noinline int one_sequence(__u32 n)
{
	__u32 zero = 0;
	struct llama_scratch *s = bpf_map_lookup_elem(&llama_scratch, &zero);
	__s32 seq = 0, first = -1, last = -1;
	__u32 outputs = 0, mixed = 0;
	__u64 stride;

	if (!s || n == 0 || n > CHUNK)
		return 0;
	stride = s->stride;
	if (stride) {
		seq = *(__s32 *)&s->ids[0];
		for (__u32 i = 1; i < CHUNK; i++)
			mixed |= below(i, n) &
				 (__u32)(*(__s32 *)&s->ids[(i * stride) & (CHUNK * MAX_STRIDE - 4)] ^ seq);
	} else if (s->b.seq_id) {
		return 0; /* ids not gathered: token by token */
	}
	if (s->b.n_seq_id) {
		for (__u32 i = 0; i < CHUNK; i++)
			mixed |= below(i, n) & sign_bit(1 - (__s64)s->nseq[i]); /* shared */
	}
	if (mixed)
		return 0;
	if (s->b.logits) {
		for (__u32 i = 0; i < CHUNK; i++)
			outputs += below(i, n) & sign_bit(-(__s64)s->logits[i] | s->logits[i]);
	}
	if (s->b.pos) {
		first = s->pos[0];
		last = s->pos[(n - 1) & (CHUNK - 1)];
	}
	add_tokens(s, seq, first, last, n, outputs);
	return 1;
}

/* One chunk of the batch: each array's part in one read, then each token's first seq id. */
TS_LOOP_STEP(read_chunk)
{
	__u32 zero = 0;
	__u64 n, stride, uneven = 0;
	struct llama_scratch *s = bpf_map_lookup_elem(&llama_scratch, &zero);
	struct ts_llama_step *r;

	if (!s)
		return 1;
	r = &s->call.rec;
	if (s->done >= r->n_tokens || s->done >= TS_LLAMA_MAX_TOKENS)
		return 1;
	n = (__u64)r->n_tokens - s->done;
	if (n > CHUNK)
		n = CHUNK;
	if (read_part(s->pos, s->b.pos, s->done, n, 4) ||
	    read_part(s->seqp, s->b.seq_id, s->done, n, 8) ||
	    read_part(s->nseq, s->b.n_seq_id, s->done, n, 4) ||
	    read_part(s->logits, s->b.logits, s->done, n, 1))
		return 1; /* the rest is counted unread */
	stride = n > 1 && s->b.seq_id ? s->seqp[1] - s->seqp[0] : 0;
	/* no branch inside (see one_sequence): with the early exit this loop had, the verifier
	 * walked llama_step_enter through 35 000 instructions, 60-80 ms of the start; 5 700 then */
	for (__u32 i = 2; i < CHUNK; i++)
		uneven |= below64(i, n) & ((s->seqp[i] - s->seqp[i - 1]) ^ stride);
	if (uneven)
		stride = 0;
	if (stride < 4 || stride > MAX_STRIDE || (stride & 3) || read_ids(s, n, stride))
		stride = 0; /* one read per token */
	s->stride = stride;
	/* a few tokens (a decode step's) go token by token: one_sequence's loops run CHUNK long */
	if (n > 8 && one_sequence(n)) {
		s->done += n;
		return 0;
	}
	s->failed = 0;
	ts_loop(CHUNK, n, read_token);
	if (s->failed)
		return 1; /* the rest is counted unread */
	s->done += n;
	return 0;
}

/* Whether context ctx computes embeddings: its flag, at = its offset + 1 (the cookie). */
static __always_inline bool embeddings_on(__u64 ctx, __u64 at)
{
	__u8 on = 0;

	return !bpf_probe_read_user(&on, 1, (void *)(ctx + at - 1)) && on;
}

/* The step's entry, for llama_decode and llama_encode alike (flags: the entry's, in the
 * scratch): one program both entries tail-call, so that its batch reading (10 000
 * instructions) is verified once, not twice (docs/performance.md, Start). Attached nowhere. */
SEC("uprobe")
int llama_step_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0, flags;
	struct llama_call *c;
	struct llama_scratch *s;
	struct ts_llama_step *r;

	s = bpf_map_lookup_elem(&llama_scratch, &zero);
	if (!s)
		return 0;
	flags = s->entry_flags;
	c = bpf_map_lookup_elem(&llama_calls, &tid);
	if (c && c->depth && bpf_ktime_get_ns() - c->rec.enter_ns < STALE_NS) {
		c->depth++; /* the call a shim makes: the same step */
		ts_count(TS_CNT_LLAMA_NESTED, 1);
		/* the shim's file had no setter to read the flag's place from; llama.cpp's has */
		if (s->embeddings_at && !(c->rec.flags & TS_LLAMA_EMBEDDINGS) &&
		    embeddings_on(c->rec.ctx, s->embeddings_at))
			c->rec.flags |= TS_LLAMA_EMBEDDINGS;
		return 0;
	}
	/* seqs[id] is only read once seqs_seen has its bit, and then it was set whole */
	r = &s->call.rec;
	s->call.depth = 1;
	s->call.seqs_seen = 0;
	r->outputs = r->other_seq_tokens = r->shared_tokens = r->unread_tokens = 0;
	r->result = 0;
	r->nseqs = 0;
	r->flags = flags;
	if (bpf_probe_read_user(&s->b, sizeof(s->b), (void *)(PT_REGS_SP(ctx) + 8))) {
		/* the batch itself could not be read: a step of unknown size, and said so */
		s->b = (struct llama_batch){ 0 };
		r->flags |= TS_LLAMA_UNREAD;
	}
	s->done = 0;
	s->last_seq = 0;
	r->ctx = PT_REGS_PARM1(ctx);
	if (s->embeddings_at && embeddings_on(r->ctx, s->embeddings_at))
		r->flags |= TS_LLAMA_EMBEDDINGS; /* an embedding step, not a prompt */
	r->n_tokens = s->b.n_tokens > 0 ? (__u32)s->b.n_tokens : 0;
	if (!s->b.pos)
		r->flags |= TS_LLAMA_NO_POS;
	if (!s->b.logits)
		r->flags |= TS_LLAMA_LAST_OUTPUT;
	ts_loop(MAX_CHUNKS, MAX_CHUNKS, read_chunk);
	if (s->done < r->n_tokens) {
		r->unread_tokens = r->n_tokens - s->done;
		r->flags |= TS_LLAMA_UNREAD;
	}
	if (!s->b.logits && s->done && s->done == r->n_tokens) {
		/* llama.cpp gives the last token an output when the batch asks for none */
		r->outputs++;
		if (s->last_seq >= 0 && s->last_seq < TS_LLAMA_SEQS)
			r->seqs[s->slot[s->last_seq & (TS_LLAMA_SEQS - 1)] & (TS_LLAMA_SEQS - 1)]
				.outputs++;
	}
	/* stamped once the batch is read: the call's work starts after this program */
	r->enter_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&llama_calls, &tid, &s->call, BPF_ANY))
		ts_count(TS_CNT_LLAMA_DROPS, 1);
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__array(values, int(struct pt_regs *));
} llama_step_read SEC(".maps") = {
	.values = { [0] = (void *)&llama_step_enter },
};

static __always_inline int enter_as(struct pt_regs *ctx, __u32 flags)
{
	__u32 zero = 0;
	struct llama_scratch *s;

	if (!ts_traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	s = bpf_map_lookup_elem(&llama_scratch, &zero);
	if (!s)
		return 0;
	s->entry_flags = flags;
#ifdef TS_LEGACY
	s->embeddings_at = 0; /* attach cookies came with 5.15 */
#else
	/* the file's own offset, found in its setter (user/capture/llama_layout.h) */
	s->embeddings_at = bpf_get_attach_cookie(ctx);
#endif
	bpf_tail_call(ctx, &llama_step_read, 0);
	ts_count(TS_CNT_LLAMA_DROPS, 1); /* the tail call failed: the step goes unseen */
	return 0;
}

SEC("uprobe")
int llama_decode_enter(struct pt_regs *ctx)
{
	return enter_as(ctx, 0);
}

SEC("uprobe")
int llama_encode_enter(struct pt_regs *ctx)
{
	return enter_as(ctx, TS_LLAMA_ENCODE);
}

SEC("uretprobe")
int llama_step_exit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 size;
	struct llama_call *c = bpf_map_lookup_elem(&llama_calls, &tid);
	struct ts_llama_step *r;

	if (!c)
		return 0;
	if (c->depth > 1) {
		c->depth--;
		return 0;
	}
	r = &c->rec;
	r->result = (__s32)PT_REGS_RC(ctx);
	size = sizeof(*r) - sizeof(r->seqs) + (__u64)r->nseqs * sizeof(r->seqs[0]);
	barrier_var(size);
	if (size > sizeof(*r))
		size = sizeof(*r);
	ts_fill_hdr(&r->hdr, TS_EV_LLAMA_STEP, size, bpf_ktime_get_ns());
	if (bpf_ringbuf_output(&events, r, size, ts_submit_flags()))
		ts_count(TS_CNT_LLAMA_DROPS, 1);
	else
		ts_count(TS_CNT_LLAMA_STEPS, 1);
	bpf_map_delete_elem(&llama_calls, &tid);
	bpf_map_update_elem(&llama_pids, &(__u32){ id >> 32 }, &(__u8){ 1 }, BPF_ANY);
	return 0;
}

/*
 * Which model a context's steps are: the model's file, from its load, and the context made of
 * it. Two models served by one process (a draft and its target, chat and embeddings) are
 * then separate engines, named by their files. A load or a context made before tokenscope
 * started is not seen: its steps are still the context's own, named by the pointer only.
 * A wrapper that calls the real function (llama_load_model_from_file, a shim) is one call.
 */
struct llama_setup {
	__u32 depth; /* probed calls open on the thread: the outermost is sent */
	__u32 _pad;
	__u64 arg;   /* the path (a load) or the model (a context) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct llama_setup);
} llama_setups SEC(".maps");

static __always_inline int setup_enter(__u64 arg)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct llama_setup *c, fresh = { .depth = 1, .arg = arg };

	if (!ts_traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	c = bpf_map_lookup_elem(&llama_setups, &tid);
	if (c && c->depth) {
		c->depth++;
		return 0;
	}
	bpf_map_update_elem(&llama_setups, &tid, &fresh, BPF_ANY);
	return 0;
}

/* The outermost call's argument, once it returns (0: not the outermost, or none open). */
static __always_inline __u64 setup_exit(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct llama_setup *c = bpf_map_lookup_elem(&llama_setups, &tid);
	__u64 arg;

	if (!c)
		return 0;
	if (c->depth > 1) {
		c->depth--;
		return 0;
	}
	arg = c->arg;
	bpf_map_delete_elem(&llama_setups, &tid);
	return arg;
}

/* llama_model_load_from_file(const char *path, params), llama_load_model_from_file */
SEC("uprobe")
int llama_model_load_enter(struct pt_regs *ctx)
{
	return setup_enter(PT_REGS_PARM1(ctx));
}

/* llama_model_load_from_splits(const char **paths, size_t n, params): the first file */
SEC("uprobe")
int llama_model_splits_enter(struct pt_regs *ctx)
{
	__u64 first = 0;

	if (PT_REGS_PARM2(ctx) < 1 ||
	    bpf_probe_read_user(&first, sizeof(first), (void *)PT_REGS_PARM1(ctx)))
		first = 0;
	return setup_enter(first);
}

SEC("uretprobe")
int llama_model_load_exit(struct pt_regs *ctx)
{
	__u64 path = setup_exit();
	struct ts_llama_model *m;

	if (!path)
		return 0;
	m = ts_reserve(TS_EV_LLAMA_MODEL, sizeof(*m), TS_CNT_LLAMA_DROPS);
	if (!m)
		return 0;
	m->model = PT_REGS_RC(ctx);
	if (bpf_probe_read_user_str(m->path, sizeof(m->path), (void *)path) < 0)
		m->path[0] = 0;
	bpf_ringbuf_submit(m, ts_submit_flags());
	return 0;
}

/* llama_init_from_model(model, params), llama_new_context_with_model(model, params) */
SEC("uprobe")
int llama_context_new_enter(struct pt_regs *ctx)
{
	return setup_enter(PT_REGS_PARM1(ctx));
}

SEC("uretprobe")
int llama_context_new_exit(struct pt_regs *ctx)
{
	__u64 model = setup_exit();
	struct ts_llama_context *c;

	if (!model)
		return 0;
	c = ts_reserve(TS_EV_LLAMA_CONTEXT, sizeof(*c), TS_CNT_LLAMA_DROPS);
	if (!c)
		return 0;
	c->ctx = PT_REGS_RC(ctx);
	c->model = model;
	bpf_ringbuf_submit(c, ts_submit_flags());
	bpf_map_update_elem(&llama_pids, &(__u32){ bpf_get_current_pid_tgid() >> 32 }, &(__u8){ 1 },
			    BPF_ANY);
	return 0;
}

/* A thread that dies inside a call must not leave its tid looking nested; a process that made
 * steps is reported gone, so that what userspace keeps of its contexts is let go. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(llama_thread_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;

	bpf_map_delete_elem(&llama_calls, &tid);
	bpf_map_delete_elem(&llama_setups, &tid);
	if (tid != tgid || !bpf_map_lookup_elem(&llama_pids, &tgid))
		return 0;
	bpf_map_delete_elem(&llama_pids, &tgid);
	ts_send_proc(TS_EV_EXIT);
	return 0;
}
