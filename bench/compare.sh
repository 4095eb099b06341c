#!/bin/bash
# Two tokenscope binaries side by side on the SSL path, in one run (root): interleaved rounds of
# sslbench untraced, under an empty uprobe + uretprobe pair on SSL_write and SSL_read, and
# under each binary (the order of the two alternating from round to round). For each binary:
# the cost it adds per round trip, as a ratio to the bare pair, and its CPU time (ns, from
# schedstat), each a median over rounds with a bootstrap 95 % interval (bench/stats.py); then
# the new binary's added cost over the old one's, per round.
#
# usage: bench/compare.sh OLD_BINARY NEW_BINARY [ROUNDS] [CALLS]
# e.g.:  git worktree add /tmp/old HEAD~1 && make -C /tmp/old tokenscope &&
#        bench/compare.sh /tmp/old/tokenscope ./tokenscope
set -eu
cd "$(dirname "$0")/.."
. bench/detaching.sh
old=$1 new=$2 rounds=${3:-9} n=${4:-20000}
cert=tests/fixtures/.gen/cert.pem key=tests/fixtures/.gen/key.pem b=.output/sslbench
lib=/lib/x86_64-linux-gnu/libssl.so.3
work=$(mktemp -d /tmp/tokenscope-compare-XXXXXX)
trap 'rm -rf "$work"' EXIT
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ t += $1 } END { printf "%.0f\n", t }'; }
traced() { # binary: prints "ns per round trip" and "tracer CPU ns"
	"$1" -q -c sslbench 2>"$work/err" >/dev/null &
	local t=$! c0 v
	until grep -q "Hit Ctrl-C" "$work/err"; do sleep 0.1; done
	c0=$(cpu_ns $t)
	v=$($b ssl "$n" $cert $key)
	sleep 0.1 # drained: the reader polls every 20 ms
	echo "$v $(($(cpu_ns $t) - c0))"
	kill -INT $t
	wait $t
	while detaching; do sleep 0.05; done
}
for r in $(seq "$rounds"); do
	u=$($b ssl "$n" $cert $key)
	p=$($b pair $lib SSL_write,SSL_read $b ssl "$n" $cert $key)
	if [ $((r % 2)) = 0 ]; then
		read -r o oc <<<"$(traced "$old")"
		read -r nw nc <<<"$(traced "$new")"
	else
		read -r nw nc <<<"$(traced "$new")"
		read -r o oc <<<"$(traced "$old")"
	fi
	echo "$u $p $o" >>"$work/old"
	echo "$u $p $nw" >>"$work/new"
	echo "$oc $((2 * n)) $((2 * n * 120))" >>"$work/oldcpu"
	echo "$nc $((2 * n)) $((2 * n * 120))" >>"$work/newcpu"
	echo "$(awk -v u="$u" -v o="$o" 'BEGIN { print o - u }') $(awk -v u="$u" -v x="$nw" 'BEGIN { print x - u }')" >>"$work/added"
done
echo "$rounds rounds of $n SSL_write + SSL_read round trips"
python3 bench/stats.py cost "old" "$work/old"
python3 bench/stats.py cost "new" "$work/new"
python3 bench/stats.py cpu "old, tracer CPU" "$work/oldcpu"
python3 bench/stats.py cpu "new, tracer CPU" "$work/newcpu"
python3 bench/stats.py paired "added cost per round trip" ns "$work/added" old new
