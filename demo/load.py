#!/usr/bin/env python3
"""Demo client load: concurrent streamed requests to the bundled fixture server, with a
bimodal TTFT (prefix-cache hits are fast, misses pay for the prompt) and a mix of APIs.

usage: load.py PORT CAFILE [REQUESTS] [CONCURRENCY]
"""
import http.client
import json
import random
import ssl
import sys
import threading


def worker(port, ctx, jobs, lock):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
    while True:
        with lock:
            if not jobs:
                break
            path, model, schedule = jobs.pop()
        body = {"model": model, "stream": True, "max_tokens": 256,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "demo prompt"}]}
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json",
                              "Authorization": "Bearer sk-demo-not-a-real-key",
                              "X-Fixture-Schedule": schedule})
        conn.getresponse().read()
    conn.close()


def main():
    port, cafile = int(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 24
    conc = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    rnd = random.Random(7)
    jobs = []
    for i in range(n):
        hit = rnd.random() < 0.5
        prompt = rnd.choice([512, 2048, 8192])
        ttft = 30 + rnd.randint(0, 10) if hit else 120 + prompt // 64
        itl = rnd.choice([8, 12])
        path, model = rnd.choice([("/v1/chat/completions", "llama-3.1-8b-instruct"),
                                  ("/v1/messages", "claude-demo")])
        schedule = (f"fx-ttft{ttft}-itl{itl}-n{rnd.randint(8, 24)}-prompt{prompt}"
                    f"{'-cache1' if hit else ''}")
        jobs.append((path, model, schedule))
    ctx = ssl.create_default_context(cafile=cafile)
    lock = threading.Lock()
    threads = [threading.Thread(target=worker, args=(port, ctx, jobs, lock)) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
