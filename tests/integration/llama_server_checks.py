"""The real llama-server (imported by run.py): each request joined to its own sequence and
split exactly, against the server's own figures.

The engine: llama.cpp's own llama-server, built from the source the pinned node-llama-cpp
package carries (scripts/llama_server.sh, cached), serving the tiny model the tests write
(tests/fixtures/llama/gguf.py) with real continuous batching over its slots, prompt reuse by
longest common prefix, speculative decoding with a draft model and context shift.
tokenscope attaches to the running server, as an operator would.

Ground truth tokenscope does not read:
- the `timings` on each response's last chunk, as the client received them: the prompt
  tokens the server evaluated (prompt_n), those it reused from the slot's cache (cache_n),
  the tokens it generated (predicted_n) and its own prompt time (prompt_ms);
- the server's /metrics counters, read once per server: the prompt tokens it processed and
  the tokens it predicted, over every request;
- the LD_PRELOAD interposer around llama_decode (tests/fixtures/llama/decode_log.c): every
  call, one engine step each.

Each request (its own connection: the record is found by the client's port) must either be
split exactly (its computed and cached prompt tokens the server's, its prefill the
interposer's calls' within the probes' exact bounds and inside prompt_ms, its sequence named
by the server's timings, nothing about it estimated) or say it is ambiguous with its two
candidates; never a wrong split. prompt_ms begins before the prompt's step (the server's
host work on the batch): how far, and how often within max(2 ms, 15 %), is printed.
"""
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from llama_checks import check_steps, read_jsonl
from plaintext_checks import wait_file

PREFILL_TOLERANCE = 0.15  # of prompt_ms, or PREFILL_FLOOR_MS, whichever is larger
PREFILL_FLOOR_MS = 2.0
EDGE_SLACK_MS = 0.002     # one clock read two ways (the probe's, the interposer's)
LEADS = []                # the server's prompt_ms minus tokenscope's prefill, per request
ATTRIBUTED_LEAST = 0.75   # of the requests with timings split (the rest: ambiguous, said so)
WORDS = ["the", "model", "stream", "reply", "latency", "prompt", "cache", "engine", "step",
         "batch", "hello", "world", "token", "and", "of", "to", "in", "is"]


def text(rnd, words):
    return " ".join(rnd.choice(WORDS) for _ in range(words))


def server_dir(root):
    """The cached build (make llama-server builds it first; this only finds it)."""
    r = subprocess.run([os.path.join(root, "scripts", "llama_server.sh")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"llama-server: {r.stderr[-500:]}")
    return r.stdout.strip().splitlines()[-1]


class Server:
    """llama-server on the tiny model, with the interposer logging every llama_decode."""

    def __init__(self, root, work, name, slots, extra=(), context=1024, model="tiny.gguf"):
        build, gen = server_dir(root), os.path.join(root, "tests", "fixtures", ".gen")
        self.decode_log = os.path.join(work, f"{name}.decode.jsonl")
        port_file = os.path.join(work, f"{name}.port")
        self.out = open(os.path.join(work, f"{name}.log"), "w+")
        # port 0 is refused by llama-server: a free one, found by binding it first
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.p = subprocess.Popen(
            [os.path.join(build, "bin", "llama-server"), "-m", os.path.join(gen, model),
             "--host", "127.0.0.1", "--port", str(self.port), "-np", str(slots),
             "-c", str(context * slots), "-t", "1", "-tb", "1", "--metrics", "--no-webui",
             *extra],
            stdout=self.out, stderr=subprocess.STDOUT,
            env=dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "bin"),
                     LD_PRELOAD=os.path.join(gen, "libdecode_log.so"),
                     DECODE_LOG=self.decode_log))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.p.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if json.loads(r.read()).get("status") == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.out.seek(0)
        raise SystemExit(f"llama-server did not start: {self.out.read()[-1500:]}")

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            lines = r.read().decode().splitlines()
        return {ln.split()[0]: float(ln.split()[1]) for ln in lines
                if ln and not ln.startswith("#")}

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return read_jsonl(self.decode_log) if os.path.exists(self.decode_log) else []


def stream(port, path, body, read_events=None):
    """One streamed request on its own connection: (client port, status, the last timings,
    usage, events read). read_events: close the connection after that many events."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.connect()
    local = c.sock.getsockname()[1]
    sent = time.monotonic_ns()  # CLOCK_MONOTONIC, as the records' times
    c.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    timings, usage, events = None, None, 0
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        o = json.loads(line[6:])
        events += 1
        timings = o.get("timings") or timings
        usage = o.get("usage") or usage
        if read_events and events >= read_events:
            break
    c.close()
    return {"port": local, "sent": sent, "status": r.status, "timings": timings, "usage": usage,
            "body": body,
            "path": path, "events": events, "cut": bool(read_events)}


def body_for(path, prompt, max_tokens, include_usage=False):
    if path == "/completion":
        return {"prompt": prompt, "n_predict": max_tokens, "stream": True, "cache_prompt": True}
    b = {"model": "tiny", "stream": True, "max_tokens": max_tokens}
    if path == "/v1/completions":
        b["prompt"] = prompt
    else:
        b["messages"] = [{"role": "user", "content": prompt}]
    if include_usage:
        b["stream_options"] = {"include_usage": True}
    return b


def together(port, jobs):
    """Each job (path, body[, read_events]) at once; their results in order."""
    results = [None] * len(jobs)
    ready = threading.Barrier(len(jobs))

    def one(i):
        ready.wait()
        results[i] = stream(port, *jobs[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def workload(port, slots, rnd):
    """The requests of one server: waves of `slots` arriving together, half of them sharing a
    long prefix, prompts of one length arriving together, each endpoint, usage asked for,
    and a client that leaves mid-stream."""
    chat = "/v1/chat/completions"
    shared = text(rnd, 120)
    done = []
    for wave in range(4):
        jobs = []
        for i in range(slots):
            prompt = (shared + " " + text(rnd, rnd.randint(2, 30)) if i % 2 else
                      text(rnd, rnd.randint(10, 150)))
            jobs.append((chat, body_for(chat, prompt, rnd.randint(8, 40))))
        done += together(port, jobs)
    # one length, together: every word of WORDS is one token of the tiny model
    n = rnd.randint(20, 60)
    done += together(port, [(chat, body_for(chat, text(rnd, n), 16)) for _ in range(slots)])
    paths = ["/v1/completions", "/completion", chat, chat]
    done += together(port, [(p, body_for(p, text(rnd, rnd.randint(5, 80)), rnd.randint(8, 24),
                                         include_usage=i == 3))
                            for i, p in enumerate(paths)])
    cut = [(chat, body_for(chat, text(rnd, 40), 200), 4)]
    done += together(port, cut + [(chat, body_for(chat, text(rnd, 30), 20))])
    return done


def engine_prefill_ms(calls, rec, a):
    """The interposer's time for the request's prompt on its sequence, and the most the probes
    may have seen of it: from the start of the first call that evaluated its prompt (at the
    cached position, begun after the request arrived) to the end of the call that sampled
    its first token or, with a draft model, of the draft context's call that evaluated the
    same prompt after it, before the first token was written. The probes' edges lie outside
    the interposer's reads and inside the calls around them (one thread: exact bounds, however
    the host is loaded; a uprobe's own handling has put the entry 1.2 ms before the read).
    (None, None): no such call."""
    seq, first, end, nxt = a["sequence"], None, None, None
    for i, c in enumerate(calls):
        q = next((q for q in c["seqs"] if q[0] == seq), None)
        if not q or c["start_ns"] < rec["start_ns"] or c["start_ns"] > rec["first_token_ns"]:
            continue
        if first is None and q[2] == a["cached_tokens"]:
            first = i
        if first is not None and end is None and q[4] > 0:
            end = i
        elif end is not None and q[1] > 1 and q[3] == first_end(calls[first], seq):
            end = i  # the draft model's pass over the same prompt
    if first is None or end is None:
        return None, None
    lo = calls[end]["end_ns"] - calls[first]["start_ns"]
    before = calls[first - 1]["end_ns"] if first else calls[first]["start_ns"] - 50_000_000
    after = (calls[end + 1]["start_ns"] if end + 1 < len(calls) else
             calls[end]["end_ns"] + 50_000_000)
    return lo / 1e6, (after - before) / 1e6


def first_end(call, seq):
    return next(q[3] for q in call["seqs"] if q[0] == seq)


def small_workload(port, slots, rnd):
    """Fewer, longer streams: a context shift's or a draft model's server."""
    chat = "/v1/chat/completions"
    return together(port, [(chat, body_for(chat, text(rnd, rnd.randint(20, 60)), 300))
                           for _ in range(slots)])


def check_request(check, label, got, rec, calls):
    """got: the client's view (its timings); rec: tokenscope's server record; calls: the
    interposer's, by start. Returns "split", "ambiguous" or "wrong"."""
    t = got["timings"]
    a = rec.get("attribution")
    if not a:
        check(bool(rec.get("attribution_candidates")),
              f"{label}: not split only where ambiguous ({rec.get('attribution_error')})")
        return "ambiguous" if rec.get("attribution_candidates") else "wrong"
    # the engine's prompt steps, to the interposer's reads. llama-server's prompt_ms holds
    # them and begins earlier, when the server began adding the slot's prompt to a batch:
    # its host work on every slot's prompt, which tokenscope's split counts as queue
    engine, most = engine_prefill_ms(calls, rec, a)
    lead = t["prompt_ms"] - a["prefill_ms"]
    prefill_ok = (engine is not None and engine - EDGE_SLACK_MS <= a["prefill_ms"] <=
                  most + EDGE_SLACK_MS and lead >= -EDGE_SLACK_MS)
    LEADS.append((lead, t["prompt_ms"]))
    exact = (a.get("prompt_tokens_computed") == t["prompt_n"] and
             a.get("cached_tokens") == t["cache_n"] and prefill_ok and
             a.get("sequence_from") == "server_timings" and "sequence" not in a["estimated"])
    check(exact, f"{label}: split as the server's timings say (computed "
                 f"{a.get('prompt_tokens_computed')} / {t['prompt_n']}, cached "
                 f"{a.get('cached_tokens')} / {t['cache_n']}, prefill {a['prefill_ms']:.3f} ms "
                 f"against the engine's {engine} (at most {most}) and the server's "
                 f"{t['prompt_ms']:.2f}, from "
                 f"{a.get('sequence_from')}, estimated {a['estimated']})")
    if "draft_n" in t:
        # speculative decoding: the tokens drafted and accepted, as the server counted them
        sp = a.get("speculative") or {}
        check(sp.get("drafted") == t["draft_n"] and sp.get("accepted") == t["draft_n_accepted"],
              f"{label}: drafted and accepted tokens are the server's ({sp.get('drafted')} / "
              f"{t['draft_n']}, {sp.get('accepted')} / {t['draft_n_accepted']})")
    usage = got["usage"]
    src = "usage" if usage else "server_timings"
    check(rec.get("input_tokens") == t["prompt_n"] + t["cache_n"] and
          rec.get("cached_tokens") == t["cache_n"] and
          rec.get("output_tokens") == t["predicted_n"] and
          rec["token_sources"]["input_tokens"] == src and "engine_tokens" not in rec,
          f"{label}: the record's own counts are the server's, from its {src} "
          f"({rec.get('input_tokens')}, {rec.get('cached_tokens')}, {rec.get('output_tokens')}; "
          f"{rec.get('token_sources')}; engine {rec.get('engine_tokens')})")
    return "split" if exact else "wrong"


def check_server(check, name, results, records, server_pid, truth, metrics, attached):
    """truth: the interposer's calls; those before `attached` (the server's warm-up) were
    not traced."""
    truth = sorted(truth, key=lambda c: c["start_ns"])
    # a client port is used again once its connection is gone: the record on the request's
    # port that began first after the client sent it
    by_port = {}
    for r in records:
        if r.get("type") == "request" and r["role"] == "server" and r["pid"] == server_pid:
            by_port.setdefault(int(r["peer"].rsplit(":", 1)[1]), []).append(r)

    def record_of(got):
        return min((r for r in by_port.get(got["port"], []) if r["start_ns"] >= got["sent"]),
                   key=lambda r: r["start_ns"], default=None)
    counts = {"split": 0, "ambiguous": 0, "wrong": 0}
    for i, got in enumerate(results):
        rec = record_of(got)
        label = f"llama-server {name}: request {i} ({got['path']})"
        if not check(got["status"] == 200 and rec, f"{label}: answered and recorded"):
            continue
        if got["cut"]:
            # no timings reached the client: its split is inferred, and says so
            a = rec.get("attribution") or {}
            check(not rec["complete"] and (not a or "sequence" in a["estimated"]),
                  f"{label}: left mid-stream: incomplete, any split marked inferred "
                  f"({a.get('estimated')}, {rec.get('attribution_error')})")
            continue
        if check(got["timings"], f"{label}: the server sent its timings"):
            counts[check_request(check, label, got, rec, truth)] += 1
    timed = sum(counts.values())
    print(f"llama-server {name}: {counts['split']} of {timed} requests split exactly, "
          f"{counts['ambiguous']} ambiguous, {counts['wrong']} wrong", flush=True)
    check(counts["wrong"] == 0 and timed and counts["split"] >= ATTRIBUTED_LEAST * timed,
          f"llama-server {name}: no request split wrong, at least {ATTRIBUTED_LEAST:.0%} split "
          f"({counts})")
    steps = [r for r in records if r.get("type") == "engine_step" and r["pid"] == server_pid]
    check_steps(check, [c for c in truth if c["start_ns"] > attached], steps)
    # the server's own counters, over every request it served: the prompt tokens it
    # processed and the tokens it predicted, against the records' sums
    mine = [record_of(g) for g in results if record_of(g) and not g["cut"]]
    computed = sum((r.get("attribution") or {}).get("prompt_tokens_computed", 0) for r in mine)
    predicted = sum(r.get("output_tokens") or 0 for r in mine)
    cut = sum(1 for g in results if g["cut"])
    check(cut or (computed == metrics.get("llamacpp:prompt_tokens_total") and
                  predicted == metrics.get("llamacpp:tokens_predicted_total")),
          f"llama-server {name}: the records' computed prompt and output tokens are the "
          f"server's counters ({computed} / {metrics.get('llamacpp:prompt_tokens_total')}, "
          f"{predicted} / {metrics.get('llamacpp:tokens_predicted_total')})")


def run_llama_server_checks(ctx):
    check, Tracer = ctx["check"], ctx["Tracer"]
    root, work = ctx["root"], os.path.join(ctx["work"], "llama-server")
    os.makedirs(work, exist_ok=True)
    rnd = random.Random(int(os.environ.get("TS_LLAMA_SERVER_SEED", "55")))
    gen = os.path.join(root, "tests", "fixtures", ".gen")
    # (name, slots, arguments, context per slot, workload)
    configs = [("4 slots", 4, [], 1024, workload), ("16 slots", 16, [], 1024, workload),
               ("context shift", 2, ["--context-shift"], 128, small_workload),
               ("draft model", 2, ["-md", os.path.join(gen, "tiny-draft.gguf"),
                                   "--spec-type", "draft-simple",
                                   "--spec-draft-n-max", "4", "--spec-draft-p-min", "0"], 1024, small_workload)]
    servers = [(name, slots, load, Server(root, work, name.replace(" ", "-"), slots, extra,
                                          context))
               for name, slots, extra, context, load in configs]
    tracer = Tracer(work)  # attached to the running servers
    attached = time.monotonic_ns()
    try:
        runs = [(name, s, load(s.port, slots, rnd)) for name, slots, load, s in servers]
        metrics = {name: s.metrics() for name, s, _ in runs}
    finally:
        truths = {name: s.stop() for name, _, _, s in servers}
        rc, out, err = tracer.stop()
    check(rc == 0, f"llama-server: tokenscope exited 0 ({err[-300:]})")
    records = read_jsonl(tracer.out)
    for name, s, results in runs:
        check_server(check, name, results, records, s.p.pid, truths[name], metrics[name],
                     attached)
    # printed, not bounded: the server's host work before a prompt's step grows with its
    # slots and with the load on the host (14 ms seen beside a CPU hog)
    leads = sorted(LEADS)
    if leads:
        within = sum(1 for x, ms in leads if abs(x) <= max(PREFILL_FLOOR_MS, PREFILL_TOLERANCE * ms))
        print(f"llama-server: prompt_ms minus prefill: p50 {leads[len(leads) // 2][0]:.2f} p90 "
              f"{leads[len(leads) * 9 // 10][0]:.2f} max {leads[-1][0]:.2f} ms; {within} of "
              f"{len(leads)} within max({PREFILL_FLOOR_MS} ms, {PREFILL_TOLERANCE:.0%})",
              flush=True)
    LEADS.clear()
