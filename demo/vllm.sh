# Sourced by the demos: start_vllm WORK starts the vLLM-shaped service (its API server in
# front of a batching engine on the stand-in GPU, chunked prefill, async scheduling) on a
# free port, and returns once it accepts connections; sets vport and api (its pid).
start_vllm() {
	vport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	VGPU_LIB=$PWD/.output/gpu/libcuda.so.1 /usr/bin/python3 tests/fixtures/vllm/api_server.py \
		--port "$vport" --truth "$1/truth.jsonl" --mode async --chunk 2048 >/dev/null 2>&1 &
	api=$!
	until python3 -c "import socket; socket.create_connection(('127.0.0.1', $vport), 1)" 2>/dev/null; do
		if ! kill -0 "$api" 2>/dev/null; then
			echo "demo: the vLLM-shaped service did not start" >&2
			exit 1
		fi
		sleep 0.1
	done
}
