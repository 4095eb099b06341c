#!/usr/bin/python3
"""One received trace drawn as a waterfall page (docs/otlp.md's picture): no trace backend
is packaged for Debian 12, so this page stands in for one.

    draw_trace.py SPANS.jsonl OUT.html [TRACE_ID]

SPANS.jsonl: receiver.py's output. Without TRACE_ID, the trace with the most spans."""
import collections
import html
import json
import sys


def main():
    spans = [json.loads(line) for line in open(sys.argv[1])]
    by_trace = collections.defaultdict(list)
    for s in spans:
        by_trace[s["trace_id"]].append(s)
    tid = sys.argv[3] if len(sys.argv) > 3 else max(by_trace, key=lambda t: len(by_trace[t]))
    trace = by_trace[tid]
    ids = {s["span_id"] for s in trace}
    kids = collections.defaultdict(list)
    for s in trace:
        kids[s["parent_span_id"] if s["parent_span_id"] in ids else ""].append(s)
    t0 = min(s["start"] for s in trace)
    t1 = max(s["end"] for s in trace)
    width = 760
    rows = []

    def walk(parent, depth):
        for s in sorted(kids[parent], key=lambda x: x["start"]):
            x = (s["start"] - t0) / (t1 - t0) * width
            w = max(1.0, (s["end"] - s["start"]) / (t1 - t0) * width)
            kind = {2: "server", 3: "client", 1: "internal"}.get(s["kind"], "")
            colour = {"server": "#1f77b4", "client": "#2ca02c"}.get(kind, "#ff7f0e")
            a = s["attributes"]
            tip = "; ".join(f"{k}={v}" for k, v in a.items() if k.startswith(("gen_ai", "tokenscope")))
            rows.append(
                f"<tr><td style='padding-left:{12 * depth + 4}px'>{html.escape(s['name'])}"
                f" <span class=k>{kind} · {html.escape(s['resource'].get('service.name', ''))}"
                f"</span></td><td class=ms>{(s['end'] - s['start']) / 1e6:.2f} ms</td>"
                f"<td><svg width='{width}' height='14'><rect x='{x:.1f}' width='{w:.1f}' "
                f"height='14' fill='{colour}'><title>{html.escape(tip)}</title></rect></svg>"
                f"</td></tr>")
            walk(s["span_id"], depth + 1)

    walk("", 0)
    page = f"""<!doctype html><meta charset=utf-8><title>trace {tid}</title>
<style>body{{font:13px sans-serif;margin:16px}} td{{padding:3px 6px;white-space:nowrap}}
.k{{color:#777;font-size:11px}} .ms{{text-align:right;color:#333}}
table{{border-collapse:collapse}} tr:nth-child(even){{background:#f4f4f4}}</style>
<h3>trace {tid}: {len(trace)} spans, {(t1 - t0) / 1e6:.2f} ms, as an OTLP receiver got them
from tokenscope --otlp</h3><table>{''.join(rows)}</table>"""
    open(sys.argv[2], "w").write(page)


if __name__ == "__main__":
    main()
