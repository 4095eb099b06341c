#!/usr/bin/env python3
"""A quiet stream through a flood of sockets: plaintext capture's socket table must not lose
it.
usage: quiet_flood.py MODEL PROCESSES [HOLD]

A server and a client thread stream one chat completion over loopback TCP: its first token,
then nothing while the main thread forks PROCESSES children, one after another, each of which
opens 64 Unix socket pairs, moves bytes both ways on each (half of the children an HTTP
request line, which capture takes, half other bytes, which it ignores) and exits without
closing any. With HOLD, one more child then opens HOLD pairs that carry HTTP and holds them
open until the stream has ended: more captured sockets than the table has room for. Then the
stream's last two tokens and [DONE]. Prints one JSON line: the sockets the flood moved bytes
on, and whether the client read the whole reply."""
import json
import os
import signal
import socket
import sys
import threading
import time

PAIRS = 64

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Connection: close\r\n\r\n")


def event(model, i):
    return b"data: " + json.dumps({"object": "chat.completion.chunk", "model": model,
                                   "choices": [{"index": 0, "delta": {"content": f"tok{i}_0"},
                                                "finish_reason": None}]}).encode() + b"\n\n"


def serve(srv, model, flooded):
    s, _ = srv.accept()
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    s.sendall(HEAD + event(model, 0))
    flooded.wait()
    s.sendall(event(model, 1))
    s.sendall(event(model, 2) + b"data: [DONE]\n\n")
    s.close()


def flood(processes):
    for n in range(processes):
        pid = os.fork()
        if pid == 0:
            first = b"GET /x HTTP/1.1\r\n" if n % 2 else b"hello, not http"
            keep = []
            for _ in range(PAIRS):
                a, b = socket.socketpair()
                a.send(first)
                b.recv(64)
                keep += [a, b]
            os._exit(0)  # no close: the kernel closes them
        os.waitpid(pid, 0)
    return processes * PAIRS * 2


HOLD_PER_PROCESS = 8000  # pairs a holder opens: within a process's 20 000 fds here
HOLD_S = 2.5  # how long they are held: the tracer reads its counters each second


def hold(pairs):
    """Children holding pairs socket pairs that carry HTTP, open; their pids once they are."""
    pids = []
    for first in range(0, pairs, HOLD_PER_PROCESS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the stream's sockets are not its to hold open
            os.closerange(3, w)
            os.closerange(w + 1, 1 << 16)
            keep = []
            for _ in range(min(HOLD_PER_PROCESS, pairs - first)):
                a, b = socket.socketpair()
                a.send(b"GET /held HTTP/1.1\r\n")
                b.recv(64)
                keep += [a, b]
            os.write(w, b"x")
            signal.pause()
            os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"x", "a holder failed"
        os.close(r)
        pids.append(pid)
    return pids


def main():
    model, processes = sys.argv[1], int(sys.argv[2])
    held = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    flooded = threading.Event()
    t = threading.Thread(target=serve, args=(srv, model, flooded))
    t.start()
    c = socket.create_connection(srv.getsockname())
    body = json.dumps({"model": model, "stream": True,
                       "messages": [{"role": "user", "content": "PROMPT-CANARY quiet"}]}).encode()
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    got = c.recv(65536)
    while b"tok0_0" not in got:
        got += c.recv(65536)
    sockets = flood(processes)
    holders = hold(held)
    sockets += 2 * held
    if holders:
        time.sleep(HOLD_S)
    flooded.set()
    while True:
        d = c.recv(65536)
        if not d:
            break
        got += d
    t.join()
    for pid in holders:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps({"flood_sockets": sockets, "whole": b"[DONE]" in got}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
