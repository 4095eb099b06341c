#!/bin/bash
# Where the probes' time goes: each BPF program's run count and mean run time (kernel
# bpf_stats) while a workload runs under tokenscope (root). The figures include bpf_stats'
# own accounting, about 55-75 ns a run here (what an empty program shows).
#
# usage: bench/progstats.sh [TOKENSCOPE OPTIONS] -- WORKLOAD...
# e.g.:  bench/progstats.sh -c gpubench -- .output/gpubench rt 200000
#        bench/progstats.sh -c sslbench -- .output/sslbench ssl 50000 \
#            tests/fixtures/.gen/cert.pem tests/fixtures/.gen/key.pem
set -eu
cd "$(dirname "$0")/.."
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	args+=("$1")
	shift
done
[ $# -gt 1 ] || { echo "usage: bench/progstats.sh [OPTIONS] -- WORKLOAD..." >&2; exit 2; }
shift
work=$(mktemp -d /tmp/tokenscope-progstats-XXXXXX)
was=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$was"; rm -rf "$work"' EXIT
sysctl -q kernel.bpf_stats_enabled=1
./tokenscope -q "${args[@]}" 2>"$work/err" >/dev/null &
t=$!
until grep -q "Hit Ctrl-C" "$work/err"; do
	kill -0 $t 2>/dev/null || { cat "$work/err" >&2; exit 1; }
	sleep 0.1
done
bpftool -j prog show >"$work/before.json"
"$@" >/dev/null
bpftool -j prog show >"$work/after.json"
kill -INT $t
wait $t || true
/usr/bin/python3 - "$work" <<'EOF'
import json, sys
before = {p["id"]: p for p in json.load(open(sys.argv[1] + "/before.json"))}
for p in json.load(open(sys.argv[1] + "/after.json")):
    o = before.get(p["id"], {})
    runs = p.get("run_cnt", 0) - o.get("run_cnt", 0)
    if runs >= 100:
        ns = p.get("run_time_ns", 0) - o.get("run_time_ns", 0)
        print(f"{p.get('name', '?'):24s} {runs:9d} runs {ns / runs:8.1f} ns a run")
EOF
