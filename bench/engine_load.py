#!/usr/bin/env python3
"""One run of the vLLM-shaped fixture for `make bench`: its API server (uvicorn, plaintext
HTTP) and engine core on the stand-in GPU, 96 streamed requests, 32 at a time
(tests/fixtures/vllm/load.py). Prints one line: generated tokens per second and requests per
second over the load's wall time, and the median step time on the host (first launch to
the host seeing the step's tokens), in ms, from the engine's own clock (its ground truth).

usage: engine_load.py WORKDIR
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import time

REQUESTS, CONCURRENCY = 96, 32
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
fixture = os.path.join(root, "tests", "fixtures", "vllm")
work = sys.argv[1]
os.makedirs(work, exist_ok=True)
truth = os.path.join(work, "truth.jsonl")
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
api = subprocess.Popen(["/usr/bin/python3", os.path.join(fixture, "api_server.py"), "--port",
                        str(port), "--truth", truth, "--mode", "sync"], env=env,
                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "api.err"), "w"))
deadline = time.monotonic() + 60
while True:  # ready: the port answers (uvicorn listens once the engine is up)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        if api.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("engine_load.py: the API server did not start")
        time.sleep(0.05)
t0 = time.monotonic()
load = subprocess.run(["/usr/bin/python3", os.path.join(fixture, "load.py"),
                       f"http://127.0.0.1:{port}", str(REQUESTS), str(CONCURRENCY)],
                      capture_output=True, text=True, timeout=600)
wall = time.monotonic() - t0
api.send_signal(2)
api.wait(timeout=60)
res = json.loads(load.stdout.strip().splitlines()[-1]) if load.returncode == 0 else {}
if res.get("done") != REQUESTS:
    raise SystemExit(f"engine_load.py: {res} of {REQUESTS} streams done: {load.stderr[-300:]}")
tokens = sum(json.loads(line)["max_tokens"] for line in open(truth + ".engine")
             if '"type": "request"' in line)
steps = [json.loads(line) for line in open(truth + ".engine") if '"type": "step"' in line]
step_ms = statistics.median((s["host_seen_ns"] - s["first_launch_ns"]) / 1e6 for s in steps)
print(f"{tokens / wall:.1f} {REQUESTS / wall:.3f} {step_ms:.3f}")
