#!/usr/bin/env python3
"""README's option table lists exactly the options the binary accepts.

    tests/check_options.py TOKENSCOPE README.md
    tests/check_options.py TOKENSCOPE README.md --self-test

The binary's usage is built from the same table as getopt_long's array (user/cli/options.c),
so `TOKENSCOPE --help` is what it accepts: each option line there ("-p, --pid PID") must be a
row of README's table ("| `-p, --pid PID` | ... |"), and each row an option line. The
self-test shows that a row missing from README, or one the binary does not have, fails.
"""
import re
import subprocess
import sys

HELP_LINE = re.compile(r"^  (?:    )?((?:-\w, )?--[\w-]+(?: \S+)?)")
README_ROW = re.compile(r"^\| `((?:-\w, )?--[\w-]+(?: [^`]+)?)` \|")


def from_help(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for line in out.splitlines() for m in [HELP_LINE.match(line)] if m]


def from_readme(text):
    return [m.group(1) for line in text.splitlines() for m in [README_ROW.match(line)] if m]


def compare(accepted, documented):
    """The differences, in words; empty when the two agree."""
    said = []
    for o in accepted:
        if o not in documented:
            said.append(f"README.md: no row for `{o}`, which tokenscope accepts")
    for o in documented:
        if o not in accepted:
            said.append(f"README.md: a row for `{o}`, which tokenscope does not accept")
    for o in set(documented):
        if documented.count(o) > 1:
            said.append(f"README.md: `{o}` has {documented.count(o)} rows")
    return said


def self_test(accepted, readme):
    rows = readme.splitlines()
    first = next(i for i, line in enumerate(rows) if README_ROW.match(line))
    missing = "\n".join(rows[:first] + rows[first + 1:])
    extra = "\n".join(rows[:first] + ["| `--no-such-option` | |"] + rows[first:])
    if not compare(accepted, from_readme(missing)) or not compare(accepted, from_readme(extra)):
        print("options: self-test: a README table that differs from the binary passed")
        return 1
    print("options: self-test: a missing row and an unknown one each fail the check")
    return 0


def main():
    binary, readme_path = sys.argv[1], sys.argv[2]
    accepted = from_help(binary)
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    if not accepted:
        print(f"options: {binary} --help lists no options")
        return 1
    if sys.argv[3:] == ["--self-test"]:
        return self_test(accepted, readme)
    said = compare(accepted, from_readme(readme))
    for line in said:
        print(line)
    if said:
        return 1
    print(f"options: README.md's table lists the {len(accepted)} options tokenscope accepts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
