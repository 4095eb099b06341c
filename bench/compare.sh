#!/bin/bash
# Two tokenscope binaries side by side on the SSL path, in one run (root): interleaved rounds of
# sslbench untraced, under a bare uprobe on SSL_write, and under each binary; medians. Reports
# the cost each adds per traced call, as a ratio to the bare uprobe, and the tracer's CPU.
#
# usage: bench/compare.sh OLD_BINARY NEW_BINARY [ROUNDS] [CALLS]
# e.g.:  git worktree add /tmp/old HEAD~1 && make -C /tmp/old tokenscope &&
#        bench/compare.sh /tmp/old/tokenscope ./tokenscope
set -eu
cd "$(dirname "$0")/.."
old=$1 new=$2 rounds=${3:-5} n=${4:-20000}
cert=tests/fixtures/.gen/cert.pem key=tests/fixtures/.gen/key.pem b=.output/sslbench
lib=/lib/x86_64-linux-gnu/libssl.so.3
work=$(mktemp -d /tmp/tokenscope-compare-XXXXXX)
trap 'rm -rf "$work"' EXIT
traced() { # binary, figures file, cpu file
	"$1" -q -c sslbench 2>"$work/err" >/dev/null &
	local t=$! c0 c1
	until grep -q "Hit Ctrl-C" "$work/err"; do sleep 0.1; done
	c0=$(awk '{print $14 + $15}' /proc/$t/stat)
	$b ssl "$n" $cert $key >>"$2"
	c1=$(awk '{print $14 + $15}' /proc/$t/stat)
	echo $((c1 - c0)) >>"$3"
	kill -INT $t
	wait $t
	# its probes come off in a child, tokenscope-det: the next measurement waits for it
	while ps -eo stat=,comm= | awk '$1 !~ /^Z/ && $2 == "tokenscope-det" { f = 1 } END { exit !f }'; do
		sleep 0.05
	done
}
for r in $(seq "$rounds"); do
	$b ssl "$n" $cert $key >>"$work/u"
	$b bare $lib SSL_write $b ssl "$n" $cert $key >>"$work/b"
	traced "$old" "$work/o" "$work/oc"
	traced "$new" "$work/n" "$work/nc"
done
med() { sort -n "$1" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
awk -v u="$(med "$work/u")" -v b="$(med "$work/b")" -v o="$(med "$work/o")" \
	-v nw="$(med "$work/n")" -v oc="$(med "$work/oc")" -v nc="$(med "$work/nc")" \
	-v hz="$(getconf CLK_TCK)" -v calls=$((2 * n)) 'BEGIN {
	printf "%d rounds of %d SSL_write + SSL_read round trips, medians\n", '"$rounds"', calls / 2
	printf "  bare uprobe on SSL_write: %.0f ns per call\n", b - u
	printf "  old: %.0f ns added per traced call (%.2f x bare), tracer CPU %.1f ms\n",
		(o - u) / 2, (o - u) / 2 / (b - u), oc * 1000 / hz
	printf "  new: %.0f ns added per traced call (%.2f x bare), tracer CPU %.1f ms\n",
		(nw - u) / 2, (nw - u) / 2 / (b - u), nc * 1000 / hz
}'
