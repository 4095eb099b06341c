#!/bin/sh
# The kernel matrix's workload (tests/kernels/matrix.py), the same in every guest and on the
# host: tokenscope traces one run of each probe family's traffic, and what it wrote is left
# in OUT for matrix.py to compare with the host's and with the workloads' own truth.
#
#   workload.sh W OUT      W: the folder matrix.py packed (binaries, libraries, certificate)
#
# busybox sh in the guests: no bash, no python; every wait is for a file's content, bounded.
set -u
W=$1
OUT=$2
mkdir -p "$OUT"

# wait_for FILE TEXT SECONDS: until FILE holds TEXT; 1 when it never does
wait_for() {
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ "$n" -gt $(($3 * 10)) ] && return 1
		sleep 0.1
	done
	return 0
}

# phase: tokenscope, every family it can load on this kernel
# -v: the Go client waits until its binary is probed (a new file's first request, within
# milliseconds of its exec, comes before its probes: issue 37)
"$W/tokenscope" -v -o "$OUT/records.jsonl" >"$OUT/summary.txt" 2>"$OUT/stderr.txt" &
ts=$!
started=0
n=0
while [ "$n" -lt 1200 ]; do
	grep -q "Hit Ctrl-C" "$OUT/stderr.txt" 2>/dev/null && { started=1; break; }
	kill -0 "$ts" 2>/dev/null || break
	n=$((n + 1))
	sleep 0.1
done
if [ "$started" = 0 ]; then
	wait "$ts"
	echo "$?" >"$OUT/rc"
	exit 0
fi

# phase: plaintext HTTP/1.1, both ends in one process, two threads on each socket
"$W/seq_race" 4 12 kplain >"$OUT/seq_race.out" 2>&1

# phase: TLS: curl (OpenSSL) and a stripped Go client, to a stripped Go TLS server
"$W/sseserver-stripped" -cert "$W/cert.pem" -key "$W/key.pem" -port-file "$OUT/go.port" \
	-truth "$OUT/go.truth" >/dev/null 2>&1 &
srv=$!
if wait_for "$OUT/go.port" "[0-9]" 30; then
	port=$(cat "$OUT/go.port")
	"$W/curl" -sS --fail -N --http1.1 --cacert "$W/cert.pem" -o /dev/null \
		-H "Content-Type: application/json" "https://127.0.0.1:$port/v1/chat/completions" \
		-d '{"model":"fx-ttft30-itl5-n5-kcurl","stream":true,"messages":[{"role":"user","content":"hi"}]}' \
		>"$OUT/curl.out" 2>&1 && echo ok >>"$OUT/curl.out"
	"$W/sseclient-stripped" -url "https://127.0.0.1:$port" -ca "$W/cert.pem" -http1 \
		-model fx-ttft20-itl5-n4-kgo -wait "$OUT/go.ahead" >"$OUT/goclient.out" 2>&1 &
	client=$!
	wait_for "$OUT/stderr.txt" "Go TLS probes on .*sseclient-stripped" 60
	touch "$OUT/go.ahead"
	wait "$client"
fi
kill "$srv" 2>/dev/null

# phase: CUDA: the real libcudart (no GPU: its calls fail, its probes fire), and the
# stand-in engine on the virtual GPU with its own truth
"$W/gpu/cudaprog" >"$OUT/cudaprog.out" 2>&1
"$W/gpu/engine" --truth "$OUT/engine.truth" --requests 3 --seed 3 >"$OUT/engine.out" 2>&1

# phase: llama.cpp serving one chat completion over plaintext HTTP (a prompt of 24 tokens,
# then 3 decodes, on the prebuilt llama.cpp), once its library is probed: its steps, and
# its request's TTFT split by them
LLAMA_STEP_WAIT="$OUT/llama.ahead" "$W/llama/llama_step" "$W/tiny.gguf" 24 3 "$W/llama" \
	"$OUT/llama.port" "$OUT/llama.truth" >"$OUT/llama.out" 2>"$OUT/llama.err" &
llama=$!
wait_for "$OUT/stderr.txt" "llama.cpp probes on .*libllama" 60
touch "$OUT/llama.ahead"
if wait_for "$OUT/llama.port" "[0-9]" 60; then
	"$W/curl" -sS --fail -N -o /dev/null -H "Content-Type: application/json" \
		"http://127.0.0.1:$(cat "$OUT/llama.port")/v1/chat/completions" \
		-d '{"model":"kllama","stream":true,"messages":[{"role":"user","content":"hi"}]}' \
		>"$OUT/curl-llama.out" 2>&1
fi
wait "$llama"

# phase: the end
sleep 0.5
kill -INT "$ts"
wait "$ts"
echo "$?" >"$OUT/rc"
