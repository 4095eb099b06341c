#!/bin/sh
# Integration tests with real eBPF probes. They need root (CAP_BPF + CAP_PERFMON): without it
# they fail, never skip.
set -eu
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "integration tests load eBPF programs and must run as root" >&2
	exit 1
fi
exec python3 tests/integration/run.py "$@"
