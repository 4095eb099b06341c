/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The event stream: the one seam between the BPF programs and the userspace pipeline.
 *
 * Every record in the ring buffer (and in a recording file, byte for byte) starts with
 * struct ts_event_hdr.  Fixed-size kernel types only, no libc headers: both sides include this.
 * Changing a layout here means bumping TS_RECORDING_VERSION (docs/recording.md).
 */
#ifndef TOKENSCOPE_H
#define TOKENSCOPE_H

#define TS_COMM_LEN 16

/* One data event carries at most TS_CHUNK_MAX payload bytes; a bigger SSL call is split into
 * pieces with offsets, at most TS_MAX_PIECES of them; the rest is counted as truncated. */
#define TS_CHUNK_MAX 8192
#define TS_MAX_PIECES 32

enum ts_event_type {
	TS_EV_TLS_DATA = 1, /* bytes moved by SSL_read*, SSL_write* */
	TS_EV_TLS_FREE = 2, /* SSL_free: the connection is gone */
	TS_EV_EXEC = 3,	    /* a process exec'd: userspace looks for TLS libraries in it */
	TS_EV_EXIT = 4,	    /* a process that moved TLS bytes or used CUDA exited */
	TS_EV_DLOPEN = 5,   /* dlopen returned: userspace rescans the process's mappings */
	TS_EV_GPU_MARK = 6, /* a CUDA ordering or sync point, with the work launched before it */
	TS_EV_GPU_KNAME = 7, /* a kernel handle's name (cuModuleGetFunction, or a symbolized stub) */
	TS_EV_SOCK_DATA = 8, /* bytes moved on a plaintext TCP socket (read/write syscalls) */
	TS_EV_SOCK_CLOSE = 9, /* close() of the fd of a socket that carried (or may carry) HTTP */
	TS_EV_TLS_SOCK = 10, /* an SSL* moves its bytes over this TCP socket: its addresses */
	TS_EV_LLAMA_STEP = 11, /* a llama_decode or llama_encode call returned: its batch, summed */
	TS_EV_UNIX_SOCK = 12, /* a captured Unix stream socket: its path and its peer */
	TS_EV_SOCK_NET = 13, /* a captured TCP socket: its network namespace */
	TS_EV_LLAMA_MODEL = 14,	  /* llama.cpp loaded a model from a file: its pointer and path */
	TS_EV_LLAMA_CONTEXT = 15, /* llama.cpp made a context of a model */
	TS_EV__END, /* one past the last: every type below it has its row (user/stream/pipeline.c) */
};

enum ts_dir {
	TS_DIR_READ = 0,  /* SSL_read, SSL_read_ex: timestamped at return */
	TS_DIR_WRITE = 1, /* SSL_write, SSL_write_ex, SSL_write_ex2: timestamped at entry */
};

/* ts_tls_data.flags */
#define TS_F_TRUNCATED (1u << 0) /* the call moved more than TS_MAX_PIECES * TS_CHUNK_MAX bytes */
#define TS_F_READ_FAULT (1u << 1) /* bpf_probe_read_user failed: len bytes are zeros */
/* ts_sock_data.flags, on a record with len 0: the call's bytes from offset to total_len were
 * not captured, because the capture budget ran out (TS_F_TRUNCATED) or there was no user
 * buffer to read (TS_F_NO_USER_BUFFER: sendfile, splice; total_len 0 for io_uring, whose byte
 * count is not seen). */
#define TS_F_NO_USER_BUFFER (1u << 2)
/* ts_tls_data.flags: the bytes of a Go program's crypto/tls (*Conn).Read or Write; ssl is
 * the *tls.Conn (bpf/tls.bpf.c, go_tls_*) */
#define TS_F_GO_TLS (1u << 3)
/* ts_tls_data and ts_sock_data: seq numbers this direction's pieces only (each direction of a
 * stream has its own counter). A read and a write on two threads reserve their numbers from
 * one counter in one order and reach the ring buffer in the other, which read as a gap; one
 * counter a direction cannot cross. Recordings made before it have one counter a stream. */
#define TS_F_SEQ_PER_DIR (1u << 4)

struct ts_event_hdr {
	__u32 type; /* enum ts_event_type */
	__u32 size; /* whole record, header included */
	__u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 pid;   /* thread group id */
	__u32 tid;
	char comm[TS_COMM_LEN];
};

struct ts_tls_data {
	struct ts_event_hdr hdr;
	__u64 ssl;	 /* SSL* in the traced process: with pid, the stream key */
	__u64 seq;	 /* per-stream piece sequence: a gap means pieces were lost */
	__u32 dir;	 /* enum ts_dir */
	__u32 flags;	 /* TS_F_* */
	__u32 total_len; /* bytes the call moved */
	__u32 offset;	 /* of this piece within the call */
	__u32 len;	 /* payload bytes that follow */
	__u32 _pad;
	__u8 data[];
};

struct ts_tls_free {
	struct ts_event_hdr hdr;
	__u64 ssl;
};

/* ---- plaintext TCP (bpf/sock.bpf.c) ---- */

struct ts_sock_addr {
	__u16 family;	/* AF_INET (2) or AF_INET6 (10); AF_UNIX (1): see below */
	__u16 lport;	/* host byte order */
	__u16 rport;
	__u16 _pad;
	__u8 laddr[16]; /* network byte order; IPv4 in the first 4 bytes */
	__u8 raddr[16];
};
/* AF_UNIX: no ports; laddr's first 8 bytes are this socket's inode number, raddr's its peer's
 * (host byte order; 0: not connected). The path comes once, in a struct ts_unix_sock. */

struct ts_sock_data {
	struct ts_event_hdr hdr;
	__u64 sock;	 /* the socket's inode number (socket:[N]): with owner, the stream key */
	__u64 seq;	 /* per-stream piece sequence: a gap means pieces were lost */
	__u32 dir;	 /* enum ts_dir */
	__u32 flags;	 /* TS_F_* */
	__u32 total_len; /* bytes the call moved */
	__u32 offset;	 /* of this piece within the call */
	__u32 len;	 /* payload bytes that follow */
	__u32 owner;	 /* the process whose stream this is (the first to move its bytes) */
	struct ts_sock_addr addr;
	__u8 data[];
};

struct ts_sock_close {
	struct ts_event_hdr hdr;
	__u64 sock;
	__u32 owner;
	__u32 flags; /* TS_CLOSE_*; 0 in recordings made before there were any */
};

/* The kernel closed the socket as the last process holding it died (exit, SIGKILL): no close
 * call was made. */
#define TS_CLOSE_BY_EXIT 1
/* A Unix socket (its stream's transport is unix, not tcp). */
#define TS_CLOSE_UNIX 2

/*
 * A Unix stream socket that the plaintext family captures: what its data records' addresses
 * cannot hold. Sent once, when its first bytes decide that it is captured, before its first
 * data record. Both ends of a connection on this host send one, each naming the other's
 * inode, which is how their records are joined.
 */
#define TS_UNIX_PATH_MAX 108 /* sockaddr_un's sun_path */
struct ts_unix_sock {
	struct ts_event_hdr hdr;
	__u64 sock;	 /* this socket's inode number: with owner, the stream key */
	__u64 peer_sock; /* the other end's inode number (0: not connected) */
	__u32 owner;	 /* as ts_sock_data's */
	__u32 peer_pid;	 /* the process that connected or accepted the other end (0: unknown) */
	__u32 path_len;	 /* bytes of path: 0 unnamed; path[0] == 0: an abstract name */
	char path[TS_UNIX_PATH_MAX]; /* this socket's bound path or, unbound (a client), its peer's */
};

/* Which TCP socket an SSL* uses: sent when the link is first seen or changes. exact: the
 * socket call was made inside an SSL call (a socket BIO); else it followed an SSL_write on the
 * same thread (a memory BIO, as node uses). */
struct ts_tls_sock {
	struct ts_event_hdr hdr;
	__u64 ssl;
	__u64 sock;
	__u32 exact;
	__u32 flags; /* TS_F_GO_TLS: ssl is a Go *tls.Conn (0 in recordings made before it) */
	struct ts_sock_addr addr;
	/* as ts_sock_net's; recordings made before 2026-12-05 end before it (104 bytes) */
	__u32 netns;
	__u32 _pad;
};

/*
 * A captured TCP socket's network namespace (the inode number of its net:[N]), sent once,
 * before its first data record: two pods may each have a server on 127.0.0.1:8000, and only
 * the namespace tells their connections apart (stream/match.c). Its addresses too, for the
 * conntrack lookup a live tracer makes (capture/nat.c). Unix sockets need none: their join
 * is by inode.
 */
struct ts_sock_net {
	struct ts_event_hdr hdr;
	__u64 sock;  /* with owner, the stream key */
	__u32 owner; /* as ts_sock_data's */
	__u32 netns;
	struct ts_sock_addr addr;
};

/* exit, dlopen: the header says all (which process, when). Recordings made before 2026-12
 * carry 264 more bytes here (ppid, exit code, exec path) that nothing reads. */
struct ts_proc {
	struct ts_event_hdr hdr;
};

/* A process exit as the reader passes it on (the probes send a ts_proc): whether the kernel's
 * closes of its sockets follow, as TS_CLOSE_BY_EXIT records (the socket family is loaded).
 * Then a TLS stream on a socket ends when its socket does: after a fork, the other process
 * may carry on with it. Recordings made before this have the header alone. */
struct ts_exit {
	struct ts_event_hdr hdr;
	__u32 flags; /* TS_EXIT_* */
	__u32 _pad;
};

#define TS_EXIT_SOCKET_CLOSES 1

/* exec: the header, and which file holds the new program's text and where it is mapped. The
 * live reader names CUDA kernel stubs from the process's maps; a short program can be gone
 * (and its /proc entry with it) before the reader sees this record, and then this mapping,
 * checked against the file's device and inode, stands in for the maps. Replays read none of
 * it (kernel names travel as their own records). */
#define TS_EXEC_PATH_LEN 256
struct ts_exec {
	struct ts_event_hdr hdr;
	__u64 text_start;  /* the mapping that holds mm->start_code; 0: none found */
	__u64 text_end;
	__u64 text_offset; /* its offset in the file */
	__u64 ino;	   /* the executable's inode number (as exec opened it: /proc/PID/exe) */
	__u32 dev;	   /* and device, in the kernel's encoding (major << 20 | minor) */
	__u32 ppid;	   /* the parent, in whose root (a container's) path is looked up first */
	char path[TS_EXEC_PATH_LEN]; /* the file's path in the process's mount namespace; "" if
				      * deeper than 32 directories or longer than 255 bytes */
};

/* What every probe family filters on, set by userspace before load (const volatile .rodata). */
struct ts_filter {
	__u8 by_pid;  /* only tgids in the `pids` map */
	__u8 by_comm; /* only this command name */
	__u8 by_port; /* plaintext sockets: only those with a local or peer port in `sock_ports` */
	__u8 _pad;
	__u32 self;   /* tokenscope's own tgid, never traced (its --metrics replies, say) */
	char comm[TS_COMM_LEN];
};

/* ---- CUDA (bpf/cuda.bpf.c) ---- */

#define TS_KSAMPLES 8	 /* distinct kernels (id, grid, block) kept per step */
#define TS_KNAME_LEN 512 /* mangled C++ kernel names run long */
#define TS_GPU_MAX_STREAMS 16 /* streams per process a device-wide sync flushes */

enum ts_gpu_mark_kind {
	TS_GPU_RECORD = 1,  /* event recorded on a stream: the stream's work so far is before it */
	TS_GPU_WAIT = 2,    /* a stream waits for an event: its later work depends on it */
	TS_GPU_FLUSH = 3,   /* a stream's work so far, handed over before a device-wide sync */
	TS_GPU_SYNC_ENTER = 4,  /* the host starts to wait (stream, event, device, blocking copy) */
	TS_GPU_SYNC_RETURN = 5, /* the host's wait returned */
	TS_GPU_QUERY_DONE = 6,	/* a query returned "done" */
};

enum ts_gpu_scope {
	TS_GPU_SCOPE_STREAM = 0,
	TS_GPU_SCOPE_EVENT = 1,
	TS_GPU_SCOPE_DEVICE = 2,
};

enum ts_gpu_api { TS_GPU_RUNTIME = 0, TS_GPU_DRIVER = 1 };

/* ts_kernel_sample.flags */
#define TS_KS_STUB (1u << 0)  /* id is a host stub address (runtime launch): symbolize it */
#define TS_KS_GRAPH (1u << 1) /* id is a graph exec handle */

struct ts_kernel_sample {
	__u64 id;
	__u32 count;
	__u32 flags;
	__u32 grid[3];
	__u32 block[3];
};

/* Work launched on one stream since its last marker, aggregated in BPF. */
struct ts_gpu_work {
	__u32 launches;
	__u32 graph_launches;
	__u32 copies;	       /* async copies enqueued */
	__u32 other_samples;   /* launches whose kernel did not fit in k[] */
	__u64 first_ns;	       /* first launch (entry of the launch call) */
	__u64 _was_last_ns;    /* 0: the last launch's time is not taken (a clock read per
				  launch cost a tenth of its trap); kept for the layout */
	__u32 nsamples;
	__u32 capturing;       /* stream capture in progress: launches are recorded, not run */
	struct ts_kernel_sample k[TS_KSAMPLES];
};

struct ts_gpu_mark {
	struct ts_event_hdr hdr; /* ts_ns: when the call was made (returns: when it returned) */
	__u32 kind;		 /* enum ts_gpu_mark_kind */
	__u32 scope;		 /* enum ts_gpu_scope */
	__u64 stream;		 /* CUstream / cudaStream_t (0 = legacy default stream) */
	__u64 event;		 /* CUevent / cudaEvent_t */
	__u32 api;		 /* enum ts_gpu_api */
	__s32 result;		 /* returns: the call's CUresult / cudaError_t */
	__u64 enter_ns;		 /* returns: when the call was entered */
	struct ts_gpu_work work; /* RECORD, FLUSH, SYNC_ENTER on a stream: its work so far */
};

struct ts_gpu_kname {
	struct ts_event_hdr hdr;
	__u64 id;    /* CUfunction / CUkernel handle, or host stub address */
	__u64 alias; /* cuKernelGetFunction: id is the same kernel as this CUkernel; name empty */
	__u32 flags; /* TS_KS_STUB when symbolized from a stub */
	__u32 _pad;
	char name[TS_KNAME_LEN];
};

/* llama.cpp: sequence ids 0 .. TS_LLAMA_SEQS - 1 are summed one by one, the tokens of other
 * ids together; at most TS_LLAMA_MAX_TOKENS tokens of a batch are read, the rest counted. */
#define TS_LLAMA_SEQS 64
#define TS_LLAMA_MAX_TOKENS 8192

/* ts_llama_step.flags */
#define TS_LLAMA_ENCODE (1u << 0)      /* llama_encode (else llama_decode) */
#define TS_LLAMA_NO_POS (1u << 1)      /* batch.pos NULL: llama.cpp placed the tokens itself,
					  positions are not known (first_pos, last_pos -1) */
#define TS_LLAMA_LAST_OUTPUT (1u << 2) /* batch.logits NULL: only the last token has an output */
#define TS_LLAMA_UNREAD (1u << 3)      /* not every token was read: see unread_tokens */
#define TS_LLAMA_EMBEDDINGS (1u << 4)  /* the context computed embeddings (its flag read at the
					  step's entry): an embedding step */

/* One sequence's part of a batch. */
struct ts_llama_seq {
	__s32 seq;	 /* llama_seq_id */
	__u32 tokens;	 /* its tokens in the batch */
	__s32 first_pos; /* the position of its first token in the batch (its KV cells before) */
	__s32 last_pos;	 /* of its last */
	__u32 outputs;	 /* its tokens that asked for logits (an output: a token sampled) */
};

/* One llama_decode/llama_encode call: one engine step. The record ends after seqs[nseqs - 1]. */
struct ts_llama_step {
	struct ts_event_hdr hdr;  /* ts_ns: when the call returned */
	__u64 ctx;		  /* struct llama_context *: a step stream per context */
	__u64 enter_ns;		  /* when the call was entered */
	__s32 result;		  /* 0: done; 1 no KV slot, 2 aborted, < 0 error: no work done */
	__u32 flags;		  /* TS_LLAMA_* */
	__u32 n_tokens;		  /* batch.n_tokens */
	__u32 outputs;		  /* over every sequence */
	__u32 other_seq_tokens;	  /* tokens of sequence ids outside 0 .. TS_LLAMA_SEQS - 1 */
	__u32 shared_tokens;	  /* tokens of several sequences (summed under their first) */
	__u32 unread_tokens;	  /* tokens not read (past TS_LLAMA_MAX_TOKENS, or a read fault) */
	__u32 nseqs;		  /* seqs[] that follow, as their ids first appear in the batch */
	struct ts_llama_seq seqs[TS_LLAMA_SEQS];
};

/* A model llama.cpp loaded (llama_model_load_from_file, or _from_splits: its first file's
 * path), sent at the call's return. A path longer than TS_LLAMA_PATH_LEN - 1 bytes keeps its
 * start; userspace names the model by the file's base name. */
#define TS_LLAMA_PATH_LEN 256
struct ts_llama_model {
	struct ts_event_hdr hdr; /* ts_ns: when the load returned */
	__u64 model;		 /* struct llama_model * (NULL: the load failed) */
	char path[TS_LLAMA_PATH_LEN];
};

/* A context made of a model (llama_init_from_model, llama_new_context_with_model): the steps
 * of ctx are that model's. */
struct ts_llama_context {
	struct ts_event_hdr hdr; /* ts_ns: when the call returned */
	__u64 ctx;		 /* struct llama_context * (NULL: it failed) */
	__u64 model;		 /* struct llama_model * */
};

/* Counters kept in a per-CPU array in BPF, summed by userspace. */
enum ts_counter {
	TS_CNT_DATA_EVENTS = 0, /* pieces sent */
	TS_CNT_DATA_BYTES,	/* payload bytes sent */
	TS_CNT_DROPS,		/* pieces lost: ring buffer full */
	TS_CNT_DROP_BYTES,
	TS_CNT_TRUNCATED,	/* calls larger than the piece budget */
	TS_CNT_TRUNCATED_BYTES, /* bytes not sent for them */
	TS_CNT_READ_FAULTS,	/* user memory that could not be read */
	TS_CNT_OTHER_DROPS,	/* exec/exit/free/dlopen events lost */
	TS_CNT_STALE_CALLS,	/* an SSL call entered while an older one had no return seen */
	TS_CNT_GPU_LAUNCHES,	/* kernel and graph launches counted */
	TS_CNT_GPU_NESTED,	/* driver calls made inside a probed runtime call: not counted twice */
	TS_CNT_GPU_CAPTURED,	/* launches into a stream capture (not run) */
	TS_CNT_GPU_DROPS,	/* CUDA marks lost: ring buffer full */
	TS_CNT_GPU_NO_SLOT,	/* launches on a stream beyond TS_GPU_MAX_STREAMS per process */
	TS_CNT_SOCK_TLS,	/* TCP sockets whose first bytes were TLS: the OpenSSL probes read them */
	TS_CNT_SOCK_IGNORED,	/* TCP sockets whose first bytes were not HTTP (or filtered by port) */
	TS_CNT_SOCK_PEEKS,	/* MSG_PEEK reads: not captured, the bytes are read again later */
	TS_CNT_SOCK_SENDFILE,	/* sendfile calls on captured sockets: bytes not seen */
	TS_CNT_SOCK_SPLICE,	/* splice calls to or from captured sockets: bytes not seen */
	TS_CNT_SOCK_IO_URING,	/* io_uring requests on TCP sockets: bytes not seen */
	TS_CNT_PROBES_OFF,	/* uprobes that could not be attached (set by userspace) */
	TS_CNT_LLAMA_STEPS,	/* llama_decode/llama_encode calls sent */
	TS_CNT_LLAMA_NESTED,	/* calls inside a probed call on the same thread (a shim's): once */
	TS_CNT_LLAMA_DROPS,	/* llama steps lost: ring buffer full, or no room for the call */
	TS_CNT_GPU_RUNTIME_UNKNOWN, /* runtime calls whose code could not be located (the mm was
				       busy): their driver calls may count twice */
	TS_CNT_SEQ_UNLOCKED,	/* legacy build: sequence numbers taken without their lock (it
				   stayed held past its spins): the pieces may share numbers */
	TS_CNT_SOCK_MMSG,	/* sendmmsg/recvmmsg calls of several messages on captured
				   sockets: bytes not seen */
	TS_CNT_SOCK_STATES_ADDED,   /* sockets put in the plaintext family's table */
	TS_CNT_SOCK_STATES_REMOVED, /* and taken out by their ends: the difference past its size
				       means the kernel pushed some out (an LRU) */
	TS_CNT__MAX,
};

/* Entries of the plaintext family's socket table (sock_states): captured, TLS and undecided
 * sockets. */
#define TS_SOCK_STATES_MAX 65536
/* An LRU makes room a little before it is full (its free lists are per CPU): entries this
 * close to the size count as full. */
#define TS_SOCK_STATES_SLACK 1024

/* The layouts are a file format (docs/recording.md): any change must be deliberate. */
#define TS_LAYOUT(type, size) _Static_assert(sizeof(struct type) == (size), #type " size")
#define TS_FIELD(type, field, off) \
	_Static_assert(__builtin_offsetof(struct type, field) == (off), #type "." #field " offset")
TS_LAYOUT(ts_event_hdr, 40);
TS_FIELD(ts_event_hdr, ts_ns, 8);
TS_FIELD(ts_event_hdr, pid, 16);
TS_FIELD(ts_event_hdr, comm, 24);
TS_LAYOUT(ts_tls_data, 80);
TS_FIELD(ts_tls_data, ssl, 40);
TS_FIELD(ts_tls_data, seq, 48);
TS_FIELD(ts_tls_data, dir, 56);
TS_FIELD(ts_tls_data, total_len, 64);
TS_FIELD(ts_tls_data, len, 72);
TS_FIELD(ts_tls_data, data, 80);
TS_LAYOUT(ts_tls_free, 48);
TS_LAYOUT(ts_sock_addr, 40);
TS_LAYOUT(ts_sock_data, 120);
TS_FIELD(ts_sock_data, sock, 40);
TS_FIELD(ts_sock_data, dir, 56);
TS_FIELD(ts_sock_data, owner, 76);
TS_FIELD(ts_sock_data, addr, 80);
TS_FIELD(ts_sock_data, data, 120);
TS_LAYOUT(ts_sock_close, 56);
TS_LAYOUT(ts_unix_sock, 176);
TS_FIELD(ts_unix_sock, owner, 56);
TS_FIELD(ts_unix_sock, path, 68);
TS_LAYOUT(ts_tls_sock, 112);
TS_FIELD(ts_tls_sock, addr, 64);
TS_FIELD(ts_tls_sock, netns, 104);
TS_LAYOUT(ts_sock_net, 96);
TS_FIELD(ts_sock_net, netns, 52);
TS_LAYOUT(ts_proc, 40);
TS_LAYOUT(ts_exit, 48);
TS_LAYOUT(ts_exec, 336);
TS_FIELD(ts_exec, path, 80);
TS_LAYOUT(ts_filter, 24);
TS_LAYOUT(ts_kernel_sample, 40);
TS_LAYOUT(ts_gpu_work, 360);
TS_FIELD(ts_gpu_work, first_ns, 16);
TS_FIELD(ts_gpu_work, k, 40);
TS_LAYOUT(ts_gpu_mark, 440);
TS_FIELD(ts_gpu_mark, stream, 48);
TS_FIELD(ts_gpu_mark, enter_ns, 72);
TS_FIELD(ts_gpu_mark, work, 80);
TS_LAYOUT(ts_gpu_kname, 576);
TS_FIELD(ts_gpu_kname, name, 64);
TS_LAYOUT(ts_llama_seq, 20);
TS_LAYOUT(ts_llama_step, 88 + 20 * TS_LLAMA_SEQS);
TS_FIELD(ts_llama_step, ctx, 40);
TS_FIELD(ts_llama_step, enter_ns, 48);
TS_FIELD(ts_llama_step, nseqs, 84);
TS_FIELD(ts_llama_step, seqs, 88);
TS_LAYOUT(ts_llama_model, 48 + TS_LLAMA_PATH_LEN);
TS_FIELD(ts_llama_model, path, 48);
TS_LAYOUT(ts_llama_context, 56);
TS_FIELD(ts_llama_context, model, 48);

#endif /* TOKENSCOPE_H */
