#!/bin/sh
# The device-machine check (issue: real GPU). Run there from the repository root with the
# tokenscope binary built here carried along; results land in $OUT for compare.py.
set -u
OUT=${OUT:-/tmp/ts-device}
mkdir -p "$OUT"
{
	uname -r
	nvidia-smi -L
	ls -la /sys/kernel/btf/vmlinux
	python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1
./tokenscope -q -o "$OUT/torch.jsonl" -r "$OUT/torch.tsrec" -v >"$OUT/summary.txt" 2>"$OUT/tokenscope.err" &
ts=$!
i=0
until grep -q "Hit Ctrl-C to end." "$OUT/tokenscope.err" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 $ts 2>/dev/null; then
		echo "tokenscope did not start" >>"$OUT/tokenscope.err"
		exit 1
	fi
	sleep 0.1
done
PYTHONUNBUFFERED=1 timeout 300 python3 tests/gpu/device/torch_steps.py "$OUT/truth.json" >"$OUT/python.log" 2>&1
echo "python exit $?" >>"$OUT/python.log"
kill -INT $ts
wait $ts
echo "tokenscope exit $?" >>"$OUT/tokenscope.err"
ls -la "$OUT"
tail -n 30 "$OUT/summary.txt"
tail -n 5 "$OUT/python.log"
