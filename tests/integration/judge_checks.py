"""The judgements with real eBPF probes (imported by run.py; `run.sh --only judge`): who reads
each reply, its stream against reading, and its SLOs, on real clients of the TLS fixture.

- An agent: the official openai SDK from npm runs a tool-calling loop (agent_loop.js). Each
  turn's first call offers a tool and the model calls it (evidence tool_call), the second
  carries the tool's result (tool_result); a last call offers none (a program: its SDK's
  User-Agent). The loop's own account of its calls is the ground truth.
- A person: headless chromium opens the fixture's chat page, which streams a reply into itself
  (browser_chat.mjs): interactive, by its User-Agent. One model streams faster than reading,
  one slower (the schedule the test picks): the headroom, the default SLOs and the summary's
  reading line must say which.
- A replay of the same recording with SLOs and rules given: each record's slo_met against its
  own figures, the summary's attainment and goodput and the metrics' counts against the
  records, the rules winning over everything.
"""
import json
import os
import re
import subprocess

from plaintext_checks import CLIENT_PYTHON, wait_file

AGENT = "fx-ttft30-itl5-n4-judgeagent"
FAST = "fx-ttft30-itl20-n6-judgefast"  # 50 tokens/s: far ahead of reading (5.3)
SLOW = "fx-ttft30-itl300-n4-judgeslow"  # 3.3 tokens/s: the reader waits
RELAYED = "fx-ttft30-itl20-n6-judgerelay"  # through a chat backend (tests/fixtures/relay.py)
TURNS = 3
READING = 5.3


def records(path):
    return [r for r in map(json.loads, open(path)) if r.get("type") == "request"]


def run_judge_checks(ctx):
    check, root, work = ctx["check"], ctx["root"], os.path.join(ctx["work"], "judge")
    os.makedirs(work, exist_ok=True)
    clients = os.path.join(root, "tests", "integration", "clients")
    port_file, truth = os.path.join(work, "port"), os.path.join(work, "truth.jsonl")
    server = subprocess.Popen([CLIENT_PYTHON, os.path.join(root, "tests", "fixtures",
                                                           "llm_server.py"),
                               "--cert", ctx["cert"], "--key", ctx["key"], "--truth", truth,
                               "--port-file", port_file, "--lifetime", "600"],
                              stdout=subprocess.DEVNULL)
    relay_port_file = os.path.join(work, "relay.port")
    relay = None
    try:
        port = wait_file(port_file, server, "the TLS fixture server")
        relay = subprocess.Popen([CLIENT_PYTHON, os.path.join(root, "tests", "fixtures",
                                                              "relay.py"),
                                  "--upstream", str(port), "--cafile", ctx["cert"],
                                  "--port-file", relay_port_file], stdout=subprocess.DEVNULL)
        relay_port = wait_file(relay_port_file, relay, "the relay")
        tracer = ctx["Tracer"](work)
        env = dict(os.environ, NODE_EXTRA_CA_CERTS=ctx["cert"])
        agent = subprocess.run(["node", os.path.join(clients, "agent_loop.js"), str(port), AGENT,
                                str(TURNS)], env=env, capture_output=True, text=True, timeout=120)
        browsed = {}
        for model, n, to, scheme in ((FAST, 3, port, "https"), (SLOW, 2, port, "https"),
                                     (RELAYED, 2, relay_port, "http")):
            b = subprocess.run(["node", os.path.join(clients, "browser_chat.mjs"), str(to),
                                model, str(n), scheme], capture_output=True, text=True,
                               timeout=180)
            browsed[model] = (b.returncode, b.stdout.strip(), b.stderr[-300:], n)
        rc, out, err = tracer.stop()
    finally:
        server.kill()
        if relay:
            relay.kill()
    check(agent.returncode == 0, f"judge: the agent's loop ran ({agent.stderr[-300:]})")
    for model, (brc, titles, berr, n) in browsed.items():
        pages = json.loads(titles) if brc == 0 else []
        check(len(pages) == n and all(t.startswith("done ") for t in pages),
              f"judge: chromium read {n} streams of {model} to their end ({titles} {berr})")
    check(rc == 0, f"judge: the tracer exits 0 ({err[-300:]})")
    calls = json.loads(agent.stdout) if agent.returncode == 0 else []
    recs = records(tracer.out)
    check_agent(check, recs, calls)
    check_sessions(check, [json.loads(line) for line in open(tracer.out)], recs, calls)
    check_person(check, recs, [json.loads(line) for line in open(truth)])
    check_relay(check, recs, server.pid, relay.pid)
    check_replay(ctx, work, tracer.rec, recs)


def by_start(recs, model, role, comm=None):
    return sorted((r for r in recs if r["model"] == model and r["role"] == role and
                   (comm is None or r["comm"] == comm)), key=lambda r: r["start_ns"])


def check_agent(check, recs, calls):
    """Each call of the loop, client (node) and server (the fixture) alike: its consumer and
    the evidence, as the loop says it called."""
    want = []
    for c in calls:
        if c["tool_result"]:
            want.append(("agent", "tool_result"))
        elif c["tools"] and c["finish"] == "tool_calls":
            want.append(("agent", "tool_call"))
        else:
            want.append(("programmatic", "program"))
    check(len(calls) == 2 * TURNS + 1 and want.count(("agent", "tool_call")) == TURNS and
          want.count(("agent", "tool_result")) == TURNS,
          f"judge: the loop made {TURNS} tool calls and fed back {TURNS} results ({len(calls)} "
          f"calls)")
    for role, comm in (("client", "node"), ("server", None)):
        mine = by_start(recs, AGENT, role, comm)
        # the client's clock: each record began inside its call
        inside = sum(int(c["start_ns"]) <= r["start_ns"] <= int(c["end_ns"])
                     for c, r in zip(calls, mine)) if role == "client" else len(mine)
        got = [(r["consumer"], r["consumer_evidence"]) for r in mine]
        check(len(mine) == len(calls) and inside == len(calls) and got == want,
              f"judge: the agent's {len(calls)} calls ({role}) are {want}, got {got} "
              f"({inside} inside their calls)")
        check(all(r["user_agent"] and r["user_agent"].startswith("OpenAI/JS ") and
                  r["slo_met"] is None for r in mine) and mine,
              f"judge: the agent's records ({role}) carry the SDK's User-Agent and no SLO "
              f"(none by default) ({[(r['user_agent'], r['slo_met']) for r in mine][:2]})")


def check_sessions(check, lines, recs, calls):
    """The loop is one session on each side (its last call, a conversation of its own, is none
    of it): its calls, how each was chained, its times from its records' own; each client
    record inside its call as the loop timed it, so the time between calls is at least the
    loop's own gaps (its tool and its waits), and at most 10 ms a gap more (the SDK building
    the next request, the network)."""
    sessions = [o for o in lines if o.get("type") == "session"]
    loop = calls[:-1]
    for role, comm, ended in (("client", "node", "exit"), ("server", None, "trace_end")):
        mine = [s for s in sessions if s["role"] == role and s["model"] == AGENT]
        recs_ = by_start(recs, AGENT, role, comm)[:len(loop)]
        check(len(mine) == 1 and mine[0]["requests"] == len(loop) == 2 * TURNS and
              mine[0]["request_ids"] == [r["id"] for r in recs_] and
              mine[0]["chained_by"] == {"previous_response_id": 0, "tool_result": TURNS,
                                        "conversation": TURNS - 1} and
              mine[0]["ended"] == ended and mine[0]["consumer"] == "agent",
              f"judge: the loop is one session ({role}) of its {len(loop)} calls, chained by "
              f"{TURNS} tool results and {TURNS - 1} conversations, ended by {ended} "
              f"({[(s['requests'], s['chained_by'], s['ended']) for s in mine]})")
        if len(mine) != 1 or len(recs_) != len(loop):
            continue
        s = mine[0]
        total = (recs_[-1]["end_ns"] - recs_[0]["start_ns"]) / 1e6
        model = sum(r["end_ns"] - r["start_ns"] for r in recs_) / 1e6
        ttft = sum(r["first_token_ns"] - r["start_ns"] for r in recs_) / 1e6
        check(abs(s["total_ms"] - total) < 1e-3 and abs(s["model_ms"] - model) < 1e-3 and
              abs(s["ttft_ms"] - ttft) < 1e-3 and
              abs(s["between_ms"] - (total - model)) < 1e-3 and
              abs(s["streaming_ms"] - (model - ttft)) < 1e-3,
              f"judge: the session's times ({role}) are its records' ({s} vs total {total}, "
              f"model {model}, ttft {ttft})")
        own = sum((int(b["start_ns"]) - int(a["end_ns"])) / 1e6 for a, b in zip(loop, loop[1:]))
        if role == "client":
            inside = sum(int(c["start_ns"]) <= r["start_ns"] <= r["end_ns"] <= int(c["end_ns"])
                         for c, r in zip(loop, recs_))
            check(inside == len(loop), f"judge: each client record lies inside its call as the "
                  f"loop timed it ({inside} of {len(loop)})")
        # node's timers may fire up to a millisecond early: the waits are 117 ms at least
        check(own >= 117 and own <= s["between_ms"] <= own + 10 * (len(loop) - 1),
              f"judge: between calls ({role}) {s['between_ms']:.1f} ms: the loop's own gaps "
              f"{own:.1f} ms (its waits 120 ms), at most 10 ms a gap more")
    check(len(sessions) == 2, f"judge: two sessions, the loop's on each side; the browser's "
          f"chats of one question and the plain call none ({len(sessions)})")


def check_relay(check, recs, server_pid, relay_pid):
    """chromium's chats through the chat backend: the backend's own request (its server
    record) is the browser's, by its User-Agent; its call upstream and the fixture's record of
    that call carry the backend's name, and are a person's by the relay."""
    want = {("server", relay_pid): ("user_agent", "Mozilla/5.0"),
            ("client", relay_pid): ("relay", "relay/1.0"),
            ("server", server_pid): ("relay", "relay/1.0")}
    for (role, pid), (evidence, ua) in want.items():
        mine = [r for r in recs if r["model"] == RELAYED and r["role"] == role and r["pid"] == pid]
        check(len(mine) == 2 and all(r["consumer"] == "interactive" and
                                     r["consumer_evidence"] == evidence and
                                     (r["user_agent"] or "").startswith(ua) for r in mine),
              f"judge: the relayed chats' {role} records of pid {pid} are interactive by "
              f"{evidence} ({[(r['consumer'], r['consumer_evidence'], r['user_agent']) for r in mine]})")


def check_person(check, recs, truth):
    """chromium's streams (the fixture's records: chromium's own TLS is BoringSSL, inside the
    binary): interactive by the browser's User-Agent; the rate against the fixture's own
    writes, the headroom, and the default SLOs (ttft<=1s, tpot<=reading) against each
    schedule."""
    for model, n, itl in ((FAST, 3, 20), (SLOW, 2, 300)):
        mine = by_start(recs, model, "server")
        check(len(mine) == n and all(r["consumer"] == "interactive" and
                                     r["consumer_evidence"] == "user_agent" and
                                     r["user_agent"].startswith("Mozilla/5.0") for r in mine),
              f"judge: chromium's {n} streams of {model} are interactive by their User-Agent "
              f"({[(r['consumer'], r['consumer_evidence'], r['user_agent']) for r in mine]})")
        # the fixture's writes, in order: the rate after the first token. Each SSL write was
        # entered between its two readings, so the span from the first token to the last lies
        # between the inner and the outer pair of them (records are rounded to 3 decimals).
        mine_truth = [t for t in truth if t["model"] == model]
        rates = [((len(t["token_ns"]) - 1) * 1e9 /
                  (t["token_after_ns"][-1] - t["token_ns"][0]),
                  (len(t["token_ns"]) - 1) * 1e9 /
                  max(1, t["token_ns"][-1] - t["token_after_ns"][0])) for t in mine_truth]
        good = [r for r, (least, most) in zip(mine, rates)
                if r["tokens_per_s"] and least - 0.0005 <= r["tokens_per_s"] <= most + 0.0005 and
                1000.0 / (r["tpot_ms"] + 0.0005) - 0.0005 <= r["tokens_per_s"] <=
                1000.0 / (r["tpot_ms"] - 0.0005) + 0.0005 and
                abs(r["reading_headroom"] - r["tokens_per_s"] / READING) < 0.002]
        check(len(good) == n == len(rates),
              f"judge: {model}: tokens_per_s is the fixture's writes' rate (within their "
              f"bracketing readings), the "
              f"headroom that over {READING} ({len(good)} of {n}: "
              f"{[(r['tokens_per_s'], r['reading_headroom']) for r in mine]} vs {rates})")
        met = itl < 1000.0 / READING
        check(all(r["slo_met"] is met for r in mine),
              f"judge: {model}: the default SLOs are {'met' if met else 'missed'} "
              f"({[r['slo_met'] for r in mine]}; TTFT {[r['ttft_ms'] for r in mine]})")


def summary_consumer(text, model, role, consumer):
    """The summary's consumer line of the group with this model and role."""
    for block in re.split(r"\n(?=\S)", text):
        head = block.split("\n", 1)[0]
        if f" {role} " in head and f"model={model} " in head:
            m = re.search(rf"^    consumer {consumer}: (.*)$", block, re.M)
            return m.group(1) if m else None
    return None


def check_replay(ctx, work, rec, live):
    """The same recording replayed with SLOs given: records, summary and metrics agree."""
    check, tokenscope = ctx["check"], ctx["tokenscope"]
    out, metrics = os.path.join(work, "slo.jsonl"), os.path.join(work, "slo.prom")
    r = subprocess.run([tokenscope, "report", rec, "-q", "-o", out, "--metrics-file", metrics,
                        "--slo", "agent:e2e<=150ms", "--slo", "interactive:ttft<=1s",
                        "--slo", "interactive:tpot<=reading", "--slo", "programmatic:ttft<=1ms",
                        "--reading-speed", "3"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"judge replay: report exits 0 ({r.stderr[-300:]})")
    recs = records(out)
    agent = [x for x in recs if x["consumer"] == "agent"]
    want = [x["e2e_ms"] <= 150 for x in agent]
    check(len(agent) == 4 * TURNS and [x["slo_met"] for x in agent] == want and
          0 < sum(want),
          f"judge replay: each agent call's slo_met is its e2e against 150 ms "
          f"({[(x['e2e_ms'], x['slo_met']) for x in agent]})")
    plain = [x for x in recs if x["model"] == AGENT and x["consumer"] == "programmatic"]
    check(len(plain) == 2 and all(x["slo_met"] is False for x in plain),
          f"judge replay: the plain call misses a TTFT of 1 ms "
          f"({[(x['ttft_ms'], x['slo_met']) for x in plain]})")
    slow = [x for x in recs if x["model"] == SLOW]
    check(slow and all(x["slo_met"] is True and x["reading_headroom"] > 1 for x in slow),
          f"judge replay: at 3 tokens/s of reading the slow stream keeps ahead "
          f"({[(x['reading_headroom'], x['slo_met']) for x in slow]})")
    # the summary: each group's attainment and goodput from its records
    span = (max(x["end_ns"] or x["start_ns"] for x in recs) - min(x["start_ns"] for x in recs)) / 1e9
    for role in ("client", "server"):
        mine = [x for x in agent if x["role"] == role]
        met = sum(x["slo_met"] for x in mine)
        line = summary_consumer(r.stdout, AGENT, role, "agent")
        want_line = (f"requests={len(mine)} slo=\"e2e<=150ms\" met={met}/{len(mine)} "
                     f"({100.0 * met / len(mine):.1f} %) goodput={met / span:.3g}/s")
        check(line == want_line, f"judge replay: the summary's agent line ({role}) is its "
              f"records' ({line!r}, want {want_line!r})")
    check(re.search(rf"^reading: all {len([x for x in recs if x['consumer'] == 'interactive'])} "
                    r"interactive streams ran ahead of reading \(3 tokens/s; the slowest "
                    r"1\.\d\dx\): faster streaming would not be seen$", r.stdout, re.M),
          f"judge replay: the summary says every stream kept ahead of reading "
          f"({[l for l in r.stdout.splitlines() if l.startswith('reading')]})")
    # the metrics: a count per consumer and outcome, the records'
    counts = {}
    for line in open(metrics):
        m = re.match(r'tokenscope_requests_judged_total\{.*consumer="(\w+)",slo="(\w+)"\} (\d+)',
                     line)
        if m:
            counts[m.group(1), m.group(2)] = counts.get((m.group(1), m.group(2)), 0) + int(m.group(3))
    want_counts = {}
    for x in recs:
        k = (x["consumer"], "none" if x["slo_met"] is None else "met" if x["slo_met"] else "missed")
        want_counts[k] = want_counts.get(k, 0) + 1
    check(counts == want_counts, f"judge replay: tokenscope_requests_judged_total counts the "
          f"records by consumer and outcome ({counts} vs {want_counts})")
    # the sessions: the summary's and the metrics' are the records'
    sessions = [x for x in map(json.loads, open(out)) if x.get("type") == "session"]
    prom = open(metrics).read()
    for s in sessions:
        block = re.search(rf"^sessions: {s['comm']} {s['role']} agent: 1 .*\n    calls +n=1 +"
                          rf"p50= +{s['requests']}\.00 .*\n    session_ms +n=1 +p50= +"
                          rf"{s['total_ms']:.2f} ", r.stdout, re.M)
        labels = f'process="{s["comm"]}",role="{s["role"]}",consumer="agent"'
        check(block and f"tokenscope_session_calls_sum{{{labels}}} {s['requests']}" in prom and
              f"tokenscope_session_duration_seconds_count{{{labels}}} 1" in prom,
              f"judge replay: the {s['role']} session is in the summary and the metrics "
              f"({[l for l in r.stdout.splitlines() if l.startswith('sessions')]})")
    check(len(sessions) == 2, f"judge replay: the replay has the live run's sessions "
          f"({len(sessions)})")
    # the live run's summary, at the default reading speed, named the slow stream's group
    live_summary = subprocess.run([tokenscope, "report", rec, "-q"], capture_output=True,
                                  text=True).stdout
    check(re.search(rf"^reading: interactive streams slower than reading \(5\.3 tokens/s\), "
                    rf"their readers waiting: python3\[\d+\] model={SLOW} 2 of 2$", live_summary,
                    re.M),
          f"judge: the summary names the group whose streams fell behind reading "
          f"({[l for l in live_summary.splitlines() if l.startswith('reading')]})")
    # rules win over every other evidence
    ruled = os.path.join(work, "ruled.jsonl")
    r = subprocess.run([tokenscope, "report", rec, "-q", "-o", ruled,
                        "--consumer", "interactive:comm=node", "--consumer", "agent:ua=Mozilla/*"],
                       capture_output=True, text=True)
    got = records(ruled)
    check(r.returncode == 0 and
          all(x["consumer"] == "interactive" and x["consumer_evidence"] == "rule"
              for x in got if x["comm"] == "node") and
          all(x["consumer"] == "agent" and x["consumer_evidence"] == "rule"
              for x in got if x["model"] in (FAST, SLOW)) and
          len([x for x in got if x["comm"] == "node"]) == 2 * TURNS + 1,
          f"judge replay: --consumer rules win ({r.stderr[-200:]})")
    for bad, why in (("--slo=agent:ttft<=fast", "the value is a time"),
                     ("--slo=robot:ttft<=1s", "CONSUMER one of"),
                     ("--consumer=agent:pid=1", "the key is comm, ua or model"),
                     ("--reading-speed=0", "more than 0")):
        r = subprocess.run([tokenscope, "report", rec, "-q", bad], capture_output=True, text=True)
        check(r.returncode != 0 and why in r.stderr and r.stderr.count("\n") == 1,
              f"judge: {bad} is refused in one clear line ({r.returncode}, {r.stderr!r})")
    check(not any(s in open(tracer_out).read() for s in ("SECRET", "PROMPT-CANARY")
                  for tracer_out in (out, ruled)),
          "judge: no credential or prompt in the records")
