#!/usr/bin/env python3
"""Edge cases of plaintext TCP capture, server and client in one process over loopback.
usage: tcp_edges.py MODE COUNT PREFIX

Each request asks for model PREFIX-<i> (openai.chat, streamed); the server answers with
three token events and usage, "Connection: close", then closes: its accepted sockets reuse
the same fd number every time. The server always peeks (MSG_PEEK) at a request before
reading it, and the client sends each request in two writes 5 ms apart (partial reads).
MODE says how the reply's body, or the request, travels:
  write     one write per event (the plain case: the fd-reuse test)
  sendfile  the server sends the body with sendfile(2) from a file
  splice    the server sends the body with splice(2) from a pipe
  writev    the client sends its request with one sendmsg of 200 iovecs of a few bytes and
            reads the reply with readv into 16 buffers of 64 bytes
  bigwritev the same with a 400 KB request body in 1000 iovecs: past the capture budget
  short     the server's socket is non-blocking with a small send buffer and the client reads
            slowly: 300 events of 1 KB go out in short writes between EAGAINs
Prints one JSON line: the models the client completed."""
import json
import os
import select
import socket
import sys
import tempfile
import threading
import time

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Connection: close\r\n\r\n")


def events(model, n=3, pad=0):
    out = []
    for i in range(n):
        out.append(b"data: " + json.dumps({"object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": {"content": f"tok{i}_0" + "x" * pad},
                                "finish_reason": None}]}).encode() + b"\n\n")
    out.append(b"data: " + json.dumps({"object": "chat.completion.chunk", "model": model,
               "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}}).encode()
               + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def read_request(s):
    peeked = s.recv(64, socket.MSG_PEEK)  # what a server sniffing the protocol does
    assert peeked
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int([h.split(b":")[1] for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += s.recv(4096)
    return json.loads(body)["model"]


def serve(srv, mode, count):
    for _ in range(count):
        s, _ = srv.accept()
        model = read_request(s)
        s.sendall(HEAD)
        body = events(model, *((300, 1000) if mode == "short" else ()))
        if mode == "short":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            s.setblocking(False)
            data, short = b"".join(body), 0
            while data:
                try:
                    n = s.send(data)
                    short += n < len(data)
                    data = data[n:]
                except BlockingIOError:  # EAGAIN: wait until the reader makes room
                    select.select([], [s], [], 5)
            s.setblocking(True)
            assert short > 0, "no short write happened"
        elif mode == "sendfile":
            with tempfile.TemporaryFile() as f:
                f.write(b"".join(body))
                f.flush()
                os.sendfile(s.fileno(), f.fileno(), 0, f.tell())
        elif mode == "splice":
            r, w = os.pipe()
            os.write(w, b"".join(body))
            os.close(w)
            left = len(b"".join(body))
            while left:
                left -= os.splice(r, s.fileno(), left)
            os.close(r)
        else:
            for ev in body:
                s.sendall(ev)
                time.sleep(0.003)
        s.close()


def request(port, model, mode):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": "PROMPT-CANARY edge"}]}
    if mode == "bigwritev":
        body["pad"] = "p" * 400_000
    body = json.dumps(body).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    c = socket.create_connection(("127.0.0.1", port))
    if mode in ("writev", "bigwritev"):
        size = -(-len(req) // (200 if mode == "writev" else 1000))
        parts = [req[i:i + size] for i in range(0, len(req), size)]
        sent = c.sendmsg(parts)
        if sent < len(req):
            c.sendall(req[sent:])
    else:
        c.sendall(req[:40])
        time.sleep(0.005)
        c.sendall(req[40:])
    got = b""
    while True:
        if mode == "writev":
            bufs = [bytearray(64) for _ in range(16)]
            n = os.readv(c.fileno(), bufs)
            d = b"".join(bufs)[:n]
        else:
            d = c.recv(4096 if mode == "short" else 65536)
        if not d:
            break
        got += d
        if mode == "short":
            time.sleep(0.0005)
    c.close()
    return b"[DONE]" in got


def main():
    mode, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    t = threading.Thread(target=serve, args=(srv, mode, count))
    t.start()
    done = []
    for i in range(count):
        model = f"{prefix}-{i}"
        if request(srv.getsockname()[1], model, mode):
            done.append(model)
    t.join()
    print(json.dumps({"done": done}), flush=True)
    return 0 if len(done) == count else 1


if __name__ == "__main__":
    sys.exit(main())
