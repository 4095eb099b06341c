#!/usr/bin/env python3
"""Python clients for the integration tests (the ssl module: SSL_read_ex/SSL_write_ex).

usage: py_client.py MODE PORT CAFILE ARGS...
  keepalive MODEL...      one connection, one streamed request per model, in order
  concurrent N MODEL      N threads, each its own connection and request, all at once
  hang MODEL              start a stream, report when the first bytes came, then wait
  big MODEL BYTES         one request whose body is padded to BYTES (sent in one SSL call)
  h2                      send the HTTP/2 client preface and a SETTINGS frame, then close
  fork M1 M2 [own]        one connection: M1 requested and read; then fork. The parent writes
                          the request for M2 and exits, the child reads its reply; with "own",
                          the parent exits at once and the child requests M2 and reads it.
                          Prints the child's pid, then "child ok" (TLS state is per process
                          after a fork: only one of them may write, only one read)

SETTLE_S=SECONDS in the environment: wait that long after the ssl module (and with it libssl)
was loaded, before the first connection.
"""
import http.client
import json
import os
import ssl
import sys
import threading
import time

DIALECT_PATHS = {
    "openai.chat": "/v1/chat/completions",
    "anthropic.messages": "/v1/messages",
    "openai.responses": "/v1/responses",
}


def request(conn, path, model):
    body = json.dumps({"model": model, "stream": True, "max_tokens": 64,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": "PROMPT-CANARY"}]})
    conn.request("POST", path, body=body, headers={
        "Content-Type": "application/json", "x-api-key": "sk-ant-test-SECRET-py",
        "Authorization": "Bearer sk-test-SECRET-py"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise SystemExit(f"status {resp.status}")
    return data


def main():
    mode, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    time.sleep(float(os.environ.get("SETTLE_S", "0")))
    ctx = ssl.create_default_context(cafile=cafile)
    # The ssl module is imported lazily by http.client users; here it is already loaded.
    if mode == "keepalive":
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        for spec in sys.argv[4:]:
            dialect, model = spec.split("=", 1)
            request(conn, DIALECT_PATHS[dialect], model)
        conn.close()
    elif mode == "concurrent":
        n, model = int(sys.argv[4]), sys.argv[5]
        errors = []
        barrier = threading.Barrier(n)

        def one(i):
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
                conn.connect()
                barrier.wait()
                request(conn, "/v1/chat/completions", model)
                conn.close()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"{len(errors)} failed: {errors[:3]}")
    elif mode == "big":
        model, size = sys.argv[4], int(sys.argv[5])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        body = json.dumps({"model": model, "stream": True, "pad": ""})
        body = body[:-2] + "p" * (size - len(body)) + '"}'
        conn.request("POST", "/v1/chat/completions", body=body.encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise SystemExit(f"status {resp.status}")
    elif mode == "h2":
        import socket
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                try:
                    tls.recv(100)
                except OSError:
                    pass
    elif mode == "fork":
        m1, m2, own = sys.argv[4], sys.argv[5], sys.argv[6:] == ["own"]
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        request(conn, "/v1/chat/completions", m1)
        body = json.dumps({"model": m2, "stream": True,
                           "messages": [{"role": "user", "content": "PROMPT-CANARY"}]})
        go = os.pipe()
        child = os.fork()
        if not child:
            os.close(go[1])
            os.read(go[0], 1)  # the parent has written, or is gone
            if own:
                ok = bool(request(conn, "/v1/chat/completions", m2))
            else:
                resp = http.client.HTTPResponse(conn.sock, method="POST")
                resp.begin()
                ok = resp.status == 200 and b"[DONE]" in resp.read()
            print("child ok" if ok else "child failed", flush=True)
            os._exit(0)
        os.close(go[0])
        if not own:
            conn.sock.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\n"
                               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        print(json.dumps({"child": child}), flush=True)
        os.write(go[1], b"w")
        os._exit(0)  # gone while the child goes on
    elif mode == "hang":
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
        body = json.dumps({"model": sys.argv[4], "stream": True})
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read1(64)
        print("STREAMING", flush=True)
        threading.Event().wait(60)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
