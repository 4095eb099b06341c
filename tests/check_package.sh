#!/bin/sh
# The Debian package (debian/), as an operator gets it: built with dpkg-buildpackage from a
# copy of the tree (its .deb lands beside the copy, not beside the checkout), linted with
# lintian (an error or a warning fails), installed with dpkg -i, run (its version, then a
# 2-second live trace that must start every family and end 0), removed with dpkg -r; a
# failing step still removes it. The .deb stays in .output/package/ for `make deploy-run`. Needs root (dpkg, the trace): `make package-check`, part of
# `make test`.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "package: installs a package and loads eBPF programs: run it as root" >&2
	exit 1
fi
work=$(mktemp -d)
cleanup() {
	dpkg -s tokenscope >/dev/null 2>&1 && dpkg -r tokenscope >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package: FAIL: $*"; exit 1; }
# what git holds (and, in a working copy, what it does not ignore), without the builds
mkdir "$work/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/src"
(cd "$work/src" && dpkg-buildpackage -b -us -uc -jauto) >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log"; fail "dpkg-buildpackage"; }
deb=$(ls "$work"/tokenscope_*_amd64.deb)
# kept for the image that deploy-run builds from it (tests/check_deploy_run.sh)
mkdir -p .output/package && rm -f .output/package/tokenscope_*_amd64.deb && cp "$deb" .output/package/
rc=0
lint=$(lintian --fail-on error,warning "$work"/tokenscope_*_amd64.changes 2>&1) || rc=$?
lint=$(printf '%s\n' "$lint" | grep -v '^running with root' || true)
[ "$rc" = 0 ] && [ -z "$lint" ] || fail "lintian ($rc): $lint"
dpkg -s tokenscope >/dev/null 2>&1 && dpkg -r tokenscope >/dev/null # one a failed run left
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
/usr/bin/tokenscope --version | grep -q '^tokenscope ' || fail "the installed binary does not run"
[ -f /usr/share/man/man1/tokenscope.1.gz ] && [ -f /usr/lib/systemd/system/tokenscope.service ] ||
	fail "the man page or the unit is not installed"
/usr/bin/tokenscope -q -d 2 >"$work/trace.out" 2>"$work/trace.err" ||
	{ cat "$work/trace.err"; fail "a live trace with the installed binary"; }
grep -q "Hit Ctrl-C to end" "$work/trace.err" || fail "the installed binary's trace did not start"
grep -q "=== tokenscope summary ===" "$work/trace.out" || fail "the installed binary wrote no summary"
dpkg -r tokenscope >/dev/null 2>&1 || fail "dpkg -r"
[ ! -e /usr/bin/tokenscope ] || fail "dpkg -r left /usr/bin/tokenscope"
echo "package: $(basename "$deb") built, lintian clean, installed, traced 2 s, removed"
