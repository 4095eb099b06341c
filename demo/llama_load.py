#!/usr/bin/env python3
"""The demo's load on the llama.cpp server: N streamed chat completions, C at a time, prompts
of varied length.   llama_load.py PORT N C"""
import http.client
import json
import random
import sys
import threading

port, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
words = "the model stream reply latency prompt cache engine step batch hello world".split()
rnd = random.Random(7)
gate = threading.Semaphore(c)


def one(i):
    with gate:
        body = {"model": "tiny", "stream": True, "max_tokens": rnd.randint(8, 32),
                "messages": [{"role": "user",
                              "content": " ".join(rnd.choice(words)
                                                  for _ in range(rnd.randint(5, 120)))}]}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"content-type": "application/json"})
        conn.getresponse().read()
        conn.close()


threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
