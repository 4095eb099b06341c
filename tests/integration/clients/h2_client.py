#!/usr/bin/python3
"""HTTP/2 clients for the HTTP/2 integration tests (Debian's python3-httpx and python3-h2).

    h2_client.py stream URL CA MODEL...        one connection (http2=True), one streamed chat
                                               completion per model, in turn
    h2_client.py concurrent URL CA N MODEL     N streams at once on one connection
    h2_client.py join URL CA                   a keep-alive connection: requests with planted
                                               header values fill the HPACK tables, then
                                               "READY" on stdout; after a line on stdin, more
                                               requests on the same connection (some reusing
                                               the planted values, some new), then one JSON
                                               line per request made after the line: its
                                               stream's path and model
    h2_client.py join-mid URL CA               a keep-alive connection in the middle of a long
                                               streamed reply: "STREAMING" on stdout once its
                                               first bytes arrived; after a line on stdin, the
                                               rest of it, then two more requests on the same
                                               connection and one JSON line each (its model)

CA "-" means plain TCP with prior knowledge (h2c). Each request prints nothing else; an
HTTP/2 connection that was not negotiated is an error (exit 1).
"""
import asyncio
import json
import sys

import httpx

PLANTED_PATH = "/v1/planted-old-A/chat/completions"
NEW_PATH = "/v1/fresh-new-B/chat/completions"


def client(url, ca, **kw):
    # the join test keeps its connection idle while tokenscope starts: no idle expiry
    kw.setdefault("limits", httpx.Limits(keepalive_expiry=600))
    if ca == "-":
        return httpx.Client(http1=False, http2=True, timeout=60, **kw)
    return httpx.Client(http2=True, verify=ca, timeout=60, **kw)


def body(model):
    return {"model": model, "stream": True,
            "messages": [{"role": "user", "content": "PROMPT-CANARY"}]}


def stream_one(c, url, path, model, headers=None):
    with c.stream("POST", url + path, json=body(model),
                  headers={"Authorization": "Bearer sk-test-SECRET-h2", **(headers or {})}) as r:
        if r.http_version != "HTTP/2":
            raise SystemExit(f"not HTTP/2: {r.http_version}")
        for _ in r.iter_bytes():
            pass


async def concurrent(url, ca, n, model):
    kw = {"http1": False} if ca == "-" else {"verify": ca}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(http2=True, timeout=120, limits=limits, **kw) as c:
        async def one(i):
            async with c.stream("POST", url + "/v1/chat/completions",
                                json=body(f"{model}{i}")) as r:
                if r.http_version != "HTTP/2":
                    raise SystemExit(f"not HTTP/2: {r.http_version}")
                async for _ in r.aiter_bytes():
                    pass
        # the first opens the connection; the rest share it
        await one(0)
        await asyncio.gather(*(one(i) for i in range(1, n + 1)))


def join(url, ca):
    with client(url, ca) as c:
        for i in range(3):  # the planted values go into both ends' tables
            stream_one(c, url, PLANTED_PATH, f"fx-ttft5-itl2-n3-jpre{i}",
                       {"x-planted": "PLANTED-OLD-VALUE"})
        print("READY", flush=True)
        sys.stdin.readline()
        made = []
        for i, path in enumerate([PLANTED_PATH, NEW_PATH, PLANTED_PATH, NEW_PATH]):
            model = f"fx-ttft20-itl5-n5-jpost{i}"
            stream_one(c, url, path, model, {"x-planted": "PLANTED-OLD-VALUE"} if i % 2 == 0
                       else {"x-fresh": "FRESH-NEW-VALUE"})
            made.append({"path": path, "model": model})
        for m in made:
            print(json.dumps(m), flush=True)


def join_mid(url, ca):
    with client(url, ca) as c:
        with c.stream("POST", url + "/v1/chat/completions",
                      json=body("fx-ttft5-itl40-n60-jmid")) as r:
            if r.http_version != "HTTP/2":
                raise SystemExit(f"not HTTP/2: {r.http_version}")
            chunks = r.iter_bytes()
            next(chunks)
            print("STREAMING", flush=True)
            sys.stdin.readline()
            for _ in chunks:
                pass
        made = []
        for i in range(2):
            model = f"fx-ttft20-itl5-n5-jmidpost{i}"
            stream_one(c, url, "/v1/chat/completions", model)
            made.append({"model": model})
        for m in made:
            print(json.dumps(m), flush=True)


def main():
    mode, url, ca = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "stream":
        with client(url, ca) as c:
            for model in sys.argv[4:]:
                stream_one(c, url, "/v1/chat/completions", model)
    elif mode == "concurrent":
        asyncio.run(concurrent(url, ca, int(sys.argv[4]), sys.argv[5]))
    elif mode == "join":
        join(url, ca)
    elif mode == "join-mid":
        join_mid(url, ca)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
