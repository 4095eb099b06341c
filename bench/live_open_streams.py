#!/usr/bin/env python3
"""Live memory with N open streams, both ends traced (plaintext TCP, on one port).

A server process answers each streamed chat completion with its head and three SSE events,
then holds the connection open; this process opens N such streams and holds them. tokenscope
traces both (--port), and its RSS is read from /proc once every stream is open and its events
were read, then again at the peak (VmHWM).

usage: live_open_streams.py TOKENSCOPE N RINGBUF_MB (0: the default)
prints one line: "N ringbuf_mb vmrss_kib vmhwm_kib rss_file_kib rss_anon_kib clients servers",
the last two the streams tokenscope saw with all their events from each end
"""
import asyncio
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

EVENTS = 3


def raise_fd_limit(n):
    """Each process holds one end of every stream."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 1000
    if hard != resource.RLIM_INFINITY and hard < want:
        raise SystemExit(f"{n} streams need {want} open files; the limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def event(i):
    e = b"data: " + json.dumps({"object": "chat.completion.chunk", "model": "bench-model",
                                "choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}
                               ).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(e), e)


async def serve(sock):
    async def one(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length:")][0]
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(event(i) for i in range(EVENTS)))
        await writer.drain()
        await reader.read()  # held open until the client goes
        writer.close()

    server = await asyncio.start_server(one, sock=sock, backlog=4096)
    async with server:
        await server.serve_forever()


async def open_streams(port, n):
    body = json.dumps({"model": "bench-model", "stream": True,
                       "messages": [{"role": "user", "content": "x" * 200}]}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    gate = asyncio.Semaphore(200)
    held = []

    async def one():
        async with gate:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await writer.drain()
            seen = 0
            while seen < EVENTS:
                line = await reader.readline()
                seen += line.startswith(b"data: ")
            held.append(writer)

    await asyncio.gather(*(one() for _ in range(n)))
    return held


def status(pid):
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "RssFile", "RssAnon"):
            fields[k] = int(v.split()[0])
    return fields


def main():
    tokenscope, n, ring_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    raise_fd_limit(n)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    work = tempfile.mkdtemp(prefix="ts-open-")
    err = open(os.path.join(work, "stderr"), "w+")
    ring = ["-b", str(ring_mb)] if ring_mb else []  # 0: the default
    tracer = subprocess.Popen([tokenscope, "-q", "--port", str(port), *ring,
                               "-o", os.path.join(work, "out.jsonl")],
                              stdout=subprocess.DEVNULL, stderr=err)
    while True:
        err.seek(0)
        if "Hit Ctrl-C to end." in err.read():
            break
        if tracer.poll() is not None:
            raise SystemExit("tokenscope did not start")
        time.sleep(0.05)
    server = os.fork()
    if server == 0:
        asyncio.run(serve(sock))
        os._exit(0)
    sock.close()
    loop = asyncio.new_event_loop()
    held = loop.run_until_complete(open_streams(port, n))
    time.sleep(2)  # the reader drains every few ms; give the last records time
    s = status(tracer.pid)
    for w in held:
        w.close()
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=60)
    # each stream must have been seen from both ends, else the figure measures less
    roles = {"client": 0, "server": 0}
    for line in open(os.path.join(work, "out.jsonl")):
        r = json.loads(line)
        if r.get("type") == "request" and r.get("output_tokens", 0) >= EVENTS:
            roles[r["role"]] = roles.get(r["role"], 0) + 1
    print(n, ring_mb, s["VmRSS"], s["VmHWM"], s["RssFile"], s["RssAnon"],
          roles["client"], roles["server"])


if __name__ == "__main__":
    main()
