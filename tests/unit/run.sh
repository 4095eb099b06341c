#!/bin/sh
# Runs each cmocka unit-test binary; no root needed. Exits non-zero if any test fails.
failed=0
for t in "$@"; do
	"$t" || failed=1
done
exit $failed
