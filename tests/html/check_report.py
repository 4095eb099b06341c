#!/usr/bin/env python3
"""An --html report against the JSON Lines of the same run, as a browser shows it.

    check_report.py REPORT.html JSONL SCREENSHOT_DIR

Opens the page in Debian's headless chromium (open_report.mjs, playwright-core) and checks:
no console error, no request made by the page, a section per (command, role, API, model)
with as many requests as the JSON Lines, each chart's count equal to what its bars or points
sum to and to the JSON Lines (TTFT, TPOT, gaps, the two scatter plots), the stats table's
n, p50, p90, p99 and max equal the JSON Lines' (nearest rank), TTFT's also per cache regime,
each consumer's requests, SLO-judged and met the JSON Lines', the slowest requests those of
the JSON Lines, the engine steps and agent sessions as many as its records, and every chart
readable:
axes with ticks and titles with units, what was measured, a tooltip on every bar and point
(readable()). Screenshots of each
section (of the groups, the first six) go to SCREENSHOT_DIR. Exits 1 on any difference (all said).
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def nearest_rank(values, p):
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else 0


def readable(who, charts):
    """Every chart a person can read: an x axis with at least two ticks and a title with its
    unit, a y axis too (the band charts' y is their bands, named), what was measured said,
    and a tooltip on every bar and point. An empty chart says "none" and draws no axis."""
    bad = []
    for c in charts:
        what = f"{who}: chart {c['chart']}"
        if c["marks"] and c["ticks"]["x"] < 2:
            bad.append(f"{what}: {c['ticks']['x']} ticks on its x axis")
        if c["marks"] and c["chart"] not in ("breakdown", "wire_breakdown", "gap_breakdown") and \
                c["ticks"]["y"] < 2:
            bad.append(f"{what}: {c['ticks']['y']} ticks on its y axis")
        if c["marks"] and (not c["axis_titles"]["x"] or "(" not in c["axis_titles"]["x"]):
            bad.append(f"{what}: its x axis has no title with a unit "
                       f"({c['axis_titles']['x']!r})")
        if not c["measured"].strip():
            bad.append(f"{what}: does not say what was measured")
        if c["untitled"]:
            bad.append(f"{what}: {c['untitled']} of {c['marks']} bars or points without a "
                       f"tooltip")
    return bad


def main():
    report, jsonl, shots = (os.path.abspath(a) for a in sys.argv[1:4])
    os.makedirs(shots, exist_ok=True)
    r = subprocess.run(["node", os.path.join(HERE, "open_report.mjs"), report, shots],
                       capture_output=True, text=True, timeout=180)
    if r.returncode:
        print(f"html: the browser could not open {report}: {r.stderr[-800:]}")
        return 1
    page = json.loads(r.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in open(jsonl) if line.strip()]
    requests = [x for x in records if x.get("type") == "request"]
    steps = [x for x in records if x.get("type") in ("gpu_step", "engine_step")]
    bad = []
    if page["errors"]:
        bad.append(f"console errors: {page['errors'][:3]}")
    if page["requests"]:
        bad.append(f"the page made {len(page['requests'])} requests: {page['requests'][:3]}")
    if page["health_requests"] != len(requests):
        bad.append(f"the page says {page['health_requests']} requests, the records "
                   f"{len(requests)}")
    def pod(x):  # llm/group.c's "NAMESPACE/NAME", "" for a process in no pod
        ns, name = x.get("k8s_namespace_name"), x.get("k8s_pod_name")
        return f"{ns or '-'}/{name or '-'}" if ns or name else ""

    for g in page["groups"]:
        mine = [x for x in requests if x["comm"] == g["comm"] and x["role"] == g["role"] and
                x["api"] == g["api"] and (x["model"] or x["response_model"] or "") == g["model"]
                and pod(x) == (g.get("pod") or "")]
        who = f"{g['comm']} {g['role']} {g['api']} {g['model']}"
        if len(mine) != g["requests"]:
            bad.append(f"{who}: {g['requests']} requests on the page, {len(mine)} records")
        ttft = [x["ttft_ms"] for x in mine if x["ttft_ms"] is not None]
        tpot = [x["tpot_ms"] for x in mine if x["tpot_ms"] is not None]
        gaps = sum(max(0, (x["token_events"] or 0) - 1) for x in mine if x["ttft_ms"] is not None)
        want = {"ttft": len(ttft), "tpot": len(tpot), "gaps": gaps,
                "ttft_prompt": sum(1 for x in mine if x["ttft_ms"] is not None and
                                   x["input_tokens"] is not None),
                "tpot_concurrency": len(tpot)}
        for c in g["charts"]:
            drawn = c["bars"] if c["chart"] in ("ttft", "tpot", "gaps") else c["points"] \
                if c["chart"].startswith(("ttft_", "tpot_")) else None
            if drawn is not None and drawn != c["count"]:
                bad.append(f"{who}: chart {c['chart']} says {c['count']}, draws {drawn}")
            if c["chart"] in want and c["count"] != want[c["chart"]]:
                bad.append(f"{who}: chart {c['chart']} counts {c['count']}, the records "
                           f"{want[c['chart']]}")
            if c["chart"] in ("breakdown", "wire_breakdown", "gap_breakdown") and not c["bands"]:
                bad.append(f"{who}: chart {c['chart']} drew no band")
        bad += readable(who, g["charts"])
        # TTFT per cache regime (it is bimodal): each regime's rows its records'
        regimes = {f"ttft_{c}": [x["ttft_ms"] for x in mine if x["ttft_ms"] is not None and
                                 x["cache_regime"] == c]
                   for c in ("hit", "partial", "miss", "unknown")}
        shown = {k for k in g["stats"] if k.startswith("ttft_")}
        if shown != {k for k, v in regimes.items() if v}:
            bad.append(f"{who}: TTFT rows by cache regime {sorted(shown)}, the records' "
                       f"{sorted(k for k, v in regimes.items() if v)}")
        # who reads them: each consumer's requests, judged and met, its records'
        consumers = {}
        for x in mine:
            c = consumers.setdefault(x["consumer"], {"requests": 0, "judged": 0, "met": 0})
            c["requests"] += 1
            c["judged"] += x["slo_met"] is not None
            c["met"] += x["slo_met"] is True
        if g["consumers"] != consumers:
            bad.append(f"{who}: consumers {g['consumers']}, the records' {consumers}")
        for stat, values in [("ttft", ttft), ("tpot", tpot)] + [(k, v) for k, v in
                                                             regimes.items() if v]:
            cells = g["stats"].get(stat)
            wants = [len(values)] + [nearest_rank(values, p) for p in (50, 90, 99)] + \
                [max(values, default=0)]
            # the records round to the microsecond
            if not cells or cells[0] != wants[0] or any(abs(a - b) > 0.0011 for a, b in
                                                        zip(cells[1:], wants[1:])):
                bad.append(f"{who}: {stat} table {cells}, the records {wants}")
    # the slowest by TTFT: the records' 20 largest TTFTs (ties may swap ids)
    ttft_of = {x["id"]: x["ttft_ms"] for x in requests if x["ttft_ms"] is not None}
    got = sorted((ttft_of.get(i, -1) for i in page["slowest"].get("slowest-ttft", [])),
                 reverse=True)
    want = sorted(ttft_of.values(), reverse=True)[:20]
    if len(got) != len(want) or any(abs(a - b) > 0.0011 for a, b in zip(got, want)):
        bad.append(f"the slowest by TTFT: {got[:5]}..., the records' {want[:5]}...")
    sessions = sum(1 for x in records if x.get("type") == "session")
    if page["sessions"] != sessions:
        bad.append(f"{page['sessions']} sessions on the page, {sessions} session records")
    bad += readable("engines", page["step_charts"])
    if page["steps"] != len(steps):
        bad.append(f"{page['steps']} engine steps on the page, {len(steps)} step records")
    print(f"html: {len(page['groups'])} groups, {len(requests)} requests, {page['steps']} steps, "
          f"{sum(len(g['charts']) for g in page['groups'])} charts; no console error: "
          f"{not page['errors']}; requests made: {len(page['requests'])}")
    for line in bad[:20]:
        print(f"  html: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
