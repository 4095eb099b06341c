#!/usr/bin/python3
"""Load for the HTTP/2 replay benchmark: the same streamed chat completions over HTTP/1.1 or
HTTP/2 (httpx, Debian's python3-httpx and python3-h2) to one server, hypercorn over TLS, so
that the two recordings differ only in the protocol.

usage: h2_load.py h1|h2 URL CAFILE REQUESTS CONCURRENCY TOKENS

h2: CONCURRENCY streams at once on one connection; h1: CONCURRENCY connections.
"""
import asyncio
import sys

import httpx


async def main():
    proto, url, ca = sys.argv[1], sys.argv[2], sys.argv[3]
    n, conc, tokens = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    h2 = proto == "h2"
    limits = httpx.Limits(max_connections=1 if h2 else conc)
    body = {"model": f"bench-ttft0-itl0-n{tokens}", "stream": True,
            "messages": [{"role": "user", "content": "bench"}]}
    async with httpx.AsyncClient(http1=not h2, http2=h2, verify=ca, limits=limits,
                                 timeout=300) as c:
        jobs = list(range(n))

        async def worker():
            while jobs:
                jobs.pop()
                async with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
                    if r.status_code != 200 or r.http_version != ("HTTP/2" if h2 else "HTTP/1.1"):
                        raise SystemExit(f"{r.status_code} {r.http_version}")
                    async for _ in r.aiter_bytes():
                        pass
        await asyncio.gather(*(worker() for _ in range(conc)))


if __name__ == "__main__":
    asyncio.run(main())
