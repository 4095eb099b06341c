#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, built from what the tests feed: usage: seeds.py OUTDIR.
Each seed is in the targets' piece format: [u8 len][len bytes]..., after a first mode byte
for http, sse and decode."""
import gzip
import json
import os
import sys
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def pieces(chunks, size=200):
    out = b""
    for c in chunks:
        for i in range(0, max(len(c), 1), size):
            part = c[i:i + size]
            out += bytes([len(part)]) + part
    return out


def sse_event(text):
    return ("data: " + json.dumps({"choices": [{"delta": {"content": text}}]}) + "\n\n").encode()


REQ = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer sk-x\r\n"
       b"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n"
       b'{"model":"m","stream":true}')
SSE = sse_event("Hello") + sse_event(" world") + b"data: [DONE]\n\n"
NDJSON = b'{"model":"m","response":"hi","done":false}\n{"done":true,"eval_count":2}\n'


def chunked(body):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


RESP = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
RESP_GZ = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
           b"Content-Length: %d\r\n\r\n")


def h2_frame(ftype, flags, stream, payload):
    """One HTTP/2 frame: 9-byte header, then the payload."""
    return (len(payload).to_bytes(3, "big") + bytes([ftype, flags]) +
            stream.to_bytes(4, "big") + payload)


def zmtp_frame(flags, body):
    """A ZMTP frame: flags (MORE 1, COMMAND 4), a short or long size, the body."""
    if len(body) > 255:
        return bytes([flags | 2]) + len(body).to_bytes(8, "big") + body
    return bytes([flags, len(body)]) + body


ZMTP_GREETING = b"\xff" + b"\x00" * 7 + b"\x01\x7f\x03\x01NULL" + b"\x00" * 16 + b"\x00" + \
    b"\x00" * 31
ZMTP_READY = b"\x05READY\x0bSocket-Type\x00\x00\x00\x06DEALER"
# ["req-1", [1, 2, 3], nil, {"max_tokens": 16}]: an EngineCoreRequest's first fields
MP_REQUEST = b"\x94\xa5req-1\x93\x01\x02\x03\xc0\x81\xaamax_tokens\x10"
# [0, [["req-1", [42], nil, nil, nil, nil, nil, [{"type": 1, "timestamp": 1.5}]]], ...]
MP_OUTPUTS = b"\x92\x00\x91\x98\xa5req-1\x91\x2a\xc0\xc0\xc0\xc0\xc0\x91\x82\xa4type" + \
    b"\x01\xa9timestamp\xcb\x3f\xf8" + b"\x00" * 6


def main():
    out = sys.argv[1]
    gz = gzip.compress(SSE)
    seeds = {
        "http": [b"\x01" + pieces([REQ, REQ]), b"\x00" + pieces([RESP, chunked(SSE)]),
                 b"\x00" + pieces([RESP_GZ % len(gz), gz]),
                 b"\x00" + pieces([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"])],
        "sse": [b"\x00" + pieces([SSE]), b"\x01" + pieces([NDJSON]),
                b"\x00" + pieces([b"event: message_start\r\ndata: {}\r\n\r\n: ping\n\n"])],
        "decode": [b"\x01" + pieces([gz]), b"\x00" + pieces([zlib.compress(SSE)]),
                   b"\x00" + pieces([zlib.compress(SSE)[2:-4]])],
        # pipeline: op byte (stream | dir << 3 ...) before each piece's bytes
        "pipeline": [pieces([b"\x08" + REQ[:150], b"\x08" + REQ[150:], b"\x00" + RESP,
                             b"\x00" + chunked(SSE)]),
                     pieces([b"\x02" + REQ, b"\x0a" + RESP, b"\x0a" + chunked(SSE),
                             b"\x0e", b"\xfa"])],
        "recording": [],
        # h2: a request (static-table HEADERS, a JSON body) and its SSE reply, in frames;
        # each piece: its length, then its direction byte (1 the client's writes)
        "h2": [b"\x00" + pieces([b"\x01" + h2_frame(4, 0, 0, b""),
                                  b"\x01" + h2_frame(1, 4, 1, b"\x83\x87\x84\x41\x01h"),
                                  b"\x01" + h2_frame(0, 1, 1, b'{"model":"m","stream":true}'),
                                  b"\x00" + h2_frame(1, 4, 1, b"\x88\x5f\x11text/event-stream"),
                                  b"\x00" + h2_frame(0, 0, 1, SSE[:120]),
                                  b"\x00" + h2_frame(0, 1, 1, SSE[120:240])]),
               b"\x01" + pieces([b"\x01" + h2_frame(1, 4, 3, b"\x83\x87\xbe"),
                                  b"\x00" + h2_frame(3, 0, 3, b"\x00\x00\x00\x08")])],
        # zmtp: libzmq's greeting, READY, then vLLM-shaped messages (a request type byte, a
        # msgpack array, an aux frame; an output map with events); then joined mid-stream
        "zmtp": [b"\x01" + pieces([ZMTP_GREETING, zmtp_frame(4, ZMTP_READY),
                                    zmtp_frame(1, b"\x00") + zmtp_frame(1, MP_REQUEST) +
                                    zmtp_frame(0, b"\xab" * 300),
                                    zmtp_frame(0, MP_OUTPUTS)]),
                 b"\x00" + pieces([zmtp_frame(0, MP_OUTPUTS), zmtp_frame(1, b"\x01") +
                                    zmtp_frame(0, MP_REQUEST)])],
        "json": [b'{"choices":[{"delta":{"content":"Hi \\u00e9\\ud83d\\ude00"},"index":0}],'
                 b'"usage":{"prompt_tokens":12,"x":-1.5e-3,"ok":true,"n":null}}',
                 b'[{"candidates":[]}, [], {}, "a\\n\\"", 0, -0, 1E+2]'],
    }
    for rec in ("tcp/capture.tsrec.gz", "vgpu/capture.tsrec.gz", "tls-clients/capture.tsrec.gz",
                "h2/capture.tsrec.gz"):
        data = gzip.decompress(open(os.path.join(ROOT, "tests", "fixtures", rec), "rb").read())
        seeds["recording"].append(data[:65536])
    for name, items in seeds.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for i, s in enumerate(items):
            with open(os.path.join(d, f"seed{i}"), "wb") as f:
                f.write(s)


if __name__ == "__main__":
    main()
