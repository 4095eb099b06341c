"""llama.cpp's own steps, with real eBPF probes on a real llama.cpp (imported by run.py).

The engine: node-llama-cpp's prebuilt CPU llama.cpp (tests/node), serving a tiny random model
the test writes (tests/fixtures/llama/gguf.py) from an OpenAI-compatible SSE server in node
(tests/fixtures/llama/server.mjs) with a context of SEQUENCES sequences: concurrent requests
are batched into the same llama_decode calls, and past SEQUENCES they queue.

Ground truth tokenscope does not read: an LD_PRELOAD interposer that wraps llama_decode
(tests/fixtures/llama/decode_log.c: each call's CLOCK_MONOTONIC start and end and its batch
summed per sequence), and the server's own log (arrival, the sequence it got and when, each
token's write, the prompt tokens its sequence already held).

The interposer exports llama_decode itself, so each call goes through two probed functions
(the shim's and the real one): tokenscope must count it once.
"""
import http.client
import json
import os
import random
import signal
import subprocess
import threading
import time

SEQUENCES = 4
CONCURRENT = 40      # streams at once, more than SEQUENCES: the rest queue
EDGE_NS = 50_000     # a step's start and end against the interposer's, 99 % of steps
EDGE_MAX_NS = 1_000_000  # and all of them


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def prompt(rnd, words):
    vocab = ["the", "model", "stream", "reply", "latency", "prompt", "cache", "engine",
             "step", "batch", "hello", "world", "token", "and", "of", "to", "in", "is"]
    return " ".join(rnd.choice(vocab) for _ in range(words))


def chat(port, text, max_tokens, user):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"model": "tiny", "stream": True, "max_tokens": max_tokens, "user": user,
                       "messages": [{"role": "user", "content": text}]})
    c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def seq_summary(step):
    """A step's sequences as the interposer writes them: sorted [seq, tokens, first, last,
    outputs] lists."""
    return sorted([q["seq"], q["tokens"], q.get("first_pos", -1), q.get("last_pos", -1),
                   q["outputs"]] for q in step["sequences"])


def run_llama_checks(ctx):
    check, Tracer = ctx["check"], ctx["Tracer"]
    root, work = ctx["root"], os.path.join(ctx["work"], "llama")
    gen = os.path.join(root, "tests", "fixtures", ".gen")
    os.makedirs(work, exist_ok=True)
    decode_log = os.path.join(work, "decode.jsonl")
    server_log = os.path.join(work, "server.jsonl")
    port_file = os.path.join(work, "port")
    tracer = Tracer(work)

    server_out = open(os.path.join(work, "server.out"), "w+")
    server = subprocess.Popen(
        ["node", os.path.join(root, "tests", "fixtures", "llama", "server.mjs"),
         "--model", os.path.join(gen, "tiny.gguf"), "--port-file", port_file,
         "--log", server_log, "--sequences", str(SEQUENCES)],
        stdout=server_out, stderr=subprocess.STDOUT,
        env=dict(os.environ, LD_PRELOAD=os.path.join(gen, "libdecode_log.so"),
                 DECODE_LOG=decode_log))
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file) and server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not check(os.path.exists(port_file), "llama: the node-llama-cpp server started"):
        server_out.seek(0)
        print(server_out.read()[-2000:])
        server.kill()
        tracer.stop()
        return
    with open(port_file) as f:
        port = int(f.read())

    # phase: more concurrent streams than sequences, prompts of varied length
    rnd = random.Random(20)
    jobs = [(prompt(rnd, rnd.randint(3, 90)), rnd.randint(4, 24), f"c{i}")
            for i in range(CONCURRENT)]
    results = [None] * len(jobs)

    def one(i):
        results[i] = chat(port, *jobs[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(all(r and r[0] == 200 and "[DONE]" in r[1] for r in results),
          f"llama: {CONCURRENT} concurrent streams answered")

    # phase: prompts that repeat the start of the one their sequence served last (the server
    # hands sequences round; one request at a time, request k + SEQUENCES gets k's sequence)
    base = [prompt(rnd, rnd.randint(10, 40)) for _ in range(SEQUENCES)]
    for k, text in enumerate(base + [b + " " + prompt(rnd, 6) for b in base]):
        status, _ = chat(port, text, 6, f"p{k}")
        check(status == 200, f"llama: prefix request {k} answered")

    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    rc, _, err = tracer.stop()
    check(rc == 0, f"llama: tokenscope exited 0 ({err[-300:]})")

    truth = read_jsonl(decode_log)
    served = read_jsonl(server_log)
    records = read_jsonl(tracer.out)
    steps = [r for r in records if r.get("type") == "engine_step"]
    check_steps(check, truth, steps)
    check(len(served) == len(jobs) + 2 * SEQUENCES,
          f"llama: the server logged every request ({len(served)})")
    check(any(s["cached"] > 0 for s in served), "llama: some prompts reused their sequence's cache")


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else 0


def check_steps(check, truth, steps):
    """Every call the interposer saw is one engine_step with the same batch, and its start and
    end within EDGE_NS of the interposer's: for 99 % of the steps, and within EDGE_MAX_NS for
    all (the interposer and the probe are both preempted now and then on 2 vCPUs, and then
    differ by a time slice that neither measured)."""
    check(len(truth) > 0, "llama: the interposer logged llama_decode calls")
    check(len(steps) == len(truth),
          f"llama: one engine_step per llama_decode call ({len(steps)} records, "
          f"{len(truth)} calls: a shim's call into the real one is the same step)")
    truth = sorted(truth, key=lambda t: t["start_ns"])
    steps = sorted(steps, key=lambda s: s["start_ns"])
    same_batch = 0
    edges = []
    for t, s in zip(truth, steps):
        same_batch += (t["n_tokens"] == s["tokens"] and t["outputs"] == s["outputs"] and
                       t["result"] == s["result"] and sorted(t["seqs"]) == seq_summary(s) and
                       int(t["ctx"], 16) == int(s["context"], 16))
        edges.append((abs(s["start_ns"] - t["start_ns"]), abs(s["end_ns"] - t["end_ns"])))
    n = len(edges)
    check(n and same_batch == n, f"llama: every step's batch summary is the interposer's "
                                 f"({same_batch}/{n})")
    starts, ends = [e[0] for e in edges], [e[1] for e in edges]
    close = sum(a <= EDGE_NS and b <= EDGE_NS for a, b in edges)
    said = (f"start p50 {pct(starts, 50) / 1000:.1f} p99 {pct(starts, 99) / 1000:.1f} max "
            f"{max(starts, default=0) / 1000:.1f} us; end p50 {pct(ends, 50) / 1000:.1f} p99 "
            f"{pct(ends, 99) / 1000:.1f} max {max(ends, default=0) / 1000:.1f} us")
    check(n and close * 100 >= 99 * n,
          f"llama: 99 % of steps start and end within {EDGE_NS // 1000} us of the interposer "
          f"({close}/{n}; {said})")
    check(n and max(starts + ends) <= EDGE_MAX_NS,
          f"llama: every step within {EDGE_MAX_NS // 1000} us ({said})")
    print(f"llama: {n} steps against the interposer: {said}", flush=True)
    kinds = {s["kind"] for s in steps}
    check({"prefill", "decode"} <= kinds or "mixed" in kinds,
          f"llama: prefill and decode steps seen ({sorted(kinds)})")
