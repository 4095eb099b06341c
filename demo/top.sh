#!/bin/sh
# `make demo TOP=1`: the vLLM-shaped service (an API server in front of a batching engine on
# the stand-in GPU) under a load that comes in waves, watched with `tokenscope top`. The view
# needs a terminal; `q` ends it (and the demo), with the usual summary.
set -eu
cd "$(dirname "$0")/.."
. demo/vllm.sh
if [ "$(id -u)" != 0 ]; then
	echo "the demo loads eBPF probes: run it as root (sudo make demo TOP=1)" >&2
	exit 1
fi
if [ ! -t 0 ] || [ ! -t 1 ]; then
	echo "make demo TOP=1 shows a full-screen view: run it in a terminal" >&2
	exit 1
fi
work=$(mktemp -d /tmp/tokenscope-top-demo-XXXXXX)
cleanup() {
	[ -n "${load:-}" ] && kill "$load" 2>/dev/null || true
	[ -n "${api:-}" ] && kill "$api" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

start_vllm "$work"
# waves of 128 streamed requests, 8 to 64 at a time, for about five minutes
(
	for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		c=$((8 << (round % 4)))
		/usr/bin/python3 tests/fixtures/vllm/load.py "http://127.0.0.1:$vport" 128 "$c" \
			--seed "$round" >/dev/null 2>&1 || true
	done
) &
load=$!
./tokenscope top -c python3
