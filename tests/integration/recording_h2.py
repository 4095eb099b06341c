#!/usr/bin/python3
"""Every HTTP/2 header field a recording holds, decoded by an HPACK decoder that is not
tokenscope's: python-hyper's hpack (Debian's python3-hpack, which python3-h2 brings).

    recording_h2.py FILE.tsrec WORD...

Reads the recording (docs/recording.md), puts each stream direction's bytes together in
`seq` order, and decodes the header blocks of every connection whose client direction begins
with the HTTP/2 preface (a connection joined mid-way has HPACK tables this reader cannot
know). Prints one JSON object: the fields decoded, the directions decoded, the blocks that
did not decode, and each field whose name or value holds one of the WORDs (none may).
"""
import json
import struct
import sys

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HDR = struct.Struct("<IIQII16s")  # struct ts_event_hdr
TLS_DATA = struct.Struct("<QQIIIIII")  # ssl, seq, dir, flags, total_len, offset, len, pad
SOCK_DATA = struct.Struct("<QQIIIIII40s")  # sock, seq, dir, flags, total, offset, len, owner
HEADERS, PUSH_PROMISE, CONTINUATION = 1, 5, 9
PADDED, PRIORITY, END_HEADERS = 0x8, 0x20, 0x4


def directions(path):
    """{(pid, kind, id, dir): {seq: bytes}} of every TLS and socket data record."""
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    off = struct.unpack_from("<I", data, 12)[0]  # header_size
    while off + HDR.size <= len(data):
        rtype, size, _ts, pid, _tid, _comm = HDR.unpack_from(data, off)
        if size < HDR.size or off + size > len(data):
            raise SystemExit(f"a record cut at offset {off}")
        body = off + HDR.size
        if rtype == 1:
            ssl, seq, d, _fl, _total, _o, n, _pad = TLS_DATA.unpack_from(data, body)
            key, payload = (pid, "tls", ssl, d), data[body + TLS_DATA.size:][:n]
        elif rtype == 8:
            sock, seq, d, _fl, _total, _o, n, owner, _addr = SOCK_DATA.unpack_from(data, body)
            key, payload = (owner, "sock", sock, d), data[body + SOCK_DATA.size:][:n]
        else:
            off += size
            continue
        pieces = out.setdefault(key, {})
        pieces[seq] = pieces.get(seq, b"") + payload
        off += size
    return out


def joined(pieces):
    """The direction's bytes up to its first lost piece."""
    out = b""
    for seq in range(len(pieces)):
        if seq not in pieces:
            break
        out += pieces[seq]
    return out


def header_blocks(stream):
    """Each whole header block of one direction's frames."""
    off, block = 0, None
    while off + 9 <= len(stream):
        n = int.from_bytes(stream[off:off + 3], "big")
        ftype, flags = stream[off + 3], stream[off + 4]
        payload = stream[off + 9:off + 9 + n]
        if len(payload) < n:
            return
        if ftype in (HEADERS, PUSH_PROMISE):
            at, pad = 0, 0
            if flags & PADDED:
                pad, at = payload[0], 1
            if ftype == HEADERS and flags & PRIORITY:
                at += 5
            if ftype == PUSH_PROMISE:
                at += 4
            block = payload[at:len(payload) - pad]
        elif ftype == CONTINUATION and block is not None:
            block += payload
        if ftype in (HEADERS, PUSH_PROMISE, CONTINUATION) and flags & END_HEADERS:
            yield block
            block = None
        off += 9 + n


def main():
    path, words = sys.argv[1], [w.encode() for w in sys.argv[2:]]
    dirs = {k: joined(v) for k, v in directions(path).items()}
    result = {"fields": 0, "directions": 0, "failed_blocks": 0, "found": []}
    for (pid, kind, ident, d), stream in dirs.items():
        if not stream.startswith(PREFACE):
            continue
        other = dirs.get((pid, kind, ident, 1 - d), b"")
        for s in (stream[len(PREFACE):], other):
            dec = hpack.Decoder()
            dec.max_allowed_table_size = 1 << 16
            result["directions"] += 1
            for block in header_blocks(s):
                try:
                    fields = dec.decode(block, raw=True)
                except hpack.HPACKError:
                    result["failed_blocks"] += 1
                    break
                for name, value in fields:
                    result["fields"] += 1
                    if any(w in name or w in value for w in words):
                        result["found"].append(f"{name.decode(errors='replace')}: "
                                               f"{value.decode(errors='replace')}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
