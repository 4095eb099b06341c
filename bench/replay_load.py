#!/usr/bin/env python3
"""Load for the replay benchmark: streamed requests to the fixture server in every dialect it
speaks, in turn, with no delays (the recording, not the timing, is what is measured).

usage: replay_load.py PORT CAFILE REQUESTS CONCURRENCY TOKENS
"""
import http.client
import json
import ssl
import sys
import threading

# (path, request body) per dialect; the schedule (fx-...) rides in the model name
DIALECTS = [
    ("/v1/chat/completions", {"stream_options": {"include_usage": True},
                              "messages": [{"role": "user", "content": "bench"}]}),
    ("/v1/completions", {"prompt": "bench"}),
    ("/v1/responses", {"input": "bench"}),
    ("/v1/messages", {"max_tokens": 256, "messages": [{"role": "user", "content": "bench"}]}),
    ("/v1beta/models/{model}:streamGenerateContent?alt=sse",
     {"contents": [{"parts": [{"text": "bench"}]}]}),
    ("/api/chat", {"messages": [{"role": "user", "content": "bench"}]}),
    ("/completion", {"prompt": "bench"}),
    ("/generate_stream", {"inputs": "bench"}),
]


def worker(port, ctx, jobs, lock, tokens):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
    model = f"bench-ttft0-itl0-n{tokens}-prompt512"
    while True:
        with lock:
            if not jobs:
                break
            i = jobs.pop()
        path, extra = DIALECTS[i % len(DIALECTS)]
        body = {"model": model, "stream": True, **extra}
        conn.request("POST", path.format(model=model), body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"{path}: HTTP {r.status}")
    conn.close()


def main():
    port, cafile = int(sys.argv[1]), sys.argv[2]
    n, conc, tokens = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    ctx = ssl.create_default_context(cafile=cafile)
    jobs, lock = list(range(n)), threading.Lock()
    threads = [threading.Thread(target=worker, args=(port, ctx, jobs, lock, tokens))
               for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
