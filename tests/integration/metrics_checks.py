"""--metrics checks with real eBPF probes (imported by run.py; `run.sh --only metrics`).

tokenscope traces the vLLM-shaped service (tests/fixtures/vllm) under 64 streamed requests
while a scraper reads /metrics every 100 ms, after misbehaving clients connected: one that
sends half a request and holds it (all along), a 1 MB request line, 1 000 connections at once
(for a second), a path other than /metrics. Checked:
  - every scrape: 200, Content-Type text/plain; version=0.0.4; promtool (Debian prometheus)
    accepts the exposition; other paths 404; tokenscope keeps tracing through the abuse;
  - --metrics-file at the end: promtool accepts it; the GenAI histograms count exactly the
    requests the JSON Lines hold, their le="0.1" buckets the requests at or under 100 ms;
  - no drops, and tokenscope never traces its own replies;
  - a real Prometheus (Debian's) scraping every second answers histogram_quantile(0.5, ...)
    of the server TTFT within the bucket of the fixture's own median (give or take the
    TTFT tolerance, max(2 ms, 5 %)), and the request count
    per model the fixture served.
"""
import http.client
import json
import os
import re
import select
import socket
import statistics
import subprocess
import threading
import time
import urllib.parse

from attribution_checks import PY, wait_port
from plaintext_checks import free_port

REQUESTS, CONCURRENCY = 64, 32


class Scraper(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.results, self.last = port, False, [], ""

    def run(self):
        while not self.stop:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/metrics")
                r = c.getresponse()
                body = r.read().decode()
                self.results.append((r.status, r.getheader("Content-Type")))
                self.last = body
                c.close()
            except OSError as e:
                self.results.append((0, str(e)))
            time.sleep(0.1)


def sample_sum(text, family, **labels):
    """Sum of the samples of `family` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(family + "{") and not line.startswith(family + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def promtool_ok(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    return r.returncode == 0, (r.stdout + r.stderr)[-300:]


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def abuse(port, check):
    """Clients a public endpoint meets. Returns the sockets to close after the load."""
    held = []
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /metr")  # half a request line, held open
    held.append(s)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = s.recv(100)
    except OSError:
        reply = b""  # reset while sending: refused too
    s.close()
    check(not reply.startswith(b"HTTP/1.1 200"),
          f"metrics: a 1 MB request line is refused ({reply[:40]!r})")
    crowd = []
    for _ in range(1000):  # past the connection limit: refused or left waiting, then gone
        try:
            crowd.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    time.sleep(1)
    for s in crowd:
        s.close()
    return held


SLOW_CLIENTS, IDLE_CLIENTS, SLOW_FOR_S = 64, 800, 8
REQUEST_TIME_MAX_S = 5  # user/sinks/exporter.c


def slow_clients(port, check):
    """64 clients that send one header line a second and 800 that connect and say nothing, for
    8 s: every scrape made meanwhile (every 100 ms) is answered, and each slow client is
    dropped within the exporter's bound on a request's whole time, not left to trickle."""
    stop = threading.Event()
    dropped_after = []

    def trickle():
        t0 = time.monotonic()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            while not stop.is_set():
                s.sendall(b"X-Slow: 1\r\n")
                readable, _, _ = select.select([s], [], [], 1.0)
                if readable and not s.recv(100):
                    break  # the server's end of it
            else:
                dropped_after.append(None)  # still held when the test ended
                s.close()
                return
            s.close()
        except OSError:
            pass  # reset: dropped too
        dropped_after.append(time.monotonic() - t0)

    threads = [threading.Thread(target=trickle) for _ in range(SLOW_CLIENTS)]
    for t in threads:
        t.start()
    idle = []
    for _ in range(IDLE_CLIENTS):
        try:
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    results = []
    deadline = time.monotonic() + SLOW_FOR_S
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/metrics")
            r = c.getresponse()
            r.read()
            results.append(r.status)
            c.close()
        except OSError as e:
            results.append(str(e))
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    for s in idle:
        s.close()
    check(len(idle) == IDLE_CLIENTS, f"metrics: {len(idle)} idle clients connected")
    check(len(results) >= 30 and all(r == 200 for r in results),
          f"metrics: every scrape answered while {SLOW_CLIENTS} slow and {IDLE_CLIENTS} idle "
          f"clients hold connections ({sum(r == 200 for r in results)}/{len(results)}: "
          f"{[r for r in results if r != 200][:3]})")
    check(len(dropped_after) == SLOW_CLIENTS and
          all(d is not None and d <= REQUEST_TIME_MAX_S + 2 for d in dropped_after),
          f"metrics: each slow client dropped within {REQUEST_TIME_MAX_S} s of its start "
          f"(+2 s), however it trickles (after {sorted(dropped_after, key=str)[-3:]})")


PROMETHEUS_CONF = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tokenscope
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def start_prometheus(work, scrape_port):
    """A real Prometheus (Debian's), its own config and data in work, on 127.0.0.1."""
    port = free_port()
    conf = os.path.join(work, "prometheus.yml")
    with open(conf, "w") as f:
        f.write(PROMETHEUS_CONF.format(port=scrape_port))
    p = subprocess.Popen(["prometheus", f"--config.file={conf}",
                          f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                          f"--web.listen-address=127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "prometheus.stderr"), "w"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/-/ready")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.2)
    raise SystemExit("prometheus did not start: " +
                     open(os.path.join(work, "prometheus.stderr")).read()[-500:])


def promql(port, query):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    r = json.loads(c.getresponse().read())
    return r["data"]["result"] if r.get("status") == "success" else None


# gen_ai.server.time_to_first_token's bucket boundaries
SERVER_TTFT_BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                      2.5, 5.0, 7.5, 10.0]


def bucket_of(x):
    lo = 0.0
    for b in SERVER_TTFT_BOUNDS:
        if x <= b:
            return lo, b
        lo = b
    return lo, float("inf")


def wait_scraped(prom_port, query, n, timeout=30):
    """Until Prometheus holds n samples of query's series (rate() needs them before the load)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = promql(prom_port, f"count_over_time(({query})[1m:1s])")
        if res and float(res[0]["value"][1]) >= n:
            return True
        time.sleep(0.5)
    return False


def wait_counted(prom_port, query, n, timeout=30):
    """Until query's value, as Prometheus last scraped it, reaches n."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = promql(prom_port, query)
        if res and float(res[0]["value"][1]) >= n:
            return True
        time.sleep(0.2)
    return False


def check_prometheus(check, prom_port, truth):
    """What the real Prometheus scraped, against the fixture's own truth."""
    # The counters as last scraped, not their rate: a series' first sample already holds the
    # requests that created it, which a rate() never counts (the warm-up, the first request of
    # each operation), and with ~60 requests that moves the median by a rank or two.
    q = ('histogram_quantile(0.5, sum by (le) ('
         'gen_ai_server_time_to_first_token_seconds_bucket{process="python3"}))')
    res = promql(prom_port, q)
    got = float(res[0]["value"][1]) if res else None
    ttfts = [(t["events"][0]["t0"] - t["arrival_ns"]) / 1e9 for t in truth]
    want = statistics.median(ttfts)
    # tokenscope's TTFT of a request is within max(2 ms, 5 %) of the fixture's (the timing
    # checks): a median that close to a bucket boundary may land on either side of it
    slack = max(0.002, 0.05 * want)
    lo, hi = bucket_of(want - slack)[0], bucket_of(want + slack)[1]
    check(got is not None and lo <= got <= hi,
          f"prometheus: the median server TTFT it computes ({got}) is in the bucket of the "
          f"fixture's own median ({want:.4f} s, +-{slack:.4f}: ({lo}, {hi}])")
    res = promql(prom_port, 'sum by (gen_ai_request_model) '
                            '(gen_ai_server_request_duration_seconds_count{process="python3"})')
    counts = {r["metric"].get("gen_ai_request_model"): float(r["value"][1]) for r in res or []}
    check(counts == {"m": float(len(truth))},  # the warm-up too
          f"prometheus: requests per model as the fixture served them ({counts}, want "
          f"{{'m': {len(truth)}}})")


def run_metrics_checks(ctx):
    check, Tracer, root = ctx["check"], ctx["Tracer"], ctx["root"]
    work = os.path.join(ctx["work"], "metrics")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
    mport, port = free_port(), free_port()
    final = os.path.join(work, "final.prom")
    tracer = Tracer(work, "--metrics", f"127.0.0.1:{mport}", "--metrics-file", final)
    api = subprocess.Popen([PY, os.path.join(root, "tests", "fixtures", "vllm", "api_server.py"),
                            "--port", str(port), "--truth", os.path.join(work, "truth.jsonl"),
                            "--disable-log-stats"],
                           env=env, stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(work, "api.stderr"), "w"))
    scraper = Scraper(mport)
    held = []
    prom = None
    try:
        wait_port(port, api, "the vLLM-shaped API server")
        prom, prom_port = start_prometheus(work, mport)
        held = abuse(mport, check)
        slow_clients(mport, check)
        check(get(mport, "/other") == 404, "metrics: a path other than /metrics is 404")
        # one request first, so that the series exist and Prometheus has them before the load
        warm = subprocess.run([PY, os.path.join(root, "tests", "fixtures", "vllm", "load.py"),
                               f"http://127.0.0.1:{port}", "1", "1", "--seed", "9"],
                              capture_output=True, text=True, timeout=60)
        check(warm.returncode == 0 and wait_scraped(
            prom_port, 'sum(gen_ai_server_time_to_first_token_seconds_count{process="python3"})', 3),
            "prometheus: scraped the warm-up request's series")
        scraper.start()
        load = subprocess.run([PY, os.path.join(root, "tests", "fixtures", "vllm", "load.py"),
                               f"http://127.0.0.1:{port}", str(REQUESTS), str(CONCURRENCY)],
                              capture_output=True, text=True, timeout=300)
        check(load.returncode == 0 and f'"done": {REQUESTS}' in load.stdout,
              f"metrics: the load ran ({load.stdout[-200:]}{load.stderr[-200:]})")
        check(tracer.p.poll() is None, "metrics: tokenscope keeps tracing through the abuse")
        api.send_signal(2)
        api.wait(timeout=60)
        truth = [json.loads(l) for l in open(os.path.join(work, "truth.jsonl"))]
        # held requests reported, published, then scraped: until Prometheus has them all
        wait_counted(prom_port, 'sum(gen_ai_server_request_duration_seconds_count'
                                '{process="python3"})', len(truth))
        check_prometheus(check, prom_port, truth)
    finally:
        scraper.stop = True
        for s in held:
            s.close()
        if api.poll() is None:
            api.terminate()
        if prom:
            prom.terminate()
            prom.wait(timeout=30)
    scraper.join(timeout=10)
    last = scraper.last
    rc, out, err = tracer.stop()
    check(rc == 0, f"metrics: tokenscope exited 0 ({err[-300:]})")
    ok = [r for r in scraper.results if r[0] == 200]
    check(len(ok) >= 20 and len(ok) == len(scraper.results) and
          all(t and t.startswith("text/plain; version=0.0.4") for _, t in ok),
          f"metrics: every scrape every 100 ms answered 200 text/plain; version=0.0.4 "
          f"({len(ok)}/{len(scraper.results)}: {scraper.results[-1:]})")
    good, why = promtool_ok(last)
    check(good, f"metrics: promtool accepts a live scrape ({why})")

    # the end: --metrics-file against the JSON Lines
    text = open(final).read()
    good, why = promtool_ok(text)
    check(good, f"metrics: promtool accepts --metrics-file ({why})")
    records = [json.loads(l) for l in open(tracer.out)]
    reqs = [r for r in records if r["type"] == "request"]
    for role, fam, bound in (("server", "gen_ai_server_time_to_first_token_seconds", "0.1"),
                             ("client", "gen_ai_client_operation_time_to_first_chunk_seconds",
                              "0.16")):
        rs = [r for r in reqs if r["role"] == role and r["comm"] == "python3" and
              r["ttft_ms"] is not None]
        n = sample_sum(text, fam + "_count", process="python3")
        le = sample_sum(text, fam + "_bucket", process="python3", le=bound)
        want_le = sum(1 for r in rs if r["ttft_ms"] <= float(bound) * 1000)
        check(len(rs) == REQUESTS + 1 and n == len(rs) and le == want_le and 0 < want_le < n,
              f"metrics: {fam} counts the {len(rs)} {role} requests (the load and a warm-up: "
              f"{n}), {want_le} at or "
              f"under {bound} s ({le})")
    check(sample_sum(text, "tokenscope_ttft_component_seconds_count", component="prefill") ==
          sum(1 for r in reqs if r.get("attribution")),
          "metrics: one TTFT split per attributed server request")
    check(sample_sum(text, "tokenscope_capture_drops_total") == 0 and
          sample_sum(last, "tokenscope_capture_drops_total") == 0,
          "metrics: scraping every 100 ms under 32 streams dropped nothing")
    check(not any(r["pid"] == tracer.p.pid for r in reqs),
          "metrics: tokenscope does not trace its own replies")
    # scraping changed nothing the pipeline made: the recording replays to the same records
    replay = os.path.join(work, "replay.jsonl")
    r = subprocess.run([ctx["tokenscope"], "report", tracer.rec, "-q", "-o", replay],
                       capture_output=True, text=True)
    check(r.returncode == 0 and [json.loads(l) for l in open(replay)] == records,
          "metrics: the recording of the scraped run replays to the same JSON Lines")
    check(re.search(r'^gen_ai_server_request_duration_seconds_bucket\{.*le="\+Inf"\} \d+$',
                    text, re.M) is not None, "metrics: histograms end with +Inf")
