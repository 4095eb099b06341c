#!/bin/sh
# deploy/prometheus/tokenscope-rules.yaml: promtool checks the rules and runs their unit tests
# (tokenscope-rules.test.yaml: one server per cause, each alert naming its own alone); then
# the same tests must fail on rules whose capacity alert compares the wrong way round, so that
# a passing run means the tests can tell.
set -eu
cd "$(dirname "$0")/../.."
promtool check rules deploy/prometheus/tokenscope-rules.yaml >/dev/null
promtool test rules tests/prometheus/tokenscope-rules.test.yaml >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/deploy/prometheus" "$tmp/tests/prometheus"
sed 's/rise1h > tokenscope:ttft_prefill/rise1h < tokenscope:ttft_prefill/' \
	deploy/prometheus/tokenscope-rules.yaml >"$tmp/deploy/prometheus/tokenscope-rules.yaml"
cmp -s deploy/prometheus/tokenscope-rules.yaml "$tmp/deploy/prometheus/tokenscope-rules.yaml" &&
	{ echo "prometheus: self-test: the capacity alert's comparison was not found" >&2; exit 1; }
cp tests/prometheus/tokenscope-rules.test.yaml "$tmp/tests/prometheus/"
if promtool test rules "$tmp/tests/prometheus/tokenscope-rules.test.yaml" >/dev/null 2>&1; then
	echo "prometheus: self-test: the rules' tests pass on a wrong capacity alert" >&2
	exit 1
fi
echo "prometheus: deploy/prometheus's rules pass promtool check and test rules; self-test: a wrong alert fails them"
