#!/usr/bin/env python3
"""A write that blocks until its reader reads, for the time a write is stamped with.
usage: slow_reader.py PORT DELAY_MS MODEL

Server and client in one process over loopback, both with small socket buffers. The server
answers the client's request (openai.chat, streamed) with one write: the response head and
three token events of 20 KB each, far more than the two buffers hold, so the write blocks
until the client reads, which it does DELAY_MS after its request went out. Prints one JSON
line: the server's write's begin and return (CLOCK_MONOTONIC ns), the delay."""
import json
import socket
import sys
import threading
import time

from tcp_edges import HEAD, events, read_request

BUF = 4096  # each socket's buffer (the kernel doubles it): the write cannot fit


def serve(srv, out):
    s, _ = srv.accept()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUF)
    model = read_request(s)
    body = HEAD + b"".join(events(model, 3, 20000))
    out["write_begin_ns"] = time.monotonic_ns()
    s.sendall(body)  # one write(2): a blocking socket's send waits for room, all of it
    out["write_end_ns"] = time.monotonic_ns()
    s.close()


def main():
    port, delay_ms, model = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(1)
    out = {"delay_ns": delay_ms * 1_000_000}
    t = threading.Thread(target=serve, args=(srv, out))
    t.start()
    body = json.dumps({"model": model, "stream": True,
                       "messages": [{"role": "user", "content": "PROMPT-CANARY slow"}]}).encode()
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUF)  # before connect: the window
    c.connect(("127.0.0.1", port))
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    time.sleep(delay_ms / 1000)
    got = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        got += d
    c.close()
    t.join()
    out["done"] = b"[DONE]" in got
    print(json.dumps(out), flush=True)
    return 0 if out["done"] else 1


if __name__ == "__main__":
    sys.exit(main())
