"""--otlp with real eBPF probes (imported by run.py; `run.sh --only otlp`): spans received by
an OTLP/HTTP receiver that decodes every export with the official OpenTelemetry protos
(tests/otlp/receiver.py), against the JSON Lines records of the same run.

- A replay of the vLLM-shaped recording: each record one span, its times the recording's
  clock pair to the nanosecond, its TTFT phases (the engine wire's split) children whose
  lengths are the record's; a client and its server in one trace, the server the child.
- Live, curl to the FastAPI fixture: a request carrying traceparent joins that trace (both
  ends under the header's span); one without starts a trace its server shares.
- The OpenTelemetry variables: the endpoint, the headers, the service name, the timeout (a
  value not in milliseconds refused).
- Faults: 503s then 200 (retried, delivered); a collector that never answers and one that is
  gone (nothing else stops, the spans dropped are counted, the end bounded by the timeout).
- curl -> nginx (TLS) -> uvicorn, every end traced: one trace, each span the child of the
  one before; with traceparent, all four under the header's span.
- A server traced without its client: its span leaves about 2 s after its end while the
  tracer runs (it waited for a client that never came).
- An application instrumented with the OpenTelemetry JS SDK (clients/otel_app.js), whose own
  span the SDK exports to the same receiver: tokenscope's spans of its call are that span's
  children, with its tracestate; a call whose context is not sampled is not sent, and counted.
- An agent's loop (the openai SDK, clients/agent_loop.js): its calls are children of one
  session span, whose times are the session record's.
- --otlp-sample on the vLLM-shaped recording: the traces sent are those whose ids the ratio
  keeps, a client and its server alike; --otlp-steps on the llama.cpp recording: each step a
  span with its record's times, each request linked to its prefill's first step and each
  token's producing step, as its record names them.
"""
import json
import os
import struct
import subprocess
import time

import plaintext_checks
from plaintext_checks import CLIENT_PYTHON, DEBIAN_PYTHON, start_app, stop_all, wait_file

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def start_receiver(work, name, *args):
    port_file = os.path.join(work, f"{name}.port")
    out = os.path.join(work, f"{name}.spans.jsonl")
    p = subprocess.Popen([DEBIAN_PYTHON, os.path.join(plaintext_checks.ROOT, "tests", "otlp",
                                                      "receiver.py"), port_file, out, *args],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{name}.err"), "w"))
    port = wait_file(port_file, p, "the OTLP receiver")
    return p, port, out


def spans_of(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def wait_spans(path, n, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(spans_of(path)) < n:
        time.sleep(0.05)
    return spans_of(path)


def header_offset(rec_gz_or_plain):
    """The recording's CLOCK_REALTIME minus CLOCK_MONOTONIC (its header, recording.h)."""
    with open(rec_gz_or_plain, "rb") as f:
        h = f.read(40)
    mono, real = struct.unpack_from("<QQ", h, 16)
    return real - mono


def fixture_recording(ctx, work, name):
    """tests/fixtures/NAME/capture.tsrec.gz, unpacked into work."""
    rec = os.path.join(work, f"{name}.tsrec")
    subprocess.run(f"gunzip -c {ctx['root']}/tests/fixtures/{name}/capture.tsrec.gz > {rec}",
                   shell=True, check=True)
    return rec


def replay_to_receiver(ctx, work, name, rec, *args):
    """`tokenscope report REC -q -o NAME.jsonl ARGS --otlp` to a receiver of its own: the run,
    its JSON Lines path and the spans received (all of them: report waits for its exports)."""
    recv, port, out = start_receiver(work, name)
    jsonl = os.path.join(work, f"{name}.jsonl")
    r = subprocess.run([ctx["tokenscope"], "report", rec, "-q", "-o", jsonl, *args, "--otlp",
                        f"http://127.0.0.1:{port}/v1/traces"], capture_output=True, text=True)
    spans = wait_spans(out, 1)
    stop_all([recv])
    return r, jsonl, spans


def check_replay(ctx, work):
    check = ctx["check"]
    rec = fixture_recording(ctx, work, "vllm")
    r, jsonl, spans = replay_to_receiver(ctx, work, "replay", rec, "--otlp-tokens")
    check(r.returncode == 0, f"otlp replay: report exits 0 ({r.stderr[-300:]})")
    records = [x for x in map(json.loads, open(jsonl)) if x.get("type") == "request"]
    # a timeout that is not whole milliseconds: refused, named, nothing written
    bad = subprocess.run([ctx["tokenscope"], "report", rec, "-q", "--otlp",
                          "http://127.0.0.1:1/v1/traces"], capture_output=True, text=True,
                         env=dict(os.environ, OTEL_EXPORTER_OTLP_TIMEOUT="5s"))
    check(bad.returncode == 1 and "OTEL_EXPORTER_OTLP_TIMEOUT '5s'" in bad.stderr and
          not bad.stdout, f"otlp replay: OTEL_EXPORTER_OTLP_TIMEOUT=5s refused, named "
                          f"({bad.returncode}, {bad.stderr.strip()[-200:]})")
    offset = header_offset(rec)
    by_req = {s["attributes"].get("tokenscope.request_id"): s for s in spans
              if "tokenscope.request_id" in s["attributes"]}
    check(len(records) >= 30 and len(by_req) == len(records) and
          len(by_req) == len([s for s in spans if s["kind"] in (2, 3)]),
          f"otlp replay: one span per record ({len(by_req)} spans, {len(records)} records)")
    exact = phases = joined = tokens = 0
    for rec_ in records:
        s = by_req.get(rec_["id"])
        if not s:
            continue
        tokens += token_events_exact(s, rec_, offset)
        end = max(rec_["end_ns"] or 0, rec_["start_ns"])
        # the record's TTFT is rounded to the microsecond (half away from zero, in C), the
        # span's is not: within half a microsecond
        exact += (s["start"] == rec_["start_ns"] + offset and s["end"] == end + offset and
                  s["kind"] == (2 if rec_["role"] == "server" else 3) and
                  s["name"] == f"{s['attributes']['gen_ai.operation.name']} {rec_['model']}" and
                  abs(s["attributes"].get("tokenscope.ttft_ms", -1) - rec_["ttft_ms"]) <=
                  0.0005 + 1e-9)
        a = rec_.get("attribution")
        if rec_["role"] == "server" and a and a["source"] == "engine_wire":
            kids = {k["name"]: k for k in spans if k["parent_span_id"] == s["span_id"]}
            want = {"tokenscope.frontend": a["frontend_ms"],
                    "tokenscope.engine_queue": a["engine_queue_ms"],
                    "tokenscope.prefill": a["prefill_ms"], "tokenscope.emit": a["emit_ms"]}
            phases += (set(kids) == set(want) and
                       all(abs((kids[k]["end"] - kids[k]["start"]) / 1e6 - v) < 2e-6
                           for k, v in want.items()) and
                       kids["tokenscope.frontend"]["start"] == s["start"])
        if rec_["role"] == "client" and rec_.get("server_id") in by_req:
            srv = by_req[rec_["server_id"]]
            joined += srv["trace_id"] == s["trace_id"] and srv["parent_span_id"] == s["span_id"]
    servers = [x for x in records if x["role"] == "server" and x.get("attribution") and
               x["attribution"]["source"] == "engine_wire"]
    clients = [x for x in records if x["role"] == "client" and x.get("server_id") in by_req]
    check(exact == len(records), f"otlp replay: each span's kind, name, times (the "
          f"recording's clock pair, to the ns) and TTFT are its record's ({exact} of "
          f"{len(records)})")
    check(tokens == len(records), f"otlp replay: each token event a span event at its time: "
          f"the first at the record's first token, their gaps its ITL ({tokens} of "
          f"{len(records)})")
    check(len(servers) >= 10 and phases == len(servers),
          f"otlp replay: each engine-wire server's phases are children of its lengths "
          f"({phases} of {len(servers)})")
    check(len(clients) >= 10 and joined == len(clients),
          f"otlp replay: each joined client shares its server's trace, the server its child "
          f"({joined} of {len(clients)})")
    check("96 spans sent" in r.stderr or "spans sent" in r.stderr and " 0 dropped" in r.stderr,
          f"otlp replay: the run says what it sent ({r.stderr.strip()[-200:]})")


def token_events_exact(span, rec, offset):
    """The span's events: one per token event (128 at most, the rest counted), the first at
    the record's first token, the largest gap between them its ITL's max (to the
    microsecond)."""
    ev = [e["time"] for e in span["events"] if e["name"] == "tokenscope.token"]
    n = rec["token_events"]
    if len(ev) != min(n, 128) or span["dropped_events"] != max(0, n - 128):
        return False
    if not n:
        return True
    gaps = sorted((b - a) / 1e6 for a, b in zip(ev, ev[1:]))
    itl = rec.get("itl_ms") or {}
    return ev[0] == rec["first_token_ns"] + offset and (
        n > 128 or n < 2 or abs(gaps[-1] - itl["max"]) <= 0.0005 + 1e-9)


def curl(port, model, traceparent=None):
    body = json.dumps({"model": model, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    args = ["curl", "-sS", "-N", "-o", "/dev/null", f"http://127.0.0.1:{port}/v1/chat/completions",
            "-H", "content-type: application/json", "-d", body]
    if traceparent:
        args += ["-H", f"traceparent: {traceparent}"]
    return subprocess.run(args, timeout=60).returncode == 0


def check_live(ctx, work, app_port):
    check, Tracer = ctx["check"], ctx["Tracer"]
    recv, port, out = start_receiver(work, "live")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}/",
           "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20otlp-token",
           "OTEL_SERVICE_NAME": "llm-fixture"}
    tracer = Tracer(os.path.join(work, "live"), "--otlp", "env", "--port", str(app_port),
                    env=env)
    ok = curl(app_port, "fx-ttft20-itl5-n5-otlp1", f"00-{TRACE}-{PARENT}-01")
    ok &= curl(app_port, "fx-ttft20-itl5-n5-otlp2")
    check(ok, "otlp live: curl ran")
    rc, _, err = tracer.stop()
    check(rc == 0, f"otlp live: tracer exited 0 ({err[-300:]})")
    records = [x for x in map(json.loads, open(tracer.out)) if x.get("type") == "request"]
    spans = wait_spans(out, 4)
    stop_all([recv])
    find = {(x["model"], x["role"]): x for x in records}
    span = {s["attributes"].get("tokenscope.request_id"): s for s in spans}
    got = {k: span.get(v["id"]) for k, v in find.items()}
    c1, s1 = got.get(("fx-ttft20-itl5-n5-otlp1", "client")), got.get(("fx-ttft20-itl5-n5-otlp1",
                                                                       "server"))
    c2, s2 = got.get(("fx-ttft20-itl5-n5-otlp2", "client")), got.get(("fx-ttft20-itl5-n5-otlp2",
                                                                       "server"))
    if not check(all((c1, s1, c2, s2)), f"otlp live: a span for each of the 4 records "
                 f"({len(spans)} spans, {len(records)} records)"):
        return
    check(c1["trace_id"] == s1["trace_id"] == TRACE and
          c1["parent_span_id"] == s1["parent_span_id"] == PARENT,
          "otlp live: traceparent honoured: both ends in its trace, under its span")
    check(c2["trace_id"] == s2["trace_id"] and s2["parent_span_id"] == c2["span_id"] and
          not c2["parent_span_id"] and c2["trace_id"] != TRACE,
          "otlp live: without one, the client starts a trace and its server is its child")
    for (model, role), r in find.items():
        s = got[(model, role)]
        check(abs(s["attributes"]["tokenscope.ttft_ms"] - r["ttft_ms"]) <= 0.0005 + 1e-9 and
              abs((s["end"] - s["start"]) / 1e6 - r["duration_ms"]) < 0.001,
              f"otlp live: {model} [{role}]: TTFT and length are the record's "
              f"({s['attributes']['tokenscope.ttft_ms']} vs {r['ttft_ms']}; "
              f"{(s['end'] - s['start']) / 1e6} vs {r['duration_ms']})")
    check(all(s["resource"].get("service.name") == "llm-fixture" and
              s["auth"] == "Bearer otlp-token" and
              s["content_type"] == "application/x-protobuf" for s in spans),
          "otlp live: OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_HEADERS and the endpoint honoured")
    check(abs(c1["start"] / 1e9 - time.time()) < 300,
          "otlp live: span times are Unix epoch nanoseconds")


def check_faults(ctx, work, app_port):
    check, Tracer = ctx["check"], ctx["Tracer"]
    # 503 twice (Retry-After: 1), then taken
    recv, port, out = start_receiver(work, "retry", "--answers", "503,503")
    tracer = Tracer(os.path.join(work, "retry"), "--otlp", f"http://127.0.0.1:{port}/v1/traces",
                    "--port", str(app_port))
    check(curl(app_port, "fx-ttft10-itl5-n3-otlpr"), "otlp 503: curl ran")
    spans = wait_spans(out, 2, timeout=15)
    rc, _, err = tracer.stop()
    stop_all([recv])
    check(rc == 0 and len(spans) >= 2 and "2 retries" in err,
          f"otlp 503: retried and delivered ({len(spans)} spans; {err.strip()[-200:]})")
    # a collector that never answers, and one that is gone: the records all the same, and
    # the end bounded by OTEL_EXPORTER_OTLP_TIMEOUT (0.3 s here; 5 s unless it is set): one
    # timeout, one more for a POST begun just before the end, and the tracer's own end
    for name, args in (("hang", ["--hang"]), ("gone", None)):
        if args:
            recv, port, out = start_receiver(work, name, *args)
        else:
            recv, port = None, plaintext_checks.free_port()
        metrics = os.path.join(work, f"{name}.metrics")
        tracer = Tracer(os.path.join(work, name), "--otlp",
                        f"http://127.0.0.1:{port}/v1/traces", "--port", str(app_port),
                        "--metrics-file", metrics, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
        check(curl(app_port, f"fx-ttft10-itl5-n3-otlp{name}"), f"otlp {name}: curl ran, "
              f"not slowed")
        t0 = time.monotonic()
        rc, out, err = tracer.stop()
        took = time.monotonic() - t0
        if recv:
            stop_all([recv], timeout=2)
        recs = [x for x in map(json.loads, open(tracer.out)) if x.get("type") == "request"]
        check(rc == 0 and len(recs) == 2 and all(x["complete"] for x in recs),
              f"otlp {name}: the records written whole ({len(recs)})")
        check("dropped" in err and " 0 dropped" not in err and took < 3.5,
              f"otlp {name}: the spans lost are counted and the end is bounded by the "
              f"0.3 s timeout ({took:.1f} s from Ctrl-C to the exit; {err.strip()[-200:]})")
        dropped = [line for line in open(metrics)
                   if line.startswith("tokenscope_otlp_spans_dropped_total ")]
        check(dropped and dropped[0].split()[1] == "2" and
              "spans were not delivered to the OTLP collector" in out,
              f"otlp {name}: the summary warns and the metrics count the 2 spans ({dropped})")


def check_server_alone(ctx, work, app):
    """Only the server traced: its span waits for a client that never comes, then leaves by
    the clock, while the tracer runs."""
    check, Tracer = ctx["check"], ctx["Tracer"]
    recv, port, out = start_receiver(work, "alone")
    tracer = Tracer(os.path.join(work, "alone"), "--otlp", f"http://127.0.0.1:{port}/v1/traces",
                    "--pid", str(app[0].pid))
    check(curl(app[1], "fx-ttft10-itl5-n3-otlpalone"), "otlp alone: curl ran")
    spans = wait_spans(out, 1, timeout=15)
    rc, _, err = tracer.stop()
    stop_all([recv])
    recs = [x for x in map(json.loads, open(tracer.out)) if x.get("type") == "request"]
    check(rc == 0 and len(recs) == 1 and len(spans) == 1 and
          spans[0]["attributes"]["tokenscope.request_id"] == recs[0]["id"] and
          spans[0]["kind"] == 2 and not spans[0]["parent_span_id"],
          f"otlp alone: the server's span left while the tracer ran, the root of its trace "
          f"({len(spans)} spans, {len(recs)} records)")


def check_nginx(ctx, work, app_port):
    """curl -> nginx (TLS) -> uvicorn, every end traced: one trace. Without a header, the
    curl span is its root, nginx's server span its child, nginx's call upstream that span's
    child, and uvicorn's span the call's child; with one, all four under the header's span."""
    check, Tracer = ctx["check"], ctx["Tracer"]
    nginx, nport = plaintext_checks.start_nginx(work, app_port, ctx["cert"], ctx["key"])
    recv, port, out = start_receiver(work, "nginx")
    try:
        tracer = Tracer(os.path.join(work, "nginx"), "--otlp", f"http://127.0.0.1:{port}/v1/traces",
                        "--port", str(nport), "--port", str(app_port))
        body = json.dumps({"model": "fx-ttft10-itl5-n3-otlpnginx", "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
        ok = True
        for tp in (None, f"00-{TRACE}-{PARENT}-01"):
            args = ["curl", "-sSk", "-N", "-o", "/dev/null",
                    f"https://127.0.0.1:{nport}/v1/chat/completions",
                    "-H", "content-type: application/json", "-d", body]
            ok &= subprocess.run(args + (["-H", f"traceparent: {tp}"] if tp else []),
                                 timeout=60).returncode == 0
        rc, _, err = tracer.stop()
    finally:
        stop_all([nginx])
    spans = wait_spans(out, 8)
    stop_all([recv])
    check(ok and rc == 0, f"otlp nginx: curl and the tracer ran ({err[-300:]})")
    recs = sorted((x for x in map(json.loads, open(tracer.out)) if x.get("type") == "request"),
                  key=lambda x: x["start_ns"])
    by_req = {s["attributes"].get("tokenscope.request_id"): s for s in spans}
    # per call, by start: curl, nginx's server record, nginx's call upstream, uvicorn's
    order = [("curl", "client"), ("nginx", "server"), ("nginx", "client"), ("python3", "server")]
    first, second = recs[:4], recs[4:]
    got = [[by_req.get(x["id"]) for x in call] for call in (first, second)]
    check(len(recs) == 8 and [(x["comm"], x["role"]) for x in first] == order and
          [(x["comm"], x["role"]) for x in second] == order and all(all(g) for g in got),
          f"otlp nginx: 4 records a call, each a span "
          f"({[(x['comm'], x['role'], x['id'] in by_req) for x in recs]})")
    if len(recs) != 8 or not all(all(g) for g in got):
        return
    a = got[0]
    check(not a[0]["parent_span_id"] and all(a[k]["trace_id"] == a[0]["trace_id"] and
                                             a[k]["parent_span_id"] == a[k - 1]["span_id"]
                                             for k in range(1, 4)),
          "otlp nginx: without a header one trace, curl -> nginx -> its call upstream -> "
          "uvicorn, each the child of the one before")
    check(all(g["trace_id"] == TRACE and g["parent_span_id"] == PARENT for g in got[1]),
          "otlp nginx: with traceparent, all four under the header's span")


def records_of(path):
    lines = [json.loads(line) for line in open(path)]
    return [x for x in lines if x.get("type") == "request"], \
        [x for x in lines if x.get("type") == "session"]


def check_app_and_agent(ctx, work):
    """The JS SDK's app and the openai SDK's agent loop, against the TLS fixture."""
    check, Tracer, root = ctx["check"], ctx["Tracer"], ctx["root"]
    clients = os.path.join(root, "tests", "integration", "clients")
    port_file = os.path.join(work, "tls.port")
    server = subprocess.Popen([CLIENT_PYTHON, os.path.join(root, "tests", "fixtures",
                                                           "llm_server.py"),
                               "--cert", ctx["cert"], "--key", ctx["key"], "--truth",
                               os.path.join(work, "tls.truth.jsonl"), "--port-file", port_file,
                               "--lifetime", "300"], stdout=subprocess.DEVNULL)
    recv, port, out = start_receiver(work, "apps")
    url = f"http://127.0.0.1:{port}/v1/traces"
    env = dict(os.environ, NODE_EXTRA_CA_CERTS=ctx["cert"])
    try:
        tls_port = wait_file(port_file, server, "the TLS fixture server")
        tracer = Tracer(os.path.join(work, "apps"), "--otlp", url)
        app = subprocess.run(["node", os.path.join(clients, "otel_app.js"), str(tls_port),
                              "fx-ttft10-itl5-n4-otelapp", url], env=env, capture_output=True,
                             text=True, timeout=120)
        agent = subprocess.run(["node", os.path.join(clients, "agent_loop.js"), str(tls_port),
                                "fx-ttft10-itl5-n3-otlpagent", "2"], env=env,
                               capture_output=True, text=True, timeout=120)
        rc, _, err = tracer.stop()
    finally:
        server.kill()
    spans = wait_spans(out, 1)
    stop_all([recv])
    check(app.returncode == 0 and agent.returncode == 0 and rc == 0,
          f"otlp apps: the app, the agent and the tracer ran ({app.stderr[-300:]} "
          f"{agent.stderr[-300:]} {err[-300:]})")
    if app.returncode or agent.returncode or rc:
        return
    recs, sessions = records_of(tracer.out)
    by_req = {s["attributes"]["tokenscope.request_id"]: s for s in spans
              if s["scope"] == "tokenscope" and "tokenscope.request_id" in s["attributes"]}
    check_app(check, json.loads(app.stdout), recs, spans, by_req, err)
    check_agent_session(check, recs, sessions, spans, by_req)


def check_app(check, calls, recs, spans, by_req, err):
    sampled, unsampled = calls
    mine = [r for r in recs if r["model"] == "fx-ttft10-itl5-n4-otelapp"]
    app_span = [s for s in spans if s["scope"] == "otel-app"]
    check(len(app_span) == 1 and app_span[0]["span_id"] == sampled["span_id"] and
          app_span[0]["trace_id"] == sampled["trace_id"],
          f"otlp app: the JS SDK exported its sampled span, and only that ({app_span})")
    first = sorted(mine, key=lambda r: r["start_ns"])
    got = [by_req.get(r["id"]) for r in first]
    check(len(first) == 4 and all(got[:2]) and not any(got[2:]),
          f"otlp app: the sampled call's two records are sent, the unsampled call's not "
          f"({[(r['role'], bool(g)) for r, g in zip(first, got)]})")
    if len(first) != 4 or not all(got[:2]):
        return
    check(all(g["trace_id"] == sampled["trace_id"] and g["parent_span_id"] == sampled["span_id"]
              and g["trace_state"] == sampled["tracestate"] == "vendor1=alpha,vendor2=beta"
              for g in got[:2]),
          f"otlp app: both ends of its call are children of the app's span, with its "
          f"tracestate ({[(g['trace_id'], g['parent_span_id'], g['trace_state']) for g in got[:2]]}"
          f" vs {sampled})")
    # the app's clock (the JS SDK's: its time origin plus a monotonic count) and tokenscope's
    # (CLOCK_MONOTONIC plus an offset read once) agree within a millisecond or two
    a = app_span[0] if app_span else None
    check(a and all(a["start"] - 2e6 <= g["start"] <= g["end"] <= a["end"] + 2e6 for g in got[:2]),
          f"otlp app: its call's spans lie inside the app's span, within 2 ms "
          f"({[(g['start'] - a['start'], a['end'] - g['end']) for g in got[:2]] if a else None})")
    check(unsampled["traceparent"].endswith("-00") and "2 not sampled" in err,
          f"otlp app: the unsampled call's 2 spans are counted ({err.strip()[-200:]})")


def check_agent_session(check, recs, sessions, spans, by_req):
    loop = [r for r in recs if r["model"] == "fx-ttft10-itl5-n3-otlpagent" and
            r["role"] == "client"]
    mine = [s for s in sessions if s["role"] == "client" and s["model"] ==
            "fx-ttft10-itl5-n3-otlpagent"]
    check(len(mine) == 1 and len(loop) == 5 and mine[0]["requests"] == 4,
          f"otlp agent: one client session of the loop's 4 chained calls "
          f"({[(s['requests'], s['role']) for s in mine]}, {len(loop)} records)")
    if len(mine) != 1:
        return
    sess = mine[0]
    ss = [s for s in spans if s["name"] == "tokenscope.session" and
          s["attributes"].get("tokenscope.session.id") == sess["id"]]
    if not check(len(ss) == 1, f"otlp agent: the session is a span ({len(ss)})"):
        return
    ss = ss[0]
    calls = [by_req.get(i) for i in sess["request_ids"]]
    check(all(c and c["trace_id"] == ss["trace_id"] and c["parent_span_id"] == ss["span_id"]
              for c in calls),
          f"otlp agent: each of its calls is the session span's child, in its trace "
          f"({[(c and c['parent_span_id'], c and c['trace_id']) for c in calls]} vs "
          f"{ss['span_id']} {ss['trace_id']})")
    check(calls[0] and ss["start"] == calls[0]["start"] and
          abs((ss["end"] - ss["start"]) / 1e6 - sess["total_ms"]) < 1e-3 and
          ss["attributes"]["tokenscope.session.calls"] == 4,
          f"otlp agent: the session span's times are the session record's "
          f"({ss['start']}..{ss['end']} vs {sess['total_ms']} ms)")
    servers = [r for r in recs if r["model"] == "fx-ttft10-itl5-n3-otlpagent" and
               r["role"] == "server"]
    client_of = {r.get("server_id"): r for r in loop}
    check(len(servers) == 5 and all(
        by_req.get(r["id"]) and r["id"] in client_of and
        by_req[r["id"]]["parent_span_id"] == by_req[client_of[r["id"]]["id"]]["span_id"]
        for r in servers),
        "otlp agent: each server span is its client span's child")
    plain = sorted(loop, key=lambda r: r["start_ns"])[-1]
    check(plain["id"] not in sess["request_ids"] and by_req.get(plain["id"]) and
          not by_req[plain["id"]]["parent_span_id"],
          "otlp agent: the loop's last call, no part of the session, is a root")


def trace_kept(trace_id, ratio):
    return int(trace_id[18:], 16) < ratio * 2 ** 56


def check_sampling(ctx, work, rec):
    check = ctx["check"]
    r, jsonl, spans = replay_to_receiver(ctx, work, "sample", rec, "--otlp-sample", "0.5")
    records = [x for x in map(json.loads, open(jsonl)) if x.get("type") == "request"]
    by_req = {s["attributes"].get("tokenscope.request_id"): s for s in spans
              if "tokenscope.request_id" in s["attributes"]}
    traces = {s["trace_id"] for s in spans}
    unsent = [x for x in records if x["id"] not in by_req]
    check(r.returncode == 0 and by_req and unsent and all(trace_kept(t, 0.5) for t in traces),
          f"otlp sample: the traces sent are those whose ids 0.5 keeps ({len(by_req)} of "
          f"{len(records)} records sent, {len(traces)} traces)")
    pairs = [(x, x["server_id"]) for x in records if x["role"] == "client" and x.get("server_id")]
    check(pairs and all((c["id"] in by_req) == (sid in by_req) for c, sid in pairs),
          f"otlp sample: a client and its server are sent alike ({len(pairs)} pairs)")
    check(f"{len(spans)} spans sent" in r.stderr and " not sampled" in r.stderr and
          " 0 not sampled" not in r.stderr,
          f"otlp sample: the run says what it sent and what it did not sample "
          f"({r.stderr.strip()[-200:]})")


def check_steps(ctx, work):
    check = ctx["check"]
    rec = fixture_recording(ctx, work, "llama")
    r, jsonl, spans = replay_to_receiver(ctx, work, "steps", rec, "--gaps", "--otlp-steps")
    check(r.returncode == 0, f"otlp steps: report exits 0 ({r.stderr[-300:]})")
    lines = [json.loads(line) for line in open(jsonl)]
    steps = [x for x in lines if x.get("type") == "engine_step"]
    records = [x for x in lines if x.get("type") == "request"]
    offset = header_offset(rec)
    step_spans = {(s["trace_id"], s["span_id"]): s for s in spans
                  if s["name"].startswith("tokenscope.step ")}
    by_start = {s["start"]: s for s in step_spans.values()}
    exact = sum(1 for x in steps if by_start.get(x["start_ns"] + offset) and
                by_start[x["start_ns"] + offset]["end"] == x["end_ns"] + offset and
                by_start[x["start_ns"] + offset]["name"] == f"tokenscope.step {x['kind']}")
    check(len(steps) >= 100 and len(step_spans) == len(steps) and exact == len(steps),
          f"otlp steps: each step a span, its record's times and kind ({exact} of {len(steps)}, "
          f"{len(step_spans)} spans)")
    linked = 0
    for x in records:
        s = next((s for s in spans if s["attributes"].get("tokenscope.request_id") == x["id"]),
                 None)
        a = x.get("attribution") or {}
        want = {a.get("prefill_start_ns")} | {g["step_start_ns"] for g in a.get("gaps", [])
                                              if g.get("step_start_ns")}
        got = {step_spans[(k["trace_id"], k["span_id"])]["start"] - offset
               for k in (s or {}).get("links", []) if (k["trace_id"], k["span_id"]) in step_spans}
        linked += bool(s) and len(s["links"]) == len(got) and got == want
    check(len(records) >= 10 and linked == len(records),
          f"otlp steps: each request links its prefill's first step and each token's producing "
          f"step, as its record names them ({linked} of {len(records)})")


def run_otlp_checks(ctx):
    root, work = ctx["root"], os.path.join(ctx["work"], "otlp")
    os.makedirs(work, exist_ok=True)
    plaintext_checks.FIXTURES = os.path.join(root, "tests", "fixtures")
    plaintext_checks.ROOT = root
    check_replay(ctx, work)
    check_sampling(ctx, work, os.path.join(work, "vllm.tsrec"))
    check_steps(ctx, work)
    app, app_port, _ = start_app(work, "asyncio")
    try:
        check_live(ctx, work, app_port)
        check_faults(ctx, work, app_port)
        check_server_alone(ctx, work, (app, app_port))
        check_nginx(ctx, work, app_port)
    finally:
        stop_all([app])
    check_app_and_agent(ctx, work)
