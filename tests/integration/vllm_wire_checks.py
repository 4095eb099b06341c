"""vLLM's engine-core wire with real eBPF probes (imported by run.py; `run.sh --only vllm_wire`).

The vLLM-shaped service (tests/fixtures/vllm/) speaks vLLM V1's own engine wire between its
API server and its engine core: ZMQ over Unix sockets (ipc://), ROUTER/DEALER in, PUSH/PULL
out, msgpack in the field orders of three vLLM releases (wire.py). The engine runs --no-gpu,
as a CPU build of vLLM does: no CUDA call at all, so the engine wire is tokenscope's only
account of the engine. Each run: 64 streamed requests at once (prompts of 32 to 8192 tokens,
30 % sharing a prefix), chunked prefill (2048-token steps), a KV cache too small for all of
them (preemptions), every 5th request with n=2, every 7th aborted by its client.

Runs, each with a tracer of its own:
  v0.8, v0.10, v0.21   the tracer started first (the ZMQ connections seen from their greeting;
                       v0.10's over tcp://, the others over ipc://)
  joined               v0.21, the tracer started after the service (its connections already
                       open: read from their frames, no greeting)
  no-stats             v0.10 with --disable-log-stats (no events: the messages' own times)
  cuda                 v0.21 on the stand-in GPU (sync): the engine's split and CUDA's beside

Checked against the fixture's truth (the engine's events as it sent them, its outputs'
timestamps, its scheduler's stats each step; the API server's response and engine ids):
  - every request joined to its engine request(s) by its response id, n>1 children counted;
  - frontend_ms, engine_queue_ms, queue_ms and prefill_ms within 0.1 ms of the truth's;
  - cached and prompt tokens exact, preemptions and output tokens exact, finish reasons;
  - no CUDA probe fired, and `estimated` names nothing the wire gave;
  - every step's running, waiting, KV use and prefix-cache counts in a vllm_step record;
  - the Prometheus gauges hold the last step's, the prefix-cache counters the sums; the
    Perfetto counter tracks hold every step's (tests/perfetto/check_trace.py);
  - without events: frontend_ms + engine_ms + emit_ms is the TTFT, queue_ms is null;
  - with CUDA steps too: CUDA's queue and prefill beside the engine's, and how far apart
    (the engine's SCHEDULED against the truth's first launch of the prefill step).
"""
import json
import os
import re
import subprocess

from attribution_checks import PY, wait_port
from plaintext_checks import free_port

REQUESTS = 64
CONCURRENCY = 64
TOL_MS = 0.1
# the engine as a CPU build runs it, chunked prefill, a KV cache too small for all
NO_GPU = ("--no-gpu", "--chunk", "2048", "--kv-policy", "vllm", "--kv-blocks", "1100")


def engine_truth(path):
    steps, reqs = [], {}
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            if t["type"] == "step":
                steps.append(t)
            else:
                reqs[t["rid"]] = t
    return steps, reqs


def child_times(t):
    """(QUEUED, the last SCHEDULED before its first output, first output) in ns, as sent."""
    first = t["first_output_ts"]
    queued = next((ts for ty, ts in t["events"] if ty == 1), None)
    sched = [ts for ty, ts in t["events"] if ty == 2 and ts <= first]
    ns = lambda x: None if x is None else round(x * 1e9)  # noqa: E731
    return ns(queued), ns(sched[-1] if sched else None), ns(first)


def run_one(ctx, name, layout, extra=NO_GPU, joined=False, perfetto=True,
            load_args=("--n2-every", "5", "--abort-every", "7")):
    check, Tracer = ctx["check"], ctx["Tracer"]
    root = ctx["root"]
    work = os.path.join(ctx["work"], "vllm-wire-" + name)
    os.makedirs(work, exist_ok=True)
    port = free_port()
    truth = os.path.join(work, "truth.jsonl")
    metrics = os.path.join(work, "metrics.prom")
    trace = os.path.join(work, "trace.pftrace")
    targs = ["--metrics-file", metrics] + (["--perfetto", trace] if perfetto else [])
    fx = os.path.join(root, "tests", "fixtures", "vllm")
    cmd = [PY, os.path.join(fx, "api_server.py"), "--port", str(port), "--truth", truth,
           "--wire", layout, "--max-seqs", "64", *extra]
    env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
    tracer = None
    if not joined:
        tracer = Tracer(work, *targs)
    api = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env,
                           stderr=open(os.path.join(work, "api.stderr"), "w"))
    try:
        wait_port(port, api, "the vLLM-shaped API server", timeout=60)
        if joined:
            tracer = Tracer(work, *targs)
        load = subprocess.run([PY, os.path.join(fx, "load.py"), f"http://127.0.0.1:{port}",
                               str(REQUESTS), str(CONCURRENCY), "--seed", "7", *load_args],
                              capture_output=True, text=True, timeout=300)
        res = json.loads(load.stdout.strip().splitlines()[-1]) if load.returncode == 0 else {}
        check(res.get("done", 0) + res.get("aborted", 0) == REQUESTS and not res.get("failed")
              and (res.get("aborted") or "--abort-every" not in load_args),
              f"vllm wire {name}: the load's streams ended, some aborted as asked ({res}, "
              f"{load.stderr[-300:]})")
        api.send_signal(2)
        api.wait(timeout=60)
    finally:
        if api.poll() is None:
            api.terminate()
            api.wait(timeout=30)
    rc, out, err = tracer.stop()
    check(rc == 0, f"vllm wire {name}: tokenscope exited 0 ({err[-300:]})")
    records = [json.loads(line) for line in open(tracer.out) if line.strip()]
    api_truth = [json.loads(line) for line in open(truth)]
    steps, ereqs = engine_truth(truth + ".engine")
    return records, api_truth, steps, ereqs, api.pid, out, metrics, trace, tracer.out


def check_requests(check, name, records, api_truth, ereqs, api_pid, events=True, cached=True):
    server = [r for r in records if r.get("type") == "request" and r["role"] == "server"
              and r["pid"] == api_pid]
    by_port = {}
    for r in server:
        by_port.setdefault(r["peer"].rsplit(":", 1)[-1], []).append(r)
    ok = bad = aborted_joined = engine_counted = 0
    problems = []
    for t in api_truth:
        recs = [r for r in by_port.get(str(t["client_port"]), [])
                if r["response_id"] == t["response_id"]]
        if len(recs) != 1:
            problems.append(f"{t['response_id']}: {len(recs)} records")
            bad += 1
            continue
        r = recs[0]
        a = r.get("attribution") or {}
        w = a.get("engine_wire") or {}
        if t["aborted"]:
            aborted_joined += r["engine_request_id"] == t["engine_ids"][0]
            continue
        kids = [ereqs[e] for e in t["engine_ids"]]
        times = [child_times(k) for k in kids]
        first = min(x[2] for x in times)
        # without events only the first output's time is on the wire
        queued = min((x[0] for x in times if x[0]), default=first)
        sched = min((x[1] for x in times if x[1]), default=first)
        want = {"frontend_ms": (queued - r["start_ns"]) / 1e6,
                "engine_queue_ms": (sched - queued) / 1e6,
                "queue_ms": (sched - r["start_ns"]) / 1e6,
                "prefill_ms": (first - sched) / 1e6,
                "emit_ms": (r["first_token_ns"] - first) / 1e6}
        facts = {"engine_request_id": (r["engine_request_id"], t["engine_ids"][0]),
                 "engine_requests": (w.get("engine_requests"), t["n"]),
                 "cached_tokens": (w.get("cached_tokens"), kids[0]["cached"] if cached else None),
                 "prompt_tokens": (w.get("prompt_tokens"), kids[0]["prompt"]),
                 "preemptions": (w.get("preemptions"),
                                 sum(k["preemptions"] for k in kids) if events else None),
                 "output_tokens": (w.get("output_tokens"), sum(k["generated"] for k in kids)),
                 "finish_reason": (w.get("finish_reason"), "length"),
                 # what the wire gave is never named estimated (token_steps, the CUDA gaps'
                 # alignment, may be)
                 "estimated": (sorted(set(a.get("estimated") or []) &
                                      {"prefill_start", "engine", "sequence"}), []),
                 "times": (w.get("times"), "events" if events else "messages")}
        src = r["token_sources"]
        if src["input_tokens"] != "usage":
            # no usage on the stream: the record's own counts are the engine's, and say so
            engine_counted += 1
            generated = sum(k["generated"] for k in kids)
            facts["record input_tokens"] = ((r["input_tokens"], src["input_tokens"]),
                                            (kids[0]["prompt"], "engine_wire"))
            facts["record cached_tokens"] = (
                (r["cached_tokens"], src["cached_tokens"]),
                (kids[0]["cached"], "engine_wire") if cached else (None, None))
            facts["record output_tokens"] = ((r["output_tokens"], src["output_tokens"]),
                                             (generated, "engine_wire"))
        wrong = [f"{k} {g!r}/{x!r}" for k, (g, x) in facts.items() if g != x]
        if events:
            wrong += [f"{k} {a.get(k)}/{v:.4f}" for k, v in want.items()
                      if a.get(k) is None or abs(a[k] - v) > TOL_MS]
        else:
            ttft = (r["first_token_ns"] - r["start_ns"]) / 1e6
            parts = a.get("frontend_ms", 0) + w.get("engine_ms", 0) + a.get("emit_ms", 0)
            if abs(parts - ttft) > 0.001 or a.get("queue_ms") is not None:
                wrong.append(f"frontend+engine+emit {parts:.4f} for a TTFT of {ttft:.4f}, "
                             f"queue_ms {a.get('queue_ms')}")
            if abs(a.get("emit_ms", -1) - want["emit_ms"]) > TOL_MS:
                wrong.append(f"emit_ms {a.get('emit_ms')}/{want['emit_ms']:.4f}")
        if wrong:
            problems.append(f"{t['response_id']}: " + ", ".join(wrong))
            bad += 1
        else:
            ok += 1
    done = sum(1 for t in api_truth if not t["aborted"])
    n2 = sum(1 for t in api_truth if t["n"] == 2 and not t["aborted"])
    pre = sum(k["preemptions"] for k in ereqs.values())
    cached = sum(1 for k in ereqs.values() if k["cached"])
    check(ok == done and not bad,
          f"vllm wire {name}: {ok}/{done} requests' engine split, tokens and finish exact "
          f"({n2} with n=2, {pre} preemptions, {cached} prefix-cache hits in the truth; "
          f"{problems[:3]})")
    check(engine_counted, f"vllm wire {name}: requests without usage have the engine's counts "
                          f"({engine_counted})")
    aborted = sum(1 for t in api_truth if t["aborted"])
    check(aborted_joined == aborted,
          f"vllm wire {name}: the {aborted} aborted requests joined to their engine requests "
          f"({aborted_joined})")
    return pre, cached, n2


def check_steps(check, name, records, steps, metrics_path):
    got = {r["ts_ns"]: r for r in records if r.get("type") == "vllm_step"}
    sent = [s for s in steps if s.get("stats")]
    wrong = []
    for s in sent:
        r = got.get(round(s["outputs_ts"] * 1e9))
        st = s["stats"]
        want = (st["num_running_reqs"], st["num_waiting_reqs"], st["kv_cache_usage"],
                st["prefix_cache_stats"]["queries"], st["prefix_cache_stats"]["hits"])
        have = r and (r["running"], r["waiting"], r["kv_cache_usage"],
                      r["prefix_cache_queries"], r["prefix_cache_hits"])
        if not have or have[:2] != want[:2] or abs(have[2] - want[2]) > 1e-12 or \
                have[3:] != want[3:]:
            wrong.append(f"step {s['step']}: {have} for {want}")
    check(sent and not wrong and len(got) >= len(sent),
          f"vllm wire {name}: every one of {len(sent)} steps' scheduler stats in a vllm_step "
          f"record ({len(got)} records; {wrong[:3]})")
    text = open(metrics_path).read()

    def metric(n):
        m = re.search(rf'^{n}{{process="[^"]*",engine="0"}} (\S+)$', text, re.M)
        return float(m.group(1)) if m else None

    last = sent[-1]["stats"] if sent else {}
    want = {"tokenscope_vllm_running_requests": last.get("num_running_reqs"),
            "tokenscope_vllm_waiting_requests": last.get("num_waiting_reqs"),
            "tokenscope_vllm_kv_cache_usage_ratio": last.get("kv_cache_usage"),
            "tokenscope_vllm_prefix_cache_queries_total":
                sum(s["stats"]["prefix_cache_stats"]["queries"] for s in sent),
            "tokenscope_vllm_prefix_cache_hits_total":
                sum(s["stats"]["prefix_cache_stats"]["hits"] for s in sent),
            "tokenscope_vllm_steps_total": len(sent)}
    bad = {k: (metric(k), v) for k, v in want.items()
           if metric(k) is None or abs(metric(k) - v) > 1e-9}
    check(not bad, f"vllm wire {name}: the metrics' scheduler gauges and counters are the "
                   f"truth's ({bad})")


def check_both(check, records, api_truth, steps, ereqs, api_pid):
    """Each request split by the engine wire and by CUDA steps: CUDA's figures beside, and how
    far apart: the engine's SCHEDULED against the first launch of its prefill step (the
    truth's), within 1 ms for 95 % of the requests (CUDA's split is an inference: the
    attribution phase holds it to its own bars)."""
    by_step = {s["step"]: s for s in steps}
    server = {(r["peer"].rsplit(":", 1)[-1], r["response_id"]): r for r in records
              if r.get("type") == "request" and r["role"] == "server" and r["pid"] == api_pid}
    n = close = 0
    wrong = []
    for t in api_truth:
        r = server.get((str(t["client_port"]), t["response_id"]))
        a = (r or {}).get("attribution") or {}
        w = a.get("engine_wire") or {}
        if "cuda_queue_ms" not in w:
            wrong.append(f"{t['response_id']}: no CUDA split beside ({a.get('source')})")
            continue
        n += 1
        if abs(w["cuda_queue_apart_ms"] - (a["queue_ms"] - w["cuda_queue_ms"])) > 0.001 or \
                abs(w["cuda_prefill_apart_ms"] - (a["prefill_ms"] - w["cuda_prefill_ms"])) > 0.001:
            wrong.append(f"{t['response_id']}: apart figures do not subtract")
        e = ereqs[t["engine_ids"][0]]
        sched = child_times(e)[1]
        want = (sched - by_step[e["prefill_steps"][0]]["first_launch_ns"]) / 1e6
        close += abs(w["cuda_queue_apart_ms"] - want) <= 1.0
    check(n == len(api_truth) and not wrong and close >= 0.95 * n,
          f"vllm wire cuda: {n}/{len(api_truth)} requests split by both, {close} of them apart "
          f"as the truth's SCHEDULED and first launch are (within 1 ms) ({wrong[:3]})")


def run_vllm_wire_checks(ctx):
    check, root = ctx["check"], ctx["root"]
    promtool = subprocess.run(["which", "promtool"], capture_output=True).returncode == 0
    for layout in ("v0.8", "v0.10", "v0.21"):
        # v0.10's run over tcp:// (vLLM's way to engines elsewhere), the others over ipc://
        records, api_truth, steps, ereqs, pid, out, metrics, trace, jsonl = run_one(
            ctx, layout, layout, extra=NO_GPU + (("--zmq", "tcp") if layout == "v0.10" else ()))
        # v0.8's outputs carried no cached tokens (num_cached_tokens came in 2025-05)
        pre, cached, n2 = check_requests(check, layout, records, api_truth, ereqs, pid,
                                         cached=layout != "v0.8")
        check(pre and cached and n2, f"vllm wire {layout}: the run had preemptions ({pre}), "
                                     f"prefix-cache hits ({cached}) and n=2 requests ({n2})")
        check_steps(check, layout, records, steps, metrics)
        check(not any(r.get("type") == "gpu_step" for r in records),
              f"vllm wire {layout}: no CUDA step at all (the engine ran --no-gpu)")
        m = re.search(r"engine wire \(vLLM\): .*", out)
        line = m.group(0) if m else ""
        check("unjoined=0" in line and "malformed=0" in line and "layout no known" not in out,
              f"vllm wire {layout}: the summary says what was read, none unjoined, "
              f"malformed or of an unknown layout ({line})")
        if promtool:
            r = subprocess.run(["promtool", "check", "metrics"], stdin=open(metrics),
                               capture_output=True, text=True)
            check(r.returncode == 0, f"vllm wire {layout}: promtool accepts the metrics "
                                     f"({r.stdout[-200:]}{r.stderr[-200:]})")
        r = subprocess.run([PY, os.path.join(root, "tests", "perfetto", "check_trace.py"),
                            trace, jsonl], capture_output=True, text=True)
        check(r.returncode == 0, f"vllm wire {layout}: the Perfetto timeline holds every "
                                 f"step's counters ({r.stdout[-400:]})")
    # joined: the service's ZMQ connections open before the tracer started
    records, api_truth, steps, ereqs, pid, out, metrics, _, _ = run_one(
        ctx, "joined", "v0.21", joined=True, perfetto=False)
    check_requests(check, "joined", records, api_truth, ereqs, pid)
    # --disable-log-stats: no events, no stats
    records, api_truth, steps, ereqs, pid, out, metrics, _, _ = run_one(
        ctx, "no-stats", "v0.10", extra=NO_GPU + ("--disable-log-stats",), perfetto=False)
    check_requests(check, "no-stats", records, api_truth, ereqs, pid, events=False)
    check(not any(r.get("type") == "vllm_step" for r in records),
          "vllm wire no-stats: no scheduler stats were sent, none reported")
    # CUDA too: the engine on the stand-in GPU, its events on: both splits, and how far apart
    records, api_truth, steps, ereqs, pid, out, metrics, trace, jsonl = run_one(
        ctx, "cuda", "v0.21", extra=("--mode", "sync"), load_args=())
    check_requests(check, "cuda", records, api_truth, ereqs, pid)
    check_both(check, records, api_truth, steps, ereqs, pid)
