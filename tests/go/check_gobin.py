#!/usr/bin/env python3
"""Go executables as user/capture/gobin.c reads them, against Go's own tools.

    tests/go/check_gobin.py GOBIN_DUMP GEN_DIR WORK_DIR

The Go TLS client (tests/fixtures/go/sseclient.go) built three ways: normally (static, with
symbols), PIE, and PIE stripped of symbols and DWARF (-s -w). For each, crypto/tls's
(*Conn).Read and (*Conn).Write must be where `go tool nm -size` puts them in the unstripped
build (the stripped PIE is the same code as the PIE: its bytes at the offsets found must be
the PIE's), with exactly the RET instructions `go tool objdump` lists, as file offsets.
Then what must be refused, each with its reason: a file that is not Go, a Go program without
crypto/tls, a Go older than 1.17 (its build info's version rewritten), a function table whose
magic is broken.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", flush=True)
    return cond


def dump(tool, *paths):
    out = subprocess.run([tool, *paths], capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines()]


def load_segments(path):
    """(vaddr, offset, filesz) of each PT_LOAD, from readelf."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        t = line.split()
        if t and t[0] == "LOAD":
            segs.append((int(t[2], 16), int(t[1], 16), int(t[4], 16)))
    return segs


def section_offset(path, names):
    """The file offset of the first of these sections the file has."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                         check=True).stdout
    for name in names:
        m = re.search(r"\]\s+" + re.escape(name) + r"\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)", out)
        if m:
            return int(m.group(1), 16)
    return None


def to_offset(segs, vaddr):
    for va, off, size in segs:
        if va <= vaddr < va + size:
            return vaddr - va + off
    return None


def go_truth(path, name):
    """(vaddr, size, [ret vaddrs]) from go tool nm and go tool objdump."""
    nm = subprocess.run(["go", "tool", "nm", "-size", path], capture_output=True, text=True,
                        check=True).stdout
    addr = size = None
    for line in nm.splitlines():
        t = line.split()
        if len(t) >= 4 and t[-1] == name and t[2] in ("T", "t"):
            addr, size = int(t[0], 16), int(t[1])
    dis = subprocess.run(["go", "tool", "objdump", "-s", "^" + re.escape(name) + "$", path],
                         capture_output=True, text=True, check=True).stdout
    rets, insns = [], []
    for line in dis.splitlines():
        m = re.match(r"\s*\S*:\d+\s+0x([0-9a-f]+)\s+([0-9a-f]+)\s+(.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(3).split()[0]))
            if insns[-1][1] == "RET":
                rets.append(insns[-1][0])
    # the body: the instruction after the stack check's JBE (among the first three)
    body = next((insns[i + 1][0] for i in range(min(3, len(insns) - 1))
                 if insns[i][1] == "JBE"), None)
    return addr, size, rets, body


def main():
    tool, gen, work = (os.path.abspath(a) for a in sys.argv[1:4])
    os.makedirs(work, exist_ok=True)
    normal, pie, stripped = (os.path.join(gen, "go", n) for n in
                             ("sseclient", "sseclient-pie", "sseclient-stripped"))
    got = {g["path"]: g for g in dump(tool, normal, pie, stripped)}
    names = {"read": "crypto/tls.(*Conn).Read", "write": "crypto/tls.(*Conn).Write"}
    version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True,
                             check=True).stdout.strip()
    for path, truth_of, pie_flag, symtab in ((normal, normal, False, True),
                                             (pie, pie, True, True),
                                             (stripped, pie, True, False)):
        g, label = got[path], os.path.basename(path)
        check(g["err"] == 0, f"{label}: read ({g['why']})")
        check(g["version"] == version, f"{label}: Go version {g['version']} ({version})")
        check(g["pie"] is pie_flag and g["symtab"] is symtab,
              f"{label}: PIE {g['pie']}, found through {'.symtab' if g['symtab'] else '.gopclntab'}")
        segs = load_segments(truth_of)
        for key, name in names.items():
            addr, size, rets, body = go_truth(truth_of, name)
            f = g[key]
            check(addr is not None and f["vaddr"] == addr,
                  f"{label}: {name} at {f['vaddr']:#x} (go tool nm: {addr and hex(addr)})")
            # nm's size ends at the function's last instruction; the table's, at the next
            # function (padding included)
            check(size is not None and f["size"] >= size and f["size"] - size < 64,
                  f"{label}: {name} size {f['size']} (go tool nm: {size})")
            check(body is not None and f["body"] == to_offset(segs, body),
                  f"{label}: {name} body (past the stack check) at {f['body']} (go tool "
                  f"objdump: {body and to_offset(segs, body)})")
            want = [to_offset(segs, r) for r in rets]
            check(rets and f["rets"] == want,
                  f"{label}: {name} returns at {f['rets']} (go tool objdump: {want})")
    # the stripped PIE is the PIE's code: the same bytes where each function was found
    with open(pie, "rb") as a, open(stripped, "rb") as b:
        for key in names:
            fp, fs = got[pie][key], got[stripped][key]
            n = min(fp["size"], fs["size"])  # .symtab's size, the table's (padding too)
            a.seek(fp["offset"])
            b.seek(fs["offset"])
            check(n > 0 and a.read(n) == b.read(n),
                  f"stripped PIE: {key}'s bytes are the PIE's")

    # refused, with the reason
    hello = os.path.join(work, "hello")
    src = os.path.join(work, "hello.go")
    with open(src, "w") as f:
        f.write('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n')
    # the fixtures' cache (tests/fixtures/Makefile): Go's own, else .gen's
    cache = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, GO111MODULE="off", CGO_ENABLED="0",
               GOCACHE=cache if cache and cache != "off" else os.path.join(gen, "go", "cache"),
               GOPATH=os.path.join(gen, "go", "path"))
    subprocess.run(["go", "build", "-o", hello, src], env=env, check=True)
    # Go 1.16: the build info's version rewritten in place (the same length)
    old = os.path.join(work, "old-go")
    data = bytearray(open(normal, "rb").read())
    info = section_offset(normal, [".go.buildinfo"])
    at = data.find(version.encode(), info)
    data[at:at + 6] = b"go1.16"
    open(old, "wb").write(bytes(data))
    # a function table whose magic is not Go's
    broken = os.path.join(work, "broken-pclntab")
    data = bytearray(open(stripped, "rb").read())
    at = section_offset(stripped, [".gopclntab", ".data.rel.ro.gopclntab"])
    data[at:at + 4] = b"\x12\x34\x56\x78"
    open(broken, "wb").write(bytes(data))
    bad = {g["path"]: g for g in dump(tool, "/bin/true", hello, old, broken)}
    info_s = section_offset(stripped, [".go.buildinfo"])
    check(bad["/bin/true"]["err"] == -8 and "not a Go executable" in bad["/bin/true"]["why"],
          f"a C program: not Go ({bad['/bin/true']})")
    check(bad[hello]["err"] == -2 and "does not link crypto/tls" in bad[hello]["why"],
          f"a Go program without TLS: said ({bad[hello]['why']})")
    check(bad[old]["err"] == -95 and "before 1.17" in bad[old]["why"] and
          "go1.16" in bad[old]["why"], f"Go 1.16: refused in one line ({bad[old]['why']})")
    check(bad[broken]["err"] == -74 and "magic" in bad[broken]["why"],
          f"a broken function table: said ({bad[broken]['why']})")
    # mutated copies of the stripped PIE (its build info and function table): never a crash,
    # and either the very functions and returns of the original, or a refusal
    want = {k: got[stripped][k] for k in names}
    rng, src, outcomes = random.Random(25), open(stripped, "rb").read(), {}
    table = section_offset(stripped, [".gopclntab", ".data.rel.ro.gopclntab"])
    mutants = []
    for i in range(100):
        data = bytearray(src)
        for _ in range(rng.randint(1, 8)):
            at = (table + rng.randrange(4096)) if rng.random() < 0.7 else info_s + rng.randrange(64)
            data[at] = rng.randrange(256)
        path = os.path.join(work, f"mutant{i}")
        open(path, "wb").write(bytes(data))
        mutants.append(path)
    r = subprocess.run([tool, *mutants], capture_output=True)
    lines = [json.loads(l.decode(errors="replace")) for l in r.stdout.splitlines()]
    wrong = [g["path"] for g in lines if g["err"] == 0 and {k: g[k] for k in names} != want]
    for g in lines:
        outcomes[g["err"]] = outcomes.get(g["err"], 0) + 1
    check(r.returncode == 0 and len(lines) == 100 and not wrong,
          f"100 mutated copies: no crash, the original's functions or a refusal "
          f"({outcomes}; wrong: {wrong[:3]})")
    print(f"go binaries: {passed} passed, {failed} failed")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
