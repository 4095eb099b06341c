#!/usr/bin/env python3
"""The layer order of user/, checked: a file includes only its own layer and those below it.

    tests/check_layers.py [ROOT]     check ROOT/user (default: the checkout); exit 1 on a breach
    tests/check_layers.py --self-test
                                     show that the check fails on an upward include

Each folder under user/ is a layer (docs/architecture.md says what each holds). A user header
is included by its layer path ("base/buf.h"), so the line itself says which layer it reaches
into. bpf/tokenscope.h (the record layout both sides share) and bpf/http_methods.h (the
request methods both sides recognise) may be included anywhere; the
generated BPF skeletons (NAME.skel.h) only by capture/, which loads the probes. And no file
in user/ or bpf/ is over LINES_MAX lines: a file is one room.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Lowest first. Each layer may include the layers listed for it, and itself.
LAYERS = {
    "base": [],                                             # buffers, sets, percentiles, files
    "proto": ["base"],                                      # wire protocols
    "llm": ["base", "proto"],                               # what LLM APIs mean
    "engine": ["base", "proto", "llm"],                     # steps and attribution
    "stream": ["base", "proto", "llm", "engine"],           # records -> streams -> connections
    "sinks": ["base", "proto", "llm", "engine", "stream"],  # what the user reads
    "capture": ["base", "proto", "llm", "engine", "stream"],  # probes, live processes
    "cli": ["base", "proto", "llm", "engine", "stream", "sinks", "capture"],
}
LINES_MAX = 800
SHARED = {"tokenscope.h", "http_methods.h"}  # bpf/: the records' layout, the HTTP methods
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def breaches(root):
    """(file, line number, what is wrong) for each include that breaks the order."""
    user = os.path.join(root, "user")
    found = []
    for entry in sorted(os.listdir(user)):
        path = os.path.join(user, entry)
        if not os.path.isdir(path):
            found.append((f"user/{entry}", 0, "a source outside the layers: put it in one"))
        elif entry not in LAYERS:
            found.append((f"user/{entry}", 0,
                          f"'{entry}' is not a layer: add it to tests/check_layers.py and "
                          "docs/architecture.md"))
    for layer in LAYERS:
        folder = os.path.join(user, layer)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"user/{layer}/{name}"
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        why = judge(layer, m.group(1))
                        if why:
                            found.append((rel, n, why))
            found += too_long(os.path.join(folder, name), rel)
    bpf = os.path.join(root, "bpf")
    for name in sorted(os.listdir(bpf)) if os.path.isdir(bpf) else []:
        if name.endswith((".c", ".h")):
            found += too_long(os.path.join(bpf, name), f"bpf/{name}")
    return found


def too_long(path, rel):
    with open(path, encoding="utf-8") as f:
        n = sum(1 for _ in f)
    return [(rel, n, f"{n} lines, over {LINES_MAX}: split it into rooms of their own")] \
        if n > LINES_MAX else []


def judge(layer, target):
    """Why `#include "target"` may not be in layer, or None."""
    if target in SHARED:
        return None
    if target.endswith(".skel.h") and "/" not in target:
        return None if layer == "capture" else \
            f'"{target}" is a BPF skeleton: only capture/ loads probes'
    if "/" not in target:
        return f'"{target}": include user headers by their layer path ("base/buf.h")'
    to = target.split("/", 1)[0]
    if to not in LAYERS:
        return f'"{target}": "{to}" is not a layer'
    if to != layer and to not in LAYERS[layer]:
        return f'"{target}": {layer}/ may not include {to}/ (an upward or sideways include)'
    return None


def self_test(root):
    """The check passes on the tree, and fails, naming the file and line, on an include from a
    lower layer into a higher one."""
    if breaches(root):
        print("self-test: the tree itself does not pass")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(root, "user"), os.path.join(tmp, "user"))
        victim = os.path.join(tmp, "user", "base", "buf.c")
        with open(victim, encoding="utf-8") as f:
            lines = f.readlines()
        lines.append('#include "sinks/jsonl.h"\n')
        with open(victim, "w", encoding="utf-8") as f:
            f.writelines(lines)
        run = subprocess.run([sys.executable, os.path.abspath(__file__), tmp],
                             capture_output=True, text=True)
        want = f"user/base/buf.c:{len(lines)}:"
        if run.returncode != 1 or want not in run.stdout:
            print(f"self-test: an upward include was not caught (exit {run.returncode}):")
            print(run.stdout + run.stderr)
            return 1
        # and a file past LINES_MAX
        with open(victim, "w", encoding="utf-8") as f:
            f.writelines(lines[:-1] + ["\n"] * (LINES_MAX + 1 - len(lines) + 1))
        run = subprocess.run([sys.executable, os.path.abspath(__file__), tmp],
                             capture_output=True, text=True)
        if run.returncode != 1 or "user/base/buf.c:" not in run.stdout or \
                f"over {LINES_MAX}" not in run.stdout:
            print(f"self-test: a file over {LINES_MAX} lines was not caught (exit "
                  f"{run.returncode}):")
            print(run.stdout + run.stderr)
            return 1
    print("layers: self-test: an upward include (base/ -> sinks/) fails the check, at its line; "
          f"so does a file over {LINES_MAX} lines")
    return 0


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test(here)
    root = sys.argv[1] if len(sys.argv) > 1 else here
    found = breaches(root)
    for rel, n, why in found:
        print(f"{rel}:{n}: {why}")
    if found:
        print(f"layers: {len(found)} include(s) or file(s) break the layer order or the "
              f"{LINES_MAX}-line room (docs/architecture.md)")
        return 1
    print(f"layers: every include in user/ stays in its layer or goes below ({', '.join(LAYERS)}); "
          f"no file in user/ or bpf/ is over {LINES_MAX} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
