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
  tiny      the client's first write of each request is 1, 2 or 3 bytes (by turns), 20 ms
            before the rest: too few to tell what the socket carries, at either end
  forkclose the server forks a child between its reply's events; the child closes every fd it
            inherited (3 to 1023) and exits: the server's socket stays open in the server
  vectored  the server sends its reply's events by turns with write, pwritev2 (offset -1) and
            sendmmsg of one message, and the client reads with preadv2: every byte seen
  mmsg      the server sends two of its reply's events in one sendmmsg of two messages: a
            call whose bytes the probes count but do not capture
  pipefd    the client first writes to a pipe on the fd number its socket then gets (a file
            its thread's writes were found not to capture, remembered by that number), then
            sends a 200 KB request in one write, through small buffers to a server that reads
            it 200 ms late: the write blocks until then, and it began at sent_ns
Prints one JSON line: the models the client completed, and for pipefd each request's sent_ns
(CLOCK_MONOTONIC just before its write) and returned_ns (just after)."""
import ctypes
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
    """The request's model; None for a connection closed before a byte (not the client's: a
    process probing ports may reach the listening one)."""
    peeked = s.recv(64, socket.MSG_PEEK)  # what a server sniffing the protocol does
    if not peeked:
        return None
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int([h.split(b":")[1] for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += s.recv(4096)
    return json.loads(body)["model"]


LIBC = ctypes.CDLL(None, use_errno=True)


class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(IOVec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class MMsgHdr(ctypes.Structure):  # struct mmsghdr
    _fields_ = [("hdr", MsgHdr), ("msg_len", ctypes.c_uint32)]


def iovecs(bufs):
    keep = [ctypes.create_string_buffer(b, len(b)) for b in bufs]
    return keep, (IOVec * len(bufs))(*[IOVec(ctypes.addressof(k), len(b))
                                       for k, b in zip(keep, bufs)])


def sendmmsg(s, messages):
    """One sendmmsg(2) call, a message a bytes object; returns the messages sent."""
    keep, vecs = [], []
    for m in messages:
        k, v = iovecs([m])
        keep.append(k)
        vecs.append(v)
    hdrs = (MMsgHdr * len(messages))(*[MMsgHdr(MsgHdr(None, 0, v, 1, None, 0, 0), 0)
                                       for v in vecs])
    n = LIBC.sendmmsg(s.fileno(), hdrs, len(messages), 0)
    assert n == len(messages) and all(h.msg_len == len(m) for h, m in zip(hdrs, messages)), \
        f"sendmmsg: {n} {os.strerror(ctypes.get_errno())}"


def pwritev2(s, data):
    keep, vec = iovecs([data])
    n = LIBC.pwritev2(s.fileno(), vec, 1, ctypes.c_long(-1), 0)
    assert n == len(data), f"pwritev2: {n} {os.strerror(ctypes.get_errno())}"


def preadv2(c, size):
    buf = ctypes.create_string_buffer(size)
    vec = (IOVec * 1)(IOVec(ctypes.addressof(buf), size))
    n = LIBC.preadv2(c.fileno(), vec, 1, ctypes.c_long(-1), 0)
    assert n >= 0, f"preadv2: {os.strerror(ctypes.get_errno())}"
    return buf.raw[:n]


def serve(srv, mode, count):
    served = 0
    while served < count:
        s, peer = srv.accept()
        if mode == "pipefd":
            time.sleep(PIPEFD_LATE)
        model = read_request(s)
        if model is None:
            print(f"tcp_edges: a connection closed before a byte, from {peer}", file=sys.stderr)
            s.close()
            continue
        served += 1
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
        elif mode == "mmsg":  # the first two events in one call of two messages
            sendmmsg(s, body[:2])
            for ev in body[2:]:
                time.sleep(0.003)
                s.sendall(ev)
        else:
            for i, ev in enumerate(body):
                if mode == "vectored" and i % 3:
                    (pwritev2 if i % 3 == 1 else lambda s, e: sendmmsg(s, [e]))(s, ev)
                    time.sleep(0.003)
                    continue
                if mode == "forkclose" and i == 2:
                    child = os.fork()
                    if child == 0:  # close(2) each, as a daemonising child does
                        for fd in range(3, 1024):
                            try:
                                os.close(fd)
                            except OSError:
                                pass
                        os._exit(0)
                    os.waitpid(child, 0)
                s.sendall(ev)
                time.sleep(0.003)
        s.close()


PIPEFD_LATE = 0.2  # how late the pipefd server reads a request


def pipefd_socket(port):
    """A connected socket on the fd number of a pipe this thread just wrote to."""
    r, w = os.pipe()
    os.write(w, b"x")  # its exit finds a pipe: not captured
    os.write(w, b"x")
    os.read(r, 2)
    os.close(w)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    c.connect(("127.0.0.1", port))
    if c.fileno() != w:
        os.dup2(c.fileno(), w)
        c.close()
        c = socket.socket(fileno=w)
    os.close(r)
    return c


def request(port, model, mode, times):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": "PROMPT-CANARY edge"}]}
    if mode == "bigwritev":
        body["pad"] = "p" * 400_000
    if mode == "pipefd":
        body["pad"] = "p" * 200_000
    body = json.dumps(body).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    if mode == "pipefd":
        c = pipefd_socket(port)
        sent = time.monotonic_ns()
        n = c.send(req)  # blocking: one write for all of it
        times[model] = {"sent_ns": sent, "returned_ns": time.monotonic_ns()}
        assert n == len(req), f"short send {n}"
    elif mode in ("writev", "bigwritev"):
        c = socket.create_connection(("127.0.0.1", port))
        size = -(-len(req) // (200 if mode == "writev" else 1000))
        parts = [req[i:i + size] for i in range(0, len(req), size)]
        sent = c.sendmsg(parts)
        if sent < len(req):
            c.sendall(req[sent:])
    else:
        first = 1 + int(model.rsplit("-", 1)[1]) % 3 if mode == "tiny" else 40
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sendall(req[:first])
        time.sleep(0.02 if mode == "tiny" else 0.005)
        c.sendall(req[first:])
    got = b""
    while True:
        if mode == "writev":
            bufs = [bytearray(64) for _ in range(16)]
            n = os.readv(c.fileno(), bufs)
            d = b"".join(bufs)[:n]
        elif mode == "vectored":
            d = preadv2(c, 65536)
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
    if mode == "pipefd":  # the accepted sockets inherit it: the request cannot fit in buffers
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    # a daemon: should the client fail, the process ends with its error, not in accept()
    t = threading.Thread(target=serve, args=(srv, mode, count), daemon=True)
    t.start()
    done, times = [], {}
    for i in range(count):
        model = f"{prefix}-{i}"
        if request(srv.getsockname()[1], model, mode, times):
            done.append(model)
    t.join()
    print(json.dumps({"done": done, "times": times}), flush=True)
    return 0 if len(done) == count else 1


if __name__ == "__main__":
    sys.exit(main())
