#!/bin/sh
# `make bench`: what tokenscope costs the processes it traces, and how fast its pipeline runs.
# Uprobe traps are slow and noisy in VMs, so the cost per SSL call is reported as a ratio to
# one bare (empty) uprobe measured in the same run. Figures: docs/performance.md.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "the benchmark attaches uprobes: run it as root" >&2
	exit 1
fi
N=${BENCH_N:-20000}
ROUNDS=${BENCH_ROUNDS:-5}
cert=tests/fixtures/.gen/cert.pem
key=tests/fixtures/.gen/key.pem
bench=.output/sslbench
work=$(mktemp -d /tmp/tokenscope-bench-XXXXXX)
trap 'kill $tracer $server 2>/dev/null; rm -rf "$work"' EXIT
tracer= server=

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# a process's CPU time so far (user + system), in clock ticks
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

start_tracer() {
	./tokenscope -q "$@" 2>"$work/stderr" >"$work/stdout" &
	tracer=$!
	until grep -q "Hit Ctrl-C to end." "$work/stderr"; do sleep 0.1; done
}
# tokenscope leaves the removal of its probes to a child, tokenscope-det, that ends on its
# own: the next measurement waits for it, or its probes would still trap there.
detaching() { ps -eo stat=,comm= | awk '$1 !~ /^Z/ && $2 == "tokenscope-det" { f = 1 } END { exit !f }'; }
stop_tracer() {
	kill -INT "$tracer"
	wait "$tracer" || true
	tracer=
	while detaching; do sleep 0.05; done
}

libssl=/lib/x86_64-linux-gnu/libssl.so.3
libcudart=$(ls /usr/local/cuda/lib64/libcudart.so.* | head -n 1)
libcuda=.output/gpu/libcuda.so.1
echo "tokenscope bench: $ROUNDS rounds of $N iterations (medians)"
for f in ssl ssl_bare ssl_t ssl_t_lost ssl_cpu ssl_bt ssl_bt_lost rt rt_bare rt_t drv drv_bare drv_t; do : >"$work/$f"; done
sed "s|LIBSSL|$libssl|g" bench/peer_ssl.bt >"$work/peer.bt"
for r in $(seq "$ROUNDS"); do
	$bench ssl "$N" "$cert" "$key" >>"$work/ssl"
	$bench bare $libssl SSL_write $bench ssl "$N" "$cert" "$key" >>"$work/ssl_bare"
	.output/gpubench rt "$N" >>"$work/rt"
	$bench bare "$libcudart" cudaLaunchKernel .output/gpubench rt "$N" >>"$work/rt_bare"
	.output/gpubench drv "$N" >>"$work/drv"
	$bench bare $libcuda cuLaunchKernel .output/gpubench drv "$N" >>"$work/drv_bare"
	start_tracer -c sslbench
	cpu0=$(cpu_ticks "$tracer")
	$bench ssl "$N" "$cert" "$key" >>"$work/ssl_t"
	sleep 0.1 # drained: the reader polls every 20 ms
	# tracer CPU for the 2N records of 120 bytes, in ms per MB
	awk -v t="$(($(cpu_ticks "$tracer") - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="$N" \
		'BEGIN { print t * 1000 / hz / (2 * n * 120 / 1e6) }' >>"$work/ssl_cpu"
	stop_tracer
	echo $((2 * N - $(grep -o 'events=[0-9]*' "$work/stdout" | cut -d= -f2))) >>"$work/ssl_t_lost"
	# the peer: bpftrace copying what each call moved (bench/peer_ssl.bt)
	BPFTRACE_STRLEN=200 bpftrace "$work/peer.bt" >"$work/bt.out" 2>"$work/bt.err" &
	tracer=$!
	until grep -q "Attaching" "$work/bt.out"; do sleep 0.1; done
	sleep 2 # bpftrace says "Attaching" before it attaches
	$bench ssl "$N" "$cert" "$key" >>"$work/ssl_bt"
	stop_tracer
	# each traced call prints a line; what bpftrace could not take, it does not print
	echo $((2 * N - $(grep -c '^[0-9]* [0-9]* [0-9]* ' "$work/bt.out"))) >>"$work/ssl_bt_lost"
	start_tracer -c gpubench
	.output/gpubench rt "$N" >>"$work/rt_t"
	.output/gpubench drv "$N" >>"$work/drv_t"
	stop_tracer
done
for f in ssl ssl_bare ssl_t ssl_bt rt rt_bare rt_t drv drv_bare drv_t; do
	eval "$f=\$(median <\"\$work/$f\")"
done
bt_lost=$(sort -n "$work/ssl_bt_lost" | tr '\n' ' ')
t_lost=$(sort -n "$work/ssl_t_lost" | tr '\n' ' ')
ssl_cpu=$(median <"$work/ssl_cpu")
awk -v s="$ssl" -v sb="$ssl_bare" -v st="$ssl_t" -v sbt="$ssl_bt" -v r="$rt" -v rb="$rt_bare" -v rt="$rt_t" \
	-v d="$drv" -v db="$drv_bare" -v dt="$drv_t" 'BEGIN {
	printf "  %-34s %9s %9s %9s %9s\n", "per call (ns)", "untraced", "bare", "traced", "ratio"
	# SSL: one round trip is two traced calls (SSL_write, SSL_read); the bare probe is on SSL_write
	printf "  %-34s %9.0f %9.0f %9.0f %8.2fx\n", "SSL_write + SSL_read round trip", s, sb - s, (st - s) / 2, (st - s) / 2 / (sb - s)
	printf "  %-34s %9s %9s %9.0f %8.2fx\n", "  the same under bpftrace (peer)", "", "", (sbt - s) / 2, (sbt - s) / 2 / (sb - s)
	printf "  %-34s %9.0f %9.0f %9.0f %8.2fx\n", "cudaLaunchKernel (libcudart)", r, rb - r, rt - r, (rt - r) / (rb - r)
	printf "  %-34s %9.0f %9.0f %9.0f %8.2fx\n", "cuLaunchKernel (stand-in libcuda)", d, db - d, dt - d, (dt - d) / (db - d)
	printf "  bare: an empty uprobe on the same entry point; traced: added per call with tokenscope\n"
	printf "  (a traced SSL call takes an entry and a return probe; a launch only an entry probe)\n"
}'
echo "  calls not delivered, per round of $((2 * N)): tokenscope $t_lost; bpftrace $bt_lost"
echo "  tokenscope's own CPU while tracing them: $ssl_cpu ms per MB captured"
echo "  (bcc's sslsniff, the other peer, is not run: it builds against kernel headers, and Debian 12"
echo "  has none for this kernel)"

# Start and stop: from exec to "Hit Ctrl-C to end." (every probe attached), from SIGINT to
# the process's end, and from SIGINT until its probes are gone (the detaching child's end).
: >"$work/start"
: >"$work/stop"
: >"$work/gone"
for r in $(seq "$ROUNDS"); do
	t0=$(date +%s%N)
	./tokenscope -q 2>"$work/stderr" >"$work/stdout" &
	tracer=$!
	until grep -q "Hit Ctrl-C to end." "$work/stderr"; do sleep 0.005; done
	t1=$(date +%s%N)
	sleep 1
	t2=$(date +%s%N)
	kill -INT "$tracer"
	wait "$tracer" || true
	t3=$(date +%s%N)
	tracer=
	while detaching; do sleep 0.01; done
	t4=$(date +%s%N)
	echo $(((t1 - t0) / 1000000)) >>"$work/start"
	echo $(((t3 - t2) / 1000000)) >>"$work/stop"
	echo $(((t4 - t2) / 1000000)) >>"$work/gone"
done
printf "  start (exec to every probe attached): %d ms; Ctrl-C to exit: %d ms; to every probe removed: %d ms\n" \
	"$(median <"$work/start")" "$(median <"$work/stop")" "$(median <"$work/gone")"

# Plaintext TCP: the syscall tracepoints every process pays, against an empty tracepoint
# program on the same four tracepoints (enter and exit of read and write), no filter.
SOCK_N=${BENCH_SOCK_N:-50000}
BULK=${BENCH_BULK_BYTES:-1073741824}
sb=.output/sockbench
modes="pipe tcp http"
for m in $modes; do for k in u b t; do : >"$work/$m.$k"; done; done
: >"$work/bulk.u"
: >"$work/bulk.t"
for r in $(seq "$ROUNDS"); do
	for m in $modes; do
		$sb "$m" "$SOCK_N" >>"$work/$m.u"
		$sb bare $sb "$m" "$SOCK_N" >>"$work/$m.b"
	done
	$sb bulk "$BULK" >>"$work/bulk.u"
	start_tracer
	for m in $modes; do $sb "$m" "$SOCK_N" >>"$work/$m.t"; done
	$sb bulk "$BULK" >>"$work/bulk.t"
	stop_tracer
done
printf "  %-34s %9s %9s %9s %9s %9s\n" "write + read of 120 bytes (ns)" "untraced" "bare" "traced" \
	"ratio" "of total"
for m in $modes; do
	u=$(median <"$work/$m.u") b=$(median <"$work/$m.b") t=$(median <"$work/$m.t")
	case $m in
	pipe) what="pipe (not a socket)" ;;
	tcp) what="TCP, not HTTP (ignored socket)" ;;
	http) what="TCP, HTTP (both calls captured)" ;;
	esac
	awk -v w="$what" -v u="$u" -v b="$b" -v t="$t" 'BEGIN {
		printf "  %-34s %9.0f %9.0f %9.0f %8.2fx %8.2fx\n", w, u, b - u, t - u, (t - u) / (b - u), t / b }'
done
awk -v u="$(median <"$work/bulk.u")" -v t="$(median <"$work/bulk.t")" -v n="$BULK" 'BEGIN {
	printf "  bare/traced: added per write + read pair; ratio: added, traced over bare; of total:\n"
	printf "  the pair with tokenscope over the pair with the bare program\n"
	printf "  bulk TCP transfer of %d MiB, not HTTP: %.0f MB/s untraced, %.0f MB/s traced: %.2fx\n", n / 1048576, u, t, t / u
}'

# Pipeline throughput: replay a recording of 1 000 streamed requests of 100 token events in
# every dialect, client and server both traced (2 000 reported requests).
python3 tests/fixtures/llm_server.py --cert "$cert" --key "$key" --port-file "$work/port" \
	--lifetime 300 >/dev/null &
server=$!
while [ ! -s "$work/port" ]; do sleep 0.1; done
start_tracer -c python3 -r "$work/rec"
python3 bench/replay_load.py "$(cat "$work/port")" "$cert" 1000 8 100
stop_tracer
events=$(grep -o 'events=[0-9]*' "$work/stdout" | cut -d= -f2)
bytes=$(grep -o ' bytes=[0-9]*' "$work/stdout" | head -n 1 | cut -d= -f2)
./tokenscope report "$work/rec" -q -o "$work/replay.jsonl" >/dev/null
tokens=$(python3 -c 'import json, sys; print(sum(json.loads(l)["token_events"] or 0 for l in open(sys.argv[1])))' "$work/replay.jsonl")
: >"$work/replay_ms"
for i in $(seq 10); do
	t0=$(date +%s%N)
	./tokenscope report "$work/rec" -q >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000)) >>"$work/replay_ms"
done
/usr/bin/time -f "%M" ./tokenscope report "$work/rec" -q 2>"$work/rss" >/dev/null
awk -v ev="$events" -v by="$bytes" -v tok="$tokens" -v us="$(median <"$work/replay_ms")" -v rss="$(tail -n 1 "$work/rss")" 'BEGIN {
	printf "  pipeline replay (median of 10, process start included): %d records (%d bytes), %d token events in %.0f ms:\n", ev, by, tok, us / 1e3
	printf "    %.0f records/s, %.0f token events/s (each its own SSE or NDJSON event), %.1f MB/s\n", ev / (us / 1e6), tok / (us / 1e6), by / us
	printf "  peak RSS of a replay: %d KiB\n", rss
}'

# HTTP/2 against HTTP/1.1 in the pipeline: the same 400 streamed requests of 100 token events
# to hypercorn over TLS, recorded once over each protocol (httpx: 8 streams on one HTTP/2
# connection, or 8 HTTP/1.1 connections), both ends traced; the two recordings replayed
# alternately, 10 rounds. Token events/s of each, and HTTP/2's over HTTP/1.1's per round.
rm -f "$work/h2.port"
/usr/bin/python3 tests/fixtures/fastapi_app.py --server hypercorn --cert "$cert" --key "$key" \
	--port-file "$work/h2.port" --truth /dev/null >/dev/null 2>&1 &
server=$!
while [ ! -s "$work/h2.port" ]; do sleep 0.1; done
for proto in h1 h2; do
	start_tracer -c python3 -r "$work/$proto.rec"
	/usr/bin/python3 bench/h2_load.py "$proto" "https://127.0.0.1:$(cat "$work/h2.port")" \
		"$cert" 400 8 100
	stop_tracer
	./tokenscope report "$work/$proto.rec" -q -o "$work/$proto.jsonl" >/dev/null
done
kill "$server"
wait "$server" 2>/dev/null || true
server=
: >"$work/h1_ms"
: >"$work/h2_ms"
for i in $(seq 10); do
	for proto in h1 h2; do
		t0=$(date +%s%N)
		./tokenscope report "$work/$proto.rec" -q >/dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000)) >>"$work/${proto}_ms"
	done
done
for proto in h1 h2; do
	python3 -c 'import json, sys; r = [json.loads(l) for l in open(sys.argv[1])]; print(len(r), sum(x["token_events"] or 0 for x in r))' "$work/$proto.jsonl" >"$work/$proto.count"
done
read -r n1 e1 <"$work/h1.count"
read -r n2 e2 <"$work/h2.count"
# per round: HTTP/2's token events/s over HTTP/1.1's, from the two replays of that round
paste "$work/h1_ms" "$work/h2_ms" | awk -v e1="$e1" -v e2="$e2" '{ print (e2 / $2) / (e1 / $1) }' |
	sort -n >"$work/h2_ratio"
awk -v n1="$n1" -v e1="$e1" -v n2="$n2" -v e2="$e2" -v m1="$(median <"$work/h1_ms")" \
	-v m2="$(median <"$work/h2_ms")" -v lo="$(head -n 1 "$work/h2_ratio")" \
	-v hi="$(tail -n 1 "$work/h2_ratio")" 'BEGIN {
	printf "  HTTP/1.1 and HTTP/2 replays of the same load (median of 10, alternated, process start included):\n"
	printf "    HTTP/1.1: %d requests, %d token events in %.0f ms: %.0f token events/s\n", n1, e1, m1 / 1e3, e1 / (m1 / 1e6)
	printf "    HTTP/2:   %d requests, %d token events in %.0f ms: %.0f token events/s\n", n2, e2, m2 / 1e3, e2 / (m2 / 1e6)
	printf "    HTTP/2 over HTTP/1.1 in token events/s: %.2fx (per round %.2f-%.2fx)\n", (e2 / m2) / (e1 / m1), lo, hi
}'

# Memory per open stream: 10 000 streamed requests left open, each seen from both ends
# (20 000 connections), replayed; against one.
python3 bench/open_streams.py 1 "$work/open1.rec"
python3 bench/open_streams.py 10000 "$work/open10k.rec"
/usr/bin/time -f "%M" ./tokenscope report "$work/open1.rec" -q 2>"$work/rss1" >/dev/null
/usr/bin/time -f "%M" ./tokenscope report "$work/open10k.rec" -q 2>"$work/rss10k" >/dev/null
awk -v a="$(tail -n 1 "$work/rss1")" -v b="$(tail -n 1 "$work/rss10k")" 'BEGIN {
	printf "  open streams, both ends, replayed: peak RSS %d KiB with 1, %d KiB with 10 000: %.1f KiB per stream\n", a, b, (b - a) / 9999
}'
# The same live: 10 000 plaintext streams held open, both ends traced (--port), with the
# smallest ring (-b 8) and the default one; the ring counts once in RSS, from the start.
for mb in 8 0; do
	while detaching; do sleep 0.05; done
	python3 bench/live_open_streams.py ./tokenscope 10000 "$mb"
done | awk '{
	printf "  open streams, both ends, live (-b %s): VmRSS %d KiB (ring and binary %d KiB, heap %d KiB), streams seen %d client / %d server\n", $2 ? $2 : "default", $3, $5, $6, $7, $8
}'

# Many short-lived client processes (a fork-per-request client): RSS and CPU per tenth of 50 000
# requests, each from its own process, then the same requests from one process.
for how in fork one; do
	while detaching; do sleep 0.05; done
	python3 bench/fork_clients.py ./tokenscope 50000 $([ $how = one ] && echo one) >"$work/fork.$how"
done
awk 'NF == 4 { if (!first) first = $3; last = $3; t[++n] = $4 }
	/^records/ { rec = $2; lines = $4; pids = $6 }
	END {
		printf "  50 000 requests from 50 000 processes: %d records, %d summary lines (%d pids); VmRSS %d -> %d KiB (%.0f B per request); CPU per 5 000 requests, first to last tenth:", rec, lines, pids, first, last, (last - first) * 1024 / 45000
		for (i = 1; i <= n; i++) printf " %d", t[i]
		printf " ticks\n"
	}' "$work/fork.fork"
awk 'NF == 4 { if (!first) first = $3; last = $3; t[++n] = $4 }
	END {
		printf "  the same from one process: VmRSS %d -> %d KiB (%.0f B per request); CPU per 5 000:", first, last, (last - first) * 1024 / 45000
		for (i = 1; i <= n; i++) printf " %d", t[i]
		printf " ticks\n"
	}' "$work/fork.one"

# llama.cpp's step path: the probes' cost per llama_decode call, against one bare uprobe on
# the same function, on a stub library (bench/llamastub.c) so that the call is all probe: a
# decode step (4 sequences, a token each) and a 512-token prefill step (the batch is read
# at entry, 32 tokens at a time, then each token's sequence id).
lb=.output/llamabench
stub=$(pwd)/.output/libllamastub.so
for k in dec dec_b dec_t pre pre_b pre_t; do : >"$work/llama.$k"; done
for r in $(seq "$ROUNDS"); do
	$lb decode "$N" >>"$work/llama.dec"
	$bench bare "$stub" llama_decode $lb decode "$N" >>"$work/llama.dec_b"
	$lb prefill "$N" >>"$work/llama.pre"
	$bench bare "$stub" llama_decode $lb prefill "$N" >>"$work/llama.pre_b"
	start_tracer -c llamabench
	$lb decode "$N" >>"$work/llama.dec_t"
	$lb prefill "$N" >>"$work/llama.pre_t"
	stop_tracer
done
for k in dec dec_b dec_t pre pre_b pre_t; do eval "l_$k=\$(median <\"\$work/llama.$k\")"; done
awk -v d="$l_dec" -v db="$l_dec_b" -v dt="$l_dec_t" -v p="$l_pre" -v pb="$l_pre_b" -v pt="$l_pre_t" 'BEGIN {
	printf "  %-34s %9s %9s %9s %9s\n", "per llama_decode call (ns)", "untraced", "bare", "traced", "ratio"
	printf "  %-34s %9.0f %9.0f %9.0f %8.2fx\n", "decode step (4 sequences)", d, db - d, dt - d, (dt - d) / (db - d)
	printf "  %-34s %9.0f %9.0f %9.0f %8.2fx\n", "prefill step (512 tokens)", p, pb - p, pt - p, (pt - p) / (pb - p)
	printf "  (a traced call takes an entry and a return probe; the bare one an entry probe only)\n"
}'

# The same on the real engine: node-llama-cpp's CPU llama.cpp on the tests' tiny model, its
# generated tokens/s without and with tokenscope, interleaved. The tiny model's steps are
# short (a few ms), so this is where the probes weigh most; the VM's noise between runs is
# larger than their cost, which the per-call figures above and the steps/s give.
model=tests/fixtures/.gen/tiny.gguf
: >"$work/tps"
for r in $(seq "$ROUNDS"); do
	u=$(node bench/llama_tokens.mjs "$model" 300 4)
	start_tracer -c node
	t=$(node bench/llama_tokens.mjs "$model" 300 4)
	stop_tracer
	steps=$(grep -o 'llama.cpp: steps=[0-9]*' "$work/stdout" | cut -d= -f2)
	echo "$u $t $steps" >>"$work/tps"
done
awk -v dt="$l_dec_t" -v d="$l_dec" 'function med(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	{ n++; u[n] = $1; t[n] = $2; ratio[n] = $1 / $2; lo = (n == 1 || ratio[n] < lo) ? ratio[n] : lo
	  hi = (n == 1 || ratio[n] > hi) ? ratio[n] : hi; steps = $3 }
	END {
		mu = med(u, n); mt = med(t, n); mr = med(ratio, n)
		printf "  llama.cpp (node-llama-cpp, tiny model, 1 thread): %.0f tokens/s untraced, %.0f traced (medians of %d interleaved rounds);\n", mu, mt, n
		printf "    slowdown %.3fx (per round %.3f to %.3f)", mr, lo, hi
		if (lo <= 1 && hi >= 1) printf ": not resolved by this run"
		printf "\n    from the per-call cost: %d steps for %d tokens, %.1f us each: %.4fx\n", steps, 4 * 4 * 300, (dt - d) / 1e3, 1 + steps * (dt - d) / 1e9 / (4 * 4 * 300 / mt)
	}' "$work/tps"
