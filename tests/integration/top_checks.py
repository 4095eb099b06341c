"""`tokenscope top` in a real terminal: tmux, driven with send-keys, read with capture-pane.

    run_top_checks(ctx)                          live, under load (run.py; root)
    top_checks.py replay TOKENSCOPE RECORDING    a kept recording (tests/replay/run.sh; no root)
    top_checks.py sched TOKENSCOPE RECORDING     vLLM's scheduler table, from a recording of its
                                                 engine wire (tests/fixtures/vllm/capture)

Live: the vLLM-shaped service (tests/fixtures/vllm) under a load of streamed requests, and one
request whose model name carries escape sequences; the view's per-group request counts and
TTFT p50 for its window, read off the screen (paused) while the load runs and after it, are
what the JSON Lines of the same run give for that window (the header's clock is the window's
end; "within one refresh" when the exact clock does not match). NO_COLOR turns colours off
(capture-pane -e shows no colour), they are on otherwise; the hostile name shows as \\xNN; `q`
prints the summary and exits 0.

Replay: two runs at --speed 10 give the same final screen, whose rows match `tokenscope report`'s
JSON Lines for the window; the keys sort (each column in order), reverse, filter, show
details, pause and quit as documented; a resize redraws (columns dropped to fit, then "too
small", then back); without a terminal `top` refuses in one line.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TMUX = ["tmux", "-L", "tokenscope-tests"]  # a tmux server of the tests' own
PY = "/usr/bin/python3"
HOSTILE_MODEL = "evil\x1b[31mred\x07\x1b]0;pwned\x07"

_checks = {"passed": 0, "failed": 0}


def _check(cond, what):
    if cond:
        _checks["passed"] += 1
    else:
        _checks["failed"] += 1
        print(f"FAIL: {what}", flush=True)
    return cond


class Screen:
    """One tmux session running cmd (a shell line) in a width x height terminal."""

    def __init__(self, name, cmd, width=200, height=60):
        self.name = name
        subprocess.run(TMUX + ["kill-session", "-t", name], capture_output=True)
        subprocess.run(TMUX + ["new-session", "-d", "-s", name, "-x", str(width), "-y",
                               str(height), cmd], check=True)

    def text(self, escapes=False, history=False):
        r = subprocess.run(TMUX + ["capture-pane", "-p", "-t", self.name] +
                           (["-e"] if escapes else []) + (["-S", "-"] if history else []),
                           capture_output=True, text=True)
        return r.stdout

    def keys(self, *keys):
        subprocess.run(TMUX + ["send-keys", "-t", self.name, *keys], check=True)

    def literal(self, s):
        subprocess.run(TMUX + ["send-keys", "-l", "-t", self.name, s], check=True)

    def resize(self, width, height):
        subprocess.run(TMUX + ["resize-window", "-t", self.name, "-x", str(width), "-y",
                               str(height)], check=True)

    def wait(self, pred, timeout=60):
        """The screen once pred(text) holds, drawn whole: the same in two captures 0.1 s
        apart (None when it never did)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = self.text()
            if pred(t):
                time.sleep(0.1)
                if self.text() == t:
                    return t
                continue
            time.sleep(0.05)
        return None

    def close(self):
        subprocess.run(TMUX + ["kill-session", "-t", self.name], capture_output=True)


def escape(s):
    """What the view shows of a name: printable ASCII, every other byte as \\xNN."""
    return "".join(chr(b) if 0x20 <= b <= 0x7e else f"\\x{b:02x}" for b in s.encode())


HEADER = re.compile(r"clock (\d+\.\d{3})\s+window (\S+?)(?:,|\s|$)")
WINDOWS = {"10s": 10, "60s": 60, "5min": 300, "all": None}


def parse(text):
    """The header's clock and window, and the request table's rows (all columns shown)."""
    m = HEADER.search(text)
    rows, in_table = [], False
    for line in text.splitlines():
        if line.startswith("process "):
            in_table = True
            continue
        if in_table:
            tok = line.split()
            if len(tok) < 15 or not re.match(r".+\[\d+( pids)?\]$", tok[0]):
                break
            rows.append({"name": tok[0], "role": tok[1], "api": tok[2], "model": tok[3],
                         "done": int(tok[4]), "ttft50": tok[7], "tokens": tok})
    return (float(m.group(1)) if m else None, WINDOWS.get(m.group(2)) if m else None), rows


def engines(text):
    """The engine table's rows: name, source, and the prefill/decode/mixed shares (None: '-')."""
    rows, in_table = [], False
    for line in text.splitlines():
        if line.startswith("engine ") and "prefill%" in line:
            in_table = True
            continue
        if in_table:
            tok = line.split()
            if len(tok) != 9 or not re.match(r".+\[\d+\]$", tok[0]):
                break
            rows.append({"name": tok[0], "source": tok[1], "steps": int(tok[2]),
                         "shares": [None if c == "-" else float(c) for c in tok[5:8]]})
    return rows


def ms_value(cell):
    """A TTFT cell back in ms (None: '-')."""
    if cell == "-":
        return None
    return float(cell[:-1]) * 1000 if cell.endswith("s") else float(cell)


def near(cell, v):
    """The cell shows v (nearest rank p50 from the records, which hold 3 decimals)."""
    got = ms_value(cell)
    if got is None or v is None:
        return got is None and v is None
    step = 0.05 if v < 1000 else 0.5 if v < 100000 else 50
    return abs(got - v) <= step + 0.0011


def p50(values):
    v = sorted(values)
    return v[max(math.ceil(0.5 * len(v)) - 1, 0)] if v else None


def row_records(row, records):
    pid = int(row["name"].split("[")[-1].rstrip("]")) if "pids" not in row["name"] else None
    return [r for r in records if r.get("type") == "request" and r["role"] == row["role"] and
            r["api"] == row["api"] and escape(r["model"] or "") == (row["model"] if
                                                                    row["model"] != "-" else "")
            and (pid is None or r["pid"] == pid)]


def matches_at(rows, records, end_s, window_s):
    """Do the rows' counts and TTFT p50 equal the records' for the window ending at end_s?"""
    hi = round(end_s * 1e9)
    lo = hi - window_s * 1_000_000_000 if window_s else -1
    for row in rows:
        got = [r for r in row_records(row, records) if r["end_ns"] and lo < r["end_ns"] <= hi]
        if len(got) != row["done"]:
            return False
        if not near(row["ttft50"], p50([r["ttft_ms"] for r in got if r["ttft_ms"] is not None])):
            return False
    return True


def differences(rows, records, end_s, window_s):
    """What the records give for each row at end_s, where it is not what the row shows."""
    hi = round(end_s * 1e9)
    lo = hi - window_s * 1_000_000_000 if window_s else -1
    said = []
    for row in rows:
        got = [r for r in row_records(row, records) if r["end_ns"] and lo < r["end_ns"] <= hi]
        want = p50([r["ttft_ms"] for r in got if r["ttft_ms"] is not None])
        if len(got) != row["done"] or not near(row["ttft50"], want):
            edge = sorted((r["end_ns"] - hi) / 1e6 for r in got)[-3:]
            said.append(f"{row['name']} {row['role']} {row['api']} {row['model']}: screen "
                        f"{row['done']} p50 {row['ttft50']}, records {len(got)} p50 {want} "
                        f"(the newest end {edge} ms from the clock)")
    return said


def window_matches(rows, records, clock, window_s, slack_s=1.0):
    """'exact' when the rows are the records' for a window ending within the millisecond the
    header's clock shows (it is cut to the millisecond); 'near' when within one refresh of
    it; None when neither."""
    ends = [r["end_ns"] / 1e9 for r in records if r.get("type") == "request" and r["end_ns"]]

    def edges(lo, hi):
        cands = {lo}
        for e in ends:
            for b in (e, e + (window_s or 0)):
                if lo <= b < hi:
                    cands.update((b, b - 1e-7))
        return sorted(c for c in cands if lo <= c < hi)

    for how, lo, hi in (("exact", clock, clock + 0.001),
                        ("near", clock - slack_s, clock + slack_s)):
        for c in sorted(edges(lo, hi), key=lambda c: abs(c - clock)):
            if matches_at(rows, records, c, window_s):
                return how
    return None


def sorted_by(rows, idx, reverse):
    """Are the rows ordered by column idx, largest first (smallest when reverse), '-' last?"""
    vals = [ms_value(r["tokens"][idx]) if r["tokens"][idx] != "-" else None for r in rows]
    known = [v for v in vals if v is not None]
    if vals[:len(known)] != known:
        return False
    return known == sorted(known, reverse=not reverse)


# ---- replay ----

def replay_checks(tokenscope, recording, work):
    check = _check
    tsrec = os.path.join(work, "top.tsrec")
    if recording.endswith(".gz"):
        with open(tsrec, "wb") as f:
            subprocess.run(["gunzip", "-c", recording], stdout=f, check=True)
    else:
        shutil.copy(recording, tsrec)
    jsonl = os.path.join(work, "top-report.jsonl")
    subprocess.run([tokenscope, "report", tsrec, "-q", "-o", jsonl], check=True,
                   capture_output=True)
    records = [json.loads(l) for l in open(jsonl)]

    # phase: refuses without a terminal
    r = subprocess.run([tokenscope, "top", "--replay", tsrec], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and
          "needs a terminal" in r.stderr and not r.stdout,
          f"top without a terminal: one line, exit 1 ({r.returncode}, {r.stderr!r})")

    # phase: two replays at --speed 10, the same final screen
    finals = []
    for i in range(2):
        rc = os.path.join(work, f"top-rc{i}")
        s = Screen(f"top-replay{i}", f"{tokenscope} top --replay {tsrec} --speed 10; "
                   f"echo $? > {rc}; sleep 600")
        try:
            t = s.wait(lambda t: "(end of recording)" in t)
            check(t is not None, f"replay {i}: the view reaches the end of the recording")
            finals.append(t)
            if i == 0:
                key_checks(s, records, rc)
        finally:
            s.close()
    check(len(finals) == 2 and finals[0] == finals[1],
          "two replays at --speed 10 give the same final screen")
    (clock, window), rows = parse(finals[0] or "")
    groups = {(r["comm"], r["role"], r["api"], r["model"]) for r in records
              if r.get("type") == "request"}
    check(clock is not None and len(rows) == len(groups) and rows,
          f"replay: a row per group ({len(rows)} rows, {len(groups)} groups)")
    check(clock is not None and window_matches(rows, records, clock, window) == "exact",
          "replay: each row's count and TTFT p50 are the JSON Lines' for the window")


def sched_checks(tokenscope, recording, work):
    """The vllm scheduler table at the end of a replay: one row per engine, its running and
    waiting requests and KV use those of the last vllm_step record."""
    check = _check
    tsrec = os.path.join(work, "sched.tsrec")
    with open(tsrec, "wb") as f:
        subprocess.run(["gunzip", "-c", recording], stdout=f, check=True)
    jsonl = os.path.join(work, "sched-report.jsonl")
    subprocess.run([tokenscope, "report", tsrec, "-q", "-o", jsonl], check=True,
                   capture_output=True)
    steps = [r for r in map(json.loads, open(jsonl)) if r.get("type") == "vllm_step"]
    s = Screen("top-sched", f"{tokenscope} top --replay {tsrec} --speed 10; sleep 600")
    try:
        t = s.wait(lambda t: "(end of recording)" in t)
    finally:
        s.close()
    rows = re.findall(r"^(\S+\[\d+\])\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+|-)\s+[\d.]+s ago",
                      t or "", re.M)
    last = steps[-1] if steps else {}
    want = (f"{last.get('comm')}[{last.get('pid')}]", str(last.get("engine_index")),
            str(last.get("running")), str(last.get("waiting")),
            f"{100 * last['kv_cache_usage']:.0f}" if last.get("kv_cache_usage") is not None
            else "-")
    check(t is not None and "vllm scheduler" in t and rows == [want],
          f"top: the vllm scheduler table shows the last step's queue ({rows}, want {want})")


def key_checks(s, records, rc_path):
    check = _check
    base = s.text()
    _, rows = parse(base)
    # sort: each column in turn (done is the first), largest first, then reversed
    names = ["req/s", "flight", "ttft p50", "ttft p90", "ttft p99", "tpot p50", "tpot p99",
             "gap max", "hit%"]
    for col, name in zip([5, 6, 7, 8, 9, 10, 11, 12, 13], names):
        s.keys("s")
        t = s.wait(lambda t, n=name: f"sort {n} (largest first)" in t, timeout=10)
        if not check(t is not None, f"keys: s sorts by {name}"):
            return
        if name == "flight":
            continue  # in flight/waiting: 0/0 at the end
        got = parse(t)[1]
        check(sorted_by(got, col, False) and len(got) == len(rows),
              f"keys: rows sorted by {name}, largest first")
        if name == "ttft p50":
            s.keys("r")
            t = s.wait(lambda t: "sort ttft p50 (smallest first)" in t, timeout=10)
            check(t is not None and sorted_by(parse(t)[1], col, True),
                  "keys: r reverses the order (unknown figures stay last)")
            s.keys("r")
    s.keys("S")
    check(s.wait(lambda t: "sort gap max (largest first)" in t, timeout=10) is not None,
          "keys: S sorts by the previous column")
    # filter
    want = {r["name"] for r in rows if "anthropic" in r["api"]}
    s.keys("/")
    s.literal("anthropic")
    check(s.wait(lambda t: "filter: anthropic_" in t, timeout=10) is not None,
          "keys: / shows the filter being typed")
    s.keys("Enter")
    t = s.wait(lambda t: "| filter anthropic" in t, timeout=10)
    got = parse(t or "")[1]
    check(t is not None and got and all("anthropic" in r["api"] for r in got) and
          len(got) == sum(1 for r in rows if "anthropic" in r["api"]) and want,
          f"keys: the filter keeps the matching rows ({len(got)})")
    s.keys("/")
    s.keys("Escape")
    check(s.wait(lambda t: len(parse(t)[1]) == len(rows) and "| filter" not in t,
                 timeout=10) is not None, "keys: Esc in the filter clears it")
    # details
    s.keys("Down")
    s.keys("Enter")
    t = s.wait(lambda t: "its slow requests" in t, timeout=10)
    check(t is not None and len(parse(t)[1]) == 1, "keys: Enter shows one group's details")
    s.keys("Escape")
    check(s.wait(lambda t: "slow requests (TTFT at or above their group's" in t and
                 len(parse(t)[1]) == len(rows), timeout=10) is not None,
          "keys: Esc leaves the details")
    # pause
    s.keys("p")
    check(s.wait(lambda t: "PAUSED" in t, timeout=10) is not None, "keys: p pauses")
    s.keys("p")
    check(s.wait(lambda t: "PAUSED" not in t, timeout=10) is not None, "keys: p resumes")
    # resize: narrower drops columns, too small says so, back again redraws all
    s.resize(100, 40)
    t = s.wait(lambda t: "ttft50" in t and "ttft90" not in t and
               max(len(l) for l in t.splitlines()) <= 100, timeout=10)
    check(t is not None, "resize: 100 columns drop the lowest-priority columns")
    s.resize(60, 10)
    check(s.wait(lambda t: "terminal too small: top needs 80x12, this one is 60x10" in t,
                 timeout=10) is not None, "resize: a terminal too small says so")
    s.resize(200, 60)
    check(s.wait(lambda t: len(parse(t)[1]) == len(rows) and "ttft90" in t,
                 timeout=10) is not None, "resize: back to 200 columns, every column again")
    # quit: the summary, exit 0
    s.keys("q")
    t = s.wait(lambda t: os.path.exists(rc_path) and open(rc_path).read().strip() != "",
               timeout=30)
    check(t is not None and open(rc_path).read().strip() == "0" and
          "=== tokenscope summary ===" in s.text(history=True), "keys: q prints the summary, exit 0")


# ---- live ----

def hostile_request(port):
    """One streamed request whose model name carries escape sequences."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"model": HOSTILE_MODEL, "prompt": "a b c", "max_tokens": 4,
                       "stream": True})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    data = c.getresponse().read()
    c.close()
    return b"[DONE]" in data


def paused_screen(s):
    """Pause, read the screen once the view is frozen, resume."""
    s.keys("p")
    t = s.wait(lambda t: "PAUSED" in t, timeout=10)
    s.keys("p")
    s.wait(lambda t: "PAUSED" not in t, timeout=10)
    return t


def run_top_checks(ctx):
    global _check
    check, root, work = ctx["check"], ctx["root"], os.path.join(ctx["work"], "top")
    _check = check
    tokenscope = ctx["tokenscope"]
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from attribution_checks import wait_port
    from plaintext_checks import free_port

    # phase: NO_COLOR (a short run of its own): no colour at all; ready when it says so
    rc0 = os.path.join(work, "nocolor.rc")
    s = Screen("top-nocolor", f"NO_COLOR=1 {tokenscope} top -c python3; echo $? > {rc0}; "
               "sleep 600")
    try:
        t = s.wait(lambda t: "Hit Ctrl-C to end." in t)
        check(t is not None, "top live: starts, and shows what it says on stderr")
        esc = s.text(escapes=True)
        check(not re.search(r"\x1b\[[0-9;]*3[0-7]m", esc), "NO_COLOR: no colour on the screen")
        s.keys("q")
        s.wait(lambda t: os.path.exists(rc0) and open(rc0).read().strip() != "", timeout=60)
    finally:
        s.close()

    # phase: the vLLM-shaped service under load, watched
    env = dict(os.environ, VGPU_LIB=os.path.join(root, ".output", "gpu", "libcuda.so.1"))
    port = free_port()
    out = os.path.join(work, "top.jsonl")
    rc = os.path.join(work, "top.rc")
    api = subprocess.Popen([PY, os.path.join(root, "tests", "fixtures", "vllm", "api_server.py"),
                            "--port", str(port), "--truth", os.path.join(work, "truth.jsonl"),
                            "--mode", "sync", "--disable-log-stats"], env=env, stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(work, "api.stderr"), "w"))
    s = Screen("top-live", f"{tokenscope} top -c python3 -o {out}; echo $? > {rc}; sleep 600")
    screens = []
    try:
        wait_port(port, api, "the vLLM-shaped API server")
        check(s.wait(lambda t: "Hit Ctrl-C to end." in t) is not None, "top live: started")
        check(re.search(r"\x1b\[[0-9;]*3[0-7]m", s.text(escapes=True)) is not None,
              "colours are on without NO_COLOR")
        check(hostile_request(port), "the hostile-model request streamed to [DONE]")
        load = subprocess.Popen([PY, os.path.join(root, "tests", "fixtures", "vllm", "load.py"),
                                 f"http://127.0.0.1:{port}", "768", "32"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t = s.wait(lambda t: any(r["role"] == "server" and r["done"] >= 60
                                 for r in parse(t)[1]), timeout=120)
        screens.append(("60 s window, under load", paused_screen(s)))
        s.keys("w", "w", "w")  # 60 s -> 5 min -> all -> 10 s
        s.wait(lambda t: "window 10s" in t, timeout=10)  # a new view, at once
        if load.poll() is None:
            screens.append(("10 s window, under load", paused_screen(s)))
        lout, lerr = load.communicate(timeout=300)
        res = json.loads(lout.strip().splitlines()[-1]) if load.returncode == 0 else {}
        check(res.get("done") == 768, f"the load's streams all ended ({res}, {lerr[-300:]})")
        s.keys("w")  # 10 s -> 60 s
        s.wait(lambda t: "window 60s" in t and "in flight 0 " in t and "ago" not in t,
               timeout=30)
        screens.append(("60 s window, after the load", paused_screen(s)))
        final = s.text()
        cuda = [e for e in engines(final) if e["source"] == "cuda"]
        check(escape(HOSTILE_MODEL) in final and "\x1b" not in final,
              f"the hostile model name shows as \\xNN ({escape(HOSTILE_MODEL)})")
        s.keys("q")
        s.wait(lambda t: os.path.exists(rc) and open(rc).read().strip() != "", timeout=60)
        check(os.path.exists(rc) and open(rc).read().strip() == "0" and
              "=== tokenscope summary ===" in s.text(history=True),
              "top live: q prints the summary, exit 0")
    finally:
        s.close()
        api.send_signal(2)
        try:
            api.wait(timeout=60)
        except subprocess.TimeoutExpired:
            api.kill()
    records = [json.loads(l) for l in open(out)]
    check(len([r for r in records if r.get("type") == "request" and r["role"] == "server"]) ==
          769, "top live: -o wrote every server record (768 and the hostile one)")
    # CUDA steps carry no batch: their kinds come from the requests attributed to them
    # (tests/unit/test_top.c checks the labels step by step); against the engine's own log of
    # what each step carried, over the steps that ended in the final screen's window
    clock = parse(final)[0][0]
    steps = [json.loads(l) for l in open(os.path.join(work, "truth.jsonl.engine"))]
    steps = [t for t in steps if t.get("type") == "step" and clock and
             clock - 60 < t["host_seen_ns"] / 1e9 <= clock]
    kinds = [(bool(t["prefill"]), bool(t["decode"])) for t in steps]
    want = [100 * kinds.count(k) / len(kinds) if kinds else None
            for k in ((True, False), (False, True), (True, True))]
    print(f"top live: the CUDA engine's prefill/decode/mixed shares "
          f"{cuda[0]['shares'] if cuda else None}, its steps' own {want} ({len(kinds)} steps)")
    check(len(cuda) == 1 and None not in cuda[0]["shares"] and None not in want and
          all(abs(g - w) <= 5 for g, w in zip(cuda[0]["shares"], want)),
          f"top live: the CUDA engine's prefill, decode and mixed shares are within 5 points "
          f"of what its steps carried ({cuda}; truth {want} over {len(kinds)} steps)")
    for what, t in screens:
        (clock, window), rows = parse(t or "")
        how = window_matches(rows, records, clock, window) if rows and clock else None
        check(how is not None and len(rows) >= 4,
              f"top live, {what}: every row's count and TTFT p50 are the JSON Lines' for the "
              f"window ending at the header's clock ({how}; {len(rows)} rows)")
        print(f"top live, {what}: {how} ({sum(r['done'] for r in rows)} requests in "
              f"{len(rows)} rows)")
        if how != "exact" and clock:
            print("  at the header's clock: " + "; ".join(differences(rows, records, clock,
                                                                       window)))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("replay", "sched"):
        raise SystemExit("usage: top_checks.py replay|sched TOKENSCOPE RECORDING")
    work = tempfile.mkdtemp(prefix="tokenscope-top-")
    try:
        (replay_checks if sys.argv[1] == "replay" else sched_checks)(
            os.path.abspath(sys.argv[2]), sys.argv[3], work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(TMUX + ["kill-server"], capture_output=True)
    print(f"top (replay): {_checks['passed']} passed, {_checks['failed']} failed")
    return 1 if _checks["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
