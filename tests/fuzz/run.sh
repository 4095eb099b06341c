#!/bin/sh
# Runs each libFuzzer target (FUZZ_TARGETS, default all; inputs up to FUZZ_MAX_LEN bytes,
# default 64 KiB) for SECONDS (from its seeds and its corpus so far, kept in
# .output/fuzz/corpus), then prints the executions. Exits non-zero on any crash, leak or
# sanitizer report; the input that caused it is left in .output/fuzz/ (crash-*, leak-*).
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-60}
targets=${FUZZ_TARGETS:-http sse decode pipeline recording json h2 zmtp}
max_len=${FUZZ_MAX_LEN:-65536}
dir=.output/fuzz
python3 tests/fuzz/seeds.py "$dir/seeds"
total=0
fail=0
for t in $targets; do
	mkdir -p "$dir/corpus/$t"
	if (cd "$dir" && "./fuzz_$t" -max_total_time="$seconds" -close_fd_mask=2 -print_final_stats=1 \
		-max_len="$max_len" -timeout=10 "corpus/$t" "seeds/$t") >"$dir/$t.log" 2>&1; then
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
