#!/bin/sh
# make install into a scratch DESTDIR, then what it wrote: the binary (it runs and says its
# version), tokenscope(1) (mandoc renders it, its options those of --help), and the systemd
# unit (ExecStart at the installed binary; systemd-analyze verify, where systemd is
# installed, against that binary). Run by `make install-check`, part of `make test`.
set -eu
cd "$(dirname "$0")/.."
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "install: FAIL: $*"; exit 1; }
make -s install DESTDIR="$dest" PREFIX=/usr >/dev/null
bin=$dest/usr/bin/tokenscope
man=$dest/usr/share/man/man1/tokenscope.1
unit=$dest/usr/lib/systemd/system/tokenscope.service
[ -x "$bin" ] || fail "no executable $bin"
"$bin" --version | grep -q '^tokenscope ' || fail "the installed binary does not run"
[ -f "$man" ] || fail "no man page"
# rendered as a terminal shows it, bold and underline (overstrikes) taken out
page=$(mandoc -T ascii "$man" | sed 's/.\x08//g')
for opt in $(./tokenscope --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	printf '%s\n' "$page" | grep -q -- "$opt" || fail "the man page lacks $opt, which --help lists"
done
grep -q "^ExecStart=/usr/bin/tokenscope " "$unit" || fail "the unit's ExecStart is not the installed binary"
[ "$(stat -c %a "$unit")" = 644 ] || fail "the unit is not mode 0644"
if command -v systemd-analyze >/dev/null 2>&1; then
	# verify checks that ExecStart's binary exists: this copy names the installed one (and the
	# man page it documents is in DESTDIR, not on man's path: --man=no)
	sed "s|^ExecStart=/usr/bin/|ExecStart=$dest/usr/bin/|" "$unit" >"$dest/tokenscope.service"
	out=$(systemd-analyze verify --man=no "$dest/tokenscope.service" 2>&1) ||
		fail "systemd-analyze verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
	verified="systemd-analyze verify clean"
else
	verified="systemd-analyze not installed: the unit not verified"
fi
echo "install: binary, tokenscope(1) with every option of --help, and the unit in DESTDIR; $verified"
