#!/usr/bin/env python3
"""make soak: tokenscope under sustained load, long enough to see memory and loss trends.

STREAMS concurrent TLS streams (keep-alive, one request after another, each 10 token events
100 ms apart) against the fixture server for SECONDS, both ends traced. At the end every
request the clients completed must have its record on both ends (complete, or incomplete with
the cause counted in the capture health), and tokenscope's RSS after the warm-up must stay
flat (within 10 % of its value at the end of the warm-up, or 4 MiB).

usage: soak.py [--seconds 600] [--streams 1000]   (root; prints a table for docs)
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from plaintext_checks import wait_file  # noqa: E402
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CERT = os.path.join(FIXTURES, ".gen", "cert.pem")
KEY = os.path.join(FIXTURES, ".gen", "key.pem")
MODEL = "fx-ttft50-itl100-n10-soak"
PROCS = 4

LOAD = r'''
import http.client, json, ssl, sys, threading, time
port, cafile, threads, deadline = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
ctx = ssl.create_default_context(cafile=cafile)
done = [0] * threads
def worker(i):
    conn = None
    while time.monotonic() < deadline:
        try:
            if conn is None:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
            conn.request("POST", "/v1/chat/completions", json.dumps(
                {"model": sys.argv[5], "stream": True, "stream_options": {"include_usage": True},
                 "messages": [{"role": "user", "content": "soak"}]}),
                {"Content-Type": "application/json"})
            conn.getresponse().read()
            done[i] += 1
        except Exception:
            conn = None
    if conn:
        conn.close()
ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"done": sum(done)}))
'''


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--streams", type=int, default=1000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("soak: loads eBPF programs: run as root")
    work = tempfile.mkdtemp(prefix="tokenscope-soak-")
    port_file = os.path.join(work, "port")
    server = subprocess.Popen([sys.executable, os.path.join(FIXTURES, "llm_server.py"),
                               "--cert", CERT, "--key", KEY, "--port-file", port_file,
                               "--lifetime", str(a.seconds + 300)], stdout=subprocess.DEVNULL)
    port = wait_file(port_file, server, "the TLS fixture server")
    out = os.path.join(work, "requests.jsonl")
    err = open(os.path.join(work, "stderr"), "w+")
    tracer = subprocess.Popen([os.path.join(ROOT, "tokenscope"), "-q", "-o", out],
                              stdout=subprocess.PIPE, stderr=err, text=True)
    while "Hit Ctrl-C" not in open(err.name).read():
        time.sleep(0.1)
    start = time.monotonic()
    deadline = start + a.seconds
    loads = [subprocess.Popen([sys.executable, "-c", LOAD, str(port), CERT,
                               str(a.streams // PROCS), str(deadline), MODEL],
                              stdout=subprocess.PIPE, text=True) for _ in range(PROCS)]
    samples = []  # (seconds since start, RSS KiB, tracer CPU s)
    while any(p.poll() is None for p in loads):
        samples.append((time.monotonic() - start, rss_kib(tracer.pid), cpu_s(tracer.pid)))
        time.sleep(10)
    done = sum(json.loads(p.stdout.read().strip().splitlines()[-1])["done"] for p in loads)
    time.sleep(1)
    tracer.send_signal(signal.SIGINT)
    summary, _ = tracer.communicate(timeout=120)
    server.kill()

    recs = [json.loads(line) for line in open(out)]
    soak = [r for r in recs if r["model"] == MODEL]
    by_role = {role: [r for r in soak if r["role"] == role] for role in ("client", "server")}
    health = [line for line in summary.splitlines() if line.startswith(("capture:", "streams:"))]
    warm = [s for s in samples if s[0] >= min(60, a.seconds / 4)]
    base = warm[0][1] if warm else 0
    peak = max((s[1] for s in warm), default=0)
    print(f"soak: {a.seconds:.0f} s, {a.streams} concurrent TLS streams, both ends traced")
    print(f"  requests completed by the clients: {done}")
    ok = True
    for role, rs in by_role.items():
        complete = sum(1 for r in rs if r["complete"])
        causes = {}
        for r in rs:
            if not r["complete"]:
                causes[r["error"]] = causes.get(r["error"], 0) + 1
        print(f"  {role} records: {len(rs)} ({complete} complete, incomplete by cause: {causes})")
        # Every completed request has its record; more records can exist (requests cut at the
        # deadline end as incomplete, with their cause).
        ok &= len(rs) >= done and all(r["complete"] or r["error"] for r in rs)
    for line in health:
        print("  " + line)
    print(f"  tokenscope RSS: {base} KiB after warm-up, {peak} KiB peak after it, "
          f"{samples[-1][1] if samples else 0} KiB at the end; CPU {samples[-1][2]:.1f} s "
          f"({samples[-1][2] / a.seconds * 100:.0f} % of one core)")
    flat = peak <= max(base * 1.10, base + 4096)
    print(f"  RSS flat after warm-up: {'yes' if flat else 'NO'}; every request accounted for: "
          f"{'yes' if ok else 'NO'}")
    print(f"  (kept {work})")
    return 0 if ok and flat else 1


if __name__ == "__main__":
    sys.exit(main())
