"""--otlp with real eBPF probes (imported by run.py; `run.sh --only otlp`): spans received by
an OTLP/HTTP receiver that decodes every export with the official OpenTelemetry protos
(tests/otlp/receiver.py), against the JSON Lines records of the same run.

- A replay of the vLLM-shaped recording: each record one span, its times the recording's
  clock pair to the nanosecond, its TTFT phases (the engine wire's split) children whose
  lengths are the record's; a client and its server in one trace, the server the child.
- Live, curl to the FastAPI fixture: a request carrying traceparent joins that trace (both
  ends under the header's span); one without starts a trace its server shares.
- The OpenTelemetry variables: the endpoint, the headers, the service name.
- Faults: 503s then 200 (retried, delivered); a collector that never answers and one that is
  gone (nothing else stops, the spans dropped are counted).
"""
import json
import os
import struct
import subprocess
import time

import plaintext_checks
from plaintext_checks import DEBIAN_PYTHON, start_app, stop_all, wait_file

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


def check_replay(ctx, work):
    check, tokenscope = ctx["check"], ctx["tokenscope"]
    rec = os.path.join(work, "vllm.tsrec")
    subprocess.run(f"gunzip -c {ctx['root']}/tests/fixtures/vllm/capture.tsrec.gz > {rec}",
                   shell=True, check=True)
    recv, port, out = start_receiver(work, "replay")
    jsonl = os.path.join(work, "replay.jsonl")
    r = subprocess.run([tokenscope, "report", rec, "-q", "-o", jsonl, "--otlp",
                        f"http://127.0.0.1:{port}/v1/traces"], capture_output=True, text=True)
    check(r.returncode == 0, f"otlp replay: report exits 0 ({r.stderr[-300:]})")
    records = [x for x in map(json.loads, open(jsonl)) if x.get("type") == "request"]
    spans = wait_spans(out, 1)
    stop_all([recv])
    offset = header_offset(rec)
    by_req = {s["attributes"].get("tokenscope.request_id"): s for s in spans
              if "tokenscope.request_id" in s["attributes"]}
    check(len(records) >= 30 and len(by_req) == len(records) and
          len(by_req) == len([s for s in spans if s["kind"] in (2, 3)]),
          f"otlp replay: one span per record ({len(by_req)} spans, {len(records)} records)")
    exact = phases = joined = 0
    for rec_ in records:
        s = by_req.get(rec_["id"])
        if not s:
            continue
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
    check(len(servers) >= 10 and phases == len(servers),
          f"otlp replay: each engine-wire server's phases are children of its lengths "
          f"({phases} of {len(servers)})")
    check(len(clients) >= 10 and joined == len(clients),
          f"otlp replay: each joined client shares its server's trace, the server its child "
          f"({joined} of {len(clients)})")
    check("96 spans sent" in r.stderr or "spans sent" in r.stderr and " 0 dropped" in r.stderr,
          f"otlp replay: the run says what it sent ({r.stderr.strip()[-200:]})")


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
    # a collector that never answers, and one that is gone: the records all the same
    for name, args in (("hang", ["--hang"]), ("gone", None)):
        if args:
            recv, port, out = start_receiver(work, name, *args)
        else:
            recv, port = None, plaintext_checks.free_port()
        metrics = os.path.join(work, f"{name}.metrics")
        tracer = Tracer(os.path.join(work, name), "--otlp",
                        f"http://127.0.0.1:{port}/v1/traces", "--port", str(app_port),
                        "--metrics-file", metrics)
        t0 = time.monotonic()
        check(curl(app_port, f"fx-ttft10-itl5-n3-otlp{name}"), f"otlp {name}: curl ran, "
              f"not slowed")
        rc, out, err = tracer.stop()
        took = time.monotonic() - t0
        if recv:
            stop_all([recv], timeout=2)
        recs = [x for x in map(json.loads, open(tracer.out)) if x.get("type") == "request"]
        check(rc == 0 and len(recs) == 2 and all(x["complete"] for x in recs),
              f"otlp {name}: the records written whole ({len(recs)})")
        check("dropped" in err and " 0 dropped" not in err and took < 30,
              f"otlp {name}: the spans lost are counted and the end is bounded "
              f"({took:.1f} s; {err.strip()[-200:]})")
        dropped = [line for line in open(metrics)
                   if line.startswith("tokenscope_otlp_spans_dropped_total ")]
        check(dropped and dropped[0].split()[1] == "2" and
              "spans were not delivered to the OTLP collector" in out,
              f"otlp {name}: the summary warns and the metrics count the 2 spans ({dropped})")


def run_otlp_checks(ctx):
    root, work = ctx["root"], os.path.join(ctx["work"], "otlp")
    os.makedirs(work, exist_ok=True)
    plaintext_checks.FIXTURES = os.path.join(root, "tests", "fixtures")
    plaintext_checks.ROOT = root
    check_replay(ctx, work)
    app, app_port, _ = start_app(work, "asyncio")
    try:
        check_live(ctx, work, app_port)
        check_faults(ctx, work, app_port)
    finally:
        stop_all([app])
