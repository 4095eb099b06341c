#!/bin/sh
# Regenerate the pinned vmlinux.h from the running kernel's BTF.
# The pinned copy lets the BPF programs build on machines without bpftool or BTF;
# CO-RE relocations make one build run on other kernels.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
btf=${1:-/sys/kernel/btf/vmlinux}
out="$here/x86/vmlinux.h"
bpftool btf dump file "$btf" format c > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out from $btf ($(uname -r))"
