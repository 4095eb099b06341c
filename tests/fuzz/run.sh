#!/bin/sh
# Runs each libFuzzer target (FUZZ_TARGETS, default all; inputs up to FUZZ_MAX_LEN bytes,
# default 64 KiB) for SECONDS (from its seeds and its corpus so far, kept in
# .output/fuzz/corpus), FUZZ_JOBS of them at a time (default: one a CPU; each fuzzer is one
# thread), then prints the executions. Exits non-zero on any crash, leak or sanitizer report;
# the input that caused it is left in .output/fuzz/ (crash-*, leak-*).
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-60}
targets=${FUZZ_TARGETS:-http sse decode pipeline recording json h2 zmtp}
max_len=${FUZZ_MAX_LEN:-65536}
jobs=${FUZZ_JOBS:-$(nproc)}
dir=.output/fuzz
python3 tests/fuzz/seeds.py "$dir/seeds"

# one target: its log in $dir/T.log, its exit status in $dir/T.rc
run_one() {
	mkdir -p "$dir/corpus/$1"
	(cd "$dir" && "./fuzz_$1" -max_total_time="$seconds" -close_fd_mask=2 -print_final_stats=1 \
		-max_len="$max_len" -timeout=10 "corpus/$1" "seeds/$1") >"$dir/$1.log" 2>&1
	echo $? >"$dir/$1.rc"
}

running=0
for t in $targets; do
	rm -f "$dir/$t.rc"
	run_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait

total=0
fail=0
for t in $targets; do
	if [ "$(cat "$dir/$t.rc" 2>/dev/null)" = 0 ]; then
		n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/$t.log" | grep -o '[0-9]*$')
		echo "fuzz: $t: ${n:-0} executions in ${seconds}s, no crash"
		total=$((total + ${n:-0}))
	else
		echo "FAIL: fuzz: $t found a crash (log: $dir/$t.log)"
		tail -n 30 "$dir/$t.log"
		fail=1
	fi
done
echo "fuzz: $total executions in all"
exit $fail
