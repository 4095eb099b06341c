"""`tokenscope compare` on the real llama-server (imported by run.py; `run.sh --only compare`):
each cause named alone in the scenario that makes it, and none for two runs of one load.

One llama-server (2 slots, 1 thread; llama_server_checks.Server), on a model wide enough that
its prefill is spent on each prompt token (tiny-wide.gguf: tests/fixtures/llama/gguf.py), is
traced while the test
plays loads one after another; each load's records (by the time its requests were sent) are
one side of a comparison, as the JSON Lines of a run of its own would be. The loads:

- base: 20 requests one at a time, prompts of 20 distinct words (about 70 tokens);
- pairs: the same load twice (runs A and B), interleaved request by request so that both
  meet the same host, a CPU hog's slices alike (none, both ways round);
- long: 20 one at a time, prompts of 200 distinct words (about 700 tokens): prefill (prompt);
- shared: 20 one at a time, prompts of 200 words sharing all but their last 5: reused from
  the slot's cache, so that long after shared is fewer cached tokens at one prompt length
  (cache);
- burst: the same 20 as base at once, past the 2 slots: queueing (capacity).

The summary of the whole recording with a 0.3 s change window compares the first 0.3 s (the
base load) with the last (the burst, and the end of the long prompts' load): its change line
names capacity.

The recording of the whole run is compared with itself too (a recording read as one side).
"""
import json
import os
import random
import subprocess
import time

from llama_server_checks import Server, body_for, stream, text, together

CHAT = "/v1/chat/completions"
N = 20


def sequential(port, prompts):
    return [stream(port, CHAT, body_for(CHAT, p, 8)) for p in prompts]


def run_compare_checks(ctx):
    check, Tracer, tokenscope = ctx["check"], ctx["Tracer"], ctx["tokenscope"]
    root, work = ctx["root"], os.path.join(ctx["work"], "compare")
    os.makedirs(work, exist_ok=True)
    rnd = random.Random(58)
    server = Server(root, work, "compare", 2, model="tiny-wide.gguf")
    tracer = Tracer(work)
    windows, ports = {}, {}
    try:
        def load(name, fn):
            start = time.monotonic_ns()
            results = fn()
            windows[name] = (start, time.monotonic_ns())
            check(all(r["status"] == 200 and r["timings"] for r in results),
                  f"compare: the {name} load's {len(results)} requests were served")
            return results

        load("base", lambda: sequential(server.port, [text(rnd, 20) for _ in range(N)]))
        # one load twice, its two runs interleaved request by request: both meet the same
        # host (a CPU hog's slices land on both alike), as two runs of one load should
        pairs = load("pairs", lambda: sequential(server.port,
                                                 [text(rnd, 20) for _ in range(2 * N)]))
        ports["run A"] = {r["port"] for r in pairs[0::2]}
        ports["run B"] = {r["port"] for r in pairs[1::2]}
        shared = text(rnd, 195)
        load("shared", lambda: sequential(server.port,
                                          [shared + " " + text(rnd, 5) for _ in range(N)]))
        load("long", lambda: sequential(server.port, [text(rnd, 200) for _ in range(N)]))
        load("burst", lambda: together(server.port, [(CHAT, body_for(CHAT, text(rnd, 20), 8))
                                                     for _ in range(N)]))
    finally:
        server.stop()
        rc, out, err = tracer.stop()
    check(rc == 0, f"compare: the tracer exits 0 ({err[-300:]})")
    lines = [line for line in open(tracer.out)]
    sides = {}

    def side(name, window, port_set=None):
        start, end = windows[window]
        path = os.path.join(work, name.replace(" ", "-") + ".jsonl")
        with open(path, "w") as f:
            for line in lines:
                o = json.loads(line)
                t = o.get("start_ns") or o.get("ts_ns") or 0
                if not start <= t <= end:
                    continue
                if o.get("type") != "request" or (o.get("role") == "server" and (
                        port_set is None or int(o["peer"].rsplit(":", 1)[1]) in port_set)):
                    f.write(line)
        sides[name] = path

    for name in windows:
        side(name, name)
    for name, port_set in ports.items():
        side(name, "pairs", port_set)

    def compare(before, after, label, want):
        r = subprocess.run([tokenscope, "compare", sides[before], sides[after], "--json"],
                           capture_output=True, text=True)
        words = subprocess.run([tokenscope, "compare", sides[before], sides[after]],
                               capture_output=True, text=True)
        check(r.returncode == 0 and words.returncode == 0,
              f"compare {label}: exits 0 ({r.stderr[-300:]})")
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            doc = {"groups": [], "cause": None}
        groups = [g for g in doc["groups"] if g["role"] == "server"]
        causes = [(g["p50"]["cause"], g["p99"]["cause"]) for g in groups]
        # p99 of 20 requests a side is not judged (100 wanted): unknown, said so
        unjudged = [g["p99"]["cause"] == "unknown" and g["p99"]["before_ms"] is None
                    for g in groups]
        verdict = words.stdout.strip().splitlines()[-1] if words.stdout.strip() else ""
        print(f"compare {label}: {verdict}", flush=True)
        # the verdict names the cause; no percentile of any group names another
        check(doc["cause"] == want and len(groups) == 1 and causes[0][0] == want and
              (causes[0][1] in (want, "none") or unjudged[0]) and
              verdict.startswith("verdict: ") and verdict == "verdict: " + doc["verdict"],
              f"compare {label}: the cause is {want} and no other ({doc['cause']}, {causes}; "
              f"{verdict})")
        return groups[0] if groups else None

    compare("run A", "run B", "one load twice", "none")
    compare("run B", "run A", "one load twice, turned round", "none")
    g = compare("base", "burst", "a burst past the slots", "capacity")
    if g:
        b, a = g["before"], g["after"]
        check(a["arrivals_per_s"] > b["arrivals_per_s"] and a["concurrency"] > 4 * b["concurrency"],
              f"compare burst: the evidence shows the load ({b}, {a})")
    g = compare("base", "long", "longer prompts", "prompt")
    if g:
        check(g["after"]["prompt_tokens_p50"] > 5 * g["before"]["prompt_tokens_p50"],
              f"compare long: the prompts' p50 grew ({g['before']['prompt_tokens_p50']} -> "
              f"{g['after']['prompt_tokens_p50']})")
    g = compare("shared", "long", "the cache lost", "cache")
    if g:
        b, a = g["before"], g["after"]
        check(b["cached_share"] > 0.8 and a["cached_share"] < 0.2 and
              abs(a["prompt_tokens_p50"] - b["prompt_tokens_p50"]) < 0.1 * b["prompt_tokens_p50"],
              f"compare cache: cached share fell at one prompt length ({b}, {a})")
    # the summary's change line: the run's first 0.3 s (the base loads) against its last (the
    # burst, the last load), in compare's words
    r = subprocess.run([tokenscope, "report", tracer.rec, "-q", "--change-window", "0.3"],
                       capture_output=True, text=True)
    change = [line for line in r.stdout.splitlines() if line.startswith("change: ")]
    print(f"compare: {change}", flush=True)
    # a line per group that changed: the server's names capacity (the test's own client is
    # traced too; on a loaded host its reads lag the server's writes: network, rightly)
    server = [line for line in change if "llama-server server openai.chat model=tiny: " in line]
    check(len(server) == 1 and server[0].startswith("change: the last 0.3s against the first "
                                                    "0.3s: llama-server server openai.chat "
                                                    "model=tiny: TTFT p50 +") and
          server[0].endswith(": a capacity problem"),
          f"compare: the summary says the server's TTFT rose by queueing ({change})")
    r = subprocess.run([tokenscope, "report", tracer.rec, "-q"], capture_output=True, text=True)
    check(r.returncode == 0 and "change: " not in r.stdout,
          "compare: a run shorter than two default windows (60 s) has no change line")
    # a recording is read as its records: the whole run against itself is no change
    r = subprocess.run([tokenscope, "compare", tracer.rec, tracer.rec], capture_output=True,
                       text=True)
    check(r.returncode == 0 and r.stdout.rstrip().endswith(": none") and
          "before: " in r.stdout and r.stdout.split("\n")[0].split(", after")[0] ==
          f"before: {sum(1 for line in lines if json.loads(line).get('type') == 'request')} requests",
          f"compare: a recording against itself is none, its requests its records' "
          f"({r.stdout[:200]} {r.stderr[-200:]})")
    # bad input: a clear line, nothing else lost
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write("not json\n")
    r = subprocess.run([tokenscope, "compare", bad, sides["base"]], capture_output=True, text=True)
    check(r.returncode == 1 and "1 lines are not JSON objects" in r.stderr and
          "no request records" in r.stderr,
          f"compare: a file of no records is refused clearly ({r.returncode}, {r.stderr!r})")
    r = subprocess.run([tokenscope, "compare", sides["base"]], capture_output=True, text=True)
    check(r.returncode == 2 and "takes two files" in r.stderr,
          f"compare: one file is a usage error ({r.returncode})")
