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

start_tracer() {
	./tokenscope -q "$@" 2>"$work/stderr" >"$work/stdout" &
	tracer=$!
	until grep -q "Hit Ctrl-C to end." "$work/stderr"; do sleep 0.1; done
}
stop_tracer() {
	kill -INT "$tracer"
	wait "$tracer" || true
	tracer=
}

echo "tokenscope bench: $ROUNDS rounds of $N iterations (medians)"
: >"$work/empty"; : >"$work/bare"; : >"$work/ssl"; : >"$work/traced"
for r in $(seq "$ROUNDS"); do
	$bench empty "$N" >>"$work/empty"
	$bench empty "$N" --bare >>"$work/bare"
	$bench ssl "$N" "$cert" "$key" >>"$work/ssl"
	start_tracer -c sslbench
	$bench ssl "$N" "$cert" "$key" >>"$work/traced"
	stop_tracer
done
empty=$(median <"$work/empty"); bare=$(median <"$work/bare")
ssl=$(median <"$work/ssl"); traced=$(median <"$work/traced")
awk -v e="$empty" -v b="$bare" -v s="$ssl" -v t="$traced" 'BEGIN {
	u = b - e; per = (t - s) / 2
	printf "  bare uprobe:                %8.0f ns per hit\n", u
	printf "  SSL_write+SSL_read untraced: %7.0f ns per round trip\n", s
	printf "  SSL_write+SSL_read traced:   %7.0f ns per round trip\n", t
	printf "  added per SSL call:         %8.0f ns = %.2f x a bare uprobe\n", per, per / u
	printf "  (each traced call takes an entry uprobe and a return probe: 2 traps)\n"
}'

# Pipeline throughput: replay a recording of streamed requests.
python3 tests/fixtures/llm_server.py --cert "$cert" --key "$key" --port-file "$work/port" \
	--lifetime 300 >/dev/null &
server=$!
while [ ! -s "$work/port" ]; do sleep 0.1; done
start_tracer -c python3 -r "$work/rec"
python3 demo/load.py "$(cat "$work/port")" "$cert" 48 8
stop_tracer
events=$(grep -o 'events=[0-9]*' "$work/stdout" | cut -d= -f2)
bytes=$(grep -o ' bytes=[0-9]*' "$work/stdout" | head -n 1 | cut -d= -f2)
reps=50
t0=$(date +%s%N)
for i in $(seq $reps); do ./tokenscope report "$work/rec" -q >/dev/null; done
t1=$(date +%s%N)
/usr/bin/time -f "%M" ./tokenscope report "$work/rec" -q 2>"$work/rss" >/dev/null
awk -v ev="$events" -v by="$bytes" -v ns="$((t1 - t0))" -v n="$reps" -v rss="$(tail -n 1 "$work/rss")" 'BEGIN {
	per = ns / n
	printf "  pipeline replay: %d events (%d bytes) in %.1f ms: %.0f events/s, %.1f MB/s (process start included)\n", ev, by, per / 1e6, ev / (per / 1e9), by / (per / 1e3)
	printf "  peak RSS of a replay: %d KiB\n", rss
}'
