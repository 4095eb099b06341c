#!/usr/bin/env python3
"""A plain-HTTP Python client (http.client over a TCP socket), several requests on one
keep-alive connection. usage: plain_client.py PORT DIALECT=MODEL...

Prints one JSON line per request with its own CLOCK_MONOTONIC readings: start_ns just before
the request was sent, first_ns when its code first saw generated text."""
import http.client
import json
import sys
import time

PATHS = {"openai.chat": "/v1/chat/completions", "anthropic.messages": "/v1/messages",
         "ollama": "/api/chat", "openai.responses": "/v1/responses"}


def main():
    port = int(sys.argv[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for spec in sys.argv[2:]:
        dialect, model = spec.split("=", 1)
        body = {"model": model, "stream": True, "max_tokens": 64,
                "messages": [{"role": "user", "content": "PROMPT-CANARY plain"}]}
        if dialect == "openai.chat":
            body["stream_options"] = {"include_usage": True}
        start = time.monotonic_ns()
        conn.request("POST", PATHS[dialect], json.dumps(body),
                     {"Content-Type": "application/json", "x-api-key": "sk-test-SECRET-plain"})
        resp = conn.getresponse()
        first = None
        while True:
            line = resp.readline()
            if not line:
                break
            if first is None and b"tok0_0" in line:
                first = time.monotonic_ns()
        print(json.dumps({"model": model, "start_ns": start, "first_ns": first}), flush=True)
    conn.close()


if __name__ == "__main__":
    main()
