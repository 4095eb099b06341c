#!/bin/sh
# The kernel matrix (tests/kernels/matrix.py): guests under QEMU that load eBPF, and the same
# workload traced on this host; root, never skipped.
set -eu
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
	echo "the kernel matrix loads eBPF programs (here and in its guests) and must run as root" >&2
	exit 1
fi
exec python3 tests/kernels/matrix.py "$@"
