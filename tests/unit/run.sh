#!/bin/sh
# Runs each cmocka unit-test binary; no root needed. Exits non-zero if any test fails.
# TS_UNIT_CASE=PATTERN (make unit CASE=...) runs only the cases it names; naming none is a
# failure, not a pass.
failed=0
ran=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
	"$t" >"$out" 2>&1 || failed=1
	cat "$out"
	n=$(sed -n 's/^\[==========\] \([0-9]*\) test(s) run\.$/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
	ran=$((ran + n))
done
if [ "$ran" = 0 ]; then
	echo "unit: no test ran${TS_UNIT_CASE:+ (no case matches $TS_UNIT_CASE)}" >&2
	exit 1
fi
exit $failed
