#!/usr/bin/env python3
"""docs/architecture.md against the tree: every source file under user/ and bpf/ is named in
it (a .c file, and a header with no .c of its name: a module's header goes with its .c), and
every .c or .h file it names exists in the repository (a name in capitals, FAMILY.bpf.c, is a
placeholder), so that the rooms the doc walks are the ones there are.

    check_docs.py [--self-test]

--self-test: the check must fail on the doc with a file's name taken out, and with a name
added that no file has.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOC = os.path.join(ROOT, "docs", "architecture.md")


def sources():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [p for p in out if p.endswith((".c", ".h"))]


def named(text, name):
    """name as a word of its own (after a space, a quote, a slash: not inside another name)."""
    return re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", text) is not None


def check(text, files):
    problems = []
    bases = {os.path.basename(p) for p in files}
    for p in files:
        if not p.startswith(("user/", "bpf/")):
            continue
        base = os.path.basename(p)
        if base.endswith(".h") and base[:-2] + ".c" in bases and not base.endswith(".bpf.h"):
            continue  # a module's header: with its .c
        if not named(text, base):
            problems.append(f"{p} is not named in docs/architecture.md")
    for name in sorted(set(re.findall(r"(?<![\w.-])([A-Za-z_][\w]*(?:\.bpf)?\.[ch])(?![\w-])",
                                      text))):
        if name not in bases and not name.split(".")[0].isupper():
            problems.append(f"docs/architecture.md names {name}, which no file in the "
                            f"repository is")
    return problems


def main():
    files = sources()
    text = open(DOC).read()
    if "--self-test" in sys.argv[1:]:
        victim = "attrib_seqs.c"
        cut = check(re.sub(r"(?<![\w.-])" + re.escape(victim) + r"(?![\w-])", "", text), files)
        added = check(text + "\n  nosuchfile.c   a room that is not there\n", files)
        if not any(victim in p for p in cut) or not any("nosuchfile.c" in p for p in added):
            print("docs: self-test FAILED: the check let a missing or an unknown file pass")
            return 1
        print("docs: self-test: a file left out and a file that is not there each fail the "
              "check")
        return 0
    problems = check(text, files)
    for p in problems:
        print(f"docs: {p}")
    if problems:
        return 1
    mine = [p for p in files if p.startswith(("user/", "bpf/"))]
    print(f"docs: docs/architecture.md names the rooms of all {len(mine)} files under user/ "
          f"and bpf/, and only files that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
