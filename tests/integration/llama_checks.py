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
import ssl
import subprocess
import threading
import time

from plaintext_checks import start_nginx, wait_file

SEQUENCES = 4
THROUGH_NGINX = 12   # streams through nginx terminating TLS in front of the server
BATCH = 64           # tokens per llama_decode call: longer prompts are computed in chunks
CONCURRENT = 40      # streams at once, more than SEQUENCES: the rest queue
EDGE_NS = 50_000     # the median of a step's edges from the interposer's (check_steps)
CLOCK_SLACK_NS = 1_000  # the probe's clock and the interposer's: one clock, read two ways
EDGE_HARD_NS = 50_000_000  # every edge: a wrong clock, or a step taken at the wrong place


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def prompt(rnd, words):
    vocab = ["the", "model", "stream", "reply", "latency", "prompt", "cache", "engine",
             "step", "batch", "hello", "world", "token", "and", "of", "to", "in", "is"]
    return " ".join(rnd.choice(vocab) for _ in range(words))


def chat(port, text, max_tokens, user, tls=None, usage_style=None, clear_after=False,
         model="tiny", copy_prefix_of=None):
    c = (http.client.HTTPSConnection("127.0.0.1", port, timeout=120, context=tls) if tls else
         http.client.HTTPConnection("127.0.0.1", port, timeout=120))
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "user": user,
            "messages": [{"role": "user", "content": text}]}
    if usage_style:
        body["usage_style"] = usage_style  # how the fixture counts the prompt in its usage
    if clear_after:
        body["clear_after"] = True  # the fixture empties the sequence's cache at the end
    if copy_prefix_of:
        body["copy_prefix_of"] = copy_prefix_of  # the fixture copies that one's cache first
    body = json.dumps(body)
    c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def concurrently(port, jobs, tls):
    """Each job (text, max_tokens, user[, usage_style[, model]]) at once."""
    results = [None] * len(jobs)

    def one(i):
        results[i] = chat(port, *jobs[i][:3], tls=tls,
                          usage_style=jobs[i][3] if len(jobs[i]) > 3 else None,
                          model=jobs[i][4] if len(jobs[i]) > 4 else "tiny")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return all(r and r[0] == 200 and "[DONE]" in r[1] for r in results)


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
    timeline = os.path.join(work, "timeline.pftrace")
    page = os.path.join(work, "report.html")
    tracer = Tracer(work, "--gaps", "--perfetto", timeline, "--html", page)

    server_out = open(os.path.join(work, "server.out"), "w+")
    server = subprocess.Popen(
        ["node", os.path.join(root, "tests", "fixtures", "llama", "server.mjs"),
         "--model", os.path.join(gen, "tiny.gguf"), "--port-file", port_file,
         "--log", server_log, "--sequences", str(SEQUENCES), "--batch", str(BATCH)],
        stdout=server_out, stderr=subprocess.STDOUT,
        env=dict(os.environ, LD_PRELOAD=os.path.join(gen, "libdecode_log.so"),
                 DECODE_LOG=decode_log))
    try:
        port = wait_file(port_file, server, "the node-llama-cpp server", timeout=60)
    except SystemExit as e:
        check(False, f"llama: {e}")
        server_out.seek(0)
        print(server_out.read()[-2000:])
        server.kill()
        tracer.stop()
        return

    # phase: more concurrent streams than sequences, prompts of varied length; then some
    # through nginx terminating TLS in front of the server
    rnd = random.Random(20)
    jobs = [(prompt(rnd, rnd.randint(3, 90)), rnd.randint(4, 24), f"c{i}")
            for i in range(CONCURRENT)]
    check(concurrently(port, jobs, None), f"llama: {CONCURRENT} concurrent streams answered")
    nginx, nginx_port = start_nginx(work, port, ctx["cert"], ctx["key"])
    tls = ssl.create_default_context(cafile=ctx["cert"])
    tls_jobs = [(prompt(rnd, rnd.randint(3, 60)), rnd.randint(4, 16), f"t{i}")
                for i in range(THROUGH_NGINX)]
    check(concurrently(nginx_port, tls_jobs, tls),
          f"llama: {THROUGH_NGINX} streams through nginx (TLS) answered")
    nginx.terminate()
    nginx.wait(timeout=30)
    jobs += tls_jobs

    # phase: prompts that repeat the start of the one their sequence served last (the server
    # hands sequences round; one request at a time, request k + SEQUENCES gets k's sequence)
    base = [prompt(rnd, rnd.randint(10, 40)) for _ in range(SEQUENCES)]
    for k, text in enumerate(base + [b + " " + prompt(rnd, 6) for b in base]):
        status, _ = chat(port, text, 6, f"p{k}")
        check(status == 200, f"llama: prefix request {k} answered")

    # phase: a prompt cache shared across sequences (issue 35, item 3): a prompt, then one that
    # repeats it and goes on, on another sequence into which the fixture copies the first's
    # cache (llama_memory_seq_cp): its cached tokens are the copy's
    shared = prompt(rnd, 30)
    status_a, _ = chat(port, shared, 6, "kv-a")
    status_b, _ = chat(port, shared + " " + prompt(rnd, 8), 6, "kv-b", copy_prefix_of="kv-a")
    check(status_a == status_b == 200, "llama: the prompt and its copied-prefix follower answered")

    # phase: servers that count the prompt otherwise (issue 35): a chat template's tokens in,
    # BOS out, the cached tokens out (Ollama), no usage at all; concurrent, so that they queue
    usage_jobs = [(prompt(rnd, rnd.randint(3, 40)), rnd.randint(4, 12), f"u{i}", style)
                  for i, style in enumerate(["plus2", "minus1", "ollama", "none"] * 3)]
    check(concurrently(port, usage_jobs, None),
          f"llama: {len(usage_jobs)} streams with the prompt counted otherwise answered")
    jobs += usage_jobs
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    many = many_sequences(check, root, gen, work, rnd)
    embedding = embeddings_beside_chat(check, root, gen, work, rnd)
    speculating = speculative(check, root, gen, work, rnd)
    dying = die_mid_decode(check, root, gen, work, rnd)
    rc, out, err = tracer.stop()
    check(rc == 0, f"llama: tokenscope exited 0 ({err[-300:]})")

    truth = read_jsonl(decode_log)
    served = read_jsonl(server_log)
    records = read_jsonl(tracer.out)
    steps = [r for r in records if r.get("type") == "engine_step" and r["pid"] == server.pid]
    check_steps(check, truth, steps)
    flagged = sum(1 for r in records if (r.get("attribution") or {}).get("usage_mismatch"))
    check(flagged and f"usage mismatch: {flagged} " in out,
          f"llama: the summary counts the {flagged} requests whose usage said another prompt "
          f"length")
    # the recording replays to the same records, attribution by sequence included, and to the
    # same timeline, byte for byte; the live timeline holds what the records say
    replay = os.path.join(work, "replay.jsonl")
    replay_timeline = os.path.join(work, "replay.pftrace")
    r = subprocess.run([ctx["tokenscope"], "report", tracer.rec, "--gaps", "-q", "-o", replay,
                        "--perfetto", replay_timeline], capture_output=True, text=True)
    check(r.returncode == 0 and read_jsonl(replay) == records,
          f"llama: the recording replays to the same {len(records)} records ({r.stderr[-200:]})")
    with open(timeline, "rb") as a, open(replay_timeline, "rb") as b:
        check(a.read() == b.read(), "llama: the replay's Perfetto timeline is the live one")
    r = subprocess.run(["python3", os.path.join(root, "tests", "perfetto", "check_trace.py"),
                        timeline, tracer.out], capture_output=True, text=True)
    print(r.stdout.strip(), flush=True)
    check(r.returncode == 0, "llama: the Perfetto timeline holds the run's requests, steps and "
                             "flows, each phase adding up to its TTFT")
    # the HTML report, as a browser shows it (screenshots: .output/test-artifacts/html/llama)
    r = subprocess.run(["python3", os.path.join(root, "tests", "html", "check_report.py"), page,
                        tracer.out, os.path.join(root, ".output", "test-artifacts", "html",
                                                 "llama-live")],
                       capture_output=True, text=True)
    print(r.stdout.strip(), flush=True)
    check(r.returncode == 0, "llama: the HTML report shows the run's requests and steps, drawn "
                             "from as many as the records, nothing fetched, no console error")
    copied = next((e for e in served if e["id"] == "kv-b"), {})
    source = next((e for e in served if e["id"] == "kv-a"), {})
    check(copied.get("copied_from") == source.get("seq") != copied.get("seq") and
          copied.get("cached", 0) > 0 and
          any((r.get("attribution") or {}).get("cached_tokens") == copied["cached"] and
              r["attribution"].get("sequence") == copied["seq"] and
              r.get("input_tokens") == copied["prompt_tokens"]
              for r in records if r.get("type") == "request" and r["role"] == "server"),
          f"llama: the request whose prefix was copied from another sequence has its cached "
          f"tokens, on its own sequence ({copied.get('cached')} from sequence "
          f"{copied.get('copied_from')} into {copied.get('seq')})")
    check(len(served) == len(jobs) + 2 * SEQUENCES + 2,
          f"llama: the server logged every request ({len(served)})")
    check(any(s["cached"] > 0 for s in served), "llama: some prompts reused their sequence's cache")
    # the TLS client's record names the llama.cpp server's record, through nginx
    servers = {r["id"]: r for r in records if r.get("type") == "request" and
               r["role"] == "server" and r["pid"] == server.pid}
    tls_clients = [r for r in records if r.get("type") == "request" and r["role"] == "client"
                   and r["transport"] == "tls"]
    linked = [c for c in tls_clients if c.get("server_id") in servers and
              servers[c["server_id"]].get("attribution")]
    check(len(tls_clients) == THROUGH_NGINX and len(linked) == THROUGH_NGINX,
          f"llama: each client through nginx names its attributed llama.cpp server record "
          f"({len(linked)} of {len(tls_clients)} TLS client records)")
    # the interposer's calls and the steps, one for one in time order (checked above)
    same = dict(zip(sorted(t["start_ns"] for t in truth), sorted(s["start_ns"] for s in steps)))
    check_attribution(check, truth, served, same,
                      list(servers.values()))
    if many:
        check_many(check, many, records)
    if embedding:
        check_embeddings(check, embedding, records)
    if speculating:
        check_speculative(check, speculating, records, out)
    if dying:
        check_shifts(check, dying, records)
        check_died(check, dying, records)


MANY_SEQUENCES = 32  # a server of many sequences on one context
MANY_STREAMS = 48    # streams at once on it: more than its sequences, so that some queue
SECOND_STREAMS = 12  # and at the same time to its second model (4 sequences of its own)
# the models by their GGUF's general.name, as the interposer logs them, and as the server
# names them (by file)
MODEL_OF_NAME = {"tokenscope-tiny": "tiny", "tiny-b": "tiny-b"}
DIE_AFTER = 4  # tokens of the last request before the server kills itself
DYING_TOKENS = 200  # what each of the killed server's streams asks for: all 4 fit its context
SMALL_CONTEXT = 1024  # the second server's context, which one sequence may fill
LONG_TOKENS = 1100   # a stream that outgrows it: node-llama-cpp shifts it (twice here)


def shifts_of(entry, calls):
    """The interposer's account of a request's context shifts: for each gap (by the index of
    the event that ends it) whose steps took its sequence to a lower position, the time of
    its steps that evaluated kept tokens again (more than one token, or none sampled): those
    calls (their starts)."""
    seq, at = entry["seq"], int(entry["seq_at"])
    mine = [(c, q) for c in sorted(calls, key=lambda c: c["start_ns"])
            for q in c["seqs"] if q[0] == seq and c["start_ns"] >= at]
    outs = [i for i, (c, q) in enumerate(mine) if q[4] > 0][:len(entry["tokens"])]
    shifts = {}
    for g in range(len(outs) - 1):
        nxt, shifted, again = mine[outs[g]][1][2] + mine[outs[g]][1][1], False, []
        for c, q in mine[outs[g] + 1:outs[g + 1] + 1]:
            shifted |= q[2] < nxt
            if shifted and (q[1] > 1 or q[4] == 0):
                again.append(c["start_ns"])
            nxt = q[2] + q[1]
        if shifted:
            shifts[g] = again
    return shifts


def check_shifts(check, dying, records):
    """The long stream's context shifts, gap by gap, against the interposer's positions; each
    shift's re-evaluation time the sum of those very steps' (check_steps() holds each step's
    time to the interposer's reads; compared here with the interposer's own sums within
    max(1 ms, 5 %), a loaded machine's probe-to-read delays, summed over a shift's chunks,
    once took one past)."""
    calls = dying["calls"]
    entry = next((e for e in dying["served"] if e["id"] == "long"), None)
    rec = next((r for r in records if r.get("type") == "request" and r["role"] == "server" and
                r["pid"] == dying["pid"] and r.get("output_tokens") == LONG_TOKENS), None)
    a = (rec or {}).get("attribution") or {}
    if not check(entry and a, f"llama: the long stream was served and attributed "
                              f"({(rec or {}).get('attribution_error')})"):
        return
    again = shifts_of(entry, calls)
    by_start = {c["start_ns"]: c for c in calls}
    steps = sorted((r for r in records if r.get("type") == "engine_step" and
                    r["pid"] == dying["pid"]), key=lambda r: r["start_ns"])
    step_of = dict(zip(sorted(by_start), steps))  # one for one from the start (check_died)
    want = {g: sum(by_start[c]["end_ns"] - by_start[c]["start_ns"] for c in cs)
            for g, cs in again.items()}
    of_steps = {g: sum(step_of[c]["end_ns"] - step_of[c]["start_ns"] for c in cs if c in step_of)
                for g, cs in again.items()}
    got = {g: round(x["shift_ms"] * 1e6) for g, x in enumerate(a.get("gaps", []))
           if x.get("context_shift")}
    print(f"llama: the long stream's context shifts: {len(got)} at gaps {sorted(got)}, "
          f"{sum(got.values()) / 1e6:.3f} ms re-evaluating; its steps': "
          f"{sum(of_steps.values()) / 1e6:.3f} ms; the interposer's: {len(want)} at "
          f"{sorted(want)}, {sum(want.values()) / 1e6:.3f} ms", flush=True)
    check(want and sorted(got) == sorted(want) and a.get("context_shifts") == len(want),
          f"llama: the stream's context shifts are the interposer's ({sorted(got)} against "
          f"{sorted(want)}; context_shifts {a.get('context_shifts')})")
    check(all(abs(got[g] - of_steps[g]) <= 2000 * len(again[g]) for g in want if g in got),
          "llama: each shift's re-evaluation time is that of the steps the interposer saw "
          "evaluate kept tokens again (within 2 us a step: the record's rounding)")
    # the step records say where the sequence went back: each step the interposer saw begin
    # below the position the sequence had reached says rewound_from that position, and no
    # other step of the stream says it
    seq, nxt, want_back = entry["seq"], 0, {}
    last = int(entry.get("done") or entry["tokens"][-1])
    for c in sorted(calls, key=lambda c: c["start_ns"]):
        q = next((q for q in c["seqs"] if q[0] == seq), None)
        if not q or c["start_ns"] < int(entry["seq_at"]) or c["start_ns"] > last:
            continue
        if q[2] < nxt:
            want_back[c["start_ns"]] = nxt
        nxt = q[2] + q[1]
    got_back = {}
    for start, st in step_of.items():
        q = next((q for q in st["sequences"] if q["seq"] == seq), None)
        if q and q.get("rewound_from") and int(entry["seq_at"]) <= start <= last:
            got_back[start] = q["rewound_from"]
    check(len(want_back) >= len(want) and got_back == want_back,
          f"llama: the stream's steps that began below where its sequence had reached say "
          f"so (rewound_from), and no other: {got_back} against the interposer's {want_back}")


def stream_until(port, text, max_tokens, user, first, die_after=None):
    """A stream read until it ends or its server dies; first is set at its first content."""
    body = {"model": "tiny", "stream": True, "max_tokens": max_tokens, "user": user,
            "usage_style": "none", "messages": [{"role": "user", "content": text}]}
    if die_after:
        body["die_after"] = die_after
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/v1/chat/completions", json.dumps(body),
                  {"content-type": "application/json"})
        r = c.getresponse()
        while line := r.fp.readline():
            if b'"content"' in line:
                first.set()
    except (ConnectionError, http.client.HTTPException):
        pass
    finally:
        first.set()
        c.close()


def start_server(check, root, gen, work, name, sequences, context_size=None, live=False,
                 second_model=None, embeddings=False, draft_model=None):
    """Another node-llama-cpp server on the same engine, its files named after name, with its
    own interposer log (live: written as calls end); second_model: a second model's file,
    served on a context of its own. Returns it, its port and its two logs (None for the
    server where it did not start, said)."""
    decode_log = os.path.join(work, f"{name}-decode.jsonl")
    server_log = os.path.join(work, f"{name}-server.jsonl")
    port_file = os.path.join(work, f"{name}-port")
    env = dict(os.environ, LD_PRELOAD=os.path.join(gen, "libdecode_log.so"),
               DECODE_LOG=decode_log)
    if live:
        env["DECODE_LOG_LIVE"] = "1"
    server = subprocess.Popen(
        ["node", os.path.join(root, "tests", "fixtures", "llama", "server.mjs"),
         "--model", os.path.join(gen, "tiny.gguf"), "--port-file", port_file,
         "--log", server_log, "--sequences", str(sequences), "--batch", str(BATCH)] +
        (["--context-size", str(context_size)] if context_size else []) +
        (["--second-model", os.path.join(gen, second_model)] if second_model else []) +
        (["--embeddings"] if embeddings else []) +
        (["--draft-model", os.path.join(gen, draft_model)] if draft_model else []),
        stdout=open(os.path.join(work, f"{name}-server.out"), "w"), stderr=subprocess.STDOUT,
        env=env)
    try:
        port = wait_file(port_file, server, f"the {name} server", timeout=60)
    except SystemExit as e:
        check(False, f"llama: {e}")
        server.kill()
        return None, None, None, None
    return server, port, decode_log, server_log


def many_sequences(check, root, gen, work, rnd):
    """A server of two models (issue 35, item 5): MANY_SEQUENCES sequences on the first
    model's context, 4 on the second's. MANY_STREAMS streams to the first and SECOND_STREAMS
    to the second at once, shuffled: up to MANY_SEQUENCES prompts and decodes batched in each
    step of the first, the two contexts' steps interleaved. Returns its pid, log and
    interposer's calls, as die_mid_decode does."""
    server, port, decode_log, server_log = start_server(check, root, gen, work, "many",
                                                        MANY_SEQUENCES, second_model="tiny-b.gguf")
    if not server:
        return None
    jobs = [(prompt(rnd, rnd.randint(3, 40)), rnd.randint(4, 16), f"m{i}", None, "tiny")
            for i in range(MANY_STREAMS)]
    jobs += [(prompt(rnd, rnd.randint(3, 40)), rnd.randint(4, 16), f"b{i}", None, "tiny-b")
             for i in range(SECOND_STREAMS)]
    rnd.shuffle(jobs)
    check(concurrently(port, jobs, None),
          f"llama: {MANY_STREAMS} streams on {MANY_SEQUENCES} sequences and {SECOND_STREAMS} to "
          f"a second model answered")
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    return {"pid": server.pid, "served": read_jsonl(server_log),
            "calls": [c for c in read_jsonl(decode_log) if "start_ns" in c]}


def check_many(check, many, records):
    """Every request of the two-model server split right, on its own model's context, and
    every gap's step; every step named by its context's model."""
    mine = [r for r in records if r.get("type") == "request" and r["role"] == "server" and
            r["pid"] == many["pid"]]
    steps = sorted((r for r in records if r.get("type") == "engine_step" and
                    r["pid"] == many["pid"]), key=lambda r: r["start_ns"])
    widest = max((len(r["sequences"]) for r in steps), default=0)
    calls = sorted(many["calls"], key=lambda c: c["start_ns"])
    same = dict(zip((c["start_ns"] for c in calls), (r["start_ns"] for r in steps)))
    # each step's model, against the model llama.cpp itself says its context's is
    named = sum(1 for c, r in zip(calls, steps) if r.get("model") == MODEL_OF_NAME.get(c["model"]))
    contexts = {MODEL_OF_NAME.get(c["model"]): c["ctx"] for c in calls}
    check(len(steps) == len(calls) and named == len(calls) and len(contexts) == 2,
          f"llama: each step of the two-model server names its context's model ({named} of "
          f"{len(calls)} steps; contexts {contexts})")
    total = {"split": 0}
    gaps = gaps_right = 0
    for model in ("tiny", "tiny-b"):
        records_of = [r for r in mine if r.get("model") == model]
        served_of = [e for e in many["served"] if e["model"] == model]
        calls_of = [c for c in calls if MODEL_OF_NAME.get(c["model"]) == model]
        good, g, g_right, bad, _ = split_against_truth(calls_of, served_of, same, records_of)
        on_own = sum(1 for r in records_of if (r.get("attribution") or {}).get("context") ==
                     contexts.get(model))
        for line in bad[:8]:
            print(f"  llama (many, {model}): {line}")
        print(f"llama: model {model}: {len(records_of)} requests, split right "
              f"{good['split']}/{len(records_of)}, on its own context {on_own}, gaps' steps "
              f"{g_right}/{g}", flush=True)
        check(len(records_of) == len(served_of) and on_own == len(records_of),
              f"llama: every request to {model} split on its own model's context "
              f"({on_own}/{len(records_of)}; {len(served_of)} served)")
        total["split"] += good["split"]
        gaps += g
        gaps_right += g_right
    print(f"llama: {MANY_STREAMS} streams on {MANY_SEQUENCES} sequences and {SECOND_STREAMS} to "
          f"a second model: split right {total['split']}/{len(mine)}, gaps' steps "
          f"{gaps_right}/{gaps}; steps {len(steps)} ({len(calls)} calls), up to {widest} "
          f"sequences in one", flush=True)
    check(len(steps) == len(calls) and widest >= MANY_SEQUENCES // 2,
          f"llama: the many-sequence server's steps are its calls, up to {widest} sequences a "
          f"step")
    check(len(mine) == MANY_STREAMS + SECOND_STREAMS and total["split"] == len(mine) and
          gaps_right == gaps,
          f"llama: every request on {MANY_SEQUENCES} sequences and to the second model split "
          f"right ({total['split']}/{len(mine)}), its gaps' steps too ({gaps_right}/{gaps})")


EMBED_CHATS = 4      # chat streams on a server that also answers /v1/embeddings
EMBED_CHAT_TOKENS = 150
EMBED_CALLS = 6      # embeddings calls, one after another, while they stream
OVERLAP_SLACK_NS = 200_000  # an embedding step this near a gap's edge may or may not be named


def embed(port, text, user):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/embeddings", json.dumps({"model": "tiny", "user": user, "input": text}),
              {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status == 200 and b'"embedding"' in data


def embeddings_beside_chat(check, root, gen, work, rnd):
    """Embeddings beside chat (issue 35, item 4): a server with an embedding context of its
    model beside its chat context (node-llama-cpp's createEmbeddingContext: a context made
    with embeddings on). EMBED_CHATS streams, then EMBED_CALLS embeddings calls one after
    another while they stream. Returns the server's pid, log and interposer's calls."""
    server, port, decode_log, server_log = start_server(check, root, gen, work, "embed",
                                                        SEQUENCES, embeddings=True)
    if not server:
        return None
    threads, firsts = [], []
    for i in range(EMBED_CHATS):
        first = threading.Event()
        t = threading.Thread(target=stream_until, args=(
            port, prompt(rnd, rnd.randint(3, 30)), EMBED_CHAT_TOKENS, f"ec{i}", first))
        t.start()
        threads.append(t)
        firsts.append(first)
    for first in firsts:
        first.wait(timeout=60)
    answered = sum(embed(port, prompt(rnd, rnd.randint(40, 90)), f"e{i}")
                   for i in range(EMBED_CALLS))
    for t in threads:
        t.join(timeout=120)
    check(answered == EMBED_CALLS, f"llama: {answered} of {EMBED_CALLS} embeddings calls answered "
                                   f"beside {EMBED_CHATS} chat streams")
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    return {"pid": server.pid, "served": read_jsonl(server_log),
            "calls": [c for c in read_jsonl(decode_log) if "start_ns" in c]}


def check_embeddings(check, emb, records):
    """The embedding context's steps named as such, and no other; each embeddings call a
    request record; every chat request split right, and named the embeddings calls whose
    steps ran in its gaps, by request, against the interposer's calls and the server's log."""
    calls = sorted(emb["calls"], key=lambda c: c["start_ns"])
    steps = sorted((r for r in records if r.get("type") == "engine_step" and
                    r["pid"] == emb["pid"]), key=lambda r: r["start_ns"])
    kinds_right = sum(1 for c, r in zip(calls, steps) if (r["kind"] == "embed") == c["embeddings"])
    embed_calls = [c for c in calls if c["embeddings"]]
    check(len(steps) == len(calls) and kinds_right == len(calls) and
          len(embed_calls) >= EMBED_CALLS,
          f"llama: each step of the embedding context is an embed step, and no other "
          f"({kinds_right} of {len(calls)} steps right, {len(embed_calls)} embedding calls)")
    mine = [r for r in records if r.get("type") == "request" and r["role"] == "server" and
            r["pid"] == emb["pid"]]
    embeds = sorted((r for r in mine if r.get("api") == "openai.embeddings"),
                    key=lambda r: r["start_ns"])
    chats = [r for r in mine if r.get("api") == "openai.chat"]
    logged = sorted((e for e in emb["served"] if e.get("embedding")), key=lambda e: int(e["arrival"]))
    check(len(embeds) == len(logged) == EMBED_CALLS and
          all(r["input_tokens"] == e["tokens"] and r["complete"] and
              r.get("attribution_error") == "an embeddings call: no token to split"
              for r, e in zip(embeds, logged)),
          f"llama: each embeddings call a request record, its prompt's tokens from its usage "
          f"({[(r['input_tokens'], r['complete']) for r in embeds]})")
    # the embedding call(s) each logged call made, by its record's id
    record_of_call = {}
    for r, e in zip(embeds, logged):
        for c in embed_calls:
            if int(e["start"]) <= c["start_ns"] and c["end_ns"] <= int(e["end"]):
                record_of_call[c["start_ns"]] = r["id"]
    chat_calls = [c for c in calls if not c["embeddings"]]
    same = dict(zip((c["start_ns"] for c in calls), (r["start_ns"] for r in steps)))
    served = [e for e in emb["served"] if not e.get("embedding")]
    good, gaps, gaps_right, bad, _ = split_against_truth(chat_calls, served, same, chats)
    for line in bad[:8]:
        print(f"  llama (embeddings): {line}")
    # each chat request's gaps, from the interposer's calls: the ones that must name an
    # embeddings call (its step overlapping the gap by more than the slack) and may (any)
    must_miss, may_not = [], []
    interfered = must_total = 0
    for r in chats:
        entry = min(served, key=lambda e: abs(int(e["tokens"][0]) - r["first_token_ns"]))
        t = truth_of(entry, chat_calls)
        by_start = {c["start_ns"]: c for c in chat_calls}
        ends = [t["end"]] + [by_start[p]["end_ns"] for p in t["producers"]]
        a = r.get("attribution") or {}
        named = {i for i in a.get("interfered_by", []) if i in set(record_of_call.values())}
        must, may = set(), set()
        for g, (w0, w1) in enumerate(zip(ends, ends[1:])):
            for c in embed_calls:
                overlap = min(w1, c["end_ns"]) - max(w0, c["start_ns"])
                if overlap > -OVERLAP_SLACK_NS:
                    may.add(record_of_call.get(c["start_ns"]))
                if overlap > OVERLAP_SLACK_NS:
                    must.add(record_of_call.get(c["start_ns"]))
                    gap = a.get("gaps", [])[g] if g < len(a.get("gaps", [])) else {}
                    interfered += bool(gap.get("interfered"))
        must_total += len(must)
        must_miss += [(r["id"], i) for i in must - named]
        may_not += [(r["id"], i) for i in named - may]
    print(f"llama: embeddings beside chat: {len(embed_calls)} embedding steps, {len(embeds)} "
          f"calls; chat split right {good['split']}/{len(chats)}, gaps' steps {gaps_right}/{gaps}; "
          f"{interfered} gaps beside an embedding step, {must_total} (request, call) pairs to "
          f"name; not named {must_miss}, named but never beside {may_not}", flush=True)
    check(len(chats) == EMBED_CHATS and good["split"] == len(chats) and gaps_right == gaps,
          f"llama: the chat requests beside embeddings split right ({good['split']}/{len(chats)}), "
          f"their gaps' steps too ({gaps_right}/{gaps})")
    check(interfered and not must_miss and not may_not,
          f"llama: each chat gap an embedding step ran in names its embeddings call, and none "
          f"other ({interfered} gaps beside one)")


SPEC_STREAMS = 8  # streams at once on a server that drafts with a second model, 4 sequences


def speculative(check, root, gen, work, rnd):
    """Speculative decoding (issue 35, item 2): a server whose sequences each draft with
    node-llama-cpp's DraftSequenceTokenPredictor on a context of a draft model (tiny-draft:
    tiny's weights, so that drafts are now and then accepted), SPEC_STREAMS streams at once.
    Returns its pid, log and interposer's calls."""
    server, port, decode_log, server_log = start_server(check, root, gen, work, "spec",
                                                        SEQUENCES, draft_model="tiny-draft.gguf")
    if not server:
        return None
    jobs = [(prompt(rnd, rnd.randint(3, 40)), rnd.randint(16, 40), f"s{i}")
            for i in range(SPEC_STREAMS)]
    check(concurrently(port, jobs, None), f"llama: {SPEC_STREAMS} speculative streams answered")
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    return {"pid": server.pid, "served": read_jsonl(server_log),
            "calls": [c for c in read_jsonl(decode_log) if "start_ns" in c]}


def check_speculative(check, spec, records, summary):
    """Each speculating request's drafted and accepted tokens against node-llama-cpp's own
    counts for its sequence (accepted: validated and used), its prompt's split against the
    interposer's calls, its gaps' steps its own sequence's, the draft model's steps named."""
    calls = sorted(spec["calls"], key=lambda c: c["start_ns"])
    steps = sorted((r for r in records if r.get("type") == "engine_step" and
                    r["pid"] == spec["pid"]), key=lambda r: r["start_ns"])
    same = dict(zip((c["start_ns"] for c in calls), (r["start_ns"] for r in steps)))
    target = [c for c in calls if c["model"] == "tokenscope-tiny"]
    drafts = [r for r, c in zip(steps, calls) if c["model"] == "tiny-draft"]
    check(len(steps) == len(calls) and drafts and all(r["model"] == "tiny-draft" for r in drafts),
          f"llama: the draft model's steps are its context's, named tiny-draft ({len(drafts)} "
          f"of {len(steps)} steps)")
    mine = [r for r in records if r.get("type") == "request" and r["role"] == "server" and
            r["pid"] == spec["pid"]]
    served = spec["served"]
    good, _, _, bad, _ = split_against_truth(target, served, same, mine)
    prompt_right = min(good[k] for k in ("prefill_start", "prefill_steps", "queue", "prefill",
                                          "emit", "cached", "sequence", "usage"))
    for line in bad[:8]:
        print(f"  llama (speculative): {line}")
    own = {same.get(c["start_ns"]) for c in target}
    off = []
    unmatched = list(served)
    for r in mine:
        a = r.get("attribution") or {}
        sp = a.get("speculative") or {}
        # the logged request of this prompt and output length that wrote its first token
        # nearest the write tokenscope saw (as split_against_truth pairs them)
        entry = min((e for e in unmatched if e["prompt_tokens"] == r.get("input_tokens") and
                     e["completion_tokens"] == r.get("output_tokens")),
                    key=lambda e: abs(int(e["tokens"][0]) - r["first_token_ns"]))
        unmatched.remove(entry)
        pr = entry["predictions"]
        accepted = pr["validated"] - pr["unused"]
        verified = pr["validated"] + pr["refuted"]
        gaps_own = all(g["step_start_ns"] in own for g in a.get("gaps", []))
        # a verifying step may come after the stream's last token (node-llama-cpp drafts on
        # past the last one it needs): its drafts are node-llama-cpp's, not the stream's
        if not (abs(sp.get("accepted", -9) - accepted) <= 1 and
                verified - 4 <= sp.get("drafted", -9) <= verified and gaps_own):
            off.append((r["id"], sp.get("drafted"), sp.get("accepted"), verified, accepted,
                        gaps_own))
    rates = sorted(r["attribution"]["speculative"]["acceptance"] for r in mine
                   if (r.get("attribution") or {}).get("speculative"))
    print(f"llama: speculative decoding: {len(mine)} requests, prompts split right "
          f"{prompt_right}/{len(mine)}, acceptance {[round(x, 2) for x in rates]}; "
          f"(id, drafted, accepted, node-llama-cpp's verified, accepted, gaps on its own "
          f"steps) off by more than a token: {off}", flush=True)
    check(len(mine) == SPEC_STREAMS and prompt_right == len(mine),
          f"llama: the speculating requests' prompts split right ({prompt_right}/{len(mine)})")
    check(len(rates) == len(mine) and not off and sum(rates) > 0,
          f"llama: each speculating request's accepted tokens within one of node-llama-cpp's "
          f"count, its drafted ones those its steps verified, its gaps on its own steps "
          f"({off})")
    check(f"speculative decoding: {len(mine)} requests verified drafted tokens" in summary and
          "model tiny-draft (drafts for speculative decoding)" in summary,
          "llama: the summary says the speculating requests, their acceptance, and which "
          "context drafted for them")


def die_mid_decode(check, root, gen, work, rnd):
    """A second server on the same engine, with a context of SMALL_CONTEXT tokens. First one
    stream longer than that: node-llama-cpp shifts the context mid-stream, clearing the
    sequence and evaluating what it keeps again. Then it is killed mid-decode (SIGKILL, by its
    own hand at a known point): 3 long streams, then a fourth that asks it to die after
    DIE_AFTER tokens, all 4 decoding when it dies. Its interposer writes its calls as they end
    (a SIGKILL runs no exit handler). Returns the server's pid, its log and its interposer's
    calls."""
    server, port, decode_log, server_log = start_server(
        check, root, gen, work, "died", SEQUENCES, context_size=SMALL_CONTEXT, live=True)
    if not server:
        return None
    status, _ = chat(port, prompt(rnd, 20), LONG_TOKENS, "long", clear_after=True)
    check(status == 200, f"llama: a stream of {LONG_TOKENS} tokens answered")
    threads = []
    for i in range(SEQUENCES):
        first = threading.Event()
        t = threading.Thread(target=stream_until, args=(
            port, prompt(rnd, rnd.randint(3, 30)), DYING_TOKENS, f"d{i}", first,
            DIE_AFTER if i == SEQUENCES - 1 else None))
        t.start()
        threads.append(t)
        first.wait(timeout=60)  # the next one starts once this one streams
    for t in threads:
        t.join(timeout=120)
    server.wait(timeout=60)
    check(server.returncode == -signal.SIGKILL,
          f"llama: the second server died by SIGKILL mid-decode (rc {server.returncode})")
    return {"pid": server.pid, "served": read_jsonl(server_log),
            "calls": [c for c in read_jsonl(decode_log) if "start_ns" in c]}


def check_died(check, dying, records):
    """The requests in flight when their server was killed: each ends process_exited, with
    the split of what it had (queue, prefill, emit, the gaps so far) right against the truth."""
    served = dying["served"]
    died = [e for e in served if e.get("died")]
    check(len(died) == SEQUENCES and all(len(e["tokens"]) >= 1 for e in died),
          f"llama: {SEQUENCES} requests decoding when the server died "
          f"({[len(e['tokens']) for e in died]} tokens written)")
    mine = [r for r in records if r.get("type") == "request" and r["role"] == "server" and
            r["pid"] == dying["pid"] and r.get("output_tokens") != LONG_TOKENS]
    check(len(mine) == len(died) and
          all(r["error"] == "process_exited" and not r["complete"] for r in mine),
          f"llama: each ended process_exited, incomplete "
          f"({[(r['error'], r['complete']) for r in mine]})")
    steps = sorted(r["start_ns"] for r in records if r.get("type") == "engine_step" and
                   r["pid"] == dying["pid"])
    # the interposer's calls and the steps one for one from the start: a SIGKILL leaves the
    # last millisecond's calls out of its log, and a call in progress out of the records
    same = dict(zip(sorted(c["start_ns"] for c in dying["calls"]), steps))
    good, gaps, gaps_right, bad, _ = split_against_truth(dying["calls"], died, same, mine)
    for line in bad:
        print(f"  llama (died): {line}")
    print(f"llama: the server killed mid-decode: {len(mine)} records "
          f"{sorted({r['error'] for r in mine})}, tokens written {[len(e['tokens']) for e in died]}, "
          f"split right {good['split']}/{len(mine)}, gaps' steps {gaps_right}/{gaps}; "
          f"{len(dying['calls'])} calls logged, {len(same)} steps", flush=True)
    check(mine and good["split"] == len(mine) and gaps and gaps_right == gaps,
          f"llama: the dead server's requests split right ({good['split']}/{len(mine)}), "
          f"their gaps' steps too ({gaps_right}/{gaps})")


def windows(calls):
    """For each of the interposer's calls (by its start): the earliest its step may have
    begun and the latest it may have ended as the probes saw them, the end read of its
    thread's call before and the start read of its thread's call after (check_steps() holds
    every step to these); the call's own reads where there is none."""
    return {start: (prev_end if prev_end is not None else start,
                    next_start if next_start is not None else
                    next(c["end_ns"] for c in calls if c["start_ns"] == start))
            for start, (prev_end, next_start) in neighbours(calls).items()}


def truth_of(entry, calls, window=None):
    """What the interposer's calls say of one request the server logged: its sequence's
    prompt steps (from the first call carrying it after the server gave it the sequence, up to
    the one that sampled its first token), the cache its first prompt token's position shows,
    and the call that produced each later token. With window (windows()), also the earliest
    the prompt may have begun (start_lo) and the latest it may have ended (end_hi)."""
    seq, at = entry["seq"], int(entry["seq_at"])
    mine = []
    for c in calls:
        q = next((q for q in c["seqs"] if q[0] == seq), None)
        if c["start_ns"] >= at and q:
            mine.append((c, q))
    prompt = []
    for c, q in mine:
        prompt.append((c, q))
        if q[4] > 0:
            break
    outs = [c for c, q in mine if q[4] > 0][:len(entry["tokens"])]
    start, end = prompt[0][0]["start_ns"], prompt[-1][0]["end_ns"]
    return {"start": start, "end": end,
            "start_lo": window[start][0] if window else start,
            "end_hi": window[prompt[-1][0]["start_ns"]][1] if window else end,
            "steps": len(prompt), "cached": prompt[0][1][2],
            "producers": [c["start_ns"] for c in outs[1:]]}


def usage_mismatch_of(entry):
    """What the record must say of a served request's usage: nothing where the server counted
    the prompt as the engine evaluated it, cached tokens in or out, or said nothing; else both
    figures (a template's tokens counted, BOS not)."""
    reported = entry.get("reported_prompt_tokens", entry["prompt_tokens"])
    if reported is None or reported in (entry["prompt_tokens"],
                                        entry["prompt_tokens"] - entry["cached"]):
        return None
    return {"reported": reported, "evaluated": entry["prompt_tokens"]}


def within(got, want, lo=None, hi=None):
    """got within max(1 ms, 5 %) of want, or of the window [lo, hi] the truth allows."""
    lo, hi = (want, want) if lo is None else (min(lo, want), max(hi, want))
    return max(lo - got, got - hi, 0) <= max(1.0, 0.05 * abs(want))


def usage_input(r):
    """The prompt length the response's usage said (the fixture's, in its usage_style), not
    the engine's that fills in where it said none."""
    return r.get("input_tokens") if r["token_sources"]["input_tokens"] == "usage" else None


def split_against_truth(calls, served, same, records):
    """Each server record's split against the truth: the interposer's steps of the request's
    own sequence (which the server logged), between the arrival and first token write
    tokenscope measured on the wire; the prompt's first step and each gap's producing step
    must be the very step (same: the interposer's call with the step tokenscope recorded).
    The server's own arrival, its 'request' event, comes later by node's parsing and
    event-loop lag: shown, not compared. Returns the counts of what was right, the gaps
    compared and right, what was wrong (lines), and the lags."""
    calls = sorted(calls, key=lambda c: c["start_ns"])
    window = windows(calls)
    unmatched = list(served)
    good = {"split": 0, "engine_counts": 0, "prefill_start": 0, "prefill_steps": 0, "queue": 0, "prefill": 0,
            "emit": 0, "cached": 0, "sequence": 0, "usage": 0}
    gaps = gaps_right = 0
    lag = []
    bad = []
    for r in records:
        # the logged request with this prompt and output length whose first token the
        # server wrote nearest the write tokenscope saw
        alike = [e for e in unmatched
                 if e.get("reported_prompt_tokens", e["prompt_tokens"]) == usage_input(r)
                 and e["completion_tokens"] == r.get("output_tokens")]
        entry = min(alike, key=lambda e: abs(int(e["tokens"][0]) - r["first_token_ns"]),
                    default=None)
        if not entry or abs(int(entry["tokens"][0]) - r["first_token_ns"]) > 20_000_000:
            bad.append(f"record {r['id']}: no logged request wrote its first token then")
            continue
        unmatched.remove(entry)
        a = r.get("attribution")
        if not a:
            bad.append(f"record {r['id']}: not attributed ({r.get('attribution_error')})")
            continue
        t = truth_of(entry, calls, window)
        lag.append((int(entry["arrival"]) - r["start_ns"]) / 1e6)
        # each phase as the interposer's reads have it, and the window its probes may have
        # seen it in (the entry probe before the start read, on a loaded machine now and then
        # milliseconds before: in the kernel's probe handling, or waiting for a CPU)
        arrival, ft = r["start_ns"], r["first_token_ns"]
        queue = [(t["start"] - arrival) / 1e6, (t["start_lo"] - arrival) / 1e6,
                 (t["start"] - arrival) / 1e6]
        prefill = [(t["end"] - t["start"]) / 1e6, (t["end"] - t["start"]) / 1e6,
                   (t["end_hi"] - t["start_lo"]) / 1e6]
        emit = [(ft - t["end"]) / 1e6, (ft - t["end_hi"]) / 1e6, (ft - t["end"]) / 1e6]
        # a record whose usage said no prompt length has the engine's: its sequence's
        ok = {"engine_counts": usage_input(r) is not None or
              (r["token_sources"]["input_tokens"] == "llama_steps" and
               r["input_tokens"] == entry["prompt_tokens"] and
               r["cached_tokens"] == entry["cached"]),
              "prefill_start": a["prefill_start_ns"] == same.get(t["start"]),
              "prefill_steps": a["prefill_steps"] == t["steps"],
              "queue": within(a["queue_ms"], *queue), "prefill": within(a["prefill_ms"], *prefill),
              "emit": within(a["emit_ms"], *emit), "cached": a.get("cached_tokens") == t["cached"]
              == entry["cached"], "sequence": a.get("sequence") == entry["seq"],
              "usage": a.get("usage_mismatch") == usage_mismatch_of(entry)}
        ok["split"] = all(ok.values())
        for k, v in ok.items():
            good[k] += v
        if not ok["split"]:
            bad.append(f"record {r['id']} (seq {entry['seq']}): queue {a['queue_ms']:.3f}/"
                       f"{queue[0]:.3f} prefill {a['prefill_ms']:.3f}/{prefill[0]:.3f} emit "
                       f"{a['emit_ms']:.3f}/{emit[0]:.3f} cached {a.get('cached_tokens')}/"
                       f"{t['cached']} seq {a.get('sequence')}/{entry['seq']} usage "
                       f"{a.get('usage_mismatch')}/{usage_mismatch_of(entry)} "
                       f"({entry.get('usage_style')})")
        for g, want in zip(a.get("gaps", []), t["producers"]):
            gaps += 1
            gaps_right += g["step_start_ns"] == same.get(want)
    return good, gaps, gaps_right, bad, lag


# Requests whose attribution may be refused as ambiguous (two of the engine's sequences fit it
# alike: the wire cannot tell them apart, and tokenscope says so rather than guess): at most
# this share; the rest are judged right or wrong.
MOST_REFUSED = 0.03


def check_attribution(check, calls, served, same, records):
    """The split of every request against the truth (split_against_truth), 99 % of those it
    attributed right; at most MOST_REFUSED of them refused as ambiguous."""
    check(len(records) == len(served), f"llama: a server record per request ({len(records)} of "
                                       f"{len(served)})")
    good, gaps, gaps_right, bad, lag = split_against_truth(calls, served, same, records)
    n = len(records)
    for line in bad[:8]:
        print(f"  llama: {line}")
    table = ", ".join(f"{k} {v}/{n}" for k, v in good.items())
    print(f"llama: attribution against the truth: {table}; gaps' producing steps "
          f"{gaps_right}/{gaps}; node's 'request' event after the read: p50 "
          f"{pct(lag, 50):.2f} ms, max {max(lag, default=0):.2f} ms", flush=True)
    check(any(r["attribution"] and r["attribution"].get("prefill_chunks") for r in records),
          f"llama: some prompts were computed in chunks of {BATCH} tokens")
    check(any(g.get("interfered") for r in records if r["attribution"]
              for g in r["attribution"].get("gaps", [])),
          "llama: some gaps shared their step with another request's prompt")
    refused = sum(1 for r in records if not r.get("attribution") and
                  (r.get("attribution_error") or "").startswith("ambiguous"))
    check(refused <= MOST_REFUSED * n,
          f"llama: at most {100 * MOST_REFUSED:.0f} % of requests refused as ambiguous "
          f"({refused}/{n})")
    judged = n - refused
    for k in good:
        check(judged and good[k] * 100 >= 99 * judged,
              f"llama: {k} right for 99 % of the requests attributed ({good[k]}/{judged}; "
              f"{refused} refused as ambiguous)")
    check(gaps and gaps_right * 100 >= 99 * gaps,
          f"llama: each gap's producing step right for 99 % ({gaps_right}/{gaps})")


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else 0


def neighbours(truth):
    """For each of the interposer's calls (by its start), the end read of its thread's call
    before and the start read of its thread's call after (None for a thread's first or last)."""
    around = {}
    by_tid = {}
    for t in sorted(truth, key=lambda t: t["start_ns"]):
        by_tid.setdefault(t["tid"], []).append(t)
    for calls in by_tid.values():
        for prev, t, nxt in zip([None] + calls[:-1], calls, calls[1:] + [None]):
            around[t["start_ns"]] = (prev["end_ns"] if prev else None,
                                     nxt["start_ns"] if nxt else None)
    return around


def check_steps(check, truth, steps):
    """Every call the interposer saw is one engine_step with the same batch, and its edges
    where the probes must have seen them, for every step: the entry probe fires before the
    interposer's start read and after the end read of the thread's call before, the return
    probe after the interposer's end read and before the start read of the thread's call
    after (one thread, one clock: exact bounds, however the machine is loaded). The medians
    within EDGE_NS: between the probes' clock reads and the interposer's lie the trap and the
    probe's program, about 20 us at the start and 1 us at the end. A wrong clock or a step
    taken at the wrong place moves every step and fails the medians; an end paired with
    another call's return crosses the thread's next call; a lost or extra step fails the count.

    The tails are printed, not bounded: on this 2-CPU VM an edge now and then comes tens to
    hundreds of microseconds late with no preemption the thread could measure (an interrupt,
    the hypervisor taking the CPU, the kernel's uprobe handling waiting for a lock or a slot
    to run the probed instruction out of line). Bounds on the tail, tried over many CI runs
    (50 us past the thread's preemption, then the starts' p99 up to 200 us, for all but
    0.5 % of the steps), failed now and then on runs with nothing wrong: 5 ends in 553 at
    67-84 us with the bound at 67 us and no preemption. The probes' cost is measured in
    `make bench`, against a bare probe in the same run."""
    check(len(truth) > 0, "llama: the interposer logged llama_decode calls")
    check(len(steps) == len(truth),
          f"llama: one engine_step per llama_decode call ({len(steps)} records, "
          f"{len(truth)} calls: a shim's call into the real one is the same step)")
    truth = sorted(truth, key=lambda t: t["start_ns"])
    steps = sorted(steps, key=lambda s: s["start_ns"])
    around = neighbours(truth)
    same_batch = 0
    edges, out_of_bounds = [], []
    for t, s in zip(truth, steps):
        same_batch += (t["n_tokens"] == s["tokens"] and t["outputs"] == s["outputs"] and
                       t["result"] == s["result"] and sorted(t["seqs"]) == seq_summary(s) and
                       int(t["ctx"], 16) == int(s["context"], 16))
        lead, lag = t["start_ns"] - s["start_ns"], s["end_ns"] - t["end_ns"]
        edges.append((lead, lag))
        prev_end, next_start = around[t["start_ns"]]
        # (edge, the probe's time, earliest, latest): the interposer's own reads around it
        for edge, at, lo, hi in (
                ("start", s["start_ns"], prev_end, t["start_ns"]),
                ("end", s["end_ns"], t["end_ns"], next_start)):
            lo = lo if lo is not None else at - EDGE_HARD_NS
            hi = hi if hi is not None else at + EDGE_HARD_NS
            if not lo - CLOCK_SLACK_NS <= at <= hi + CLOCK_SLACK_NS or \
                    abs(at - (t["start_ns"] if edge == "start" else t["end_ns"])) > EDGE_HARD_NS:
                out_of_bounds.append(f"{edge} of the step at {s['start_ns']}: "
                                     f"{(at - lo) / 1000:.1f} us after its earliest, "
                                     f"{(hi - at) / 1000:.1f} us before its latest")
    n = len(edges)
    check(n and same_batch == n, f"llama: every step's batch summary is the interposer's "
                                 f"({same_batch}/{n})")
    starts, ends = [e[0] for e in edges], [e[1] for e in edges]
    said = (f"start p50 {pct(starts, 50) / 1000:.1f} p99 {pct(starts, 99) / 1000:.1f} max "
            f"{max(starts, default=0) / 1000:.1f} us; end p50 {pct(ends, 50) / 1000:.1f} p99 "
            f"{pct(ends, 99) / 1000:.1f} max {max(ends, default=0) / 1000:.1f} us")
    check(n and not out_of_bounds,
          f"llama: every step's start between its thread's call before and the interposer's "
          f"start, its end between the interposer's end and its thread's call after "
          f"({len(out_of_bounds)} not: {out_of_bounds[:3]}; {said})")
    for name, lags in (("starts", starts), ("ends", ends)):
        check(n and abs(pct(lags, 50)) <= EDGE_NS,
              f"llama: the steps' {name} a median {pct(lags, 50) / 1000:.1f} us from the "
              f"interposer's, within {EDGE_NS // 1000} us ({said})")
    print(f"llama: {n} steps against the interposer: {said}", flush=True)
    kinds = {s["kind"] for s in steps}
    check({"prefill", "decode"} <= kinds or "mixed" in kinds,
          f"llama: prefill and decode steps seen ({sorted(kinds)})")
