#!/usr/bin/env python3
"""Model names chosen by clients: N streamed requests on one keep-alive plaintext connection,
each naming its own model ("names") or all the same one ("one", the yardstick), against a
server in the same process; tokenscope traces both ends (--port). What the names cost: the
tracer's peak RSS and CPU, the records it wrote by 5 s after the load, how long SIGINT took
to end it, and its summary's lines.

usage: model_names.py TOKENSCOPE N names|one
prints "hwm_kib H cpu_ticks C records R of W exit_s E summary_lines L"
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(b):
    return b"%x\r\n%s\r\n" % (len(b), b)


BODY = (chunk(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n') +
        chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


def serve(srv, n):
    s, _ = srv.accept()
    f = s.makefile("rb")
    for _ in range(n):
        length = 0
        while True:
            line = f.readline()
            if line.lower().startswith(b"content-length"):
                length = int(line.split(b":")[1])
            if line == b"\r\n":
                break
        f.read(length)
        s.sendall(HEAD + BODY)
    s.close()


def proc_stat(pid):
    hwm = [int(x.split()[1]) for x in open(f"/proc/{pid}/status") if x.startswith("VmHWM")][0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return hwm, int(fields[11]) + int(fields[12])


def main():
    tokenscope, n, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    work = tempfile.mkdtemp(prefix="tokenscope-names-")
    out = os.path.join(work, "out.jsonl")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    err = open(os.path.join(work, "err"), "w+")
    summary = open(os.path.join(work, "summary"), "w+")
    p = subprocess.Popen([tokenscope, "-q", "--port", str(port), "-o", out], stdout=summary,
                         stderr=err)
    while "Hit Ctrl-C" not in open(err.name).read():
        if p.poll() is not None:
            raise SystemExit(open(err.name).read())
        time.sleep(0.05)
    t = threading.Thread(target=serve, args=(srv, n))
    t.start()
    c = socket.create_connection(("127.0.0.1", port))
    for i in range(n):
        body = json.dumps({"model": f"client-named-{i}" if how == "names" else "one-model",
                           "stream": True}).encode()
        c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Length: %d"
                  b"\r\n\r\n" % len(body) + body)
        got = b""
        while not got.endswith(b"0\r\n\r\n"):
            got += c.recv(65536)
    c.close()
    t.join()
    time.sleep(5)
    records = sum(1 for line in open(out) if '"type":"request"' in line)
    hwm, cpu = proc_stat(p.pid)
    start = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(timeout=600)
    took = time.monotonic() - start
    summary.seek(0)
    print(f"hwm_kib {hwm} cpu_ticks {cpu} records {records} of {2 * n} exit_s {took:.2f} "
          f"summary_lines {len(summary.readlines())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
