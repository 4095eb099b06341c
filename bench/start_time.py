#!/usr/bin/env python3
"""tokenscope's start and stop, ROUNDS times: from exec to its "Hit Ctrl-C to end." (every
probe attached), from SIGINT to its exit, and from SIGINT until its probes are gone (its
detaching child, tokenscope-det, ended). Its stderr is read as it comes, through a pipe: a
shell loop that polls a file with grep forks a process every few milliseconds, and on a
2-core machine those forks took the CPUs the start's loads run on (+100 ms here).

usage: start_time.py TOKENSCOPE ROUNDS
prints one line per round: "start_ms stop_ms gone_ms"
"""
import os
import signal
import subprocess
import sys
import time


def detaching():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if comm == "tokenscope-det" and state != "Z":
            return True
    return False


def one(binary):
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "-q"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True)
    ready = False
    for line in p.stderr:
        if "Hit Ctrl-C to end." in line:
            ready = True
            break
    t1 = time.monotonic()
    if not ready:
        sys.exit(f"start_time.py: {binary} ended before it was ready (exit {p.wait()})")
    time.sleep(1)
    t2 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.communicate()
    t3 = time.monotonic()
    while detaching():
        time.sleep(0.005)
    t4 = time.monotonic()
    return (t1 - t0) * 1e3, (t3 - t2) * 1e3, (t4 - t2) * 1e3


def main():
    binary, rounds = sys.argv[1], int(sys.argv[2])
    while detaching():  # an earlier run's probes still coming off
        time.sleep(0.01)
    for _ in range(rounds):
        time.sleep(0.3)  # what the last one freed, settled
        print("%.0f %.0f %.0f" % one(binary), flush=True)


if __name__ == "__main__":
    main()
