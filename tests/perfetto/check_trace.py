#!/usr/bin/env python3
"""A --perfetto file against the JSON Lines of the same run.

    check_trace.py TRACE JSONL

Decodes TRACE with protoc (Debian's protobuf-compiler) against trace_subset.proto, the field
numbers of Perfetto's own protos, then checks what a person would look for:
- the first packet declares CLOCK_MONOTONIC the trace's clock, every timed packet uses it;
- every track is described once, its name unique, its parent described;
- every slice closes on its track, nested inside the one open before it;
- every request record has its track with one "request" slice from its start; a server
  request attributed has queued, prefill and emit slices that add up to its TTFT (in ns),
  a gap slice per token gap, and an instant per token event;
- every step record (gpu_step, engine_step) has its slice;
- every vllm_step record's running, waiting and KV cache use are on their counter tracks;
- every flow has one start and one end.
Prints what it found; exits 1 on the first kind of problem it finds (all of them said).
"""
import collections
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MONOTONIC = 3


def parse_text(text):
    """protoc's text format into nested dicts of lists."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|[{}]|[A-Za-z_][A-Za-z0-9_]*:?|-?[0-9][0-9.e+-]*', text)
    pos = 0

    def value(tok):
        if tok.startswith('"'):
            return bytes(tok[1:-1], "utf-8").decode("unicode_escape")
        if re.match(r"^-?[0-9]", tok):
            return float(tok) if "." in tok or "e" in tok else int(tok)
        return tok

    def message():
        nonlocal pos
        out = collections.defaultdict(list)
        while pos < len(tokens) and tokens[pos] != "}":
            name = tokens[pos].rstrip(":")
            pos += 1
            if tokens[pos] == "{":
                pos += 1
                out[name].append(message())
                pos += 1  # the }
            else:
                out[name].append(value(tokens[pos]))
                pos += 1
        return out

    return message()


def one(m, field, default=None):
    v = m.get(field)
    return v[0] if v else default


def main():
    trace_path, jsonl_path = sys.argv[1], sys.argv[2]
    with open(trace_path, "rb") as f:
        r = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", HERE,
                            os.path.join(HERE, "trace_subset.proto")], stdin=f,
                           capture_output=True)
    if r.returncode:
        print(f"perfetto: protoc could not decode {trace_path}: {r.stderr.decode()[-500:]}")
        return 1
    packets = parse_text(r.stdout.decode())["packet"]
    with open(jsonl_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    problems = []

    # the clock
    first = packets[0] if packets else {}
    snap = one(first, "clock_snapshot", {})
    if one(snap, "primary_trace_clock") != MONOTONIC:
        problems.append("the first packet does not declare CLOCK_MONOTONIC the trace's clock")
    for p in packets:
        if "timestamp" in p and one(p, "timestamp_clock_id") != MONOTONIC:
            problems.append("a timed packet not on CLOCK_MONOTONIC")
            break

    # tracks
    tracks, names = {}, collections.Counter()
    for p in packets:
        for d in p.get("track_descriptor", []):
            uuid = one(d, "uuid")
            if uuid in tracks:
                problems.append(f"track {uuid} described twice")
            tracks[uuid] = d
            proc = one(d, "process")
            names[one(d, "name") or f"process {one(proc or {}, 'pid')}"] += 1
    for name, n in names.items():
        if n > 1:
            problems.append(f"track name {name!r} used by {n} tracks")
    for uuid, d in tracks.items():
        parent = one(d, "parent_uuid")
        if parent is not None and parent not in tracks:
            problems.append(f"track {one(d, 'name')!r} has a parent that is not described")

    # slices and instants, per track, in time order (file order breaks ties)
    events = collections.defaultdict(list)
    flows_out, flows_in = collections.Counter(), collections.Counter()
    for i, p in enumerate(packets):
        for e in p.get("track_event", []):
            track = one(e, "track_uuid")
            if track not in tracks:
                problems.append(f"an event on track {track}, which is not described")
                continue
            events[track].append((one(p, "timestamp"), i, e))
            for fid in e.get("flow_ids", []):
                flows_out[fid] += 1
            for fid in e.get("terminating_flow_ids", []):
                flows_in[fid] += 1
    slices = collections.defaultdict(list)  # track -> [(name, start, end, depth, args)]
    instants = collections.defaultdict(list)
    for track, evs in events.items():
        stack = []
        for ts, _, e in sorted(evs, key=lambda x: (x[0], x[1])):
            kind = one(e, "type")
            if kind == "TYPE_SLICE_BEGIN":
                stack.append((one(e, "name"), ts, e))
            elif kind == "TYPE_SLICE_END":
                if not stack:
                    problems.append(f"a slice ends on {one(tracks[track], 'name')!r} with "
                                    "none open")
                    continue
                name, start, b = stack.pop()
                args = {one(a, "name"): next(iter(v[0] for k, v in a.items() if
                                                 k.endswith("_value")), None)
                        for a in b.get("debug_annotations", [])}
                slices[track].append((name, start, ts, len(stack), args))
            elif kind == "TYPE_INSTANT":
                instants[track].append((one(e, "name"), ts))
        if stack:
            problems.append(f"{len(stack)} slices never end on {one(tracks[track], 'name')!r}")
    for fid in set(flows_out) | set(flows_in):
        if flows_out[fid] != 1 or flows_in[fid] != 1:
            problems.append(f"flow {fid}: {flows_out[fid]} starts, {flows_in[fid]} ends")
            break

    # requests against the JSON Lines
    by_id = {}
    for track, ss in slices.items():
        for name, start, end_, depth, args in ss:
            if name == "request" and depth == 0:
                by_id[args.get("id")] = (track, start)
    requests = [x for x in records if x.get("type") == "request"]
    split_ok = attributed = 0
    for rec in requests:
        if rec["id"] not in by_id:
            problems.append(f"request {rec['id']}: no request slice")
            continue
        track, start = by_id[rec["id"]]
        if start != rec["start_ns"]:
            problems.append(f"request {rec['id']}: its slice starts at {start}, not "
                            f"{rec['start_ns']}")
        phase = {name: end_ - s for name, s, end_, depth, _ in slices[track] if depth == 1}
        gaps = sum(1 for name, _, _, depth, _ in slices[track] if name == "gap")
        toks = sum(1 for name, _ in instants[track] if name == "token")
        if toks != (rec["token_events"] or 0) or gaps != max(0, (rec["token_events"] or 0) - 1):
            problems.append(f"request {rec['id']}: {toks} token instants and {gaps} gaps for "
                            f"{rec['token_events']} token events")
        if rec.get("attribution"):
            attributed += 1
            ttft = rec["first_token_ns"] - rec["start_ns"]
            parts = phase.get("queued", 0) + phase.get("prefill", 0) + phase.get("emit", 0)
            if parts == ttft and {"queued", "prefill", "emit"} <= set(phase):
                split_ok += 1
            else:
                problems.append(f"request {rec['id']}: phases {phase} add to {parts}, its TTFT "
                                f"is {ttft}")
    steps = [x for x in records if x.get("type") in ("gpu_step", "engine_step")]
    step_slices = sum(1 for track, ss in slices.items() for name, *_ in ss
                      if re.match(r"^(gpu|llama\.cpp) steps ", one(tracks[track], "name") or ""))
    if step_slices != len(steps):
        problems.append(f"{step_slices} step slices for {len(steps)} step records")

    # vLLM's scheduler stats: each vllm_step record's values on its counter tracks, at its time
    counters = collections.defaultdict(dict)  # track name -> {ts: value}
    for track, evs in events.items():
        for ts, _, e in evs:
            if one(e, "type") == "TYPE_COUNTER":
                v = one(e, "counter_value")
                counters[one(tracks[track], "name")][ts] = (
                    v if v is not None else one(e, "double_counter_value"))
    sched = [x for x in records if x.get("type") == "vllm_step"]
    for x in sched:
        for what, key in (("running", "running"), ("waiting", "waiting"),
                          ("kv cache use", "kv_cache_usage")):
            got = counters.get(f"vllm {what} [engine {x['engine_index']}]", {}).get(x["ts_ns"])
            if x[key] is not None and (got is None or abs(got - x[key]) > 1e-12):
                problems.append(f"vllm step at {x['ts_ns']}: {what} {got} on its counter "
                                f"track, {x[key]} in the record")
                break

    print(f"perfetto: {len(packets)} packets, {len(tracks)} tracks, {len(requests)} requests "
          f"({split_ok}/{attributed} attributed ones' phases add up to their TTFT), "
          f"{step_slices} steps, {len(flows_in)} flows, {len(sched)} vllm steps' counters")
    for line in problems[:20]:
        print(f"  perfetto: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
