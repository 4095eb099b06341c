#!/usr/bin/env python3
"""A fork-per-request client (cron jobs, CLI calls, a shell loop of curl): N processes, one
streamed chat completion each over plaintext HTTP, against one server; tokenscope traces both
ends (--port). Its RSS and CPU are read from /proc every N/10 requests: with per-process state
let go as processes exit, both stay flat however many processes came before.

usage: fork_clients.py TOKENSCOPE N [one]
("one": the same N requests from this one process, no fork: what the requests cost by
themselves, beside what N processes add)
prints one line per tenth: "batch requests vmrss_kib cpu_ticks", then
"records R summary_lines L pids P" (request records written, summary lines of requests, and
the pid count the summary gives)
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json"
           b"\r\nContent-Length: 40\r\n\r\n" + b'{"model":"bench-fork","stream":true}    ')


def event(i):
    e = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}
                               ).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(e), e)


REPLY = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
         b"Connection: close\r\n\r\n" + b"".join(event(i) for i in range(3)) +
         b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))


def serve(lsock):
    while True:
        c, _ = lsock.accept()
        buf = b""
        while len(buf) < len(REQUEST):
            d = c.recv(4096)
            if not d:
                break
            buf += d
        c.sendall(REPLY)
        c.close()


def proc_figures(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    with open(f"/proc/{pid}/status") as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    return rss, ticks


def main():
    tokenscope, n, one = sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["one"]
    work = tempfile.mkdtemp(prefix="ts-fork-")
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(512)
    port = lsock.getsockname()[1]
    server = os.fork()
    if not server:
        serve(lsock)
    out = os.path.join(work, "out.jsonl")
    err = open(os.path.join(work, "err"), "w+")
    summary = open(os.path.join(work, "summary"), "w+")
    tracer = subprocess.Popen([tokenscope, "-q", "--port", str(port), "-o", out],
                              stdout=summary, stderr=err)
    while "Hit Ctrl-C to end." not in open(err.name).read():
        if tracer.poll() is not None:
            raise SystemExit("tokenscope did not start: " + open(err.name).read())
        time.sleep(0.05)
    batch = max(n // 10, 1)
    last_ticks = proc_figures(tracer.pid)[1]
    for i in range(n):
        child = 0 if one else os.fork()
        if not child:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(REQUEST)
            while s.recv(65536):
                pass
            if not one:
                os._exit(0)
            s.close()
        else:
            os.waitpid(child, 0)
        if (i + 1) % batch == 0:
            rss, ticks = proc_figures(tracer.pid)
            print(f"{(i + 1) // batch} {i + 1} {rss} {ticks - last_ticks}", flush=True)
            last_ticks = ticks
    deadline = time.monotonic() + 60  # until every request's two records are written
    while time.monotonic() < deadline and sum(1 for _ in open(out)) < 2 * n:
        time.sleep(0.1)
    tracer.send_signal(signal.SIGINT)
    tracer.wait()
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    records = sum(1 for _ in open(out))
    text = open(summary.name).read()
    lines = [l for l in text.splitlines() if " model=" in l]
    pids = re.findall(r"\[(\d+) pids\] client", text)
    print(f"records {records} summary_lines {len(lines)} pids {pids[0] if pids else 1}")


if __name__ == "__main__":
    main()
