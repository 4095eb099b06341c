"""Attribution checks with real eBPF probes (imported by run.py; `run.sh --only attribution`).

The vLLM-shaped service (tests/fixtures/vllm/): a FastAPI app under uvicorn, which starts its
engine core as a child process and reaches it over ZMQ; the engine schedules continuous
batches and runs them on the stand-in libcuda.so.1's virtual GPU (tests/gpu/vgpu.c), in
tensor parallel on two worker processes in one mode. Driven by 96 streamed requests, 64 at a
time, prompts of 32 to 8192 tokens with 30 % prefix reuse, through three front ends: TLS to
uvicorn, plaintext, and nginx terminating TLS in front of it.

Ground truth is what the fixture writes: the engine every step (first launch, GPU end from the
virtual GPU, the requests in it, prefill tokens, first tokens), the API server each SSE event
(the steps whose tokens it carries; the clock just before and after it was handed over). The
request's arrival is tokenscope's own (first request byte read, checked elsewhere against
the wire); everything the correlation adds is checked against the truth:
  - queue, prefill, emit, queue_busy, queue_idle; the step that began the prefill;
  - each token gap's producing step; interference flags (precision and recall);
  - no request attributed when the engine is not traced.
The accuracy table per mode is printed (docs/attribution.md holds a copy).
"""
import bisect
import json
import os
import socket
import subprocess
import sys
import time

from plaintext_checks import free_port, start_nginx

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's: fastapi, uvicorn, zmq
REQUESTS, CONCURRENCY = 128, 64

# name, front end, engine options, stream interval, chunked
MODES = [
    ("sync", "tcp", ["--mode", "sync"], 1, False),
    ("async+graphs", "tls", ["--mode", "async", "--graphs"], 1, False),
    ("chunked+async", "tcp", ["--mode", "async", "--chunk", "2048"], 1, True),
    ("chunked+graphs+tp2, interval 4", "nginx",
     ["--mode", "sync", "--chunk", "2048", "--graphs", "--tp", "2"], 4, True),
    ("async, server behind", "tcp", ["--mode", "async", "--fall-behind", "40"], 1, False),
]


def wait_port(port, proc, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start")


def within(got, want, abs_ms, rel):
    return got is not None and abs(got - want) <= max(abs_ms, rel * abs(want))


def busy_intervals(steps):
    """Each step's time on the GPU: from its first launch, or the previous step's end."""
    out, prev = [], 0
    for s in sorted(steps, key=lambda s: s["gpu_end_ns"]):
        start = max(s["first_launch_ns"], prev)
        out.append((start, s["gpu_end_ns"]))
        prev = max(prev, s["gpu_end_ns"])
    return out


# A spinning host sees its GPU finish within tens of microseconds (the truth's host_seen_ns
# against the virtual GPU's end). Past this, the engine's own host thread was descheduled:
# on this 2-core VM, when the load's burst of connections arrives, say.
HOST_LATE_NS = 200_000


def host_late(steps, past_ns=HOST_LATE_NS):
    """The engine's own late looks at its GPU, from the truth alone: (gpu end, host seen) of
    the steps its host saw end more than past_ns after their GPU work did."""
    return [(s["gpu_end_ns"], s["host_seen_ns"]) for s in steps
            if s["host_seen_ns"] - s["gpu_end_ns"] > past_ns]


def overlap(intervals, lo, hi):
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in intervals)


def nearest_step(steps_by_launch, launches, t):
    i = bisect.bisect_left(launches, t)
    cands = [j for j in (i - 1, i) if 0 <= j < len(launches)]
    j = min(cands, key=lambda j: abs(launches[j] - t))
    return steps_by_launch[j], abs(launches[j] - t)


def evaluate(records, truth, engine_truth, chunked, api_pid, interval=1):
    """Per-request comparison; returns the accuracy figures and the list of problems."""
    steps = {s["step"]: s for s in engine_truth if s["type"] == "step"}
    ereqs = {r["rid"]: r for r in engine_truth if r["type"] == "request"}
    by_launch = sorted(steps.values(), key=lambda s: s["first_launch_ns"])
    launches = [s["first_launch_ns"] for s in by_launch]
    busy = busy_intervals(steps.values())
    late_host = host_late(steps.values())  # the requests counted as touched by it
    seen_after = host_late(steps.values(), 0)  # what is allowed: every step's own lag
    server = [r for r in records if r["type"] == "request" and r["role"] == "server"
              and r["pid"] == api_pid]
    abs_ms, rel = (2.0, 0.10) if chunked else (1.0, 0.05)
    f = {"requests": len(truth), "matched": 0, "attributed": 0, "queue": 0, "prefill": 0,
         "emit": 0, "busy_idle": 0, "busy_idle_explained": 0, "prefill_start": 0, "gaps": 0,
         "gap_step": 0, "tp": 0, "fp": 0, "fn": 0, "linked": 0, "split_explained": 0,
         "gaps_after_merge": 0, "merged_known": 0, "inferred": 0, "inferred_step": 0,
         "counted": 0, "counted_inferred": 0, "host_late": 0}
    # tokenscope's steps against the truth's: |start error| + |end error| per truth step
    ours = sorted((r for r in records if r["type"] == "gpu_step"),
                  key=lambda r: r["first_launch_ns"])
    our_starts = [r["first_launch_ns"] for r in ours]
    step_error = {}
    for st in steps.values():
        i = bisect.bisect_left(our_starts, st["first_launch_ns"] - 2_000_000)
        near = []
        while i < len(ours) and our_starts[i] <= st["first_launch_ns"] + 2_000_000:
            near.append(ours[i])
            i += 1
        if near:
            step_error[st["step"]] = (
                abs(min(r["first_launch_ns"] for r in near) - st["first_launch_ns"]) +
                abs(max(r["gpu_done_ns"] for r in near) - st["gpu_end_ns"]))
    clients = {}
    for c in records:
        if c["type"] == "request" and c["role"] == "client" and c["comm"] == "python3":
            clients.setdefault(c.get("server_id"), []).append(c)
    problems = []
    for t in truth:
        port = t["client_port"]
        ev0 = t["events"][0]
        recs = [r for r in server if r["peer"] and r["peer"].endswith(f":{port}")
                and r["first_token_ns"] and ev0["t0"] <= r["first_token_ns"] <= ev0["t1"]]
        if len(recs) != 1:
            problems.append(f"rid {t['rid']}: {len(recs)} server records match")
            continue
        r = recs[0]
        f["matched"] += 1
        # the load's own record (directly, or through nginx) names this server record
        cs = clients.get(r["id"], [])
        f["linked"] += (len(cs) == 1 and cs[0]["upstream_ms"] is not None and
                        abs(cs[0]["upstream_ms"] - (cs[0]["ttft_ms"] - r["ttft_ms"])) < 0.01)
        a = r.get("attribution")
        if not a or a.get("source") != "steps":
            # (the engine wire's span alone, where no step split it, is no step split)
            problems.append(f"rid {t['rid']}: not attributed by steps: "
                            f"{r.get('attribution_error') or (a or {}).get('source')}")
            continue
        f["attributed"] += 1
        er = ereqs[t["rid"]]
        first_step = steps[er["prefill_steps"][0]]
        ft_step = steps[er["first_token_step"]]
        arrival, ft = r["start_ns"], r["first_token_ns"]
        ps = first_step["first_launch_ns"]
        want = {"queue": (ps - arrival) / 1e6,
                "prefill": (ft_step["gpu_end_ns"] - ps) / 1e6,
                "emit": (ft - ft_step["gpu_end_ns"]) / 1e6}
        want_busy = overlap(busy, arrival, ps) / 1e6
        # What no tracer on the host could see: the engine's own host seeing a step's end
        # after its GPU work ended (the truth's own clocks, never tokenscope's figures). A
        # step's end is known when the host sees it; that much is allowed, every step's: a
        # spinning host's tens of microseconds, summed over the 60 steps of a long queue,
        # are a millisecond (CI, unloaded: a queue's busy time 6.62 ms over the truth's, of
        # which 5.58 ms in steps seen more than HOST_LATE_NS late). The requests with a
        # step seen that late are counted.
        h_queue = overlap(seen_after, arrival, ps) / 1e6
        h_ft = overlap(seen_after, ft_step["gpu_end_ns"], ft_step["host_seen_ns"]) / 1e6
        f["host_late"] += (overlap(late_host, arrival, ps) +
                           overlap(late_host, ft_step["gpu_end_ns"], ft_step["host_seen_ns"])) > 0
        ok = {"queue": within(a["queue_ms"], want["queue"], abs_ms, rel),
              "prefill": within(a["prefill_ms"], want["prefill"], abs_ms + h_ft, rel),
              "emit": within(a["emit_ms"], want["emit"], abs_ms + h_ft, rel)}
        for k in ok:
            f[k] += ok[k]
        # The same with the steps' own time errors allowed (tokenscope's start and end of a
        # step against the truth's; see below): when a bar fails, whether the split used the
        # wrong steps or right steps seen late (a host thread descheduled).
        e_ps, e_ft = step_error.get(first_step["step"], 0) / 1e6, step_error.get(ft_step["step"], 0) / 1e6
        f["split_explained"] += (within(a["queue_ms"], want["queue"], abs_ms + e_ps, rel) and
                                 within(a["prefill_ms"], want["prefill"], abs_ms + e_ps + e_ft, rel) and
                                 within(a["emit_ms"], want["emit"], abs_ms + e_ft, rel))
        b_ok = (within(a["queue_busy_ms"], want_busy, abs_ms + h_queue, rel) and
                within(a["queue_idle_ms"], want["queue"] - want_busy, abs_ms + h_queue, rel))
        f["busy_idle"] += b_ok
        # What the step timestamps could not give: a step's end is observed when its sync
        # returns (a host thread descheduled then returns late; with async scheduling a sync
        # made after the step ended only bounds it), its start at the launch call's probe
        # (the truth reads its clock inside the call, just after). Each step's own error
        # (tokenscope's step against the truth's) allowed, summed over the queue.
        late = sum(step_error.get(s["step"], 0) for s in steps.values()
                   if s["host_seen_ns"] > arrival and s["first_launch_ns"] < ps) / 1e6
        f["busy_idle_explained"] += (
            within(a["queue_busy_ms"], want_busy, abs_ms + late, rel) and
            within(a["queue_idle_ms"], want["queue"] - want_busy, abs_ms + late, rel))
        got_step, d = nearest_step(by_launch, launches, a["prefill_start_ns"])
        f["prefill_start"] += got_step["step"] == first_step["step"] and d < 1_000_000
        if not all(ok.values()) or not b_ok:
            problems.append(
                f"rid {t['rid']}: queue {a['queue_ms']:.2f}/{want['queue']:.2f} busy "
                f"{a['queue_busy_ms']:.2f}/{want_busy:.2f} prefill {a['prefill_ms']:.2f}/"
                f"{want['prefill']:.2f} ({a['prefill_steps']} steps, truth "
                f"{len(er['prefill_steps'])}) emit {a['emit_ms']:.2f}/{want['emit']:.2f}")
        # the gaps: content events after the first, in order
        gaps = a.get("gaps") or []
        evs = t["events"]
        if len(gaps) != len(evs) - 1:
            problems.append(f"rid {t['rid']}: {len(gaps)} gaps, truth {len(evs) - 1}")
            continue
        # An event that carries more steps than the stream interval (the first event, more
        # than one) is the server fallen behind, merging steps' tokens. Where its chunks state
        # the tokens so far (usage on every chunk), the engine's outputs say which event
        # carried which; where not, tokenscope says the gaps it cannot tell (step_inferred).
        # Every gap whose step it states as known is judged, merged or not; the inferred
        # ones are counted apart, with their own bar (docs/attribution.md).
        merged = len(evs[0]["steps"]) > 1 or any(len(ev["steps"]) > interval for ev in evs[1:])
        f["counted"] += t["usage_every_chunk"]
        f["counted_inferred"] += t["usage_every_chunk"] and any(g["step_inferred"] for g in gaps)
        for g, ev in zip(gaps, evs[1:]):
            producer = steps[max(ev["steps"])]
            got, d = nearest_step(by_launch, launches, g["step_start_ns"])
            right = got["step"] == producer["step"] and d < 1_000_000
            f["gaps_after_merge"] += merged
            if g["step_inferred"]:
                f["inferred"] += 1
                f["inferred_step"] += right
                continue
            f["merged_known"] += merged
            f["gaps"] += 1
            f["gap_step"] += right
            truly = any(rid != t["rid"] for s in ev["steps"] for rid, _ in steps[s]["prefill"])
            if truly and g["interfered"]:
                f["tp"] += 1
            elif g["interfered"]:
                f["fp"] += 1
            elif truly:
                f["fn"] += 1
    return f, problems


def table_row(name, front, f):
    n = max(f["attributed"], 1)
    pct = lambda k, d=n: 100.0 * f[k] / max(d, 1)  # noqa: E731
    prec = 100.0 * f["tp"] / max(f["tp"] + f["fp"], 1)
    rec = 100.0 * f["tp"] / max(f["tp"] + f["fn"], 1)
    gap = f"{pct('gap_step', f['gaps']):.2f} ({f['gaps']}; {f['merged_known']} merged)"
    inter = f"{prec:.1f} / {rec:.1f}"
    inferred = (f"{pct('inferred_step', f['inferred']):.1f} ({f['inferred']})"
                if f["inferred"] else "- (0)")
    return (f"| {name} | {front} | {f['attributed']}/{f['requests']} | {pct('queue'):.1f} | "
            f"{pct('prefill'):.1f} | {pct('emit'):.1f} | {pct('busy_idle'):.1f} | "
            f"{pct('split_explained'):.1f} / {pct('busy_idle_explained'):.1f} | "
            f"{pct('prefill_start'):.1f} | {gap} | {inferred} | {inter} | {f['host_late']} |")


TABLE_HEAD = ("| mode | front end | attributed | queue ok % | prefill ok % | emit ok % | "
              "busy/idle ok % | step time errors allowed: queue+prefill+emit / busy/idle ok % | "
              "prefill start step % | "
              "gap step % (gaps known; of them in merged streams) | "
              "inferred gaps: on their step % (gaps) | interference precision / recall % | "
              "requests with the engine's host late |\n|" + " --- |" * 13)


def run_mode(ctx, name, front, engine_args, interval, chunked, extra_tracer_args=()):
    check, Tracer = ctx["check"], ctx["Tracer"]
    root, cert, key = ctx["root"], ctx["cert"], ctx["key"]
    work = os.path.join(ctx["work"], "attr-" + "".join(c if c.isalnum() else "-" for c in name))
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
    port = free_port()
    truth_path = os.path.join(work, "truth.jsonl")
    tracer = Tracer(work, "--gaps", *extra_tracer_args)
    procs = []
    try:
        cmd = [PY, os.path.join(root, "tests", "fixtures", "vllm", "api_server.py"),
               "--port", str(port), "--truth", truth_path, "--stream-interval", str(interval),
               # the engine's events off (vLLM's --disable-log-stats): these runs check the
               # split from CUDA steps; vllm_wire_checks.py checks the engine wire's own
               "--disable-log-stats", *engine_args]
        if front == "tls":
            cmd += ["--tls", cert, key]
        api = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(work, "api.stderr"), "w"))
        procs.append(api)
        wait_port(port, api, "the vLLM-shaped API server")
        url = f"https://127.0.0.1:{port}" if front == "tls" else f"http://127.0.0.1:{port}"
        if front == "nginx":
            nginx, nport = start_nginx(work, port, cert, key)
            procs.append(nginx)
            url = f"https://127.0.0.1:{nport}"
        load = subprocess.run([PY, os.path.join(root, "tests", "fixtures", "vllm", "load.py"),
                               url, str(REQUESTS), str(CONCURRENCY), "--tls-ca", cert],
                              capture_output=True, text=True, timeout=300)
        res = json.loads(load.stdout.strip().splitlines()[-1]) if load.returncode == 0 else {}
        check(res.get("done") == REQUESTS,
              f"{name}: the load's {REQUESTS} streams all ended with [DONE] ({res}, "
              f"{load.stderr[-300:]})")
        api.send_signal(2)
        api.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
    rc, out, err = tracer.stop()
    check(rc == 0, f"{name}: tokenscope exited 0 ({err[-300:]})")
    records = [json.loads(line) for line in open(tracer.out)]
    truth = [json.loads(line) for line in open(truth_path)]
    engine_truth = [json.loads(line) for line in open(truth_path + ".engine")]
    secret = b"sk-fixture-secret"
    check(secret not in open(tracer.out, "rb").read() and secret not in open(tracer.rec, "rb").read(),
          f"{name}: the load's API key is in neither output")
    return api.pid, records, truth, engine_truth, out, tracer


# Bars (the issue's) are checked over the requests and gaps of all modes of a kind pooled;
# each mode alone must come within PER_MODE_SLACK of them (a mode is 128 requests, where one
# request is 0.8 %: a descheduled host thread at the wrong moment must not fail the build).
PER_MODE_SLACK = 0.02
# The least gaps a mode's "producing step" bar (99 %) is judged over: 400 resolve 1 % (each
# mode has about 1 400 to 4 000 known, the stream interval's about 550: the half of its
# streams without usage on every chunk are inferred)
MIN_GAPS_JUDGED = 400
# Gaps whose step tokenscope says it inferred (step_inferred: a merged stream whose chunks
# state no count), in the mode that falls behind on purpose (one event in four merging 4 to 6
# steps): placed by the server's lag within what the engine's outputs allow
INFERRED_GAP_STEP = 0.93
# Streams that state their tokens so far on every chunk, judged for the rule that none of
# their gaps is inferred: the load asks it of half its 128 requests
LEAST_COUNTED = 48


# The least samples each kind of bar is judged over (a mode runs 128 requests, ~550 to 4 000
# known token gaps, ~400 to 2 600 of them interfered): fewer fail the bar, never pass it.
LEAST_REQUESTS = 100
LEAST_GAPS = MIN_GAPS_JUDGED
LEAST_INTERFERED = 200


def bar(check, what, got, of, want, least):
    check(of >= least and got >= want * of,
          f"{what} >= {100 * want:.0f} % ({got}/{of}; at least {least} to judge)")


def run_attribution_checks(ctx):
    check = ctx["check"]
    rows = []
    pooled = {False: {}, True: {}}  # chunked or not -> summed figures
    for name, front, engine_args, interval, chunked in MODES:
        api_pid, records, truth, engine_truth, summary, tracer = run_mode(
            ctx, name, front, engine_args, interval, chunked)
        f, problems = evaluate(records, truth, engine_truth, chunked, api_pid, interval)
        for p in problems[:8]:
            print(f"  {name}: {p}")
        print(f"{name}: {f['gaps_after_merge']} gaps in streams with a merged event, "
              f"{f['merged_known']} of them known; {f['inferred']} gaps inferred, "
              f"{f['inferred_step']} of them on their producing step; known gaps "
              f"{f['gaps']}, {f['tp'] + f['fn']} of them interfered", flush=True)
        rows.append(table_row(name, front, f))
        for k, v in f.items():
            pooled[chunked][k] = pooled[chunked].get(k, 0) + v
        n = f["requests"]
        check(n == REQUESTS and f["matched"] == n,
              f"{name}: every request's server record found ({f['matched']}/{n})")
        check(f["linked"] == n, f"{name}: every load client record names its server record "
              f"(server_id, upstream_ms) ({f['linked']}/{n})")
        check_bars(check, name, f, chunked, PER_MODE_SLACK)
        # the tokens so far on every chunk tie each event to the engine's outputs it carried,
        # merged or not: none of those streams has a gap inferred
        check(f["counted"] >= LEAST_COUNTED and f["counted_inferred"] == 0,
              f"{name}: no gap inferred in the streams with usage on every chunk "
              f"({f['counted_inferred']} of {f['counted']} had one; at least {LEAST_COUNTED})")
        if "--fall-behind" in engine_args:
            check(f["merged_known"] >= MIN_GAPS_JUDGED,
                  f"{name}: known gaps in streams with a merged event >= {MIN_GAPS_JUDGED} "
                  f"({f['merged_known']} of {f['gaps_after_merge']})")
            bar(check, f"{name}: the producing step of the gaps said inferred",
                f["inferred_step"], f["inferred"], INFERRED_GAP_STEP, MIN_GAPS_JUDGED)
        else:
            check(f["gaps"] >= MIN_GAPS_JUDGED,
                  f"{name}: known gaps >= {MIN_GAPS_JUDGED} "
                  f"({f['gaps']} of {f['gaps'] + f['inferred']})")
        check("TTFT p99" in summary and "queued behind engine work" in summary and
              "token gaps above p90" in summary and "engine pid" in summary,
              f"{name}: the summary gives the tail in words and the engine")
        # the recording replays to the same records
        rp = subprocess.run([ctx["tokenscope"], "report", tracer.rec, "-q", "--gaps", "-o",
                             tracer.out + ".replay"], capture_output=True, text=True)
        check(rp.returncode == 0 and
              [json.loads(l) for l in open(tracer.out + ".replay")] == records,
              f"{name}: the recording replays to the same records")
    for chunked, f in pooled.items():
        check_bars(check, "chunked prefill modes" if chunked else "modes without chunked prefill",
                   f, chunked, 0)

    # The engine not traced (tokenscope follows only the API server): nothing is attributed.
    check_untraced(ctx)
    print("\nattribution accuracy against the fixture's ground truth:\n" + TABLE_HEAD)
    for r in rows:
        print(r)


def check_bars(check, name, f, chunked, slack):
    n = f["requests"]
    if chunked:
        bar(check, f"{name}: prefill began in the right step", f["prefill_start"], n,
            0.90 - slack, LEAST_REQUESTS)
        for k in ("queue", "prefill"):
            bar(check, f"{name}: {k} within max(2 ms, 10 %)", f[k], n, 0.90 - slack,
                LEAST_REQUESTS)
    else:
        # The step time errors allowed (the table's other figures) are named to tell, when
        # a bar fails, timestamps that came late from steps chosen wrong.
        for k in ("queue", "prefill", "emit"):
            bar(check, f"{name}: {k} within max(1 ms, 5 %) ({f['split_explained']} with the "
                f"steps' time errors allowed)", f[k], n, 0.99 - slack, LEAST_REQUESTS)
        bar(check, f"{name}: queue busy/idle within max(1 ms, 5 %) "
            f"({f['busy_idle_explained']} with the steps' time errors allowed)",
            f["busy_idle"], n, 0.95 - slack, LEAST_REQUESTS)
    bar(check, f"{name}: the producing step of the token gaps it states ({f['merged_known']} "
        f"in streams whose server merged steps into one event; {f['inferred']} said inferred, "
        f"judged apart)", f["gap_step"], f["gaps"], 0.99 - slack, LEAST_GAPS)
    bar(check, f"{name}: interference precision", f["tp"], f["tp"] + f["fp"], 0.95 - slack,
        LEAST_INTERFERED)
    bar(check, f"{name}: interference recall", f["tp"], f["tp"] + f["fn"], 0.95 - slack,
        LEAST_INTERFERED)


def check_untraced(ctx):
    """-p API_PID: the engine's steps are never seen, so no record has a split from them; what
    the API server's own socket carries of vLLM's engine wire (--disable-log-stats: no
    events) still splits each TTFT into the front end's part and the engine's, unsplit."""
    check, Tracer, root = ctx["check"], ctx["Tracer"], ctx["root"]
    work = os.path.join(ctx["work"], "attr-untraced")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
    port = free_port()
    api = subprocess.Popen([PY, os.path.join(root, "tests", "fixtures", "vllm", "api_server.py"),
                            "--port", str(port), "--truth", os.path.join(work, "truth.jsonl"),
                            "--disable-log-stats"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, api, "the vLLM-shaped API server")
        tracer = Tracer(work, "-p", str(api.pid))
        load = subprocess.run([PY, os.path.join(root, "tests", "fixtures", "vllm", "load.py"),
                               f"http://127.0.0.1:{port}", "16", "8"],
                              capture_output=True, text=True, timeout=120)
        check(load.returncode == 0, "untraced engine: load ran")
        api.send_signal(2)
        api.wait(timeout=60)
        rc, out, err = tracer.stop()
    finally:
        if api.poll() is None:
            api.terminate()
    server = [json.loads(l) for l in open(tracer.out)]
    server = [r for r in server if r["type"] == "request" and r["role"] == "server"]
    def wire_only(r):
        a = r["attribution"] or {}
        w = a.get("engine_wire") or {}
        return (a.get("source") == "engine_wire" and a["queue_ms"] is None and
                a["prefill_ms"] is None and a["steps"] == 0 and w.get("times") == "messages"
                and a["engine_pids"] == [] and abs(a["frontend_ms"] + w["engine_ms"] +
                                                   a["emit_ms"] - r["ttft_ms"]) < 0.002)
    check(len(server) == 16 and all(wire_only(r) for r in server),
          f"untraced engine: all {len(server)}/16 server records split by the engine wire "
          f"alone, no step's split in any "
          f"({[r['attribution'] for r in server if not wire_only(r)][:1]})")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import run  # noqa: E402
    sys.argv = [sys.argv[0], "--only", "attribution"]
    sys.exit(run.main())
