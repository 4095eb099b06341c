#!/bin/sh
# `make demo`: start the bundled local TLS "LLM API" server, trace it and a concurrent client
# load with tokenscope, print the per-request lines and the summary; then the same with the
# vLLM-shaped service (an API server in front of a batching engine on the stand-in GPU), where
# each server-side TTFT is split into queue, prefill and emit; then llama.cpp itself
# (node-llama-cpp), its own steps and the same split; and exit, leaving the Perfetto timeline
# and the HTML report of the last two in .output/demo.
set -eu
cd "$(dirname "$0")/.."
. demo/vllm.sh
if [ "$(id -u)" != 0 ]; then
	echo "the demo loads eBPF probes: run it as root (sudo make demo)" >&2
	exit 1
fi
work=$(mktemp -d /tmp/tokenscope-demo-XXXXXX)
# the timelines and reports the demo leaves behind, to open after it
keep=$PWD/.output/demo
mkdir -p "$keep"
cert=tests/fixtures/.gen/cert.pem
key=tests/fixtures/.gen/key.pem
cleanup() {
	[ -n "${server:-}" ] && kill "$server" 2>/dev/null || true
	[ -n "${api:-}" ] && kill "$api" 2>/dev/null || true
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

# Part 2: the vLLM-shaped service. Its API server (FastAPI, uvicorn) starts its engine as a
# child process; tokenscope finds the engine through the process tree.
echo
echo "demo: the vLLM-shaped service: 64 streamed requests, 32 at a time, prompts of 32 to 8192 tokens" >&2
./tokenscope -c python3 -q -o "$work/vllm.jsonl" --perfetto "$keep/vllm.pftrace" \
	--html "$keep/vllm.html" 2>"$work/stderr2" &
tracer=$!
until grep -q "Hit Ctrl-C to end." "$work/stderr2" 2>/dev/null; do
	if ! kill -0 "$tracer" 2>/dev/null; then cat "$work/stderr2" >&2; exit 1; fi
	sleep 0.1
done
start_vllm "$work"
/usr/bin/python3 tests/fixtures/vllm/load.py "http://127.0.0.1:$vport" 64 32 >/dev/null
kill -INT "$api"
wait "$api" || true
api=
kill -INT "$tracer"
wait "$tracer"
tracer=
echo
echo "demo: one server record's attribution:"
grep '"role":"server"' "$work/vllm.jsonl" | grep '"attribution":{' | head -n 1 |
	python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); print(json.dumps({k: r[k] for k in ("id", "ttft_ms", "attribution")}, indent=1))'

# Part 3: a real engine, llama.cpp (node-llama-cpp's CPU build, a tiny model the tests write)
# behind an OpenAI-compatible server in node: its own steps, each llama_decode call with its
# batch, and each TTFT split from the sequences they carried.
echo
echo "demo: llama.cpp (node-llama-cpp): 24 streamed requests, 12 at a time, over 4 sequences" >&2
./tokenscope -c node -q -o "$work/llama.jsonl" --perfetto "$keep/llama.pftrace" \
	--html "$keep/llama.html" 2>"$work/stderr3" &
tracer=$!
until grep -q "Hit Ctrl-C to end." "$work/stderr3" 2>/dev/null; do
	if ! kill -0 "$tracer" 2>/dev/null; then cat "$work/stderr3" >&2; exit 1; fi
	sleep 0.1
done
node tests/fixtures/llama/server.mjs --model tests/fixtures/.gen/tiny.gguf \
	--port-file "$work/lport" --log "$work/llama-server.jsonl" --sequences 4 --batch 64 \
	>"$work/llama-server.out" 2>&1 &
api=$!
while [ ! -s "$work/lport" ]; do
	if ! kill -0 "$api" 2>/dev/null; then cat "$work/llama-server.out" >&2; exit 1; fi
	sleep 0.1
done
python3 demo/llama_load.py "$(cat "$work/lport")" 24 12
kill -TERM "$api"
wait "$api" || true
api=
kill -INT "$tracer"
wait "$tracer"
tracer=
echo
echo "demo: one llama.cpp step and one server record's attribution:"
grep '"type":"engine_step"' "$work/llama.jsonl" | grep '"kind":"mixed"' | head -n 1
grep '"role":"server"' "$work/llama.jsonl" | grep '"attribution":{' | tail -n 1 |
	python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); print(json.dumps({k: r[k] for k in ("id", "ttft_ms", "attribution")}, indent=1))'
echo
echo "demo: left for you to open (readable by root: sudo cp them to share):"
echo "  timelines: $keep/vllm.pftrace and $keep/llama.pftrace"
echo "    open https://ui.perfetto.dev and drag a file in (it is read in the browser, not uploaded)"
echo "  reports:   $keep/vllm.html and $keep/llama.html"
echo "    open in any browser (file://$keep/vllm.html): one page, no script, nothing fetched"
