#!/usr/bin/env python3
"""A recording (docs/recording.md) of N streamed chat completions left open, each seen from
both ends (a client process and a server process): the request, the response head and a few
SSE events, then nothing. The replay's peak RSS over N gives the memory per open stream.

usage: open_streams.py N FILE
"""
import json
import struct
import sys

TS_EV_TLS_DATA = 1
CLIENT_PID, SERVER_PID = 4100, 4200
COUNTERS = 21


def record(out, ts, pid, comm, ssl, seq, direction, payload):
    hdr = struct.pack("<IIQII16s", TS_EV_TLS_DATA, 80 + len(payload), ts, pid, pid, comm)
    body = struct.pack("<QQIIIIII", ssl, seq, direction, 0, len(payload), 0, len(payload), 0)
    out.write(hdr + body + payload)


def main():
    n, path = int(sys.argv[1]), sys.argv[2]
    req_body = json.dumps({"model": "bench-model", "stream": True,
                           "messages": [{"role": "user", "content": "x" * 200}]}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
               b"Content-Length: %d\r\n\r\n" % len(req_body)) + req_body
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")

    def event(i):
        e = b"data: " + json.dumps({"object": "chat.completion.chunk", "model": "bench-model",
                                    "choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}
                                   ).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(e), e)

    with open(path, "wb") as out:
        out.write(b"TSCOPE\r\n" + struct.pack("<IIQQII", 1, 40, 1, 1, 8192, COUNTERS))
        ts = 1_000_000_000
        for s in range(n):
            cs, ss = 0x10000 + s, 0x900000 + s
            seqs = {cs: 0, ss: 0}

            def rec(pid, comm, ssl, direction, payload):
                nonlocal ts
                ts += 1000
                record(out, ts, pid, comm, ssl, seqs[ssl], direction, payload)
                seqs[ssl] += 1

            rec(CLIENT_PID, b"client", cs, 1, request)
            rec(SERVER_PID, b"server", ss, 0, request)
            rec(SERVER_PID, b"server", ss, 1, head)
            rec(CLIENT_PID, b"client", cs, 0, head)
            for i in range(3):
                rec(SERVER_PID, b"server", ss, 1, event(i))
                rec(CLIENT_PID, b"client", cs, 0, event(i))


if __name__ == "__main__":
    main()
