#!/usr/bin/python3
"""Replay kept llama integration runs and score their split against the truth again.

How attribution by sequence (user/engine/attrib_seqs.c) is tuned: keep the work of some live
runs (as root: `TS_KEEP_WORK=1 sh tests/integration/run.sh --only llama`, some of them with a
CPU hog beside), rebuild tokenscope with the change (USAGE_WORTH_STEPS, say), and replay every
kept recording through it:

    python3 tests/integration/llama_resplit.py ./tokenscope /tmp/tokenscope-it-*/llama

Each line is one run's main server: its requests split right, its gaps' steps right, and the
records split wrong. No root needed: the recordings hold what the probes saw.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_checks import read_jsonl, split_against_truth  # noqa: E402


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    tokenscope, dirs = sys.argv[1], sys.argv[2:]
    wrong_runs = 0
    for d in dirs:
        if not os.path.exists(os.path.join(d, "server.jsonl")):
            print(f"{d}: no server log (not a kept llama run)")
            continue
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
            subprocess.run([tokenscope, "report", os.path.join(d, "capture.tsrec"), "--gaps",
                            "-q", "-o", out.name], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            records = read_jsonl(out.name)
        calls = read_jsonl(os.path.join(d, "decode.jsonl"))
        served = read_jsonl(os.path.join(d, "server.jsonl"))
        steps = [r for r in records if r.get("type") == "engine_step"]
        # the main server: the pid whose steps the main interposer log holds, as many
        pids = {}
        for s in steps:
            pids[s["pid"]] = pids.get(s["pid"], 0) + 1
        pid = min(pids, key=lambda p: abs(pids[p] - len(calls))) if pids else None
        steps = [s for s in steps if s["pid"] == pid]
        servers = [r for r in records if r.get("type") == "request" and
                   r["role"] == "server" and r["pid"] == pid]
        same = dict(zip(sorted(c["start_ns"] for c in calls),
                        sorted(s["start_ns"] for s in steps)))
        good, gaps, gaps_right, bad, _ = split_against_truth(calls, served, same, servers)
        wrong_runs += bool(bad)
        print(f"{d}: split {good['split']}/{len(servers)}, gaps' steps {gaps_right}/{gaps}")
        for line in bad:
            print(f"    {line}")
    print(f"{wrong_runs} of {len(dirs)} runs with a request split wrong")
    return 1 if wrong_runs else 0


if __name__ == "__main__":
    sys.exit(main())
