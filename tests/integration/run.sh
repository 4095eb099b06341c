#!/bin/sh
# Integration tests with real eBPF probes, run by pytest (Debian's python3-pytest):
#   run.sh               every phase, in order
#   run.sh --only PHASE  one (tls, gpu, plaintext, ... : run.py's PHASES)
# They need root (CAP_BPF + CAP_PERFMON): without it they fail, never skip.
set -eu
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "integration tests load eBPF programs and must run as root" >&2
	exit 1
fi
case="tests/integration/test_integration.py"
if [ "${1:-}" = --only ] && [ -n "${2:-}" ]; then
	case="$case::test_phase[$2]"
elif [ $# -gt 0 ]; then
	echo "usage: $0 [--only PHASE]" >&2
	exit 2
fi
exec /usr/bin/python3 -m pytest -p no:cacheprovider -s -q -o console_output_style=classic \
	--rootdir tests/integration "$case"
