"""Integration tests with real eBPF probes (root), the phases and their checks; pytest runs
them (test_integration.py, through run.sh). The core (tls): real clients against a local TLS
fixture server, traced live by ./tokenscope, checked against the ground truth the fixture
writes; then GPU steps (gpu_checks.py), plaintext HTTP over TCP (plaintext_checks.py) and the
attribution of TTFT and token gaps to GPU steps (attribution_checks.py), the Prometheus
endpoint (metrics_checks.py), and llama.cpp's own steps on a real llama.cpp
(llama_checks.py), HTTP/2 and gRPC (h2_checks.py), Unix sockets (unix_checks.py), vLLM's
engine wire (vllm_wire_checks.py), the real llama-server (llama_server_checks.py), container and pod identity (identity_checks.py)
and from the real runtimes (containers_checks.py), the DaemonSet's pod run as written
(daemonset_checks.py),
network namespaces in the join (netns_checks.py), who reads each reply and its SLOs
(judge_checks.py), why TTFT changed between two runs of the real llama-server
(compare_checks.py),
`tokenscope top` in tmux (top_checks.py), and Go's crypto/tls (go_checks.py).

Clients: curl (libssl SSL_read/SSL_write), Python's ssl module (SSL_read_ex/SSL_write_ex),
node's fetch and https (node's embedded OpenSSL), the official openai and @anthropic-ai/sdk
packages from npm. The fixture itself is traced too (role "server").
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import time

from attribution_checks import run_attribution_checks
from go_checks import run_go_checks
from gpu_checks import run_gpu_checks
from h2_checks import run_h2_checks
from llama_checks import run_llama_checks
from llama_server_checks import run_llama_server_checks
from metrics_checks import run_metrics_checks
from plaintext_checks import CLIENT_PYTHON, run_plaintext_checks, wait_file
from top_checks import run_top_checks
from unix_checks import run_unix_checks
from vllm_wire_checks import run_vllm_wire_checks
from identity_checks import run_identity_checks
from containers_checks import run_containers_checks
from daemonset_checks import run_daemonset_checks
from netns_checks import run_netns_checks
from otlp_checks import run_otlp_checks
from judge_checks import run_judge_checks
from compare_checks import run_compare_checks

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# TOKENSCOPE=./tokenscope-asan: the same tests against the sanitized build (make asan).
TOKENSCOPE = os.path.abspath(os.environ.get("TOKENSCOPE", os.path.join(ROOT, "tokenscope")))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CLIENTS = os.path.join(ROOT, "tests", "integration", "clients")
CERT = os.path.join(FIXTURES, ".gen", "cert.pem")
LATE_NODE_RUNS = 20
KEY = os.path.join(FIXTURES, ".gen", "key.pem")
TOLERANCE_MS = 2.0
TIMING_LEAST = 10  # requests each accuracy figure is judged over, at least (13 to 36 here)
REQUEST_TRANSIT_MS = 10.0
SECRETS = ["SECRET", "PROMPT-CANARY", "tok0_0"]

passed = 0
failed = 0
FAILURES = []  # what each failed check said, in order (test_integration.py reports a phase's)


def check(cond, what):
    """A check that says what failed and goes on: a phase reports all of its failures."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        FAILURES.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


class Tracer:
    def __init__(self, work, *args, env=None):
        os.makedirs(work, exist_ok=True)
        self.out = os.path.join(work, "requests.jsonl")
        self.rec = os.path.join(work, "capture.tsrec")
        self.stdout = open(os.path.join(work, "tokenscope.stdout"), "w+")
        self.stderr = open(os.path.join(work, "tokenscope.stderr"), "w+")
        self.p = subprocess.Popen([TOKENSCOPE, "-o", self.out, "-r", self.rec, *args],
                                  stdout=self.stdout, stderr=self.stderr,
                                  env=dict(os.environ, **(env or {})))
        # a test that dies half way must not leave a tracer tracing the next runs
        atexit.register(lambda p=self.p: p.poll() is None and p.send_signal(signal.SIGINT))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.stderr.seek(0)
            if "Hit Ctrl-C to end." in self.stderr.read():
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.stderr.seek(0)
        raise SystemExit(f"tokenscope did not start: {self.stderr.read()}")

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        rc = self.p.wait(timeout=60)
        self.stdout.seek(0)
        self.stderr.seek(0)
        return rc, self.stdout.read(), self.stderr.read()


CLIENT_TIMES = {}  # model -> the client's own {start_ns, first_ns}, for clients that report them
TIMING = {"server ttft": [], "client ttft vs the wire": [], "server tpot": [],
          "client tpot vs the wire": []}  # errors in ms


def run(cmd, env=None, timeout=120, model=None):
    r = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    elif model:
        CLIENT_TIMES[model] = json.loads(r.stdout.strip().splitlines()[-1])
    return r.returncode == 0


def curl(port, path, model, body_extra=None, extra=()):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": "PROMPT-CANARY"}]}
    body.update(body_extra or {})
    return run(["curl", "-sS", "--fail", "-N", "--cacert", CERT, *extra,
                "-H", "Authorization: Bearer sk-test-SECRET-curl",
                "-H", "Content-Type: application/json",
                "-o", "/dev/null", f"https://127.0.0.1:{port}{path}", "-d", json.dumps(body)])


def truth_metrics(t):
    ttft = (t["token_ns"][0] - t["recv_ns"]) / 1e6
    n = t["output_tokens"]
    tpot = (t["token_ns"][-1] - t["token_ns"][0]) / (n - 1) / 1e6 if n > 1 else None
    return ttft, tpot


def check_record(rec, t, api, label, timing=True):
    ok = check(rec is not None, f"{label}: a record exists")
    if not ok:
        return
    check(rec["complete"] is True, f"{label}: complete (got {rec['complete']}, {rec['error']})")
    check(rec["api"] == api, f"{label}: api {rec['api']} == {api}")
    check(rec["status"] == 200, f"{label}: status {rec['status']}")
    check(rec["output_tokens"] == t["output_tokens"] and not rec["output_tokens_estimated"],
          f"{label}: output_tokens {rec['output_tokens']} == {t['output_tokens']} from usage")
    # What each API reports: TGI no prompt usage at all, Ollama no cache figure. Unknown is
    # null, never 0.
    want_in = None if api == "tgi" else t["input_tokens"]
    want_cached = None if api in ("tgi", "ollama") else t["cached_tokens"]
    want_hit = None if want_cached is None else want_cached > 0
    check(rec["input_tokens"] == want_in,
          f"{label}: input_tokens {rec['input_tokens']} == {want_in}")
    check(rec["cached_tokens"] == want_cached and rec["cache_hit"] == want_hit,
          f"{label}: cached_tokens {rec['cached_tokens']} / cache_hit {rec['cache_hit']} == "
          f"{want_cached} / {want_hit}")
    check(rec["token_events"] == t["events"],
          f"{label}: token_events {rec['token_events']} == {t['events']}")
    if not timing:
        return
    ttft, tpot = truth_metrics(t)
    first = rec["first_token_ns"]
    if not check(first is not None and rec["ttft_ms"] is not None and rec["tpot_ms"] is not None,
                 f"{label}: ttft, tpot and first token measured"):
        return
    last = rec["start_ns"] + round(rec["e2e_ms"] * 1e6)  # e2e_ms is rounded to the microsecond
    if rec["role"] == "server":
        # The fixture's clock read just before and just after each of its own SSL calls: each
        # time tokenscope reports must lie inside the matching window.
        check(t["peek_call_ns"] <= rec["start_ns"] <= t["recv_ns"],
              f"{label}: request start inside the fixture's read")
        check(t["token_ns"][0] <= first <= t["token_after_ns"][0],
              f"{label}: first token inside the fixture's write")
        check(t["token_ns"][-1] - 2000 <= last <= t["token_after_ns"][-1] + 2000,
              f"{label}: last token inside the fixture's write")
        TIMING["server ttft"].append(abs(rec["ttft_ms"] - ttft))
    elif t["model"] in CLIENT_TIMES:
        # The client reported its own clock: tokenscope's times must lie between what the
        # server did and what the client's code saw (node reads the socket from its event
        # loop, so a busy client sees bytes late; that lateness is real client time).
        c = CLIENT_TIMES[t["model"]]
        js_start, js_first = int(c["start_ns"]), int(c["first_ns"])
        check(js_start <= rec["start_ns"] <= t["recv_ns"],
              f"{label}: start {rec['start_ns']} between the client's call {js_start} and the "
              f"fixture's read {t['recv_ns']}")
        check(t["token_ns"][0] <= first <= js_first,
              f"{label}: first token {first} between the fixture's write {t['token_ns'][0]} and "
              f"the client seeing it {js_first}")
    else:
        # curl and Python cannot report their own clock: each time is checked against the
        # wire. Per request, what physics demands (a token is read after it was written, a
        # request leaves before it arrives) within a generous bound; over all of them, the
        # median within 2 ms. Not the p90: what this measures is the client's own lateness
        # in reading (a client thread descheduled at the wrong moment is late for real),
        # not the tracer's error; CI, unloaded, once had 2 of 13 at 3.8 and 6.3 ms.
        delivery = (first - t["token_ns"][0]) / 1e6
        lead = (t["recv_ns"] - rec["start_ns"]) / 1e6
        check(0 <= delivery <= 20, f"{label}: first token read {delivery:.3f} ms after the "
              f"fixture wrote it")
        check(0 <= lead <= REQUEST_TRANSIT_MS,
              f"{label}: request start {lead:.3f} ms before the fixture read it")
        TIMING["client ttft vs the wire"].append(
            abs(rec["ttft_ms"] - (t["token_ns"][0] - rec["start_ns"]) / 1e6))
    check(abs(rec["ttft_ms"] - (first - rec["start_ns"]) / 1e6) < 0.01,
          f"{label}: ttft {rec['ttft_ms']} = first token - start")
    check(abs(rec["tpot_ms"] - tpot) <= 10 * TOLERANCE_MS,
          f"{label}: tpot {rec['tpot_ms']} near {tpot:.3f}")
    # a server's token times lie inside its own writes; a client's are when it read them,
    # and its lateness in reading (real, under load) counts in its figure as in its TTFT's
    TIMING["server tpot" if rec["role"] == "server" else "client tpot vs the wire"].append(
        abs(rec["tpot_ms"] - tpot))


def check_timing():
    """The accuracy claim: a server's TTFT and TPOT within 2 ms of the truth for 90% of
    requests; a client's TTFT and TPOT against the wire (its own reading late counts in them)
    for the median. Beside two CPU hogs, the client and server TPOT pooled once had a p90 of
    2.05 ms (max 5.0) over 72 requests."""
    for what, errs in TIMING.items():
        if not check(len(errs) >= TIMING_LEAST,
                     f"{what}: at least {TIMING_LEAST} requests to judge ({len(errs)})"):
            continue
        errs = sorted(errs)
        p50, p90 = errs[len(errs) // 2], errs[min(len(errs) - 1, int(0.9 * len(errs)))]
        print(f"timing: {what}: p50 {p50:.3f} ms, p90 {p90:.3f} ms, "
              f"max {errs[-1]:.3f} ms over {len(errs)} requests")
        share, err = ("median", p50) if what.endswith("vs the wire") else ("p90", p90)
        check(err <= TOLERANCE_MS, f"{what}: {share} error {err:.3f} ms over {len(errs)} "
              f"requests (<= {TOLERANCE_MS}; max {errs[-1]:.3f})")


def run_tls_checks(ctx):
    """The core: every dialect over TLS from real clients (curl, Python, node, the SDKs) to
    the fixture server, against its truth; output files, privileges, the recording."""
    work = ctx["work"]
    truth_path = os.path.join(work, "truth.jsonl")
    port_file = os.path.join(work, "port")
    server = subprocess.Popen([CLIENT_PYTHON, os.path.join(FIXTURES, "llm_server.py"),
                               "--cert", CERT, "--key", KEY, "--truth", truth_path,
                               "--port-file", port_file, "--lifetime", "900"],
                              stdout=subprocess.DEVNULL)
    try:
        port = wait_file(port_file, server, "the TLS fixture server")
        body(work, port, truth_path, server.pid)
    finally:
        server.kill()


# Every phase, in the order a whole run takes them (run.sh --only NAME runs one)
PHASES = {"tls": run_tls_checks, "gpu": run_gpu_checks, "plaintext": run_plaintext_checks,
          "attribution": run_attribution_checks, "metrics": run_metrics_checks,
          "llama": run_llama_checks, "llama_server": run_llama_server_checks,
          "h2": run_h2_checks, "unix": run_unix_checks, "vllm_wire": run_vllm_wire_checks,
          "identity": run_identity_checks, "containers": run_containers_checks,
          "daemonset": run_daemonset_checks, "netns": run_netns_checks, "top": run_top_checks,
          "go": run_go_checks, "otlp": run_otlp_checks, "judge": run_judge_checks,
          "compare": run_compare_checks}


def context(work):
    """What every phase is handed: its checks, the tracer and command runner, the paths."""
    return {"check": check, "Tracer": Tracer, "run": run, "root": ROOT, "work": work,
            "tokenscope": TOKENSCOPE, "cert": CERT, "key": KEY, "check_record": check_record,
            "client_times": CLIENT_TIMES}


def check_output_files(work):
    """Output files as an attacker in a shared directory would want them: a symlink planted
    towards a victim file, a file owned by another user, and a previous output that a failing
    run must leave as it was."""
    shared = os.path.join(work, "shared")
    os.makedirs(shared)
    os.chmod(shared, 0o1777)
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    os.chmod(victim, 0o644)
    link = os.path.join(shared, "out.jsonl")
    os.symlink(victim, link)
    theirs = os.path.join(shared, "theirs.tsrec")
    with open(theirs, "w") as f:
        f.write("theirs")
    os.chown(theirs, 65534, 65534)
    for args, why in ((["-o", link], "is a symbolic link"),
                      (["-r", link], "is a symbolic link"),
                      (["-r", theirs], "owned by uid 65534"),
                      (["-o", theirs], "owned by uid 65534")):
        r = subprocess.run([TOKENSCOPE, "-d", "1", *args], capture_output=True, text=True)
        check(r.returncode == 1 and why in r.stderr and r.stderr.count("\n") == 1,
              f"{' '.join(args)}: refused in one line ({r.returncode}, {r.stderr!r})")
    st = os.stat(victim)
    check(open(victim).read() == "precious" and st.st_mode & 0o777 == 0o644 and
          open(theirs).read() == "theirs" and os.stat(theirs).st_uid == 65534,
          "the symlink's target and the other user's file are untouched")
    # A run that fails at start (not privileged) leaves the previous output as it was and
    # creates no recording.
    mine = os.path.join(shared, "mine.jsonl")
    with open(mine, "w") as f:
        f.write("previous run\n")
    os.chown(mine, 65534, 65534)
    rec = os.path.join(shared, "new.tsrec")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        TOKENSCOPE, "-d", "1", "-o", mine, "-r", rec],
                       capture_output=True, text=True)
    check(r.returncode == 1 and open(mine).read() == "previous run\n" and
          not os.path.exists(rec), f"a run that fails at start destroys nothing ({r.stderr!r})")


def start_curl_tracer(err_path, *args):
    """tokenscope -q of curl's TLS alone, with args, started: its process and its stderr
    (err_path, open), once it says it traces (or has ended)."""
    err = open(err_path, "w+")
    p = subprocess.Popen([TOKENSCOPE, "-q", "-c", "curl", "--no-plaintext", *args],
                         stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        err.seek(0)
        if "Hit Ctrl-C to end." in err.read():
            break
        time.sleep(0.05)
    return p, err


def check_full_disk(work, port):
    """-o and -r on filesystems that fill up (tmpfs of 8 and 16 KiB): each output says at once,
    in one line, that it failed; keeps only whole records; says at the end how many it could
    not write; and the run exits 1. Ground truth: the requests this test makes."""
    n = 30
    dirs = {}
    for what, size in (("jsonl", "8k"), ("rec", "16k")):
        d = dirs[what] = os.path.join(work, f"full-{what}")
        os.makedirs(d)
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d],
                           capture_output=True, text=True)
        if not check(m.returncode == 0, f"a {size} tmpfs for {what} ({m.stderr.strip()})"):
            return
        atexit.register(subprocess.run, ["umount", "-l", d], capture_output=True)
    out, rec = os.path.join(dirs["jsonl"], "out.jsonl"), os.path.join(dirs["rec"], "cap.tsrec")
    prom = os.path.join(dirs["jsonl"], "metrics.prom")  # written at the end, on a full disk
    p, err = start_curl_tracer(os.path.join(work, "full.stderr"), "-o", out, "-r", rec,
                               "--metrics-file", prom)
    for i in range(n):
        curl(port, "/v1/chat/completions", f"fx-ttft1-itl1-n3-idf{i}")
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=60)
    err.seek(0)
    text = err.read()
    lines = open(out, "rb").read().split(b"\n")
    whole = all(json.loads(line) for line in lines[:-1]) and lines[-1] == b""
    for path, total in ((out, n), (rec, None), (prom, None)):
        at_once = [line for line in text.splitlines() if f"writing {path} failed" in line]
        end = [line for line in text.splitlines() if f"not written to {path}" in line]
        check(len(at_once) == 1 and len(end) == 1,
              f"full disk: {path}: one line when it failed, one with the count at the end "
              f"({text[-600:]!r})")
        if total and end:
            lost, kept = end[0].split()[2], end[0].split(" it holds the first ")[1].split(",")[0]
            check(int(kept) == len(lines) - 1 and int(lost) + int(kept) == total,
                  f"full disk: {path} holds {kept} whole records, says {lost} were not "
                  f"written: {total} requests made")
    check(rc == 1, f"full disk: tokenscope exits 1 ({rc})")
    check(os.path.getsize(prom) == 0, "full disk: no half metrics exposition is left")
    check(whole, "full disk: every JSON line kept is whole")
    r = subprocess.run([TOKENSCOPE, "report", rec, "-q"], capture_output=True, text=True)
    check(r.returncode == 0 and "truncated" not in r.stderr,
          f"full disk: the recording kept ends on a whole record ({r.stderr[-300:]!r})")


def check_killed_recording(work, port):
    """A tracer killed with SIGKILL while recording: its recording was written out with the
    counters of each second, so it holds every request that ended a second before, whole
    records only. Ground truth: the requests this test makes, and the tracer's own records."""
    n = 5
    out, rec = os.path.join(work, "killed.jsonl"), os.path.join(work, "killed.tsrec")
    p, _ = start_curl_tracer(os.path.join(work, "killed.stderr"), "-o", out, "-r", rec)
    for i in range(n):
        curl(port, "/v1/chat/completions", f"fx-ttft1-itl1-n3-kill{i}")

    replay = os.path.join(work, "killed.replay.jsonl")

    def replayed():
        r = subprocess.run([TOKENSCOPE, "report", rec, "-q", "-o", replay],
                           capture_output=True, text=True)
        return sorted(json.loads(x)["model"] for x in open(replay)
                      if json.loads(x).get("type") == "request") if r.returncode == 0 else []

    want = sorted(f"fx-ttft1-itl1-n3-kill{i}" for i in range(n))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and replayed() != want:
        time.sleep(0.2)
    p.kill()
    p.wait(timeout=60)
    check(replayed() == want, f"killed with SIGKILL: its recording holds the {n} requests "
          f"that ended before ({replayed()})")
    r = subprocess.run([TOKENSCOPE, "report", rec, "-q"], capture_output=True, text=True)
    check(r.returncode == 0 and "truncated" not in r.stderr,
          f"killed with SIGKILL: the recording ends on a whole record ({r.stderr[-300:]!r})")


def check_forged_detacher(work):
    """An unprivileged process that names itself tokenscope-det (a copy of sleep under that
    name) delays no start: tokenscope waits only for a detacher of its own executable and
    user (before: every start waited 30 s for it)."""
    fake = os.path.join(work, "forged", "tokenscope-det")
    os.makedirs(os.path.dirname(fake))
    os.chmod(os.path.dirname(fake), 0o755)
    shutil.copy("/bin/sleep", fake)
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          fake, "120"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                open(f"/proc/{d}/comm").read().strip() == "tokenscope-det"
                for d in os.listdir("/proc") if d.isdigit() and os.path.exists(f"/proc/{d}/comm")):
            time.sleep(0.05)
        start = time.monotonic()
        r = subprocess.run([TOKENSCOPE, "-d", "1", "-q"], capture_output=True, text=True)
        took = time.monotonic() - start
    finally:
        p.kill()
        p.wait()
    check(r.returncode == 0 and "waiting for an earlier run" not in r.stderr and took < 20,
          f"a process of another user named tokenscope-det delays no start ({took:.1f} s, "
          f"{r.stderr[-300:]!r})")


def check_held_probe():
    """Another tracer holds SSL_read with a reference-counted uprobe (as bcc's sslsniff
    does): the kernel refuses tokenscope's probe there. It must say so, name the function and
    the file, call the run partial, and count it."""
    gen = os.path.join(FIXTURES, ".gen")
    lib = os.path.join(gen, "libprobed.so")
    holder = subprocess.Popen([os.path.join(gen, "probe_holder"), lib, "SSL_read",
                               "probed_semaphore"], stdout=subprocess.PIPE, text=True)
    try:
        if not check(holder.stdout.readline().strip() == "HOLDING", "probe holder holds"):
            return
        r = subprocess.run([TOKENSCOPE, "-d", "1"], capture_output=True, text=True)
    finally:
        holder.kill()
        holder.wait()
    check(r.returncode == 0 and f"SSL_read in {lib} stays unprobed (return probe: Invalid "
          "argument): another tracer may hold this function" in r.stderr and
          "tracing is partial: 1 probe could not be attached" in r.stderr and
          "(partial). Hit Ctrl-C to end." in r.stderr and
          "WARNING: 1 probe could not be attached" in r.stdout,
          f"a probe held by another tracer is named, the run called partial and counted "
          f"({r.returncode}, {r.stderr[-600:]!r}, {r.stdout[-300:]!r})")


def body(work, port, truth_path, server_pid):
    """The core phase: what needs no tracer first, then the clients under one tracer, then
    their records against the fixture's truth."""
    check_before_tracing(work, port)
    driven = drive_clients(work, port, server_pid)
    judge_records(work, port, truth_path, server_pid, driven)


def check_before_tracing(work, port):
    """Privileges, output files, a held probe, a full disk, a killed recording, a forged
    detacher: each with its own tracer or none."""
    # Not privileged: one clear line, exit 1.
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        TOKENSCOPE, "-d", "1"], capture_output=True, text=True)
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "root" in r.stderr,
          f"unprivileged run fails clearly (rc {r.returncode}, {r.stderr!r})")
    check_output_files(work)
    check_held_probe()
    check_full_disk(work, port)
    check_killed_recording(work, port)
    check_forged_detacher(work)


def drive_clients(work, port, server_pid):
    """Every client of the core phase under one tracer (and a second, filtered to the
    server); what the checks need of them is returned."""
    env = dict(os.environ, NODE_EXTRA_CA_CERTS=CERT)
    # A private copy of libssl, loaded by Python through dlopen after tokenscope started.
    libdir = os.path.join(work, "lib")
    os.makedirs(libdir)
    shutil.copy2("/lib/x86_64-linux-gnu/libssl.so.3", libdir)

    tracer = Tracer(work, "-v")  # -v: it says when probes go on a binary
    # A second tracer at the same time, filtered to the fixture server's pid: it must see
    # the server side only. It puts its uprobes on as perf events (kernels before 6.6 have
    # no uprobe_multi links), beside the first one's uprobe_multi links on the same functions.
    only_server = Tracer(os.path.join(work, "pidfilter"), "-v", "-p", str(server_pid),
                         env={"TOKENSCOPE_UPROBE_MULTI": "0"})
    expect = []  # (label, model, api, comm or None, timing)

    # phase: curl, one request per dialect
    curl_cases = [
        ("/v1/chat/completions", "fx-ttft40-itl8-n6-cache1-idc1", "openai.chat",
         {"stream_options": {"include_usage": True}}, ()),
        ("/v1/completions", "fx-ttft25-itl6-n5-idc2", "openai.completions", {}, ()),
        ("/v1/responses", "fx-ttft30-itl5-n6-tpe2-cache1-idc3", "openai.responses", {}, ()),
        ("/v1/messages", "fx-ttft45-itl7-n5-tpe3-cache1-gzip1-idc4", "anthropic.messages", {},
         ("--compressed",)),
        (None, "fx-ttft20-itl9-n4-idc5", "gemini", {}, ()),
        ("/api/chat", "fx-ttft15-itl6-n7-idc6", "ollama", {}, ()),
        ("/completion", "fx-ttft35-itl4-n8-cache1-idc7", "llamacpp", {}, ()),
        ("/generate_stream", "fx-ttft22-itl5-n6-idc8", "tgi", {}, ()),
    ]
    for path, model, api, extra_body, extra in curl_cases:
        if path is None:
            path = f"/v1beta/models/{model}:streamGenerateContent?alt=sse&key=SECRETKEY"
        check(curl(port, path, model, extra_body, extra), f"curl {api} ran")
        expect.append((f"curl {api}", model, api, "curl", True))

    # phase: Python ssl, three requests on one keep-alive connection
    ka = [("anthropic.messages", "fx-ttft30-itl6-n5-cache1-idk1"),
          ("openai.responses", "fx-ttft20-itl5-n6-idk2"),
          ("anthropic.messages", "fx-ttft25-itl8-n4-idk3")]
    check(run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "keepalive", str(port),
               CERT] + [f"{d}={m}" for d, m in ka]), "python keep-alive client ran")
    for d, m in ka:
        expect.append((f"python keep-alive {m}", m, d, None, True))

    # phase: node from files it had never seen (issue 37), each copy started after
    # tokenscope and sending its request as soon as it can (node needs 80 ms or more to get
    # there): found at its exec, every first request measured. A copy at a new path in a
    # directory of its own (comm stays node), removed after its run.
    for i in range(LATE_NODE_RUNS):
        late_node = os.path.join(work, "late", str(i), "node")
        os.makedirs(os.path.dirname(late_node))
        shutil.copy2(shutil.which("node"), late_node)
        mode, model = ("fetch", "https")[i % 2], f"fx-ttft10-itl4-n4-idnlate{i}"
        check(run([late_node, os.path.join(CLIENTS, "node_client.js"), mode, str(port), model],
                  env=env, model=model), f"node (never-seen copy {i}, {mode}) ran")
        os.unlink(late_node)
        expect.append((f"node {mode} (never-seen copy {i})", model,
                       ("openai.chat", "ollama")[i % 2], "node", True))
    # The system node, never run since tokenscope started: probed at this exec, as the
    # copies were.
    check(run(["node", os.path.join(CLIENTS, "node_client.js"), "https", str(port),
               "fx-ttft20-itl5-n5-idn2"], env=env, model="fx-ttft20-itl5-n5-idn2"),
          "node https ran")
    expect.append(("node https", "fx-ttft20-itl5-n5-idn2", "ollama", "node", True))

    # phase: official SDKs from npm
    check(run(["node", os.path.join(CLIENTS, "node_client.js"), "openai", str(port),
               "fx-ttft35-itl7-n6-cache1-ids1"], env=env, model="fx-ttft35-itl7-n6-cache1-ids1"),
          "openai SDK ran")
    expect.append(("openai SDK", "fx-ttft35-itl7-n6-cache1-ids1", "openai.chat", "node", True))
    check(run(["node", os.path.join(CLIENTS, "node_client.js"), "anthropic", str(port),
               "fx-ttft40-itl6-n5-tpe2-ids2"], env=env, model="fx-ttft40-itl6-n5-tpe2-ids2"),
          "anthropic SDK ran")
    expect.append(("anthropic SDK", "fx-ttft40-itl6-n5-tpe2-ids2", "anthropic.messages", "node",
                   True))

    # phase: a libssl loaded through dlopen after tokenscope started
    # Python dlopens the private libssl and would write its request at once; the probes attach
    # when the dlopen event has been read, which on this 2-core VM under load has taken more
    # than the ~50 ms the whole exchange lasts (README, Limits). What is checked here is that
    # the dlopen'd file gets probed at all, so the client waits half a second after loading it.
    check(run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "keepalive", str(port),
               CERT, "openai.chat=fx-ttft25-itl5-n4-idd1"],
              env=dict(os.environ, LD_LIBRARY_PATH=libdir, SETTLE_S="0.5")),
          "python with private libssl ran")
    expect.append(("python via dlopen'd private libssl", "fx-ttft25-itl5-n4-idd1", "openai.chat",
                   None, True))

    # phase: large request bodies: 8 KiB pieces reassembled in order; past the 256 KiB budget
    # the body is cut (counted), the reply still measured
    big = "fx-ttft20-itl5-n4-idb1"
    check(curl(port, "/v1/chat/completions", big,
               {"stream_options": {"include_usage": True}, "pad": "p" * 100_000}),
          "curl with a 100 KB request body ran")
    expect.append(("curl 100 KB request", big, "openai.chat", "curl", True))
    # Python's ssl module sends a body with one SSL_write_ex call: 400 KB in one call.
    huge = "fx-ttft20-itl5-n4-idb2"
    check(run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "big", str(port), CERT,
               huge, "400000"]), "python with a 400 KB request body ran")

    # phase: fork() after TLS setup (see the checks below): the parent writes and exits, the
    # child reads; then the parent exits at once and the child makes its own request
    fork_runs = {}
    for how, models in (("shared", ["fx-ttft20-itl5-n4-idf1", "fx-ttft60-itl10-n5-idf2"]),
                        ("own", ["fx-ttft20-itl5-n4-idf3", "fx-ttft30-itl5-n4-idf4"])):
        r = subprocess.run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "fork",
                            str(port), CERT, *models] + (["own"] if how == "own" else []),
                           capture_output=True, text=True, timeout=60)
        lines = r.stdout.splitlines()
        fork_runs[how] = (models, json.loads(lines[0])["child"] if lines else None)
        check(r.returncode == 0 and "child ok" in lines,
              f"forked TLS client ({how}) ran ({r.stdout!r} {r.stderr[-300:]!r})")

    # phase: an HTTP/2 client preface: detected and counted as unsupported (both ends)
    check(run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "h2", str(port), CERT]),
          "HTTP/2 preface client ran")

    # phase: 50 concurrent streams, none lost, while two gzip bombs (512 MiB of newlines in
    # ~0.5 MB each) arrive beside them: the bombs stop at the decode budget and hold nothing up
    bombs = [subprocess.Popen(["curl", "-sS", "-N", "--cacert", CERT, "-o", "/dev/null",
                               "-H", "Accept-Encoding: gzip", "-H", "Content-Type: application/json",
                               f"https://127.0.0.1:{port}/v1/chat/completions", "-d",
                               json.dumps({"model": f"fx-bomb1-idz{i}", "stream": True})])
             for i in range(2)]
    check(run([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "concurrent", str(port),
               CERT, "50", "fx-ttft60-itl10-n10-conc"], timeout=180), "50 concurrent streams ran")
    check(all(b.wait(timeout=120) == 0 for b in bombs), "gzip bomb clients ran")

    # phase: a client that dies mid-stream
    hang = subprocess.Popen([CLIENT_PYTHON, os.path.join(CLIENTS, "py_client.py"), "hang",
                             str(port), CERT, "fx-ttft10-itl200-n50-idh1"],
                            stdout=subprocess.PIPE, text=True)
    check(hang.stdout.readline().strip() == "STREAMING", "dying client started streaming")
    hang.kill()
    hang.wait()
    # its record is written as it dies (not at the end of the capture): until it is there
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and '"fx-ttft10-itl200-n50-idh1"' not in open(tracer.out).read():
        time.sleep(0.05)
    return {"tracer": tracer, "only_server": only_server, "expect": expect, "ka": ka,
            "huge": huge, "fork_runs": fork_runs}


def judge_records(work, port, truth_path, server_pid, driven):
    """The core phase's records against the fixture's truth, the summary, the secrets and
    the replay."""
    tracer, only_server, expect = driven["tracer"], driven["only_server"], driven["expect"]
    ka, huge, fork_runs = driven["ka"], driven["huge"], driven["fork_runs"]
    rc, out, err = tracer.stop()
    rc2, _, err2 = only_server.stop()
    check(rc2 == 0, f"-p tracer exited 0 ({err2[-300:]})")
    check("uprobes as perf events" in err2, "-p tracer: uprobes as perf events, as asked")
    filtered = [json.loads(line) for line in open(only_server.out)]
    check(len(filtered) > 0 and all(r["pid"] == server_pid and r["role"] == "server"
                                    for r in filtered),
          f"-p {server_pid}: {len(filtered)} records, all from the server")
    check(rc == 0, f"tokenscope exited 0 on SIGINT (rc {rc}): {err[-500:]}")
    # Debian's libssl3 reads and writes through one inner function each: probed there, once
    # a call (user/capture/ssl_inner.h), for both tracers; the records below are exact only
    # where each of the four exported forms is captured once
    for e, label in ((err, "tokenscope"), (err2, "-p tracer")):
        for d in ("read", "write"):
            check(re.search(rf"libssl\.so\.3: SSL_{d} and SSL_{d}_ex probed where both go, "
                            r"\+0x[0-9a-f]+ ", e) is not None,
                  f"{label}: libssl's SSL_{d} and SSL_{d}_ex probed at their inner function")
    # every record, for the replay; the requests, for the checks (an unfiltered tracer also
    # writes the steps of any CUDA or llama.cpp program the machine runs meanwhile)
    all_records = [json.loads(line) for line in open(tracer.out)]
    records = [r for r in all_records if r.get("type") == "request"]
    truth = {}
    for line in open(truth_path):
        t = json.loads(line)
        truth[t["model"]] = t

    def find(model, role):
        for r in records:
            if r["model"] == model and r["role"] == role:
                return r
        return None

    # phase: per-request figures, client and server side, against the fixture's truth
    for label, model, api, comm, timing in expect:
        t = truth.get(model)
        if not check(t is not None, f"{label}: fixture served it"):
            continue
        c = find(model, "client")
        check_record(c, t, api, f"{label} [client]", timing)
        if c and comm:
            check(c["comm"] == comm, f"{label}: comm {c['comm']} == {comm}")
        s = find(model, "server")
        check_record(s, t, api, f"{label} [server]", timing)
        if s:
            check(s["pid"] == server_pid, f"{label}: server pid {s['pid']} == {server_pid}")
        # Each TLS stream found its socket (curl, Python and the fixture through the socket
        # call inside their SSL call; node, whose OpenSSL writes to memory, through the write
        # that follows SSL_write): both ends name the same one.
        if c and s:
            check(c["transport"] == s["transport"] == "tls" and
                  c["peer"] == s["local"] == f"127.0.0.1:{port}" and c["local"] == s["peer"]
                  and c["local"], f"{label}: one TLS socket seen from both ends "
                  f"({c['local']} -> {c['peer']}, {s['peer']} -> {s['local']})")

    check_timing()

    # keep-alive: three client records from one process, in order
    ka_recs = [find(m, "client") for _, m in ka]
    if all(ka_recs):
        check(len({r["pid"] for r in ka_recs}) == 1 and
              ka_recs[0]["start_ns"] < ka_recs[1]["start_ns"] < ka_recs[2]["start_ns"],
              "keep-alive: three requests from one process, in order")

    conc_c = [r for r in records if r["model"] and r["model"].startswith("fx-ttft60-itl10-n10-conc")
              and r["role"] == "client"]
    conc_s = [r for r in records if r["model"] and r["model"].startswith("fx-ttft60-itl10-n10-conc")
              and r["role"] == "server"]
    check(len(conc_c) == 50 and len({r["pid"] for r in conc_c}) == 1,
          f"concurrent: 50 client records from one process (got {len(conc_c)})")
    check(len(conc_s) == 50, f"concurrent: 50 server records (got {len(conc_s)})")
    check(all(r["complete"] and r["token_events"] == 10 and r["output_tokens"] == 10
              for r in conc_c + conc_s), "concurrent: every stream complete with 10 tokens")

    bombed = [r for r in records if r["model"] and r["model"].startswith("fx-bomb1-")]
    check(len(bombed) == 4 and all(not r["complete"] and r["error"] == "decode_budget_exceeded"
                                   for r in bombed),
          f"gzip bombs: both ends of both stopped at the decode budget "
          f"({[(r['role'], r['error']) for r in bombed]})")
    check("decode budget exceeded 4)" in out, "gzip bombs counted in the summary")

    cut = find(huge, "client")
    check(cut is not None and cut["complete"] is True and cut["ttft_ms"] is not None,
          "400 KB request: the reply is still measured")
    check(f"truncated_calls=1 ({400_000 - 32 * 8192} bytes)" in out,
          "400 KB request: one truncated call, the bytes past 256 KiB counted")
    check("http/2 2," in out, "HTTP/2 preface counted as unsupported on both ends")

    # fork after TLS setup: a request is the connection's, whichever process wrote or read it
    for how, (models, child) in fork_runs.items():
        got = [r for m in models for r in records if r["model"] == m and r["role"] == "client"]
        check(len(got) == 2 and all(r["complete"] and r["local"] and
                                    r["peer"] == f"127.0.0.1:{port}" and
                                    r["token_events"] == truth[r["model"]]["events"] for r in got),
              f"fork after TLS setup ({how}): both requests complete, with their addresses ("
              f"{[(r['pid'], r['complete'], r['error'], r['local'], r['token_events']) for r in got]})")
        if len(got) == 2:
            check(got[0]["pid"] == got[1]["pid"] != child,
                  f"fork after TLS setup ({how}): the records are the connection's, under the "
                  f"process that opened it ({[r['pid'] for r in got]}, child {child})")

    dead = find("fx-ttft10-itl200-n50-idh1", "client")
    check(dead is not None and dead["complete"] is False and dead["error"] == "process_exited",
          f"dying client: incomplete, process_exited ({dead and dead['error']})")

    # phase: health, secrets, summary
    check("=== tokenscope summary ===" in out and "drops=0 " in out and "lost_pieces=0 " in out,
          "summary printed, nothing dropped")
    check("requests=50 incomplete=0" in out, "summary: the concurrent client group has 50 requests")
    blob = out + err + open(tracer.out).read()
    for s in SECRETS:
        check(s not in blob, f"no '{s}' in any output")
    rec_bytes = open(tracer.rec, "rb").read()
    check(b"sk-test-SECRET" not in rec_bytes and b"SECRETKEY" not in rec_bytes,
          "recording has credentials masked")
    check(oct(os.stat(tracer.out).st_mode & 0o777) == "0o600", "JSON Lines file is mode 0600")

    # phase: replay the recording: the same records
    replay_out = os.path.join(work, "replay.jsonl")
    r = subprocess.run([TOKENSCOPE, "report", tracer.rec, "-q", "-o", replay_out],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"report exits 0 ({r.stderr})")
    replayed = [json.loads(line) for line in open(replay_out)]
    check(replayed == all_records, f"replay gives the same {len(all_records)} records "
          f"(got {len(replayed)})")
    check("=== tokenscope summary ===" in r.stdout, "replay prints the summary")
