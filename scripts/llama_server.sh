#!/bin/sh
# Builds the real llama-server from the llama.cpp source that the pinned node-llama-cpp
# package carries (tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle), with no
# network, and caches it in $TS_LLAMA_CACHE (default /var/cache/tokenscope/llama-server), one
# build per node-llama-cpp version. Prints the directory that holds bin/llama-server and its
# shared libraries. About 8 minutes on 2 cores the first time; instant once cached.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
pkg="$here/tests/node/node_modules/node-llama-cpp"
bundle="$pkg/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
	echo "llama_server: $bundle is missing (run make deps)" >&2
	exit 1
fi
version=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$pkg/package.json" | head -n 1)
cache="${TS_LLAMA_CACHE:-/var/cache/tokenscope/llama-server}"
out="$cache/node-llama-cpp-$version"
if [ -x "$out/bin/llama-server" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "llama_server: building llama-server from node-llama-cpp $version's llama.cpp (once; cached in $out)" >&2
git clone -q "$bundle" "$work/src" >&2
# The UI flags keep the configure step from downloading the web UI; no OpenSSL: the tests
# serve plain HTTP.
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF \
	-DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$work/configure.log" 2>&1 ||
	{ tail -n 30 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 ||
	{ tail -n 30 "$work/build.log" >&2; exit 1; }
mkdir -p "$work/out/bin"
cp -a "$work/build/bin/llama-server" "$work/build/bin/"*.so* "$work/out/bin/"
git -C "$work/src" rev-parse HEAD >"$work/out/commit"
rm -rf "$out"
mv "$work/out" "$out"
echo "$out"
