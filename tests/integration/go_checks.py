"""Go's crypto/tls with real eBPF probes (imported by run.py; `run.sh --only go`).

The Go TLS client (tests/fixtures/go/sseclient.go, Debian's Go) built normally and stripped PIE
(`-trimpath -buildmode=pie -ldflags='-s -w'`), streaming from the TLS fixture server
(llm_server.py: HTTP/1.1, OpenAI and Anthropic dialects) and from hypercorn (HTTP/2 by ALPN):
  - started before tokenscope (probed by the scan of running processes), and after it (a copy
    of the binary at a new path, probed at its exec), each waiting for a go-ahead file until
    tokenscope says it probed that file (-v);
  - 20 more copies at new paths (stripped PIE, never seen), no go-ahead: each sends its
    request 5 ms after it was spawned, or as soon as it can. Each must be probed at its exec
    (tokenscope -v says when), and each request sent after its probes were on must be
    measured; one sent before them may go unseen, and is counted. How soon a new program is
    probed is a figure of `make bench` (its exec section): the kernel's first uprobe on a
    new file waits for an RCU grace period, which takes 1 to 25 ms on some hosts;
  - each record against the server's ground truth and the client's own CLOCK_MONOTONIC
    (run.py's check_record, as for node's clients); transport go_tls; its addresses the
    server record's, reversed (the socket a goroutine's syscalls use inside a TLS call);
  - stack safety: 2 x 1 000 concurrent streams on GOMAXPROCS=2, GOGC=1 with stack shrinking on,
    each goroutine growing its stack 2 000 frames deep between reads: the program must exit 0
    with every stream whole, and every stream must be recorded whole;
  - a Go TLS server (stripped PIE, running before tokenscope) streaming to curl over HTTP/2
    and HTTP/1.1, to Python's ssl and to the openai SDK from npm (Debian has no Python SDK):
    server records against its own clock;
  - no credential in any output.
"""
import json
import os
import re
import shutil
import subprocess
import time

import h2_checks
import plaintext_checks
from plaintext_checks import CLIENT_PYTHON
from h2_checks import start_hypercorn, truths, wait_file

STRESS_STREAMS = 1000
LATE_RUNS, LATE_AFTER_NS = 20, 5_000_000

# Python's ssl, HTTP/1.1: stream one reply from URL (argv[2]) with BODY (argv[3]) to its end.
PY_CLIENT = """
import http.client, ssl, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[2])
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=sys.argv[1]))
c.request("POST", u.path, sys.argv[3], {"Content-Type": "application/json",
                                        "Authorization": "Bearer sk-test-SECRET-go"})
r = c.getresponse()
data = r.read()
sys.exit(0 if r.status == 200 and b"[DONE]" in data else 1)
"""


def wait_for(path, text, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.02)
    return False


class GoClient:
    """One sseclient run, waiting for its go-ahead file before it sends anything."""

    def __init__(self, binary, work, name, url, ca, model, *args, env=None):
        self.go = os.path.join(work, f"{name}.go-ahead")
        self.name, self.model = name, model
        self.p = subprocess.Popen([binary, "-url", url, "-ca", ca, "-model", model,
                                   "-wait", self.go, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, **(env or {})))

    def go_ahead(self):
        open(self.go, "w").close()

    def finish(self, timeout=300):
        out, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, out, err


def run_go_checks(ctx):
    check, root, work = ctx["check"], ctx["root"], os.path.join(ctx["work"], "go")
    check_record, client_times = ctx["check_record"], ctx["client_times"]
    os.makedirs(work, exist_ok=True)
    gen = os.path.join(root, "tests", "fixtures", ".gen")
    normal, stripped = (os.path.join(gen, "go", n) for n in ("sseclient", "sseclient-stripped"))
    cert, key = ctx["cert"], ctx["key"]
    h2_checks.FIXTURES = plaintext_checks.FIXTURES = os.path.join(root, "tests", "fixtures")

    # phase: the servers
    port_file, truth_path = os.path.join(work, "port"), os.path.join(work, "truth.jsonl")
    server = subprocess.Popen([CLIENT_PYTHON, os.path.join(root, "tests", "fixtures",
                                                           "llm_server.py"),
                               "--cert", cert, "--key", key, "--truth", truth_path,
                               "--port-file", port_file, "--lifetime", "600"],
                              stdout=subprocess.DEVNULL)
    hyper = gsrv = None
    clients = {}
    try:
        port = wait_file(port_file, server, "the TLS fixture server")
        hyper, hport, htruth = start_hypercorn(work, "go-hyper", cert, key)
        gsrv_bin = os.path.join(gen, "go", "sseserver-stripped")
        gtruth, gport_file = os.path.join(work, "gosrv.truth"), os.path.join(work, "gosrv.port")
        gsrv = subprocess.Popen([gsrv_bin, "-cert", cert, "-key", key, "-port-file", gport_file,
                                 "-truth", gtruth], stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(work, "gosrv.err"), "w"))
        gport = wait_file(gport_file, gsrv, "the Go TLS server")
        url, hurl = f"https://127.0.0.1:{port}", f"https://127.0.0.1:{hport}"

        # phase: clients started before tokenscope, waiting
        before = [("before normal openai h1", normal, url, "fx-ttft40-itl6-n8-gobno", ["-http1"]),
                  ("before stripped anthropic h1", stripped, url, "fx-ttft40-itl6-n8-gobsa",
                   ["-http1", "-dialect", "anthropic"]),
                  ("before stripped openai h2", stripped, hurl, "fx-ttft40-itl6-n8-gobsh2", [])]
        for label, binary, u, model, args in before:
            clients[label] = GoClient(binary, work, label.replace(" ", "-"), u, cert, model,
                                      *args)
        tracer = ctx["Tracer"](os.path.join(work, "trace"), "-v")
        for label, binary, *_ in before:
            check(wait_for(tracer.stderr.name, f"Go TLS probes on {binary} "),
                  f"go: {label}: its running binary was probed")
            clients[label].go_ahead()

        # phase: clients started after tokenscope: copies at new paths, probed at their exec
        after = []
        for label, src, u, model, args in (
                ("after normal openai h1", normal, url, "fx-ttft40-itl6-n8-goano", ["-http1"]),
                ("after stripped openai h2", stripped, hurl, "fx-ttft40-itl6-n8-goash2", [])):
            binary = os.path.join(work, label.replace(" ", "-"))
            shutil.copy(src, binary)
            clients[label] = GoClient(binary, work, label.replace(" ", "-"), u, cert, model,
                                      *args)
            check(wait_for(tracer.stderr.name, f"Go TLS probes on {binary} "),
                  f"go: {label}: probed at its exec")
            clients[label].go_ahead()
            after.append((label, binary, u, model, args))
        # phase: the Go TLS server (running before tokenscope), to curl and Python
        check(wait_for(tracer.stderr.name, f"Go TLS probes on {gsrv_bin} "),
              "go: the running Go server was probed")
        gurl = f"https://127.0.0.1:{gport}/v1/chat/completions"
        served = {}
        for label, cmd in (
                ("curl h2", ["curl", "-sS", "--fail", "-N", "--http2", "--cacert", cert]),
                ("curl h1", ["curl", "-sS", "--fail", "-N", "--http1.1", "--cacert", cert]),
                ("python h1", [CLIENT_PYTHON, "-c", PY_CLIENT, cert]),
                ("node openai SDK", ["node", os.path.join(root, "tests", "integration",
                                                          "clients", "node_client.js"),
                                     "openai", str(gport)])):
            model = f"fx-ttft30-itl5-n6-gosrv{len(served)}"
            body = json.dumps({"model": model, "stream": True,
                               "messages": [{"role": "user", "content": "PROMPT-CANARY"}]})
            if cmd[0] == "curl":
                cmd = cmd + ["-H", "Authorization: Bearer sk-test-SECRET-go",
                             "-H", "Content-Type: application/json", "-d", body,
                             "-o", "/dev/null", gurl]
            elif cmd[0] == "node":
                cmd = cmd + [model]
            else:
                cmd = cmd + [gurl, body]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, NODE_EXTRA_CA_CERTS=cert))
            check(r.returncode == 0, f"go server: {label}: streamed ({r.stderr[-300:]})")
            served[label] = model
        for label, c in clients.items():
            rc, out, err = c.finish()
            if check(rc == 0, f"go: {label}: the client streamed its reply ({err[-300:]})"):
                client_times[c.model] = json.loads(out.strip().splitlines()[-1])

        # phase: never-seen copies, no go-ahead (issue 37): each a new file, started after
        # tokenscope and sending its request 5 ms after it was started, or as soon as it can
        # (Go's runtime and the client's set-up take longer here). Tokenscope learns of the
        # file at its exec and must have probed it before the first TLS write: every request
        # measured, in each of the runs.
        late, lateness = [], []
        for i in range(LATE_RUNS):
            binary, model = os.path.join(work, f"never-seen-{i}"), f"fx-ttft10-itl3-n4-golate{i}"
            shutil.copy(stripped, binary)
            spawned = time.monotonic_ns()  # CLOCK_MONOTONIC, as the client's -at
            p = subprocess.Popen([binary, "-url", url, "-ca", cert, "-model", model, "-http1",
                                  "-at", str(spawned + LATE_AFTER_NS)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = p.communicate(timeout=60)
            if check(p.returncode == 0, f"go: never-seen copy {i}: streamed ({err[-300:]})"):
                client_times[model] = json.loads(out.strip().splitlines()[-1])
                lateness.append((client_times[model]["start_ns"] - spawned) / 1e6)
            late.append((f"never-seen copy {i}", model, p.pid))

        # phase: stack safety under the probes
        stress = []
        for i in range(2):
            model = f"fx-ttft5-itl2-n4-gostress{i}"
            c = GoClient(stripped if i else normal, work, f"stress{i}", url, cert, model,
                         "-http1", "-n", str(STRESS_STREAMS), "-recurse", "2000",
                         env={"GOMAXPROCS": "2", "GOGC": "1", "GODEBUG": "gcshrinkstackoff=0"})
            c.go_ahead()
            rc, out, err = c.finish()
            res = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {}
            check(rc == 0 and res.get("ended") == STRESS_STREAMS,
                  f"go: stress {i}: {STRESS_STREAMS} streams under GC and stack growth, none "
                  f"crashed or cut ({res}, {err[-300:]})")
            stress.append(model)
        rc, out, err = tracer.stop()
    finally:
        for p in (server, hyper, gsrv):
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
    check(rc == 0, f"go: tokenscope exited 0 ({err[-300:]})")

    # phase: the records
    records = [json.loads(l) for l in open(tracer.out)]
    requests = [r for r in records if r.get("type") == "request"]
    truth = {**{t["model"]: t for t in map(json.loads, open(truth_path))}, **truths(htruth)}
    for label, *_ in before + after:
        model = clients[label].model
        rec = next((r for r in requests if r["model"] == model and r["role"] == "client"), None)
        api = "anthropic.messages" if "anthropic" in label else "openai.chat"
        # the peer is the server's port; where the server record knows its addresses
        # (hypercorn's memory BIO does not always), they are the client's, reversed
        srv = next((r for r in requests if r["model"] == model and r["role"] == "server"), None)
        want_peer = f"127.0.0.1:{hport if 'h2' in label else port}"
        check(rec is not None and rec["peer"] == want_peer and rec["local"] and
              (srv is None or srv["peer"] is None or
               (rec["local"] == srv["peer"] and rec["peer"] == srv["local"])),
              f"go: {label}: the client's addresses ({rec and (rec['local'], rec['peer'])}; "
              f"the server {want_peer}, its record {srv and (srv['local'], srv['peer'])})")
        check(rec is not None and rec["transport"] == "go_tls" and
              rec["http_version"] == ("2" if "h2" in label else "1.1"),
              f"go: {label}: a go_tls client record over HTTP/"
              f"{'2' if 'h2' in label else '1.1'} ({rec and (rec['transport'], rec['http_version'])})")
        if model in truth:
            check_record(rec, truth[model], api, f"go: {label}")
        else:
            check(False, f"go: {label}: the server wrote its truth")
    gt = {t["model"]: t for t in map(json.loads, open(gtruth))}
    for label, model in served.items():
        rec = next((r for r in requests if r["model"] == model and r["role"] == "server"), None)
        t = gt.get(model)
        h2 = label == "curl h2"
        if not check(rec is not None and t is not None and rec["transport"] == "go_tls" and
                     rec["http_version"] == ("2" if h2 else "1.1") and
                     t["proto"] == ("HTTP/2.0" if h2 else "HTTP/1.1"),
                     f"go server: {label}: a go_tls server record over "
                     f"{'HTTP/2' if h2 else 'HTTP/1.1'} ({rec and (rec['transport'], rec['http_version'])}, "
                     f"{t and t['proto']})"):
            continue
        check(rec["complete"] and rec["token_events"] == t["events"] and
              rec["output_tokens"] == t["output_tokens"] and rec["local"] == f"127.0.0.1:{gport}",
              f"go server: {label}: complete, {rec['token_events']} token events, its address "
              f"({rec['error']}, {rec['local']})")
        # the server's own clock: the request was read before its handler ran, each token
        # written between the clock reads around its handing over (HTTP/2: Go's server
        # writes the frame from its connection's goroutine, after the handler's Flush may
        # have returned: within 5 ms then)
        late_ns = 5_000_000 if h2 else 0
        check(rec["start_ns"] <= t["recv_ns"] and
              t["token_ns"][0] <= rec["first_token_ns"] <= t["token_after_ns"][0] + late_ns,
              f"go server: {label}: request start and first token inside the server's own "
              f"times (start {t['recv_ns'] - rec['start_ns']} ns before the handler, first "
              f"token {rec['first_token_ns'] - t['token_ns'][0]} ns after its write began)")
    # when each never-seen copy was probed: "exec of PID at NS: its new files probed MS ms"
    probed_at = {}
    for line in err.splitlines():
        m = re.match(r"tokenscope: exec of (\d+) at (\d+): its new files probed ([0-9.]+) ms", line)
        if m:
            probed_at[int(m.group(1))] = int(m.group(2)) + float(m.group(3)) * 1e6
    in_time = 0
    for label, model, pid in late:
        rec = next((r for r in requests if r["model"] == model and r["role"] == "client"), None)
        sent = client_times.get(model, {}).get("start_ns")
        if not check(pid in probed_at, f"go: {label}: probed at its exec (pid {pid})") or \
                sent is None:
            continue
        if probed_at[pid] >= sent:  # its request left before its probes were on
            check(rec is None or rec["transport"] == "go_tls",
                  f"go: {label}: sent {(probed_at[pid] - sent) / 1e6:.1f} ms before its probes "
                  f"were on: not measured, or measured through them")
            continue
        in_time += 1
        check(rec is not None and rec["transport"] == "go_tls",
              f"go: {label}: its first request, sent after its probes were on, seen through "
              f"the Go probes ({rec and rec['transport']})")
        if check(model in truth, f"go: {label}: the server wrote its truth"):
            check_record(rec, truth[model], "openai.chat", f"go: {label}")
    check(in_time >= 1, f"go: never-seen copies: at least one probed before its request "
                        f"({in_time} of {len(late)})")
    print(f"go: never-seen copies: {in_time} of {len(late)} probed before their request "
          f"(5 ms after the spawn)")
    lateness.sort()
    if lateness:
        print(f"go: never-seen copies: request sent {lateness[0]:.1f} to {lateness[-1]:.1f} ms "
              f"after the spawn (median {lateness[len(lateness) // 2]:.1f})")
    for model in stress:
        got = [r for r in requests if r["role"] == "client" and r["transport"] == "go_tls" and
               (r["model"] or "").startswith(model + "-s")]
        whole = [r for r in got if r["complete"] and r["token_events"] == 4]
        check(len(got) == STRESS_STREAMS and len(whole) == STRESS_STREAMS,
              f"go: {model}: every stream recorded whole ({len(whole)} of {len(got)}, "
              f"{[(r['model'], r['error']) for r in got if r not in whole][:3]})")
    blob = out + err + open(tracer.out).read()
    check("sk-test-SECRET-go" not in blob and "PROMPT-CANARY" not in blob,
          "go: no credential or prompt in any output")
    print(f"go: {len(requests)} records; stress {len(stress)} x {STRESS_STREAMS} streams")
