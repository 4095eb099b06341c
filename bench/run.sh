#!/bin/sh
# `make bench`: what tokenscope costs the processes it traces, and how fast its pipeline runs.
# Traps are slow and noisy in VMs, so each cost per call is reported as a ratio to a bare
# (empty) probe on the very same entry point or tracepoints, measured in the same run: rounds
# interleave untraced, bare and traced runs (the order alternating from round to round), and
# bench/stats.py gives every figure as a median over rounds with a bootstrap 95 % interval, or
# says "within noise" where the run cannot resolve it. Figures: docs/performance.md.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "the benchmark attaches uprobes: run it as root" >&2
	exit 1
fi
N=${BENCH_N:-20000}
ROUNDS=${BENCH_ROUNDS:-15}
ENGINE_ROUNDS=${BENCH_ENGINE_ROUNDS:-5}
BULK=${BENCH_BULK_BYTES:-1073741824}
cert=tests/fixtures/.gen/cert.pem
key=tests/fixtures/.gen/key.pem
bench=.output/sslbench
sb=.output/sockbench
lb=.output/llamabench
stats="python3 bench/stats.py"
# The servers' load client runs as Debian's python itself: a version manager's shim on PATH
# (pyenv's `python3` is a shell script) execs some 20 short-lived processes per start, which a
# traced round would then probe while it runs (about 23 ms of tracer CPU a round, measured):
# a cost of that shell's set-up, not of the server's streams.
loadpy=/usr/bin/python3
work=$(mktemp -d /tmp/tokenscope-bench-XXXXXX)
trap '[ -z "$tracer$server$servers" ] || kill $tracer $server $servers 2>/dev/null; rm -rf "$work"' EXIT
tracer= server= servers=

# BENCH_ONLY: the sections to run (default all): servers calls start pipeline h2 memory fork
# names engine top exec
want() { case " ${BENCH_ONLY:-servers calls start pipeline h2 memory fork names engine top exec} " in *" $1 "*) ;; *) return 1 ;; esac; }
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# a process's CPU time so far, every thread, in ns (schedstat: time on a CPU)
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ t += $1 } END { printf "%.0f\n", t }'; }

start_tracer() {
	./tokenscope -q "$@" 2>"$work/stderr" >"$work/stdout" &
	tracer=$!
	until grep -q "Hit Ctrl-C to end." "$work/stderr"; do
		kill -0 "$tracer" 2>/dev/null || { cat "$work/stderr" >&2; exit 1; }
		sleep 0.1
	done
}
. bench/detaching.sh
stop_tracer() {
	kill -INT "$tracer"
	wait "$tracer" || true
	tracer=
	while detaching; do sleep 0.05; done
}

libssl=/lib/x86_64-linux-gnu/libssl.so.3
libcudart=$(ls /usr/local/cuda/lib64/libcudart.so.* | head -n 1)
libcuda=.output/gpu/libcuda.so.1
stub=$(pwd)/.output/libllamastub.so
ssl="$bench ssl $N $cert $key"
gotls=".output/gotlsbench $N $cert $key"
# Loopback TCP's time per call moves by more than the bare programs cost from one process to
# the next when the scheduler moves it between CPUs: the socket workloads run on one CPU.
pin="taskset -c $(($(nproc) - 1))"

# The workloads whose cost per call is measured: name, the command, the bare probe's place
# (how sslbench attaches it: "bare LIB SYMBOLS" an entry uprobe, "pair LIB SYMBOLS" entry and
# return, "tokenscope" for SYMBOLS where tokenscope probes OpenSSL, "gobare BINARY" uprobes
# where tokenscope puts its Go TLS ones, "tp" sockbench's empty programs on the enter and exit
# of read and write). sslsym: the SSL workload against a bare pair on the exported functions,
# where a tracer without tokenscope's inner places pays a single-step trap a call.
workloads() {
	cat <<-EOF
	ssl|$ssl|pair $libssl tokenscope
	sslsym|$ssl|pair $libssl SSL_write,SSL_read
	gotls|$gotls|gobare .output/gotlsbench
	rt|.output/gpubench rt $N|bare $libcudart cudaLaunchKernel
	drv|.output/gpubench drv $N|bare $libcuda cuLaunchKernel
	rtgraph|.output/gpubench rtgraph $N|bare $libcudart cudaGraphLaunch
	drvgraph|.output/gpubench drvgraph $N|bare $libcuda cuGraphLaunch
	llamadec|$lb decode $N|pair $stub llama_decode
	llamapre|$lb prefill $N|pair $stub llama_decode
	pipe|$pin $sb pipe 50000|tp
	tcp|$pin $sb tcp 50000|tp
	unix|$pin $sb unix 50000|tp
	http|$pin $sb http 50000|tp
	EOF
}
bare_run() { # place, command...
	place=$1
	shift
	case $place in
	tp) $sb bare "$@" ;;
	*) $bench $place "$@" ;;
	esac
}
untraced_set() {
	workloads | while IFS='|' read -r name cmd place; do
		# shellcheck disable=SC2086
		if [ $((r % 2)) = 0 ]; then
			$cmd >"$work/$name.u1" </dev/null
			bare_run $place $cmd >"$work/$name.b1" </dev/null
		else
			bare_run $place $cmd >"$work/$name.b1" </dev/null
			$cmd >"$work/$name.u1" </dev/null
		fi
		# the socket rows under the floor capturer too (bench/floor.bpf.c)
		# shellcheck disable=SC2086
		[ "$place" != tp ] || $sb floor $cmd >"$work/$name.f1" </dev/null
	done
	$sb bulk "$BULK" >"$work/bulk.u1"
	# the peer: bpftrace copying what each call moved (bench/peer_ssl.bt)
	BPFTRACE_STRLEN=200 bpftrace "$work/peer.bt" >"$work/bt.out" 2>"$work/bt.err" &
	tracer=$!
	until grep -q "Attaching" "$work/bt.out"; do
		kill -0 "$tracer" 2>/dev/null || { cat "$work/bt.err" >&2; exit 1; }
		sleep 0.1
	done
	sleep 2 # bpftrace says "Attaching" before it attaches
	$ssl >"$work/ssl.bt1"
	stop_tracer
	# each traced call prints a line; what bpftrace could not take, it does not print
	echo $((2 * N - $(grep -c '^[0-9]* [0-9]* [0-9]* ' "$work/bt.out"))) >>"$work/ssl_bt_lost"
}
traced_set() {
	start_tracer # default options: every process, plaintext capture on
	workloads | while IFS='|' read -r name cmd place; do
		[ "$name" != ssl ] || c0=$(cpu_ns "$tracer")
		# shellcheck disable=SC2086
		$cmd >"$work/$name.t1" </dev/null
		if [ "$name" = ssl ]; then
			sleep 0.1 # drained: the reader polls every 20 ms
			echo "$(($(cpu_ns "$tracer") - c0)) $((2 * N)) $((2 * N * 120))" >>"$work/ssl_cpu"
		fi
	done
	$sb bulk "$BULK" >"$work/bulk.t1"
	stop_tracer
	# records the ring had no room for, over every workload of the round
	grep -o 'capture: events=[0-9]* bytes=[0-9]* drops=[0-9]*' "$work/stdout" |
		sed 's/.*drops=//' >>"$work/ssl_t_lost"
}

if want servers; then
# What a user's server loses: real servers under a streaming load, untraced and traced (the
# default options: every process, plaintext capture on; the tracer started on the running
# servers, as an operator does), interleaved, the order alternating from round to round.
SERVER_ROUNDS=${BENCH_SERVER_ROUNDS:-8}
# tokenscope's CPU (every thread) from its start's end to 2 s after the load (a request is
# attributed 1.5 s after it ended: the settle queue), its peak RSS, the round's tokens
stop_tracer_cpu() { # FILE TOKENS CPU_AT_START
	sleep 2
	echo "$(($(cpu_ns "$tracer") - $3)) $(awk '/VmHWM/ { print $2 }' /proc/"$tracer"/status) $2" >>"$1"
	stop_tracer
}
# NAME COMMAND...: "untraced traced" lines of the command's output, per round. With BARE (a
# command prefix), a third arm: the load under bare probes, empty programs at tokenscope's
# places ("untraced traced bare"); the arms' order rotates from round to round.
paired_rounds() {
	name=$1
	shift
	: >"$work/$name"
	for r in $(seq "$SERVER_ROUNDS"); do
		if [ -n "${BARE:-}" ]; then
			arms=$(echo u t b u t | cut -d' ' -f$((r % 3 + 1))-$((r % 3 + 3)))
		elif [ $((r % 2)) = 0 ]; then
			arms="u t"
		else
			arms="t u"
		fi
		for k in $arms; do
			case $k in
			u) "$@" >"$work/$name.u" ;;
			b)
				# shellcheck disable=SC2086
				$BARE "$@" >"$work/$name.b"
				;;
			t)
				start_tracer && c0=$(cpu_ns "$tracer")
				"$@" >"$work/$name.t"
				stop_tracer_cpu "$work/$name.cpu" "$(awk '{ print $5 }' "$work/$name.t")" "$c0"
				;;
			esac
		done
		if [ -z "${BARE:-}" ]; then
			paste -d' ' "$work/$name.u" "$work/$name.t" >>"$work/$name"
		else
			paste -d' ' "$work/$name.u" "$work/$name.t" "$work/$name.b" >>"$work/$name"
		fi
	done
}
# column C of both halves of NAME's rounds (server_load.py prints 5 columns); of the arms with
# bare probes (untraced and bare; bare and traced), where there are
column_pair() {
	awk -v c="$2" '{ print $c, $(c + 5) }' "$work/$1" >"$work/$1.$2"
	awk -v c="$2" 'NF >= 15 { print $c, $(c + 10) }' "$work/$1" >"$work/$1.$2.bare"
	awk -v c="$2" 'NF >= 15 { print $(c + 10), $(c + 5) }' "$work/$1" >"$work/$1.$2.own"
}
# the arms with bare probes of NAME's column C: what they alone cost, and tokenscope beyond them
bare_rows() { # NAME C UNIT
	$stats paired "  the same under bare probes" "$3" "$work/$1.$2.bare" untraced bare
	$stats paired "  tokenscope over the bare probes" "$3" "$work/$1.$2.own" bare traced
}
echo "  what a user's server loses, traced over untraced (medians of per-round ratios, 95 % intervals):"
# The real llama-server (make llama-server; the tests' tiny model, one thread), 4 and 16
# slots: 128 streamed chat completions of 48 tokens, 16 at a time.
lsdir=$(./scripts/llama_server.sh | tail -n 1)
for slots in 4 16; do
	lport=$((18600 + slots))
	LD_LIBRARY_PATH="$lsdir/bin" "$lsdir/bin/llama-server" -m tests/fixtures/.gen/tiny.gguf \
		--host 127.0.0.1 --port $lport -np $slots -c $((1024 * slots)) -t 1 -tb 1 \
		--no-webui >"$work/llama-server.log" 2>&1 &
	servers=$!
	until curl -sf "http://127.0.0.1:$lport/health" >/dev/null; do
		kill -0 "$servers" 2>/dev/null || { tail "$work/llama-server.log" >&2; exit 1; }
		sleep 0.1
	done
	url="http://127.0.0.1:$lport/v1/chat/completions"
	$loadpy bench/server_load.py "$url" tiny 16 16 48 >/dev/null # warm
	paired_rounds ls$slots $loadpy bench/server_load.py "$url" tiny 128 16 48
	kill "$servers"
	wait "$servers" 2>/dev/null || true
	servers=
	for c in 1 3 4; do column_pair ls$slots $c; done
	$stats paired "llama-server, $slots slots: tokens/s" tokens/s "$work/ls$slots.1"
	$stats paired "  request latency p50" ms "$work/ls$slots.3"
	$stats paired "  request latency p99" ms "$work/ls$slots.4"
done
# tokenscope itself over those traced rounds: CPU per 1 000 streamed tokens, peak RSS
cat "$work/ls4.cpu" "$work/ls16.cpu" | awk '{ print $1 / $3 * 1000 / 1e6, $2 }' | sort -n |
	awk '{ c[NR] = $1; if ($2 > rss) rss = $2 } END {
		printf "  tokenscope on llama-server: %.2f ms of CPU per 1 000 streamed tokens (median of %d rounds, %.2f to %.2f); peak RSS %d KiB\n", c[int((NR + 1) / 2)], NR, c[1], c[NR], rss }'
# nginx terminating TLS in front of uvicorn (the FastAPI fixture, asyncio), both ends
# captured: SSE streams of 16 tokens (1 ms apart) at saturation, 32 at a time, 400 a round
# (Python's ssl client, on the same two cores); then h2load's HTTP/1.1 load over TLS, 16
# connections, 1 000 requests a round.
/usr/bin/python3 tests/fixtures/fastapi_app.py --port-file "$work/app.port" \
	--truth "$work/app.truth" >/dev/null 2>&1 &
servers=$!
until [ -s "$work/app.port" ]; do sleep 0.1; done
nport=18640
mkdir -p "$work/nginx"
sed -e "s|WORK|$work/nginx|g" -e "s|APP|$(cat "$work/app.port")|" -e "s|PORT|$nport|" \
	-e "s|CERT|$(pwd)/$cert|" -e "s|KEY|$(pwd)/$key|" bench/nginx_front.conf \
	>"$work/nginx/nginx.conf"
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g "daemon off;" 2>"$work/nginx/stderr" &
servers="$servers $!"
until curl -sk "https://127.0.0.1:$nport/" -o /dev/null; do sleep 0.1; done
front="https://127.0.0.1:$nport/v1/chat/completions"
$loadpy bench/server_load.py "$front" fx-ttft1-itl1-n16-bench 32 32 16 "$cert" >/dev/null
# The bare arm: empty programs where tokenscope's TLS and plaintext probes run on these paths
# (an entry and a return uprobe where tokenscope probes libssl's reads and writes, in every
# process; the enter and exit tracepoints of read and write), what any tracer placed there pays
BARE="$bench pair $libssl tokenscope $sb bare"
paired_rounds front $loadpy bench/server_load.py "$front" fx-ttft1-itl1-n16-bench 400 32 16 \
	"$cert"
for c in 2 4; do column_pair front $c; done
$stats paired "nginx (TLS) -> uvicorn SSE: requests/s" requests/s "$work/front.2"
bare_rows front 2 requests/s
$stats paired "  request latency p99" ms "$work/front.4"
# tokenscope itself over the front end's traced rounds: its CPU per 1 000 streamed tokens (of
# the round's 6 400, each crossing four captured sockets) against the servers' and load's
awk '{ print $1 / $3 * 1000 / 1e6 }' "$work/front.cpu" | sort -n | awk '{ c[NR] = $1 } END {
	printf "  tokenscope on the front end: %.2f ms of CPU per 1 000 streamed tokens (median of %d rounds, %.2f to %.2f)\n", c[int((NR + 1) / 2)], NR, c[1], c[NR] }' 
printf '{"model":"fx-ttft1-itl1-n16-bench","stream":true,"messages":[{"role":"user","content":"hi"}]}' \
	>"$work/h2load.body"
# requests/s, in server_load.py's five columns (a command, not a function: the bare arm
# runs it under its probes)
h2load_rps='h2load --h1 -n 1000 -c 16 -H "content-type: application/json" -d "$1" "$2" 2>/dev/null |
	awk "/^finished in/ { gsub(/,/, \"\", \$4); print \$4, 0, 0, 0, 0 }"'
paired_rounds h2load bash -c "$h2load_rps" h2load "$work/h2load.body" "$front"
BARE=
column_pair h2load 1
$stats paired "h2load over TLS (16 connections): requests/s" requests/s "$work/h2load.1"
bare_rows h2load 1 requests/s
kill $servers
wait $servers 2>/dev/null || true
servers=
fi

if want calls; then
echo "tokenscope bench: $ROUNDS rounds (each: untraced, bare and traced runs, interleaved), $N calls a run"
sed "s|LIBSSL|$libssl|g" bench/peer_ssl.bt >"$work/peer.bt"
: >"$work/ssl_bt_lost"
: >"$work/ssl_t_lost"
: >"$work/ssl_cpu"
: >"$work/ssl.bt"
: >"$work/bulk.rows"
workloads | while IFS='|' read -r name cmd place; do : >"$work/$name.rows"; : >"$work/$name.floor"; done
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 0 ]; then
		untraced_set
		traced_set
	else
		traced_set
		untraced_set
	fi
	workloads | while IFS='|' read -r name cmd place; do
		echo "$(cat "$work/$name.u1") $(cat "$work/$name.b1") $(cat "$work/$name.t1")" >>"$work/$name.rows"
		[ "$place" != tp ] ||
			echo "$(cat "$work/$name.u1") $(cat "$work/$name.f1") $(cat "$work/$name.t1")" >>"$work/$name.floor"
	done
	echo "$(cat "$work/ssl.u1") $(cat "$work/ssl.b1") $(cat "$work/ssl.bt1")" >>"$work/ssl.bt"
	echo "$(cat "$work/bulk.u1") $(cat "$work/bulk.t1")" >>"$work/bulk.rows"
done
echo "  cost per call, ns: untraced; what a bare probe adds; what tokenscope adds (95 % intervals)"
$stats cost "SSL_write + SSL_read round trip" "$work/ssl.rows"
$stats cost "  over a bare pair on the exported functions" "$work/sslsym.rows"
$stats cost "  the same under bpftrace (peer)" "$work/ssl.bt"
echo "    (bare: an empty uprobe and uretprobe where tokenscope probes, the functions that"
echo "    SSL_write and SSL_read call (user/capture/ssl_inner.h); on the exported functions"
echo "    each hit is single-stepped; tokenscope takes the entry and the return of each;"
echo "    bpftrace, on the exported functions, copies up to 200 bytes at each return)"
range() { sort -n "$1" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf(lo == hi ? "%d in every round" : "%d to %d", lo, hi) }'; }
echo "  SSL calls not delivered, per round of $((2 * N)): bpftrace $(range "$work/ssl_bt_lost"); tokenscope: records dropped (ring full), over every workload of a round: $(range "$work/ssl_t_lost")"
$stats cpu "tokenscope's own CPU while tracing them (2 records of 120 bytes a round trip)" "$work/ssl_cpu"
$stats cost "Go (*tls.Conn).Write + Read round trip" "$work/gotls.rows"
echo "    (in one Go process over net.Pipe; bare: empty uprobes where tokenscope puts its own,"
echo "    past the stack check of Read and Write and on each of their RETs)"
$stats cost "cudaLaunchKernel (libcudart)" "$work/rt.rows"
$stats cost "cuLaunchKernel (stand-in libcuda)" "$work/drv.rows"
$stats cost "cudaGraphLaunch (libcudart)" "$work/rtgraph.rows"
$stats cost "cuGraphLaunch (stand-in libcuda)" "$work/drvgraph.rows"
echo "    (bare: an empty uprobe on the entry point; a launch takes only an entry probe)"
$stats cost "llama_decode, decode step (4 seqs)" "$work/llamadec.rows"
$stats cost "llama_decode, prefill (512 tokens)" "$work/llamapre.rows"
echo "    (on a stub library that returns at once; bare: an empty uprobe and uretprobe there)"
$stats cost "pipe (not a socket)" "$work/pipe.rows"
$stats cost "TCP, not HTTP (ignored socket)" "$work/tcp.rows"
$stats cost "Unix socket, not HTTP (ignored)" "$work/unix.rows"
$stats cost "TCP, HTTP (both calls captured)" "$work/http.rows"
echo "    (a write + read of 120 bytes; bare: empty programs on the enter and exit tracepoints"
echo "    of read and write, the very four tokenscope's run on for these calls)"
echo "  the same calls against the floor capturer (bench/floor.bpf.c: the least any tracer pays"
echo "  that copies what each call moved into a ring record; tokenscope captures only HTTP):"
$stats cost "TCP, HTTP (both calls captured)" "$work/http.floor" 1 floor
$stats cost "Unix socket, not HTTP (ignored)" "$work/unix.floor" 1 floor
$stats cost "TCP, not HTTP (ignored socket)" "$work/tcp.floor" 1 floor
$stats paired "bulk TCP, $((BULK >> 20)) MiB, not HTTP" MB/s "$work/bulk.rows"
fi

if want start; then
# Start and stop (medians of 5): from exec to "Hit Ctrl-C to end." (every probe attached),
# from SIGINT to the process's end, and from SIGINT until its probes are gone (the detaching
# child's end); tokenscope's stderr read through a pipe (bench/start_time.py says why)
python3 bench/start_time.py ./tokenscope 5 >"$work/startstop"
printf "  start (exec to every probe attached): %d ms [%d, %d]; Ctrl-C to exit: %d ms; to every probe removed: %d ms\n" \
	"$(cut -d' ' -f1 "$work/startstop" | median)" "$(cut -d' ' -f1 "$work/startstop" | sort -n | head -n 1)" \
	"$(cut -d' ' -f1 "$work/startstop" | sort -n | tail -n 1)" \
	"$(cut -d' ' -f2 "$work/startstop" | median)" "$(cut -d' ' -f3 "$work/startstop" | median)"
# On a busy host, as an operator starts it: libssl and libcudart (a Python process that loaded
# both), llama.cpp (the real llama-server, idle) and a Go TLS program (the Go SSE server)
# mapped, and a CPU hog on one of the two CPUs; 20 starts, the median and the p95 (nearest
# rank), and one more start's phases
python3 -c 'import ctypes, ssl, sys, time; ctypes.CDLL(sys.argv[1]); time.sleep(1e6)' \
	"$libcudart" &
busy="$!"
lsdir=$(./scripts/llama_server.sh | tail -n 1)
LD_LIBRARY_PATH="$lsdir/bin" "$lsdir/bin/llama-server" -m tests/fixtures/.gen/tiny.gguf \
	--host 127.0.0.1 --port 18699 -t 1 --no-webui >/dev/null 2>&1 &
busy="$busy $!"
tests/fixtures/.gen/go/sseserver-stripped -cert "$cert" -key "$key" \
	-port-file "$work/go.port" -truth "$work/go.truth" >/dev/null 2>&1 &
busy="$busy $!"
until [ -s "$work/go.port" ] && curl -sf http://127.0.0.1:18699/health >/dev/null; do sleep 0.1; done
taskset -c $(($(nproc) - 1)) sh -c 'while :; do :; done' &
hog=$!
python3 bench/start_time.py ./tokenscope 20 | cut -d' ' -f1 | sort -n >"$work/start.busy"
printf "  start on a busy host (those libraries mapped, a CPU hog on one CPU): %d ms median, p95 %d ms (20 starts, %d to %d)\n" \
	"$(median <"$work/start.busy")" "$(sed -n 19p "$work/start.busy")" \
	"$(head -n 1 "$work/start.busy")" "$(tail -n 1 "$work/start.busy")"
./tokenscope -q -v -d 1 2>"$work/start.busy.v" >/dev/null
while detaching; do sleep 0.01; done
sed -n 's/^tokenscope: start: /  its phases (one busy start): /p' "$work/start.busy.v"
kill $hog $busy
wait $hog $busy 2>/dev/null || true
# where the start goes: one more run, its phases (-v) and each family's verifier time
# (TOKENSCOPE_VERIFIER_STATS: the kernel's own count, summed over the family's programs)
TOKENSCOPE_VERIFIER_STATS=1 ./tokenscope -q -v -d 1 2>"$work/start.v" >/dev/null
while detaching; do sleep 0.01; done
sed -n 's/^tokenscope: start: /  start phases (one run): /p' "$work/start.v"
awk '/^tokenscope: verifier: / { us[$3] += $5; n[$3]++; insns[$3] += $7 }
	END { printf "  verifier time by family (one run, loads in parallel):"
		for (f in us) printf " %s %.0f ms (%d programs, %d instructions)", f, us[f] / 1000, n[f], insns[f]
		printf "\n" }' "$work/start.v"
fi

if want pipeline; then
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
# the instructions of one replay: the same recording gives the same count every run, so two
# builds compare exactly where the times above move with the host
valgrind --tool=callgrind --callgrind-out-file=/dev/null ./tokenscope report "$work/rec" -q \
	2>"$work/callgrind" >/dev/null
ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/callgrind")
awk -v ev="$events" -v by="$bytes" -v tok="$tokens" -v us="$(median <"$work/replay_ms")" -v rss="$(tail -n 1 "$work/rss")" -v ir="$ir" 'BEGIN {
	printf "  pipeline replay (median of 10, process start included): %d records (%d bytes), %d token events in %.0f ms:\n", ev, by, tok, us / 1e3
	printf "    %.0f records/s, %.0f token events/s (each its own SSE or NDJSON event), %.1f MB/s\n", ev / (us / 1e6), tok / (us / 1e6), by / us
	printf "  its instructions (callgrind, one replay, exact for this recording): %.1f M, %.0f a token event\n", ir / 1e6, ir / tok
	printf "  peak RSS of a replay: %d KiB\n", rss
}'
fi

if want h2; then
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
fi

if want memory; then
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
# least room (-b 8) and the default; the kernel's ring (4 MiB) counts once in RSS from the
# start, the reader's backlog only while it holds records.
for mb in 8 0; do
	while detaching; do sleep 0.05; done
	python3 bench/live_open_streams.py ./tokenscope 10000 "$mb"
done | awk '{
	printf "  open streams, both ends, live (-b %s): VmRSS %d KiB (ring and binary %d KiB, heap %d KiB), streams seen %d client / %d server\n", $2 ? $2 : "default", $3, $5, $6, $7, $8
}'
fi

if want top; then
# One refresh of `tokenscope top`: the figures of a 60 s window holding 10 000 requests
# (bench/topbench.c; its own CPU time, not the screen's drawing)
printf "  top: %s\n" "$(.output/topbench 10000 51)"
fi

if want exec; then
# A never-seen program: 20 new copies each of the stripped Go client and of node (which
# embeds OpenSSL), run once each while tokenscope traces; from the exec (the kernel's time)
# to its probes attached, as tokenscope -v says it
tokenscope_v() {
	./tokenscope -q -v 2>"$work/exec.err" >/dev/null &
	tracer=$!
	until grep -q "Hit Ctrl-C to end." "$work/exec.err"; do sleep 0.01; done
}
for prog in tests/fixtures/.gen/go/sseclient-stripped "$(command -v node)"; do
	tokenscope_v
	for i in $(seq 20); do
		cp "$prog" "$work/new-$i"
		"$work/new-$i" --version >/dev/null 2>&1 || true
		sleep 0.2
	done
	stop_tracer
	sed -n 's/.* probed \([0-9.]*\) ms after the exec$/\1/p' "$work/exec.err" | sort -n |
		awk -v p="$(basename "$prog")" '{ v[NR] = $1 } END {
			printf "  a never-seen %s: exec to probed, %d new files: median %.2f ms, p95 %.2f ms, max %.2f ms\n", p, NR, v[int((NR + 1) / 2)], v[int(NR * 0.95 + 0.5)], v[NR] }'
	rm -f "$work"/new-*
done
fi

if want fork; then
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
# what a process costs beside its requests: the two runs' CPU apart, per process (10 ms ticks:
# resolved to 0.002 ms over 50 000 processes)
awk 'NF == 4 { t[FILENAME] += $4 }
	END { printf "  tracer CPU per short-lived process, beside its request: %.3f ms (%d ticks forked, %d from one process, over 50 000)\n", (t[ARGV[1]] - t[ARGV[2]]) * 10 / 50000, t[ARGV[1]], t[ARGV[2]] }' "$work/fork.fork" "$work/fork.one"
fi

if want names; then
# Model names chosen by clients: 100 000 requests each naming its own model, against the same
# requests naming one (the yardstick), in the same run.
for how in names one; do
	while detaching; do sleep 0.05; done
	python3 bench/model_names.py ./tokenscope 100000 $how >"$work/names.$how"
done
awk 'FNR == 1 { v[FILENAME] = $0 }
	END {
		split(v[ARGV[1]], a, " "); split(v[ARGV[2]], b, " ")
		printf "  100 000 model names (one in brackets): peak RSS %d KiB (%d), CPU %d ticks (%d), records 5 s after %d of %d (%d), exit %.2f s (%.2f), summary %d lines (%d)\n", a[2], b[2], a[4], b[4], a[6], a[8], b[6], a[10], b[10], a[12], b[12]
	}' "$work/names.names" "$work/names.one"
fi

if want engine; then
# What an engine loses: the same load untraced and traced (default options: every process,
# plaintext capture on), interleaved, the order alternating from round to round.
#
# node-llama-cpp's CPU llama.cpp on the tests' tiny model (1 thread, 4 sequences of 300
# tokens, 4 times): generated tokens/s. Its steps are short (about 2 ms), so this is where the
# step probes weigh most.
model=tests/fixtures/.gen/tiny.gguf
: >"$work/llama_tps"
for r in $(seq "$ENGINE_ROUNDS"); do
	if [ $((r % 2)) = 0 ]; then u=$(node bench/llama_tokens.mjs "$model" 300 4); fi
	start_tracer
	t=$(node bench/llama_tokens.mjs "$model" 300 4)
	stop_tracer
	if [ $((r % 2)) = 1 ]; then u=$(node bench/llama_tokens.mjs "$model" 300 4); fi
	echo "$u $t" >>"$work/llama_tps"
done
echo "  what an engine loses, traced over untraced (medians of per-round ratios, 95 % intervals):"
$stats paired "llama.cpp tokens/s (tiny model)" tokens/s "$work/llama_tps"

# The vLLM-shaped fixture (tests/fixtures/vllm: uvicorn API server, ZMQ, an engine core on the
# stand-in GPU): 96 streamed requests, 32 at a time, over plaintext HTTP (captured when
# traced). bench/engine_load.py gives its tokens/s, requests/s and median step time.
: >"$work/vllm"
for r in $(seq "$ENGINE_ROUNDS"); do
	for k in $([ $((r % 2)) = 0 ] && echo u t || echo t u); do
		[ "$k" = u ] || start_tracer
		python3 bench/engine_load.py "$work/vllm.$k" >"$work/vllm.$k.out"
		[ "$k" = u ] || stop_tracer
	done
	paste -d' ' "$work/vllm.u.out" "$work/vllm.t.out" >>"$work/vllm"
done
awk '{ print $1, $4 }' "$work/vllm" >"$work/vllm.tps"
awk '{ print $2, $5 }' "$work/vllm" >"$work/vllm.rps"
awk '{ print $3, $6 }' "$work/vllm" >"$work/vllm.step"
$stats paired "vLLM-shaped engine: tokens/s" tokens/s "$work/vllm.tps"
$stats paired "  its API server: requests/s" requests/s "$work/vllm.rps"
$stats paired "  median step time (host, launch to sync)" ms "$work/vllm.step"
fi
exit 0
