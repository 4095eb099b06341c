#!/bin/sh
# `make demo`: start the bundled local TLS "LLM API" server, trace it and a concurrent client
# load with tokenscope, print the per-request lines and the summary, and exit.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "the demo loads eBPF probes: run it as root (sudo make demo)" >&2
	exit 1
fi
work=$(mktemp -d /tmp/tokenscope-demo-XXXXXX)
cert=tests/fixtures/.gen/cert.pem
key=tests/fixtures/.gen/key.pem
cleanup() {
	[ -n "${server:-}" ] && kill "$server" 2>/dev/null || true
	[ -n "${tracer:-}" ] && kill "$tracer" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

python3 tests/fixtures/llm_server.py --cert "$cert" --key "$key" --port-file "$work/port" \
	--lifetime 300 >/dev/null &
server=$!
while [ ! -s "$work/port" ]; do sleep 0.1; done
port=$(cat "$work/port")

# Trace only the demo's own processes (python3): the summary then holds just the demo.
./tokenscope -c python3 -o "$work/requests.jsonl" 2>"$work/stderr" &
tracer=$!
until grep -q "Hit Ctrl-C to end." "$work/stderr" 2>/dev/null; do
	if ! kill -0 "$tracer" 2>/dev/null; then cat "$work/stderr" >&2; exit 1; fi
	sleep 0.1
done
cat "$work/stderr" >&2
echo "demo: 24 streamed requests, 6 at a time, half of them prefix-cache hits" >&2
python3 demo/load.py "$port" "$cert" 24 6
sleep 0.5
kill -INT "$tracer"
wait "$tracer"
tracer=
echo
echo "demo: $(wc -l <"$work/requests.jsonl") JSON Lines records; the first one:"
head -n 1 "$work/requests.jsonl"
