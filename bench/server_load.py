"""A streaming load on a real server, for `make bench` (bench/run.sh's servers section): N
OpenAI chat completions streamed over SSE, C at a time, each read to its end; prints one line,

    tokens/s requests/s p50_ms p99_ms tokens

tokens counted as the SSE events that carried content; a request's time from its send to its
last byte. https URLs are verified against CAFILE.

    server_load.py URL MODEL N C MAX_TOKENS [CAFILE]
"""
import http.client
import json
import ssl
import sys
import threading
import time
import urllib.parse


def one(url, body, ctx):
    u = urllib.parse.urlsplit(url)
    c = (http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=120)
         if u.scheme == "https" else http.client.HTTPConnection(u.hostname, u.port, timeout=120))
    t0 = time.monotonic()
    c.request("POST", u.path, body=body, headers={"content-type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"server_load: HTTP {r.status}: {r.read()[:200]!r}")
    tokens = 0
    for line in r:
        if line.startswith(b"data: {"):
            d = json.loads(line[6:])
            for ch in d.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    tokens += 1
    c.close()
    return time.monotonic() - t0, tokens


def main():
    url, model, n, conc, max_tokens = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    ctx = ssl.create_default_context(cafile=sys.argv[6]) if len(sys.argv) > 6 else None
    body = json.dumps({"model": model, "stream": True, "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0,
                       "messages": [{"role": "user", "content": "Count the stars, slowly."}]})
    lock, times, total = threading.Lock(), [], [0]
    left = [n]

    def worker():
        while True:
            with lock:
                if not left[0]:
                    return
                left[0] -= 1
            took, tokens = one(url, body, ctx)
            with lock:
                times.append(took)
                total[0] += tokens

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if len(times) != n:
        raise SystemExit(f"server_load: {len(times)} of {n} requests done")
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] * 1e3  # noqa: E731
    print(f"{total[0] / wall:.3f} {n / wall:.3f} {p(0.5):.3f} {p(0.99):.3f} {total[0]}")


if __name__ == "__main__":
    main()
