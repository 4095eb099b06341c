#!/bin/sh
# Installs what tokenscope needs to build and test, from Debian 12 packages (and, for the
# integration tests' SDK clients, the npm registry). Used by `make demo`, `make test` and
# `make bench` (`setup.sh bench`: bpftrace too); installs only what is missing.
set -eu

need="clang llvm make gcc pkg-config bpftool libbpf-dev libelf-dev zlib1g-dev libssl-dev
libjansson-dev libcmocka-dev openssl curl python3 util-linux time
python3-fastapi python3-uvicorn python3-uvloop python3-zmq nginx liburing-dev
libmicrohttpd-dev prometheus python3-hypercorn protobuf-compiler chromium
libnghttp2-dev nghttp2-client python3-grpcio python3-grpc-tools python3-httpx python3-h2
libncurses-dev tmux golang-go libcapstone-dev binutils
qemu-system-x86 busybox-static cpio mandoc dpkg-dev debhelper lintian python3-yaml
python3-msgpack libnetfilter-conntrack-dev nftables iproute2 python3-pytest
podman runc catatonit containerd docker.io mmdebstrap"
# qemu-system-x86, busybox-static, cpio: the kernel matrix (tests/kernels) boots Debian's
# kernels with a busybox initramfs
# mandoc: make man lints tokenscope(1); make install-check renders it
# dpkg-dev, debhelper, lintian: make package-check builds, lints and installs the .deb;
# python3-yaml: make deploy-check reads the DaemonSet
# python3-msgpack: the vLLM-shaped fixture writes vLLM's engine wire (tests/fixtures/vllm)
# python3-pytest: runs the integration phases (tests/integration/run.sh)
# libnetfilter-conntrack-dev: joins through NAT (user/capture/nat.c); nftables, iproute2: the
# network namespace checks build namespaces, a veth pair and a DNAT rule
# (tests/integration/netns_checks.py)
# podman, runc, catatonit (a pod's infra container), containerd (ctr), docker.io: the real
# container runtimes whose containers tokenscope names (tests/integration/containers_checks.py;
# RUNLEVEL=1 below keeps dockerd and containerd from starting system-wide); mmdebstrap: the
# Debian 12 base the DaemonSet's image is built on (tests/integration/daemonset_checks.py)
# make bench measures a peer, bpftrace, in the same run, and counts the pipeline's instructions
# under valgrind (callgrind), a figure the host's noise does not move
[ "${1:-}" = bench ] && need="$need bpftrace valgrind"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"

missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
# node and npm may come from elsewhere (NodeSource); then the commands are what count.
if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing packages:$missing (run as root, or install them)" >&2
		exit 1
	fi
	echo "setup: installing$missing"
	apt-get update -qq
	# RUNLEVEL=1: nginx is installed for the tests to start with their own configuration;
	# its package must not start a system-wide one.
	RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		$missing >/dev/null
fi

# The official SDK clients used by the integration tests, node-llama-cpp (a prebuilt CPU
# llama.cpp: the real engine of the llama.cpp step tests), playwright-core (it drives
# Debian's chromium to open the HTML report) and the OpenTelemetry JS SDK (an instrumented
# application for the --otlp test), pinned by package-lock.json. Its
# GPU builds are optional packages (700 MB) and not installed; its install script would only
# test the prebuilt binary. `npm install` with the lock file, not `npm ci`: the lock cannot
# list the optional builds that node-llama-cpp names for other platforms and npm cannot
# resolve, and `npm ci` refuses a lock without them.
here=$(cd "$(dirname "$0")/.." && pwd)
nm="$here/tests/node/node_modules"
if [ ! -d "$nm/openai" ] || [ ! -d "$nm/@anthropic-ai/sdk" ] || [ ! -d "$nm/node-llama-cpp" ] ||
	[ ! -d "$nm/@node-llama-cpp/linux-x64" ] || [ ! -d "$nm/playwright-core" ] ||
	[ ! -d "$nm/@opentelemetry/sdk-trace-base" ] ||
	[ ! -d "$nm/@opentelemetry/exporter-trace-otlp-proto" ]; then
	echo "setup: installing test clients and engines from npm (openai, @anthropic-ai/sdk, node-llama-cpp, playwright-core, the OpenTelemetry JS SDK)"
	(cd "$here/tests/node" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
		npm install --omit=optional --no-audit --no-fund --loglevel=error)
fi

# The OpenTelemetry protos (their official .proto files, as the JS SDK's npm package ships
# them): the --otlp test's receiver decodes every export with them (tests/otlp/receiver.py).
protos="$here/tests/node/otlp-protos"
if [ ! -f "$protos/opentelemetry/proto/collector/trace/v1/trace_service.proto" ]; then
	echo "setup: fetching the OpenTelemetry protos from npm (@opentelemetry/otlp-grpc-exporter-base)"
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack --silent @opentelemetry/otlp-grpc-exporter-base@0.36.1 >/dev/null &&
		tar xzf opentelemetry-otlp-grpc-exporter-base-0.36.1.tgz)
	mkdir -p "$protos"
	cp -r "$tmp/package/build/protos/opentelemetry" "$protos/"
	rm -rf "$tmp"
fi
