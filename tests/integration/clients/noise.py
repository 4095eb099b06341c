#!/usr/bin/env python3
"""Traffic tokenscope must ignore, in one process: random bytes both ways over loopback TCP,
a bulk TCP transfer of BYTES, and a Unix socket pair. usage: noise.py SECONDS BYTES

Prints the bytes moved; exits 0 when every byte arrived intact."""
import os
import socket
import sys
import threading
import time


def pair_tcp():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname())
    s, _ = srv.accept()
    srv.close()
    return c, s


def echo_random(seconds, out):
    # Binary that never looks like HTTP or TLS (first byte 0xff), both directions.
    a, b = pair_tcp()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        msg = b"\xff" + os.urandom(511)
        a.sendall(msg)
        got = b""
        while len(got) < len(msg):
            got += b.recv(len(msg) - len(got))
        b.sendall(got)
        back = b""
        while len(back) < len(msg):
            back += a.recv(len(msg) - len(back))
        if back != msg:
            out["ok"] = False
        n += 2 * len(msg)
        time.sleep(0.002)
    out["echo"] = n


def unix_chatter(seconds, out):
    a, b = socket.socketpair()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        # bytes that would look like HTTP on TCP: a Unix socket is never read
        a.sendall(b"GET / HTTP/1.1\r\n\r\n")
        n += len(b.recv(64))
        time.sleep(0.002)
    out["unix"] = n


def bulk(total, out):
    a, b = pair_tcp()
    chunk = b"\x00\x01" * 32768
    got = [0]

    def sink():
        while got[0] < total:
            d = b.recv(1 << 20)
            if not d:
                break
            got[0] += len(d)

    t = threading.Thread(target=sink)
    t.start()
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        n = min(len(chunk), total - sent)
        a.sendall(chunk[:n])
        sent += n
    t.join()
    out["bulk"] = got[0]
    out["bulk_s"] = time.monotonic() - t0
    if got[0] != total:
        out["ok"] = False


def main():
    seconds, total = float(sys.argv[1]), int(sys.argv[2])
    out = {"ok": True}
    ts = [threading.Thread(target=echo_random, args=(seconds, out)),
          threading.Thread(target=unix_chatter, args=(seconds, out)),
          threading.Thread(target=bulk, args=(total, out))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(out, flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
