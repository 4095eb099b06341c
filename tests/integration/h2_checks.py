"""HTTP/2 and gRPC with real eBPF probes (imported by run.py; `run.sh --only h2` alone).

Real servers, each started here: hypercorn (Debian's python3-hypercorn) serving the FastAPI
app over TLS (HTTP/2 by ALPN) and over h2c with prior knowledge; nginx with http2 on in front
of uvicorn (HTTP/1.1 upstream); a Triton-shaped ModelStreamInfer service on python3-grpcio,
over h2c and TLS. Real clients: curl --http2 and --http2-prior-knowledge, nghttp (Debian's
nghttp2-client), httpx with http2=True (one connection, and 32 streams at once on one
connection), node's http2 module, grpcio. Every figure is checked against the servers' own
clock (their truth files). Then capture joins a keep-alive HTTP/2 connection whose HPACK
tables were filled before it started: later streams are measured, headers_partial, and no
header value comes from the wrong table entry (planted values prove it). The recording
replays to the same records.
"""
import json
import os
import subprocess
import sys

import plaintext_checks
from plaintext_checks import DEBIAN_PYTHON, start_app, start_nginx, wait_file

TOKEN_WINDOW_MS = 20.0  # how late a token's bytes may leave or arrive after the server made it
CONCURRENT = 32
GRPC_CONCURRENT = 200  # calls at once on one grpcio channel
# every credential header tokenscope masks (docs/security.md), long values (which HPACK
# encoders index) and short ones, and a query string beside them
CREDENTIAL_HEADERS = [
    "-H", "Authorization: Bearer sk-test-SECRET-curl-h2-0123456789abcdefghijklmnopqrstuv",
    "-H", "x-api-key: SECRET-xapikey", "-H", "Cookie: session=SECRET-cookie-value",
    "-H", "x-goog-api-key: SECRET-goog", "-H", "Proxy-Authorization: Basic SECRET-proxy",
    "-H", "api-key: SECRET-azure", "-H", "OpenAI-Organization: org-SECRET",
]
NGINX_CONCURRENT = 24  # streams at once on one connection through nginx


def start(cmd, work, name, port_file):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{name}.err"), "w"))
    return p, wait_file(port_file, p, name)


def start_hypercorn(work, name, cert=None, key=None):
    port_file, truth = os.path.join(work, f"{name}.port"), os.path.join(work, f"{name}.truth")
    cmd = [DEBIAN_PYTHON, os.path.join(FIXTURES, "fastapi_app.py"), "--port-file", port_file,
           "--truth", truth, "--server", "hypercorn"]
    if cert:
        cmd += ["--cert", cert, "--key", key]
    p, port = start(cmd, work, name, port_file)
    return p, port, truth


def body_file(work, model):
    path = os.path.join(work, f"{model}.json")
    with open(path, "w") as f:
        json.dump({"model": model, "stream": True,
                   "messages": [{"role": "user", "content": "PROMPT-CANARY"}]}, f)
    return path


def truths(*paths):
    t = {}
    for p in paths:
        if os.path.exists(p):
            for line in open(p):
                d = json.loads(line)
                t[d["model"]] = d
    return t


FIXTURES = None


def run_h2_checks(ctx):
    global FIXTURES
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    root, work = ctx["root"], os.path.join(ctx["work"], "h2")
    cert, key = ctx["cert"], ctx["key"]
    FIXTURES = plaintext_checks.FIXTURES = os.path.join(root, "tests", "fixtures")
    clients = os.path.join(root, "tests", "integration", "clients")
    grpc_llm = os.path.join(FIXTURES, "grpc", "grpc_llm.py")
    h2_client = os.path.join(clients, "h2_client.py")
    os.makedirs(work, exist_ok=True)
    procs = []
    try:
        tls, tls_port, tls_truth = start_hypercorn(work, "hyper-tls", cert, key)
        plain, plain_port, plain_truth = start_hypercorn(work, "hyper-h2c")
        uvi, uvi_port, uvi_truth = start_app(work, "asyncio")
        procs += [tls, plain, uvi]
        nginx, nginx_port = start_nginx(work, uvi_port, cert, key, http2=True)
        procs.append(nginx)
        gtruth = os.path.join(work, "grpc.truth")
        g1, g1_port = start([DEBIAN_PYTHON, grpc_llm, "serve", "--port-file",
                             os.path.join(work, "g1.port"), "--truth", gtruth], work, "grpc-h2c",
                            os.path.join(work, "g1.port"))
        g2, g2_port = start([DEBIAN_PYTHON, grpc_llm, "serve", "--port-file",
                             os.path.join(work, "g2.port"), "--truth", gtruth, "--cert", cert,
                             "--key", key], work, "grpc-tls", os.path.join(work, "g2.port"))
        procs += [g1, g2]
        body_phases(ctx, work, {
            "tls_port": tls_port, "tls_truth": tls_truth, "plain_port": plain_port,
            "plain_truth": plain_truth, "uvi_truth": uvi_truth, "nginx_port": nginx_port,
            "g1_port": g1_port, "g2_port": g2_port, "gtruth": gtruth, "h2_client": h2_client,
            "grpc_llm": grpc_llm, "clients": clients})
    finally:
        for p in procs:
            p.terminate()  # nginx's master takes its workers with it; SIGKILL left them behind
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def body_phases(ctx, work, s):
    """The clients, one tracer for all of them, then the checks; s: the servers' ports and
    truth files, the client scripts."""
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    cert = ctx["cert"]
    tls_port, plain_port, nginx_port = s["tls_port"], s["plain_port"], s["nginx_port"]
    g1_port, g2_port, h2_client, grpc_llm = s["g1_port"], s["g2_port"], s["h2_client"], s["grpc_llm"]
    clients = s["clients"]
    tracer = Tracer(work)
    expect = []  # (label, model, client comm, truth file, the server traced)

    # phase: curl and nghttp over TLS (ALPN h2) and h2c with prior knowledge, to hypercorn
    for model, args, url in (
            ("fx-ttft30-itl6-n6-h2a1", ["--http2", "--cacert", cert],
             f"https://127.0.0.1:{tls_port}"),
            ("fx-ttft25-itl5-n5-h2a2", ["--http2-prior-knowledge"],
             f"http://127.0.0.1:{plain_port}")):
        check(run(["curl", "-sS", "--fail", "-N", *args, "-H", "Content-Type: application/json",
                   *CREDENTIAL_HEADERS, "-o", "/dev/null",
                   f"{url}/v1/chat/completions?key=SECRET-query-{model}", "-d",
                   open(body_file(work, model)).read()]), f"curl {args[0]} ran")
        expect.append((f"curl {args[0]}", model, "curl", s["tls_truth"] if "https" in url
                       else s["plain_truth"], True))
    for model, url in (("fx-ttft30-itl5-n6-h2n1", f"https://127.0.0.1:{tls_port}"),
                       ("fx-ttft20-itl6-n5-h2n2", f"http://127.0.0.1:{plain_port}")):
        check(run(["nghttp", "-d", body_file(work, model), "-H", "content-type: application/json",
                   "-H", "authorization: Bearer sk-SECRET-nghttp-0123456789abcdef0123456789",
                   "-H", "x-api-key: SECRET-nghttp-key",
                   f"{url}/v1/chat/completions"]), f"nghttp {url[:5]} ran")
        expect.append((f"nghttp {url[:5]}", model, "nghttp", s["tls_truth"] if "https" in url
                       else s["plain_truth"], True))

    # phase: httpx (http2=True): two streams in turn on one connection, TLS and h2c
    for ca, port, truth, tag in ((cert, tls_port, s["tls_truth"], "x"),
                                 ("-", plain_port, s["plain_truth"], "y")):
        models = [f"fx-ttft25-itl5-n5-h2{tag}1", f"fx-ttft20-itl7-n4-h2{tag}2"]
        scheme = "https" if ca != "-" else "http"
        check(run([DEBIAN_PYTHON, h2_client, "stream", f"{scheme}://127.0.0.1:{port}", ca,
                   *models]), f"httpx http2 ({scheme}) ran")
        # hypercorn writes the reply of a second stream on an httpx connection in one go at
        # its end (both ends' records show the same): the schedule cannot be checked there,
        # only that each token was measured after the server made it
        for m in models:
            expect.append((f"httpx http2 {scheme}", m, None, truth, False))

    # phase: node's http2 client (node's own OpenSSL); a node that lives a second first, so
    # that node's binary is probed before the measured one starts (run.py says why)
    check(run(["node", "-e", "setTimeout(() => {}, 1000)"]), "warm-up node ran")
    models = ["fx-ttft30-itl6-n5-h2o1", "fx-ttft25-itl5-n6-h2o2"]
    check(run(["node", os.path.join(clients, "node_h2.js"), str(tls_port), cert, *models]),
          "node http2 ran")
    for m in models:
        expect.append(("node http2", m, "node", s["tls_truth"], True))

    # phase: nginx with http2 on, TLS, in front of uvicorn (HTTP/1.1 upstream)
    through = "fx-ttft30-itl6-n6-h2g1"
    check(run(["curl", "-sS", "--fail", "-N", "--http2", "--cacert", cert, "-H",
               "Content-Type: application/json", "-o", "/dev/null",
               f"https://127.0.0.1:{nginx_port}/v1/chat/completions", "-d",
               open(body_file(work, through)).read()]), "curl --http2 through nginx ran")

    # phase: 32 streams at once on one connection (interleaved DATA frames)
    conc = "fx-ttft60-itl10-n8-h2c"
    check(run([DEBIAN_PYTHON, h2_client, "concurrent", f"https://127.0.0.1:{tls_port}", cert,
               str(CONCURRENT), conc], timeout=180), f"{CONCURRENT} concurrent streams ran")

    # phase: 24 streams at once on one connection to nginx, each passed on to uvicorn over an
    # HTTP/1.1 connection of its own
    conc_nginx = "fx-ttft60-itl10-n6-h2cn"
    check(run([DEBIAN_PYTHON, h2_client, "concurrent", f"https://127.0.0.1:{nginx_port}", cert,
               str(NGINX_CONCURRENT), conc_nginx], timeout=180),
          f"{NGINX_CONCURRENT} concurrent streams through nginx ran")

    # phase: gRPC, h2c and TLS: a stream, an error in the trailers, a cancel, a deadline
    grpc_cases = []
    for port, ca, tag in ((g1_port, None, "p"), (g2_port, cert, "t")):
        for model, extra, status in ((f"fx-ttft30-itl6-n6-gr{tag}1", [], "OK"),
                                     (f"fx-ttft20-itl5-n3-abort-gr{tag}2", [], "INVALID_ARGUMENT"),
                                     (f"fx-ttft20-itl40-n10-gr{tag}3", ["--cancel-after", "2"],
                                      "CANCELLED"),
                                     (f"fx-ttft20-itl40-n10-gr{tag}4", ["--timeout", "0.25"],
                                      "DEADLINE_EXCEEDED")):
            r = subprocess.run([DEBIAN_PYTHON, grpc_llm, "call", str(port), model, *extra] +
                               (["--ca", ca] if ca else []), capture_output=True, text=True,
                               timeout=60)
            got = json.loads(r.stdout) if r.returncode == 0 else {}
            check(got.get("status") == status, f"grpc {tag} {model}: {status} ({r.stderr[-200:]})")
            grpc_cases.append((model, status, got.get("tokens"), "tls" if ca else "tcp"))
    # 200 server-streaming calls at once on one plaintext channel: grpcio reads and writes
    # its socket from several threads at once (issue 38, case 1)
    many = "fx-ttft20-itl5-n8-grm"
    r = subprocess.run([DEBIAN_PYTHON, grpc_llm, "call", str(g1_port), many, "--concurrent",
                        str(GRPC_CONCURRENT)], capture_output=True, text=True, timeout=120)
    got = json.loads(r.stdout) if r.returncode == 0 else {}
    check(got.get("status") == "OK" and got.get("tokens") == 8 * GRPC_CONCURRENT,
          f"grpc: {GRPC_CONCURRENT} concurrent calls on one channel ran ({got}, "
          f"{r.stderr[-200:]})")

    rc, out, err = tracer.stop()
    check(rc == 0, f"tokenscope exited 0 ({err[-300:]})")
    all_records = [json.loads(line) for line in open(tracer.out)]
    records = [r for r in all_records if r.get("type") == "request"]  # not stray steps
    check_streams(check, records, expect, out)
    check_nginx(check, records, through, nginx_port, s["uvi_truth"])
    check_concurrent(check, records, conc, s["tls_truth"])
    check_pairs(check, records, conc_nginx, "concurrent through nginx", direct=False)
    check_grpc(check, records, grpc_cases, s["gtruth"])
    check_grpc_concurrent(check, records, many, out)
    blob = out + err + open(tracer.out).read()
    for secret in ("SECRET", "PROMPT-CANARY"):
        check(secret not in blob, f"h2: no '{secret}' in any output")
    rec_bytes = open(tracer.rec, "rb").read()
    check(b"SECRET" not in rec_bytes, "h2: no raw credential in the recording")
    # every header field of the recording, decoded by another HPACK decoder (Huffman-coded
    # values among them): none holds a credential, and the blocks still decode
    r = subprocess.run([DEBIAN_PYTHON, os.path.join(os.path.dirname(__file__), "recording_h2.py"),
                        tracer.rec, "SECRET"], capture_output=True, text=True)
    got = json.loads(r.stdout) if r.returncode == 0 else {}
    check(got.get("fields", 0) >= 200 and got.get("directions", 0) >= 20 and
          got.get("failed_blocks") == 0 and got.get("found") == [],
          f"h2: the recording's header fields, decoded, hold no credential ({got}, "
          f"{r.stderr[-300:]})")
    replay = os.path.join(work, "replay.jsonl")
    r = subprocess.run([ctx["tokenscope"], "report", tracer.rec, "-q", "-o", replay],
                       capture_output=True, text=True)
    check(r.returncode == 0 and [json.loads(x) for x in open(replay)] == all_records,
          f"h2: the recording replays to the same {len(records)} records ({r.stderr[-200:]})")

    check_join(ctx, work, tls_port, s["tls_truth"], h2_client)
    check_join_mid_reply(ctx, work, plain_port, s["plain_truth"], h2_client)


def check_join_mid_reply(ctx, work, port, truth_path, h2_client):
    """Capture starts in the middle of a streamed reply on a plaintext HTTP/2 connection: the
    probes first see its DATA frames (bpf/sock_classify.h), and the connection's later
    requests are measured, both ends. (A connection the probes ignore is ignored for life.)"""
    check, Tracer = ctx["check"], ctx["Tracer"]
    c = subprocess.Popen([DEBIAN_PYTHON, h2_client, "join-mid", f"http://127.0.0.1:{port}",
                          "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if not check(c.stdout.readline().strip() == "STREAMING", "join mid-reply: streaming"):
        c.kill()
        return
    # the client reads nothing more until the tracer is up: its next read is of DATA frames
    # waiting in its socket (the server's, while the reply still streams)
    tracer = Tracer(os.path.join(work, "join-mid"))
    c.stdin.write("go\n")
    c.stdin.flush()
    made = [json.loads(line) for line in c.stdout]
    check(c.wait(timeout=60) == 0 and len(made) == 2,
          "join mid-reply: the client made 2 more requests")
    tracer.stop()
    records = [json.loads(line) for line in open(tracer.out)]
    t = truths(truth_path)
    for m in made:
        for role in ("client", "server"):
            r = find(records, m["model"], role)
            label = f"join mid-reply {m['model']} [{role}]"
            if check(r is not None, f"{label}: a record (the connection was captured)"):
                check(r["http_version"] == "2" and r["complete"] and
                      r["token_events"] == t[m["model"]]["events"],
                      f"{label}: HTTP/2, complete, every token ({r['error']})")


def check_measured(check, rec, t, label):
    """TTFT measured, and the first token no earlier than the server made it."""
    first = rec["first_token_ns"]
    check(rec["ttft_ms"] is not None and first is not None and first >= t["token_ns"][0],
          f"{label}: TTFT measured, the first token after the server made it")


def find(records, model, role):
    return next((r for r in records if r["model"] == model and r["role"] == role), None)


def check_timing(check, rec, t, label, server_rec=None):
    """A server's record against the server's own clock: the first token after the server
    made it and within the window, TPOT within 2 ms. A client's against the server's record:
    each token read after the server wrote it (curl, nghttp, node and httpx read their
    sockets when their loops get to it: that lateness is real client time, not checked)."""
    first = rec["first_token_ns"]
    if rec["role"] == "client":
        if check(first is not None and server_rec is not None and
                 server_rec["first_token_ns"] is not None,
                 f"{label}: first token measured at both ends ({rec['error']})"):
            lag = (first - server_rec["first_token_ns"]) / 1e6
            check(0 <= lag <= 200, f"{label}: first token read {lag:.3f} ms after the server "
                  "wrote it")
        return
    ok = first is not None and rec["tpot_ms"] is not None
    if not check(ok, f"{label}: first token and tpot measured ({rec['error']})"):
        return
    lag = (first - t["token_ns"][0]) / 1e6
    check(0 <= lag <= TOKEN_WINDOW_MS, f"{label}: first token {lag:.3f} ms after the server "
          "made it")
    tn = t["token_ns"]
    tpot = (tn[-1] - tn[0]) / (len(tn) - 1) / 1e6
    check(abs(rec["tpot_ms"] - tpot) <= 2.0, f"{label}: tpot {rec['tpot_ms']} near {tpot:.3f}")


def check_streams(check, records, expect, out):
    for label, model, comm, truth_path, traced_server in expect:
        t = truths(truth_path).get(model)
        if not check(t is not None, f"{label}: served ({model})"):
            continue
        for role in ("client", "server"):
            r = find(records, model, role)
            if not check(r is not None, f"{label} [{role}]: a record"):
                continue
            check(r["http_version"] == "2" and r["stream_id"] and r["stream_id"] % 2 == 1 and
                  not r["headers_partial"], f"{label} [{role}]: HTTP/2 stream "
                  f"{r['stream_id']}, headers whole")
            check(r["complete"] and r["api"] == "openai.chat" and r["status"] == 200 and
                  r["path"] == "/v1/chat/completions",
                  f"{label} [{role}]: complete openai.chat 200 ({r['error']}, {r['path']})")
            check(r["token_events"] == t["events"] and r["output_tokens"] == t["output_tokens"],
                  f"{label} [{role}]: {r['token_events']} token events == {t['events']}")
            if role == "client" and comm:
                check(r["comm"] == comm, f"{label}: comm {r['comm']} == {comm}")
            if traced_server:
                check_timing(check, r, t, f"{label} [{role}]", find(records, model, "server"))
            else:
                check_measured(check, r, t, f"{label} [{role}]")
    check("http/2: connections=" in out and "frame_errors=0 hpack_errors=0" in out,
          "h2: the summary's http/2 line, no framing or HPACK errors")


def check_nginx(check, records, model, nginx_port, uvi_truth):
    t = truths(uvi_truth).get(model)
    recs = [r for r in records if r["model"] == model]
    h2 = [r for r in recs if r["http_version"] == "2"]
    h1 = [r for r in recs if r["http_version"] == "1.1"]
    check(len(h2) == 2 and {r["role"] for r in h2} == {"client", "server"} and
          all(r["complete"] and f"127.0.0.1:{nginx_port}" in (r["local"], r["peer"])
              for r in h2), f"nginx http2: curl's and nginx's HTTP/2 records ({len(h2)})")
    check(len(h1) == 2 and all(r["complete"] for r in h1),
          f"nginx http2: its HTTP/1.1 upstream, both ends ({len(h1)})")
    if t:
        for r in recs:
            check(r["token_events"] == t["events"], f"nginx http2: {r['role']} "
                  f"{r['http_version']}: {r['token_events']} tokens == {t['events']}")


def check_pairs(check, records, prefix, label, direct=True):
    """Every HTTP/2 client record of the model prefix names the server record of its own model,
    and, straight to the server (direct), of its own stream (issue 38, case 2: concurrent
    streams of one connection were joined by time only). Through nginx the server record is
    the upstream's, on an HTTP/1.1 connection of its own."""
    by_id = {r["id"]: r for r in records if r.get("type") == "request"}
    clients = [r for r in by_id.values() if r["role"] == "client" and r["model"] and
               r["model"].startswith(prefix) and r["http_version"] == "2"]
    wrong = [(c["model"], c["stream_id"], by_id.get(c.get("server_id"), {}).get("model"),
              by_id.get(c.get("server_id"), {}).get("stream_id")) for c in clients
             if c.get("server_id") not in by_id or
             by_id[c["server_id"]]["model"] != c["model"] or
             (direct and by_id[c["server_id"]]["stream_id"] != c["stream_id"]) or
             (not direct and by_id[c["server_id"]]["http_version"] != "1.1")]
    check(clients and not wrong, f"{label}: each of {len(clients)} clients names the server "
                                 f"record of its own stream and model ({len(wrong)} not: "
                                 f"{wrong[:4]})")


def check_concurrent(check, records, prefix, truth_path):
    t = truths(truth_path)
    for role in ("client", "server"):
        recs = [r for r in records if r["role"] == role and r["model"] and
                r["model"].startswith(prefix)]
        conns = {(r["pid"], r["local"], r["peer"]) for r in recs}
        check(len(recs) == CONCURRENT + 1 and len(conns) == 1 and
              len({r["stream_id"] for r in recs}) == CONCURRENT + 1,
              f"concurrent [{role}]: {CONCURRENT + 1} streams, one connection, each its own "
              f"record ({len(recs)} records, {len(conns)} connections)")
        for r in recs:
            if t.get(r["model"]):
                check(r["complete"] and r["token_events"] == t[r["model"]]["events"],
                      f"concurrent [{role}] {r['model']}: complete, every token")
                check_timing(check, r, t[r["model"]], f"concurrent [{role}] {r['model']}",
                             find(records, r["model"], "server"))
    check_pairs(check, records, prefix, "concurrent")


def check_grpc(check, records, cases, truth_path):
    t = truths(truth_path)
    errors = {"OK": None, "INVALID_ARGUMENT": "grpc_invalid_argument: bad sampling parameters",
              "CANCELLED": "rst_stream_cancel", "DEADLINE_EXCEEDED": None}
    for model, status, tokens, transport in cases:
        for role in ("client", "server"):
            r = find(records, model, role)
            label = f"grpc {transport} {status} [{role}]"
            if not check(r is not None, f"{label}: a record ({model})"):
                continue
            check(r["api"] == "triton" and r["transport"] == transport and
                  r["path"] == "/inference.GRPCInferenceService/ModelStreamInfer" and
                  r["http_version"] == "2", f"{label}: triton over HTTP/2 ({r['api']}, "
                  f"{r['path']})")
            want = errors[status]
            if status == "DEADLINE_EXCEEDED":
                check(not r["complete"] or r["error"].startswith("grpc_deadline_exceeded") or
                      r["error"].startswith("grpc_cancelled"),
                      f"{label}: the deadline ends it with an error ({r['error']})")
            else:
                check(r["error"] == want or (status == "CANCELLED" and
                                             r["error"].startswith("rst_stream")),
                      f"{label}: error {r['error']!r} == {want!r}")
            if status == "OK":
                check(r["complete"] and r["grpc_status"] == 0 and
                      r["token_events"] == t[model]["events"] and r["response_model"] == "ensemble",
                      f"{label}: complete, grpc-status 0, every token ({r['token_events']})")
                check_timing(check, r, t[model], label, find(records, model, "server"))
            if status == "INVALID_ARGUMENT":
                check(r["grpc_status"] == 3 and r["token_events"] == t[model]["events"],
                      f"{label}: grpc-status 3 after its tokens")
            if status == "CANCELLED":
                check(not r["complete"] and r["token_events"] >= tokens,
                      f"{label}: incomplete, the tokens before the cancel counted")


def check_grpc_concurrent(check, records, prefix, out):
    """Every one of the concurrent calls on one channel whole at both ends: none lost to a
    sequence number two threads shared, in the summary or in the records."""
    for role in ("client", "server"):
        got = [r for r in records if r.get("type") == "request" and r["role"] == role and
               (r["model"] or "").startswith(prefix + "-")]
        bad = [(r["model"], r["error"], r["token_events"]) for r in got
               if not r["complete"] or r["token_events"] != 8]
        check(len(got) == GRPC_CONCURRENT and not bad,
              f"grpc concurrent [{role}]: {len(got)} of {GRPC_CONCURRENT} records, each "
              f"complete with 8 tokens ({len(bad)} not: {bad[:4]})")
    check("lost_pieces=0 " in out and "drops=0 " in out,
          "grpc concurrent: nothing dropped, no piece lost")


def check_join(ctx, work, port, truth_path, h2_client):
    """Capture joins a keep-alive HTTP/2 connection whose tables hold planted values."""
    check, Tracer = ctx["check"], ctx["Tracer"]
    join_dir = os.path.join(work, "join")
    c = subprocess.Popen([DEBIAN_PYTHON, h2_client, "join", f"https://127.0.0.1:{port}",
                          ctx["cert"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if not check(c.stdout.readline().strip() == "READY", "join: the client filled its tables"):
        c.kill()
        return
    tracer = Tracer(join_dir)
    c.stdin.write("go\n")
    c.stdin.flush()
    made = [json.loads(line) for line in c.stdout]
    check(c.wait(timeout=60) == 0 and len(made) == 4, "join: the client made 4 more requests")
    rc, out, err = tracer.stop()
    records = [json.loads(line) for line in open(tracer.out)]
    t = truths(truth_path)
    check(not any(r["model"] and "jpre" in r["model"] for r in records),
          "join: nothing of the requests before capture")
    for m in made:
        for role in ("client", "server"):
            r = find(records, m["model"], role)
            label = f"join {m['path'].split('/')[2]} [{role}]"
            if not check(r is not None, f"{label}: a record"):
                continue
            check(r["http_version"] == "2" and r["headers_partial"],
                  f"{label}: HTTP/2, headers_partial")
            # a path is its own or unknown: never the planted one on a fresh request, or the
            # fresh one on a planted request
            check(r["path"] in (None, m["path"]), f"{label}: path {r['path']!r} is "
                  f"{m['path']!r} or unknown")
            check(r["complete"] and r["api"] == "openai.chat" and
                  r["token_events"] == t[m["model"]]["events"],
                  f"{label}: complete, every token, the dialect from the payload "
                  f"({r['error']}, {r['api']})")
            check_measured(check, r, t[m["model"]], label)
    blob = open(tracer.out).read()
    check("PLANTED-OLD-VALUE" not in blob and "FRESH-NEW-VALUE" not in blob,
          "join: no header value in any record")
    check("joined=" in out and "joined=0" not in out, "join: the summary counts a joined "
          "connection")
