#!/bin/sh
# Replays of recorded captures (no root): `tokenscope report` on each recording
# tests/fixtures/*/NAME.tsrec.gz must give, byte for byte, the JSON Lines the live run wrote
# (NAME.jsonl.gz beside it), so a change that alters any record shows here. Where the capture
# came with its workload's own ground truth (truth.json from tests/gpu/device/torch_steps.py
# on an H200), the steps must still match it (tests/gpu/device/compare.py). Each replay's
# --perfetto timeline is decoded and checked against its records
# (tests/perfetto/check_trace.py), and is the same file from a second replay; each replay's
# --html report is opened in headless chromium and checked against its records
# (tests/html/check_report.py); with REPLAY_HTML_AS=BINARY, compared with BINARY's instead
# (make test's second pass, with the sanitized build, against the plain build's).
#
#   h200/torch         a real H200 run (PyTorch, eager, CUDA graphs, async scheduling)
#   tcp/capture        plaintext HTTP: uvicorn, nginx in front, the TCP edge cases
#   tls-clients/capture every client of the integration tests against the TLS fixture server
#   vgpu/capture       the simulated engine on the stand-in libcuda (tests/gpu)
#   llama/capture      llama.cpp (node-llama-cpp) serving 16 streams: its own steps, and the
#                      split from the sequences they carried
#   h2/capture         HTTP/2 and gRPC: hypercorn, nginx, grpcio; curl, nghttp, httpx, node
#   vllm/capture       vLLM's engine wire (ZeroMQ over Unix sockets) beside its HTTP: the
#                      engine's own split, scheduler stats
# Then `tokenscope top --replay` of tls-clients/capture, driven in tmux.
set -u
cd "$(dirname "$0")/../.."
TOKENSCOPE=${TOKENSCOPE:-./tokenscope}
echo "replay: with $TOKENSCOPE"
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rec in tests/fixtures/*/*.tsrec.gz; do
	dir=$(dirname "$rec")
	name=$(basename "$dir")-$(basename "$rec" .tsrec.gz)
	want=${rec%.tsrec.gz}.jsonl.gz
	gunzip -c "$rec" >"$tmp/$name.tsrec"
	gunzip -c "$want" >"$tmp/$name.live.jsonl"
	if $TOKENSCOPE report "$tmp/$name.tsrec" -q -o "$tmp/$name.replay.jsonl" >"$tmp/$name.summary" &&
		[ -s "$tmp/$name.live.jsonl" ] && cmp -s "$tmp/$name.replay.jsonl" "$tmp/$name.live.jsonl"; then
		pass=$((pass + 1))
	else
		echo "FAIL: $name: the replay differs from the live records"
		diff "$tmp/$name.replay.jsonl" "$tmp/$name.live.jsonl" | head -n 6
		fail=$((fail + 1))
	fi
	# the timeline of the same replay: decoded, checked against its records, and the same
	# file from a second replay
	if $TOKENSCOPE report "$tmp/$name.tsrec" -q --perfetto "$tmp/$name.pftrace" -o "$tmp/$name.pf.jsonl" >/dev/null &&
		$TOKENSCOPE report "$tmp/$name.tsrec" -q --perfetto "$tmp/$name.again.pftrace" >/dev/null &&
		cmp -s "$tmp/$name.pftrace" "$tmp/$name.again.pftrace" &&
		python3 tests/perfetto/check_trace.py "$tmp/$name.pftrace" "$tmp/$name.pf.jsonl" >"$tmp/$name.pfcheck"; then
		pass=$((pass + 1))
	else
		cat "$tmp/$name.pfcheck" 2>/dev/null
		echo "FAIL: $name: the Perfetto timeline of its replay"
		fail=$((fail + 1))
	fi
	# the HTML report of the same replay, opened in a browser and checked against its records
	# (screenshots of its sections kept in .output/test-artifacts/html/NAME); with
	# REPLAY_HTML_AS=BINARY (make test's pass with the sanitized build), the same file as that
	# build's report, which its own pass opened (the browser took 95 s of each pass)
	if [ -n "${REPLAY_HTML_AS:-}" ]; then
		if $TOKENSCOPE report "$tmp/$name.tsrec" -q --html "$tmp/$name.html" -o "$tmp/$name.html.jsonl" >/dev/null &&
			$REPLAY_HTML_AS report "$tmp/$name.tsrec" -q --html "$tmp/$name.as.html" -o "$tmp/$name.as.jsonl" >/dev/null &&
			cmp "$tmp/$name.html" "$tmp/$name.as.html" >"$tmp/$name.htmlcheck"; then
			pass=$((pass + 1))
		else
			cat "$tmp/$name.htmlcheck" 2>/dev/null
			echo "FAIL: $name: the HTML report of its replay differs from $REPLAY_HTML_AS's"
			fail=$((fail + 1))
		fi
	elif $TOKENSCOPE report "$tmp/$name.tsrec" -q --html "$tmp/$name.html" -o "$tmp/$name.html.jsonl" >/dev/null &&
		python3 tests/html/check_report.py "$tmp/$name.html" "$tmp/$name.html.jsonl" \
			".output/test-artifacts/html/$name" >"$tmp/$name.htmlcheck"; then
		pass=$((pass + 1))
	else
		cat "$tmp/$name.htmlcheck" 2>/dev/null
		echo "FAIL: $name: the HTML report of its replay"
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
# The reader streams: a pipe, standard input ("-") and a FIFO give the same records as a file.
rec=tests/fixtures/tcp/capture.tsrec.gz
gunzip -c "${rec%.tsrec.gz}.jsonl.gz" >"$tmp/want.jsonl"
gunzip -c "$rec" | $TOKENSCOPE report - -q -o "$tmp/stdin.jsonl" >/dev/null
mkfifo "$tmp/fifo"
gunzip -c "$rec" >"$tmp/fifo" &
$TOKENSCOPE report "$tmp/fifo" -q -o "$tmp/fifo.jsonl" >/dev/null
wait
for how in stdin fifo; do
	if cmp -s "$tmp/$how.jsonl" "$tmp/want.jsonl"; then
		pass=$((pass + 1))
	else
		echo "FAIL: a recording read from $how differs from the live records"
		fail=$((fail + 1))
	fi
done
# A header that says it is shorter than it is: the message says what is wrong.
gunzip -c "$rec" >"$tmp/bad.tsrec"
printf '\010\000\000\000' | dd of="$tmp/bad.tsrec" bs=1 seek=12 conv=notrunc status=none
if ! $TOKENSCOPE report "$tmp/bad.tsrec" -q 2>"$tmp/bad.err" >/dev/null &&
	grep -q "corrupt header: it says it is 8 bytes long" "$tmp/bad.err"; then
	pass=$((pass + 1))
else
	echo "FAIL: a corrupt header_size is not named: $(cat "$tmp/bad.err")"
	fail=$((fail + 1))
fi
# A directory given for the recording: said as such, in one line.
if ! $TOKENSCOPE report "$tmp" -q 2>"$tmp/dir.err" >/dev/null &&
	grep -q "is a directory, not a recording" "$tmp/dir.err" && [ "$(wc -l <"$tmp/dir.err")" = 1 ]; then
	pass=$((pass + 1))
else
	echo "FAIL: report DIR does not say it is a directory: $(cat "$tmp/dir.err")"
	fail=$((fail + 1))
fi
# `tokenscope top --replay` in tmux: the same final screen twice, its rows against the
# report's records, the keys, a resize, no terminal (tests/integration/top_checks.py).
if python3 tests/integration/top_checks.py replay "$TOKENSCOPE" tests/fixtures/tls-clients/capture.tsrec.gz &&
	python3 tests/integration/top_checks.py sched "$TOKENSCOPE" tests/fixtures/vllm/capture.tsrec.gz; then
	pass=$((pass + 1))
else
	echo "FAIL: top --replay (above)"
	fail=$((fail + 1))
fi

echo "replay: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
