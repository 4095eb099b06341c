#!/usr/bin/env python3
"""The call structure of user/, drawn from the built objects and checked: no file calls a
function of a layer above its own, and no files call each other round in a cycle.

    tests/check_calls.py [OBJDIR]    check OBJDIR/user/*/*.o (default: .output); exit 1 on a
                                     breach, naming the calls that make it
    tests/check_calls.py --self-test show that the check fails on a call up and on a cycle

tests/check_layers.py checks what a file includes; this checks what it calls, which an
include does not show: a function declared in a lower layer's header and defined above it
(a "back door"), or two rooms of one layer that call each other (conn.c and h2conn.c did,
through h2conn.h, until the wire protocols got their interface, stream/wire.h). A call through
a function pointer that a lower room was handed (a callback) is no call here, which is the
point of handing it: the lower room names no one above it.

The drawing is nm's: each object's defined functions and data (T, D, B, R) and its undefined
symbols (U); an undefined symbol that another object of user/ defines is a call to that file.
"""
import collections
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import LAYERS  # noqa: E402  (one order of the layers, not two)

ORDER = {layer: len(below) for layer, below in LAYERS.items()}


def draw(objdir):
    """{file: {file it calls: [symbols]}} for user/'s objects under objdir."""
    objs = sorted(glob.glob(os.path.join(objdir, "user", "*", "*.o")))
    defined = {os.path.relpath(o, objdir)[:-2] + ".c": set() for o in objs}
    wanted = {name: set() for name in defined}
    # one nm for all (-A: each line begins "OBJECT.o:"): a process per object took 10 s here
    out = subprocess.run(["nm", "-A", *objs], capture_output=True, text=True,
                         check=True).stdout if objs else ""
    for line in out.splitlines():
        obj, _, symbol = line.partition(".o:")
        name = os.path.relpath(obj, objdir) + ".c"
        parts = symbol.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined[name].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            wanted[name].add(parts[1])
    owner = {sym: f for f, syms in defined.items() for sym in syms}
    calls = collections.defaultdict(lambda: collections.defaultdict(list))
    for f, syms in wanted.items():
        for sym in sorted(syms):
            if sym in owner and owner[sym] != f:
                calls[f][owner[sym]].append(sym)
    return {f: dict(calls[f]) for f in defined}


def layer_of(f):
    return f.split("/")[1]


def ups(calls):
    return [f"{f} calls up into {g} ({layer_of(g)} is above {layer_of(f)}): "
            f"{', '.join(syms[:3])}"
            for f, callees in sorted(calls.items()) for g, syms in sorted(callees.items())
            if ORDER[layer_of(g)] > ORDER[layer_of(f)]]


def cycles(calls):
    """The strongly connected groups of more than one file (Tarjan)."""
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in calls.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(calls):
        if v not in index:
            visit(v)
    return [f"files that call each other round: {' -> '.join(g)}" for g in found]


def check(calls):
    return ups(calls) + cycles(calls)


def main():
    args = [a for a in sys.argv[1:] if a != "--self-test"]
    objdir = args[0] if args else ".output"
    calls = draw(objdir)
    if not calls:
        print(f"calls: no objects under {objdir}/user: build first")
        return 1
    if "--self-test" in sys.argv[1:]:
        up = {f: dict(c) for f, c in calls.items()}
        up.setdefault("user/base/buf.c", {})["user/sinks/line.c"] = ["a_call_up"]
        cyc = {f: dict(c) for f, c in calls.items()}
        cyc.setdefault("user/stream/conn.c", {})["user/stream/h2conn.c"] = ["h2_data"]
        cyc.setdefault("user/stream/h2conn.c", {})["user/stream/conn.c"] = ["conn_back_door"]
        if not ups(up) or not cycles(cyc):
            print("calls: self-test FAILED: a call up or a cycle passed the check")
            return 1
        print("calls: self-test: a call up (base/ -> sinks/) and a cycle (conn.c <-> h2conn.c) "
              "each fail the check")
        return 0
    problems = check(calls)
    for p in problems:
        print(f"calls: {p}")
    if problems:
        return 1
    edges = sum(len(c) for c in calls.values())
    print(f"calls: {len(calls)} files of user/, {edges} file-to-file calls: none up a layer, "
          f"no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
