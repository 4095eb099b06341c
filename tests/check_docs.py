#!/usr/bin/env python3
"""docs/architecture.md against the tree: every source file under user/ and bpf/ is named in
it (a .c file, and a header with no .c of its name: a module's header goes with its .c), and
every .c or .h file it names exists in the repository (a name in capitals, FAMILY.bpf.c, is a
placeholder), so that the rooms the doc walks are the ones there are.

README.md's Layout, the short form, is checked the same way for what it holds: every file
under bpf/ and every layer folder under user/ is named there, and every .c or .h file it names
exists.

    check_docs.py [--self-test]

--self-test: each check must fail on its doc with a file's name (a folder's, for README.md)
taken out, and with a name added that no file has.
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


README = os.path.join(ROOT, "README.md")


def layout_of(readme):
    """README.md's Layout section: its first code block."""
    m = re.search(r"^## Layout\n+```\n(.*?)```", readme, re.S | re.M)
    return m.group(1) if m else ""


def check_readme(layout, files):
    problems = []
    if not layout:
        return ["README.md has no Layout section with a code block"]
    bases = {os.path.basename(p) for p in files}
    for p in files:
        if p.startswith("bpf/") and not named(layout, p):
            problems.append(f"{p} is not named in README.md's Layout")
    folders = sorted({p.split("/")[1] for p in files
                      if p.startswith("user/") and p.count("/") >= 2})
    for folder in folders:
        if not re.search(r"^\s+" + re.escape(folder) + r"/", layout, re.M):
            problems.append(f"user/{folder}/ is not named in README.md's Layout")
    for name in sorted(set(re.findall(r"(?<![\w.-])([A-Za-z_][\w]*(?:\.bpf)?\.[ch])(?![\w-])",
                                      layout))):
        if name not in bases:
            problems.append(f"README.md's Layout names {name}, which no file in the "
                            f"repository is")
    return problems


def main():
    files = sources()
    text = open(DOC).read()
    layout = layout_of(open(README).read())
    if "--self-test" in sys.argv[1:]:
        victim = "attrib_seqs.c"
        cut = check(re.sub(r"(?<![\w.-])" + re.escape(victim) + r"(?![\w-])", "", text), files)
        added = check(text + "\n  nosuchfile.c   a room that is not there\n", files)
        if not any(victim in p for p in cut) or not any("nosuchfile.c" in p for p in added):
            print("docs: self-test FAILED: the check let a missing or an unknown file pass")
            return 1
        cut = check_readme(re.sub(r"(?m)^  engine/", "  ", layout), files)
        added = check_readme(layout + "  nosuchfile.c   a room that is not there\n", files)
        if not any("user/engine/" in p for p in cut) or \
                not any("nosuchfile.c" in p for p in added):
            print("docs: self-test FAILED: README.md's Layout check let a missing folder or "
                  "an unknown file pass")
            return 1
        print("docs: self-test: a file left out and a file that is not there each fail the "
              "check, and in README.md's Layout a folder left out and a file that is not there")
        return 0
    problems = check(text, files) + check_readme(layout, files)
    for p in problems:
        print(f"docs: {p}")
    if problems:
        return 1
    mine = [p for p in files if p.startswith(("user/", "bpf/"))]
    print(f"docs: docs/architecture.md names the rooms of all {len(mine)} files under user/ "
          f"and bpf/, and only files that exist; README.md's Layout every bpf/ file and "
          f"user/ folder, and only files that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
