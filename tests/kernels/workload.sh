#!/bin/sh
# The kernel matrix's workload (tests/kernels/matrix.py), the same in every guest and on the
# host: tokenscope traces one run of each probe family's traffic, and what it wrote is left
# in OUT for matrix.py to compare with the host's and with the workloads' own truth.
#
#   workload.sh W OUT      W: the folder matrix.py packed (binaries, libraries, certificate)
#
# busybox sh in the guests: no bash, no python; every wait is for a file's content, and
# every step is bounded: a step past its bound is killed and named in OUT/hung, so a guest
# always sends its files and a hang says where it was. OUT/phases holds each phase's start
# (seconds since boot), and the same lines go to stderr: a guest's console.
set -u
W=$1
OUT=$2
mkdir -p "$OUT"

phase() {
	echo "workload: $1 at $(cut -d' ' -f1 /proc/uptime) s" | tee -a "$OUT/phases" >&2
}

# bounded NAME SECONDS COMMAND...: COMMAND, killed after SECONDS (and named in OUT/hung)
bounded() {
	name=$1 secs=$2
	shift 2
	timeout -s KILL "$secs" "$@"
	rc=$?
	[ "$rc" = 137 ] && echo "$name: killed after $secs s" >>"$OUT/hung"
	return "$rc"
}

# wait_bounded NAME PID SECONDS: wait for PID, killing it after SECONDS (named in OUT/hung)
wait_bounded() {
	n=0
	while kill -0 "$2" 2>/dev/null; do
		n=$((n + 1))
		if [ "$n" -gt $(($3 * 10)) ]; then
			echo "$1: killed after $3 s" >>"$OUT/hung"
			kill -9 "$2" 2>/dev/null
			break
		fi
		sleep 0.1
	done
	wait "$2"
}

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

phase tokenscope
# tokenscope, every family it can load on this kernel
# -v: the Go client waits until its binary is probed (a new file's first request, within
# milliseconds of its exec, comes before its probes: issue 37)
# TS_WRAP: a command tokenscope runs under (matrix.py: setpriv, as nobody with only its
# capabilities); unquoted on purpose, its words are the command's
# shellcheck disable=SC2086
${TS_WRAP:-} "$W/tokenscope" -v -o "$OUT/records.jsonl" >"$OUT/summary.txt" 2>"$OUT/stderr.txt" &
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
	[ "$n" -ge 1200 ] && echo "tokenscope: no start line in 120 s" >>"$OUT/hung"
	wait_bounded tokenscope "$ts" 10
	echo "$?" >"$OUT/rc"
	exit 0
fi

phase plaintext
# plaintext HTTP/1.1, both ends in one process, two threads on each socket
bounded seq_race 60 "$W/seq_race" 4 12 kplain >"$OUT/seq_race.out" 2>&1
# the same over a Unix stream socket: both ends joined by their inodes
SEQ_RACE_UNIX="$OUT/unix.sock" bounded seq_race_unix 60 "$W/seq_race" 2 8 kunix \
	>"$OUT/seq_race_unix.out" 2>&1
rm -f "$OUT/unix.sock" # OUT's files are read back: a socket is none

phase tls
# TLS: curl (OpenSSL) and a stripped Go client, to a stripped Go TLS server
"$W/sseserver-stripped" -cert "$W/cert.pem" -key "$W/key.pem" -port-file "$OUT/go.port" \
	-truth "$OUT/go.truth" >/dev/null 2>&1 &
srv=$!
# The server is a new file to tokenscope: curl's request, made as soon as the server listens,
# can come before its probes are on (issue 37; CI lost the server's record so once on the
# host), so curl waits for them as the Go client does.
if wait_for "$OUT/go.port" "[0-9]" 30 &&
	wait_for "$OUT/stderr.txt" "Go TLS probes on .*sseserver-stripped" 60; then
	port=$(cat "$OUT/go.port")
	bounded curl 30 "$W/curl" -sS --fail -N --http1.1 --cacert "$W/cert.pem" -o /dev/null \
		-H "Content-Type: application/json" "https://127.0.0.1:$port/v1/chat/completions" \
		-d '{"model":"fx-ttft30-itl5-n5-kcurl","stream":true,"messages":[{"role":"user","content":"hi"}]}' \
		>"$OUT/curl.out" 2>&1 && echo ok >>"$OUT/curl.out"
	"$W/sseclient-stripped" -url "https://127.0.0.1:$port" -ca "$W/cert.pem" -http1 \
		-model fx-ttft20-itl5-n4-kgo -wait "$OUT/go.ahead" >"$OUT/goclient.out" 2>&1 &
	client=$!
	wait_for "$OUT/stderr.txt" "Go TLS probes on .*sseclient-stripped" 60
	touch "$OUT/go.ahead"
	wait_bounded sseclient "$client" 30
fi
kill "$srv" 2>/dev/null

phase cuda
# the real libcudart (no GPU: its calls fail, its probes fire), and the stand-in engine on
# the virtual GPU with its own truth
bounded cudaprog 30 "$W/gpu/cudaprog" >"$OUT/cudaprog.out" 2>&1
# the engine's library is a new file: it starts once its probes are on
"$W/gpu/engine" --truth "$OUT/engine.truth" --requests 3 --seed 3 --wait "$OUT/engine.ahead" \
	>"$OUT/engine.out" 2>&1 &
engine=$!
wait_for "$OUT/stderr.txt" "CUDA probes on .*/gpu/libcuda.so.1" 60
touch "$OUT/engine.ahead"
wait_bounded engine "$engine" 30

phase llama
# llama.cpp serving one chat completion over plaintext HTTP (a prompt of 24 tokens,
# then 3 decodes, on the prebuilt llama.cpp), once its library is probed: its steps, and
# its request's TTFT split by them
LLAMA_STEP_WAIT="$OUT/llama.ahead" "$W/llama/llama_step" "$W/tiny.gguf" 24 3 "$W/llama" \
	"$OUT/llama.port" "$OUT/llama.truth" >"$OUT/llama.out" 2>"$OUT/llama.err" &
llama=$!
wait_for "$OUT/stderr.txt" "llama.cpp probes on .*libllama" 60
touch "$OUT/llama.ahead"
if wait_for "$OUT/llama.port" "[0-9]" 60; then
	bounded curl-llama 60 "$W/curl" -sS --fail -N -o /dev/null \
		-H "Content-Type: application/json" \
		"http://127.0.0.1:$(cat "$OUT/llama.port")/v1/chat/completions" \
		-d '{"model":"kllama","stream":true,"messages":[{"role":"user","content":"hi"}]}' \
		>"$OUT/curl-llama.out" 2>&1
fi
wait_bounded llama_step "$llama" 30

phase end
sleep 0.5
kill -INT "$ts"
wait_bounded "tokenscope's end" "$ts" 60
echo "$?" >"$OUT/rc"
phase done
