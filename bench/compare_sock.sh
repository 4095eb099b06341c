#!/bin/bash
# Two tokenscope binaries side by side on the plaintext paths, in one run (root): interleaved
# rounds of sockbench (a write + read of 120 bytes over a pipe, an ignored TCP socket, an
# ignored Unix socket, and TCP after an HTTP head: both calls captured), pinned to CPU 1 as in
# make bench, untraced, under the four bare tracepoint programs, and under each binary (the
# order of the two alternating from round to round). For each row and binary: the cost it
# adds, as a ratio to the bare programs; then the new binary's added cost over the old one's,
# per round (bench/stats.py: medians with bootstrap 95 % intervals).
#
# usage: bench/compare_sock.sh OLD_BINARY NEW_BINARY [ROUNDS] [CALLS]
# e.g.:  git worktree add /tmp/old HEAD~1 && make -C /tmp/old tokenscope &&
#        bench/compare_sock.sh /tmp/old/tokenscope ./tokenscope
set -eu
cd "$(dirname "$0")/.."
. bench/detaching.sh
old=$1 new=$2 rounds=${3:-8} n=${4:-50000}
b=.output/sockbench pin="taskset -c 1" rows="pipe tcp unix http"
work=$(mktemp -d /tmp/tokenscope-compare-XXXXXX)
trap 'rm -rf "$work"' EXIT
traced() { # binary tag: one figure per row into $work/tag.ROW
	"$1" -q 2>"$work/err" >/dev/null &
	local t=$! k
	until grep -q "Hit Ctrl-C" "$work/err"; do sleep 0.1; done
	for k in $rows; do $pin $b $k "$n" >"$work/$2.$k"; done
	kill -INT $t
	wait $t
	while detaching; do sleep 0.05; done
}
for r in $(seq "$rounds"); do
	for k in $rows; do
		$pin $b $k "$n" >"$work/u.$k"
		$b bare $pin $b $k "$n" >"$work/b.$k"
	done
	if [ $((r % 2)) = 0 ]; then
		traced "$old" o
		traced "$new" n
	else
		traced "$new" n
		traced "$old" o
	fi
	for k in $rows; do
		read -r u <"$work/u.$k"; read -r p <"$work/b.$k"
		read -r o <"$work/o.$k"; read -r nw <"$work/n.$k"
		echo "$u $p $o" >>"$work/old.$k"
		echo "$u $p $nw" >>"$work/new.$k"
		echo "$(awk -v u="$u" -v o="$o" 'BEGIN { print o - u }') $(awk -v u="$u" -v x="$nw" 'BEGIN { print x - u }')" >>"$work/added.$k"
	done
done
echo "$rounds rounds of $n write + read pairs on each path"
for k in $rows; do
	python3 bench/stats.py cost "$k, old" "$work/old.$k"
	python3 bench/stats.py cost "$k, new" "$work/new.$k"
	python3 bench/stats.py paired "$k, added cost per pair" ns "$work/added.$k" old new
done
