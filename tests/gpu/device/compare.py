#!/usr/bin/env python3
"""Compare tokenscope's GPU steps from the device run with torch_steps.py's truth.

usage: compare.py STEPS.jsonl TRUTH.json   (exit 1 when a check fails)
For each step torch_steps.py timed (CLOCK_MONOTONIC t0 before the step, t1 after its event
synchronize returned; torch.cuda event time on the GPU), the tokenscope step whose first
launch falls inside [t0, t1] must exist, be seen by the host within 0.5 ms of t1, and, where
tokenscope reports an exact completion, span at least the GPU time the events measured.
"""
import json
import statistics
import sys

TOL_NS = 500_000


def main():
    steps = [json.loads(l) for l in open(sys.argv[1])]
    steps = [s for s in steps if s["type"] == "gpu_step"]
    truth = json.load(open(sys.argv[2]))
    failed = 0
    print(f"device: {truth['device']}, torch {truth['torch']}")
    for phase in ("eager", "graph"):
        rows = []
        for t in truth[phase]:
            inside = [s for s in steps if t["t0_ns"] <= s["first_launch_ns"] <= t["t1_ns"]]
            rows.append((t, inside))
        found = sum(len(i) == 1 for _, i in rows)
        seen_err = [abs(i[0]["host_seen_ns"] - t["t1_ns"]) / 1e6 for t, i in rows if len(i) == 1]
        exact = [(t, i[0]) for t, i in rows if len(i) == 1 and not i[0]["done_bound"]]
        span_vs_gpu = [((s["gpu_done_ns"] - s["first_launch_ns"]) / 1e6 - t["gpu_ms"])
                       for t, s in exact]
        host_span = [((s["gpu_done_ns"] - s["first_launch_ns"]) - (t["t1_ns"] - t["t0_ns"])) / 1e6
                     for t, i in rows if len(i) == 1 for s in i]
        launches = sorted({(i[0]["launches"], i[0]["graph_launches"]) for _, i in rows if len(i) == 1})
        print(f"{phase}: {found}/{len(rows)} steps matched one tokenscope step; "
              f"launches/graph launches per step {launches}; "
              f"{len(exact)} with exact completion")
        if seen_err:
            print(f"  host_seen - t1: max {max(seen_err):.3f} ms, median {statistics.median(seen_err):.3f} ms")
        if host_span:
            print(f"  (gpu_done - first launch) - (t1 - t0): median {statistics.median(host_span):.3f} ms")
        if span_vs_gpu:
            print(f"  exact steps: (gpu_done - first launch) - event GPU time: median "
                  f"{statistics.median(span_vs_gpu):.3f} ms, min {min(span_vs_gpu):.3f}, "
                  f"max {max(span_vs_gpu):.3f}")
        names = sorted({k["name"][:70] for _, i in rows if len(i) == 1 for k in i[0]["kernels"]})
        print(f"  kernel names (first 3 of {len(names)}): {names[:3]}")
        if found != len(rows) or any(e > TOL_NS / 1e6 for e in seen_err) or \
                any(d < -0.05 for d in span_vs_gpu):
            failed = 1
        if phase == "graph" and any(i[0]["graph_launches"] != 1 for _, i in rows if len(i) == 1):
            failed = 1
    # vLLM-style async steps: launched in [t0, t_launched], seen when the host waited for the
    # step's copy event, one step later
    rows = truth.get("async", [])
    if rows:
        matched = []
        for t in rows:
            inside = [s for s in steps if t["t0_ns"] <= s["first_launch_ns"] <= t["t_launched_ns"]
                      and s["launches"] > 0]
            matched.append((t, inside))
        found = sum(len(i) == 1 for _, i in matched)
        seen_err = [abs(i[0]["host_seen_ns"] - t["seen_ns"]) / 1e6 for t, i in matched if len(i) == 1]
        # the point of async scheduling: step N is seen after step N+1 was launched
        late = sum(len(a[1]) == 1 and a[1][0]["host_seen_ns"] > b[0]["t_launched_ns"]
                   for a, b in zip(matched, matched[1:]))
        print(f"async: {found}/{len(rows)} steps matched one tokenscope step; "
              f"{late} seen after the next step was launched")
        if seen_err:
            print(f"  host_seen - the host's wait for the copy event: max {max(seen_err):.3f} ms, "
                  f"median {statistics.median(seen_err):.3f} ms")
        if found != len(rows) or any(e > TOL_NS / 1e6 for e in seen_err):
            failed = 1
    print("compare:", "FAILED" if failed else "ok")
    return failed


if __name__ == "__main__":
    sys.exit(main())
