#!/bin/sh
# Replays of recorded captures (no root): `tokenscope report` on each recording under
# tests/fixtures/*/ must give the records the live run wrote, and, where the capture came with
# its workload's own ground truth (truth.json from tests/gpu/device/torch_steps.py on an H200),
# the steps must still match it (tests/gpu/device/compare.py).
set -u
cd "$(dirname "$0")/../.."
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for dir in tests/fixtures/*/; do
	[ -f "$dir/torch.tsrec.gz" ] || continue
	name=$(basename "$dir")
	gunzip -c "$dir/torch.tsrec.gz" >"$tmp/$name.tsrec"
	gunzip -c "$dir/steps.jsonl.gz" >"$tmp/$name.live.jsonl"
	if ./tokenscope report "$tmp/$name.tsrec" -q -o "$tmp/$name.replay.jsonl" >"$tmp/$name.summary" &&
		python3 -c 'import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if a == b and a else 1)' "$tmp/$name.replay.jsonl" "$tmp/$name.live.jsonl"; then
		pass=$((pass + 1))
	else
		echo "FAIL: $name: the replay differs from the live records"
		fail=$((fail + 1))
	fi
	if [ -f "$dir/truth.json" ]; then
		if python3 tests/gpu/device/compare.py "$tmp/$name.replay.jsonl" "$dir/truth.json" >"$tmp/$name.compare"; then
			pass=$((pass + 1))
		else
			cat "$tmp/$name.compare"
			echo "FAIL: $name: replayed steps no longer match the workload's truth"
			fail=$((fail + 1))
		fi
	fi
done
echo "replay: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
