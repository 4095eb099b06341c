#!/usr/bin/env python3
"""The kernel matrix: tokenscope on Debian's own kernels, each booted under QEMU (TCG) with a
busybox initramfs that holds tokenscope and a workload for every probe family
(tests/kernels/workload.sh), against the same workload traced on this host.

    matrix.py [--only SERIES ...]

Kernels: the newest cloud image of each series in Debian's archive, the one this machine's
apt sources name: 5.10 (Debian 11, the bullseye suite, through a sources list of its own; the
system's are left alone), 6.1 and 6.12 (Debian 12). Packages are kept in
/var/cache/tokenscope/kernels (TS_KERNEL_CACHE) between runs; without the archive, the newest
kept package of a series is used.

In every guest each family must have traced its workload with the build of its programs that
kernel takes (5.10: the legacy build, for kernels without bpf_loop; 6.1: plaintext TCP through
CO-RE reads; 6.12: the default build), and every record must be the host's for the same
traffic: the same requests from both ends (dialect, transport, completeness, token events,
usage), the same engine steps (kind, tokens, launches); the Go server's and the engine's own
truth is checked in the guest itself.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, ".output", "kernels")
CACHE = os.environ.get("TS_KERNEL_CACHE", "/var/cache/tokenscope/kernels")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
NODE_BINS = os.path.join(ROOT, "tests", "node", "node_modules", "@node-llama-cpp", "linux-x64",
                         "bins", "linux-x64")
GEN = os.path.join(ROOT, "tests", "fixtures", ".gen")

# series, suite, package name, the plaintext family's build as the start line names it
KERNELS = [
    ("5.10", "bullseye", r"linux-image-5\.10\.0-[0-9]+-cloud-amd64-unsigned",
     "plaintext TCP (5.10 programs)"),
    ("6.1", "bookworm", r"linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned",
     "plaintext TCP (CO-RE reads)"),
    ("6.12", "bookworm", r"linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64-unsigned",
     "plaintext TCP."),
]
BOOT_TIMEOUT = 240  # seconds a guest may take, boot to power-off
# guests booted at once: each is one host thread (thread=single, below), this machine has two
# CPUs, and the host's own run is over before the first boots
GUESTS_AT_ONCE = 2
# loglevel=5: a lockup's or stall's register dump and stack (KERN_DEFAULT, level 4) reach
# the console, not only its first line; every CPU's backtrace on a soft lockup, and the
# hung-task report, so a stuck kernel says where each CPU was
KERNEL_CMDLINE = ("console=ttyS0 quiet loglevel=5 panic=-1 softlockup_all_cpu_backtrace=1 "
                  "hung_task_timeout_secs=30")
KERNEL_TROUBLE = re.compile(r"soft lockup|rcu.*stall|blocked for more than|BUG:|Oops|WARNING:")
FIRST_TRAP_MS = 10  # a process's first probed call, under emulation (check_llama_split)

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", flush=True)
    return cond


# ---- kernel packages ----

def archive_uri():
    """The Debian archive this machine's apt sources name (deb822 or one-line)."""
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for entry in open(path).read().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", entry, re.M))
            if "bookworm" in fields.get("Suites", "").split() and "URIs" in fields:
                return fields["URIs"].split()[0]
    for path in ["/etc/apt/sources.list"] + glob.glob("/etc/apt/sources.list.d/*.list"):
        if os.path.exists(path):
            m = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s", open(path).read(), re.M)
            if m:
                return m.group(1)
    return None


def apt_options(suite):
    """apt's options for suite: the system's for bookworm; for bullseye a sources list and
    lists folder of our own (kept in the cache), updated once a run."""
    if suite == "bookworm":
        return []
    lists = os.path.join(CACHE, f"{suite}-lists")
    os.makedirs(os.path.join(lists, "partial"), exist_ok=True)
    sources = os.path.join(CACHE, f"{suite}.list")
    uri = archive_uri()
    if uri:
        with open(sources, "w") as f:
            f.write(f"deb [signed-by={KEYRING}] {uri} {suite} main\n")
    opts = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={lists}", "-o", "APT::Get::List-Cleanup=0"]
    if uri:
        subprocess.run(["apt-get", *opts, "-qq", "update"], capture_output=True, timeout=300)
    return opts


def version_key(name):
    return [int(x) for x in re.findall(r"\d+", name)]


def kernel_package(series, suite, pattern):
    """The .deb of the newest kernel of the series: from the archive, else the cache."""
    os.makedirs(CACHE, exist_ok=True)
    opts = apt_options(suite)
    r = subprocess.run(["apt-cache", *opts, "search", "--names-only", f"^{pattern}$"],
                       capture_output=True, text=True, timeout=120)
    names = sorted({line.split()[0] for line in r.stdout.splitlines() if line.strip()},
                   key=version_key)
    if names:
        newest = names[-1]
        have = glob.glob(os.path.join(CACHE, f"{newest}_*.deb"))
        if have:
            return have[0]
        r = subprocess.run(["apt-get", *opts, "-qq", "download", newest], cwd=CACHE,
                           capture_output=True, text=True, timeout=600)
        have = glob.glob(os.path.join(CACHE, f"{newest}_*.deb"))
        if have:
            return have[0]
        print(f"kernels: {series}: cannot download {newest}: {r.stderr.strip()[-300:]}")
    kept = sorted((p for p in glob.glob(os.path.join(CACHE, "*.deb"))
                   if re.match(pattern + "_", os.path.basename(p))), key=version_key)
    return kept[-1] if kept else None


def vmlinuz_of(deb):
    """The kernel image inside the package (extracted once, beside it), and its version."""
    version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    image = deb[:-4] + ".vmlinuz"
    if not os.path.exists(image):
        tmp = tempfile.mkdtemp(dir=CACHE)
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        found = glob.glob(os.path.join(tmp, "boot", "vmlinuz-*"))
        shutil.move(found[0], image)
        shutil.rmtree(tmp)
    return image, version


# ---- the initramfs ----

def copy_with_libraries(root, binary, dest):
    """binary to root/dest, and every library ldd names to its own path under root."""
    os.makedirs(os.path.dirname(root + dest), exist_ok=True)
    shutil.copy2(binary, root + dest)
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    for lib in re.findall(r"(/\S+) \(0x", r.stdout):
        target = root + lib
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), target)


# /init: the workload, and a watchdog on it: a guest still in its workload at WATCHDOG_S
# (seconds since boot) writes where every process stands, user threads' kernel stacks and
# the kernel's own dumps of blocked tasks and CPUs (sysrq w, l) to hang.txt, kills the
# workload and sends what it has, so a hang in CI says where it was
WATCHDOG_S = 180
INIT = """#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t debugfs none /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ip link set lo up
ulimit -l unlimited
echo "@@KERNEL $(uname -r)" >/dev/ttyS1
sh /w/workload.sh /w /tmp/out &
wl=$!
while kill -0 $wl 2>/dev/null; do
	up=$(cut -d. -f1 /proc/uptime)
	if [ "$up" -ge %d ]; then
		{
			echo "the workload still running at $up s; its phases:"
			cat /tmp/out/phases
			for p in /proc/[0-9]*; do
				grep -qs '^VmSize' $p/status || continue
				for t in $p/task/*; do
					echo "pid ${p##*/} tid ${t##*/} $(cat $t/comm) $(sed -n 's/^State:.//p' $t/status) wchan $(cat $t/wchan)"
					sed 's/^/    /' $t/stack
				done
			done
			echo w >/proc/sysrq-trigger
			echo l >/proc/sysrq-trigger
			sleep 1
			echo "the kernel's log, from the sysrq dumps:"
			dmesg | sed -n '/sysrq: Show Blocked State/,$p'
		} >/tmp/out/hang.txt 2>&1
		kill -9 -1
		break
	fi
	sleep 0.2
done
wait $wl
for f in /tmp/out/*; do
	echo "@@BEGIN ${f##*/}" >/dev/ttyS1
	cat "$f" >/dev/ttyS1
	echo "@@END" >/dev/ttyS1
done
poweroff -f
""" % WATCHDOG_S


def build_initramfs(llama_step):
    """One initramfs for every guest: busybox, tokenscope and the workloads under /w."""
    root = os.path.join(OUT, "root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "proc", "sys", "dev", "tmp", "sys/fs/bpf", "w/gpu", "w/llama"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy2(shutil.which("busybox") or "/bin/busybox", os.path.join(root, "bin", "busybox"))
    applets = subprocess.run([os.path.join(root, "bin", "busybox"), "--list"],
                             capture_output=True, text=True, check=True).stdout.split()
    for a in applets:
        if a != "busybox":
            os.symlink("busybox", os.path.join(root, "bin", a))
    gpu = os.path.join(ROOT, ".output", "gpu")
    for src, dest in ((os.path.join(ROOT, "tokenscope"), "/w/tokenscope"),
                      (os.path.join(GEN, "seq_race"), "/w/seq_race"),
                      (os.path.join(GEN, "go", "sseserver-stripped"), "/w/sseserver-stripped"),
                      (os.path.join(GEN, "go", "sseclient-stripped"), "/w/sseclient-stripped"),
                      (shutil.which("curl"), "/w/curl"),
                      (os.path.join(gpu, "cudaprog"), "/w/gpu/cudaprog"),
                      (os.path.join(gpu, "engine"), "/w/gpu/engine"),
                      (os.path.join(gpu, "libcuda.so.1"), "/w/gpu/libcuda.so.1"),
                      (llama_step, "/w/llama/llama_step")):
        copy_with_libraries(root, src, dest)
    for lib in glob.glob(os.path.join(NODE_BINS, "*.so")):
        copy_with_libraries(root, lib, "/w/llama/" + os.path.basename(lib))
    # the toolkit's own layout, links and all (tokenscope finds libcudart where installers
    # put it, /usr/local/cuda*/lib64, at start: cudaprog is over before a rescan would come)
    for link in glob.glob("/usr/local/cuda*") + glob.glob("/usr/local/cuda*/lib64"):
        if os.path.islink(link) and not os.path.lexists(root + link):
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(os.readlink(link), root + link)
    # the loader's cache: the paths it names are the host's, as copied above (libcudart is
    # found through it, as on the host)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    shutil.copy2("/etc/ld.so.cache", os.path.join(root, "etc", "ld.so.cache"))
    for name in ("cert.pem", "key.pem", "tiny.gguf"):
        shutil.copy2(os.path.join(GEN, name), os.path.join(root, "w", name))
    shutil.copy2(os.path.join(ROOT, "tests", "kernels", "workload.sh"),
                 os.path.join(root, "w", "workload.sh"))
    with open(os.path.join(root, "init"), "w") as f:
        f.write(INIT)
    os.chmod(os.path.join(root, "init"), 0o755)
    image = os.path.join(OUT, "initramfs.cpio.gz")
    with open(image, "wb") as f:
        find = subprocess.Popen(["find", "."], cwd=root, stdout=subprocess.PIPE)
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root,
                                stdin=find.stdout, stdout=subprocess.PIPE)
        subprocess.run(["gzip", "-1"], stdin=cpio.stdout, stdout=f, check=True)
        cpio.wait()
        find.wait()
    return root, image


def build_llama_step():
    """tests/kernels/llama_step.c against node-llama-cpp's prebuilt llama.cpp, with llama.h
    from the llama.cpp source the package ships (its git bundle, cloned once)."""
    src = os.path.join(OUT, "llama.cpp")
    bundle = os.path.join(ROOT, "tests", "node", "node_modules", "node-llama-cpp", "llama",
                          "gitRelease.bundle")
    if not os.path.exists(os.path.join(src, "include", "llama.h")):
        shutil.rmtree(src, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", bundle, src], check=True, capture_output=True)
    out = os.path.join(OUT, "llama_step")
    lib = os.path.basename(glob.glob(os.path.join(NODE_BINS, "libllama.v*.so"))[0])
    ggml = os.path.basename(glob.glob(os.path.join(NODE_BINS, "libggml.v*.so"))[0])
    subprocess.run(["cc", "-O2", "-Wall", "-I", os.path.join(src, "include"), "-I",
                    os.path.join(src, "ggml", "include"),
                    os.path.join(ROOT, "tests", "kernels", "llama_step.c"), "-L", NODE_BINS,
                    f"-l:{lib}", f"-l:{ggml}", "-Wl,-rpath,$ORIGIN", "-o", out], check=True)
    return out


# ---- running the workload ----

def boot(vmlinuz, initramfs, series):
    """The guest's files, as its /init sent them on its second serial port; how long it ran;
    what went wrong past the guest's own watchdog (None). Runs beside another guest's boot:
    it checks nothing itself."""
    console = os.path.join(OUT, f"guest-{series}.console")
    files = os.path.join(OUT, f"guest-{series}.files")
    if os.path.exists(files):
        os.unlink(files)
    # thread=single: both vCPUs on one host thread. With a thread each (MTTCG, QEMU 7.2), 1
    # 5.10 boot in 30 left a vCPU spinning for good in syscall_exit_to_user_mode at a jump
    # label's NOP, just after the tracer detached its syscall tracepoints (soft lockups every
    # 22 s, an RCU stall): code patched by the other vCPU, run as it was before the patch,
    # which one host thread translating for both cannot race. 0 in 30 so; 30 boots cannot
    # prove a 1-in-30 cure (`matrix.py --only 5.10 --repeat 30` counts again)
    cmd = ["qemu-system-x86_64", "-accel", "tcg,thread=single", "-cpu", "max", "-m", "3072",
           "-smp", "2", "-kernel", vmlinuz, "-initrd", initramfs, "-append",
           KERNEL_CMDLINE, "-display", "none", "-no-reboot",
           "-net", "none", "-serial", f"file:{console}", "-serial", f"file:{files}"]
    t, trouble = time.monotonic(), None
    try:
        subprocess.run(cmd, timeout=BOOT_TIMEOUT, capture_output=True)
    except subprocess.TimeoutExpired:
        # past the guest's own watchdog: the kernel itself stuck, its console says how
        lines = open(console, errors="replace").read().splitlines() \
            if os.path.exists(console) else []
        first = next((i for i, line in enumerate(lines) if KERNEL_TROUBLE.search(line)), None)
        shown = lines[first:first + 200] if first is not None else lines[-40:]
        trouble = (f"kernel {series}: the guest powered off within {BOOT_TIMEOUT} s; its "
                   f"console" + (" from the first report of trouble" if first is not None
                                 else "'s end") + f" ({console}):\n" + "\n".join(shown))
    took = time.monotonic() - t
    out, name = {}, None
    text = open(files, errors="replace").read() if os.path.exists(files) else ""
    for line in text.splitlines():
        if line.startswith("@@KERNEL "):
            out["kernel"] = line[9:]
        elif line.startswith("@@BEGIN "):
            name, out[line[8:]] = line[8:], ""
        elif line == "@@END":
            name = None
        elif name:
            out[name] += line + "\n"
    return out, took, trouble


# The capabilities tokenscope documents (docs/security.md, deploy/tokenscope.service), less
# CAP_SYS_RESOURCE where the machine's bounding set lacks it (kernels from 5.11 charge the BPF
# maps to the memory cgroup, not RLIMIT_MEMLOCK: it is not needed there).
CAPABILITIES = ["bpf", "perfmon", "sys_ptrace", "dac_read_search", "sys_admin", "sys_resource"]
NOBODY = 65534


def capabilities_here():
    bounding = int(next(line.split()[1] for line in open("/proc/self/status")
                        if line.startswith("CapBnd:")), 16)
    bits = {"sys_resource": 24}
    return [c for c in CAPABILITIES if c not in bits or bounding >> bits[c] & 1]


def run_host(root, caps=None):
    """The same workload on this host, with the same binaries (from the initramfs' /w); with
    caps, tokenscope runs as nobody holding exactly those capabilities (setpriv)."""
    out = os.path.join(OUT, "host-caps" if caps else "host")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ)
    if caps:
        os.makedirs(out)
        os.chown(out, NOBODY, NOBODY)  # its outputs are its own
        want = "-all," + ",".join("+" + c for c in caps)
        env["TS_WRAP"] = (f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
                          f"--inh-caps={want} --ambient-caps={want} --bounding-set={want}")
    # its phase lines (stderr) are in out/phases
    subprocess.run(["sh", os.path.join(root, "w", "workload.sh"), os.path.join(root, "w"), out],
                   timeout=300, stderr=subprocess.DEVNULL, env=env)
    return {name: open(os.path.join(out, name), errors="replace").read()
            for name in os.listdir(out)}


def check_capabilities(root, host, host_recs):
    """The host's workload again with tokenscope as nobody and only its documented
    capabilities: the same start line (every family), no probe it could not attach, the same
    requests and steps as root's run, and the workloads' own truth."""
    caps = capabilities_here()
    run = run_host(root, caps)
    recs = records(run)
    label = f"host as nobody with {','.join(caps)}"
    start = re.search(r"tracing .*Hit Ctrl-C", run.get("stderr.txt", ""))
    root_start = re.search(r"tracing .*Hit Ctrl-C", host.get("stderr.txt", ""))
    check(run.get("rc", "").strip() == "0" and start and root_start and
          start.group(0) == root_start.group(0),
          f"{label}: tokenscope started as root's did and exited 0 "
          f"({start and start.group(0)}; {run.get('stderr.txt', '')[-300:]})")
    check("cannot attach" not in run.get("stderr.txt", "") and
          "could not be attached" not in run.get("stderr.txt", ""),
          f"{label}: every probe attached")
    check(requests_of(recs) == requests_of(host_recs),
          f"{label}: every request the root run's ({len(requests_of(recs))} vs "
          f"{len(requests_of(host_recs))})")
    check(steps_of(recs) == steps_of(host_recs),
          f"{label}: every step the root run's")
    check_truth(label, run, recs)


# ---- what the records say ----

WORKLOAD_MODELS = re.compile(r"^(kplain-\d+|kunix-\d+|kllama|fx-ttft\d+-itl\d+-n\d+-k(curl|go))$")
# the stand-in engine batches by when requests come, so its steps differ from machine to
# machine: they are checked against its own truth on each (check_truth), not across
STEP_COMMS = ("cudaprog", "llama_step")


def records(files):
    return [json.loads(line) for line in files.get("records.jsonl", "").splitlines()
            if line.strip()]


def requests_of(recs):
    """The workload's requests, as what must be the same on every kernel."""
    return sorted((r["role"], r["model"], r["api"], r["transport"], r["http_version"],
                   r["complete"], r["error"], r["token_events"], r["output_tokens"])
                  for r in recs if r.get("type") == "request" and r.get("model") and
                  WORKLOAD_MODELS.match(r["model"]))


def steps_of(recs):
    """The workload's steps (CUDA's gpu_step, llama.cpp's engine_step), as what must be the
    same on every kernel."""
    return sorted((s["comm"], s["type"], s.get("kind", ""), s.get("tokens", 0),
                   s.get("launches", 0), s.get("graph_launches", 0), s.get("copies", 0))
                  for s in recs if s.get("type") in ("gpu_step", "engine_step") and
                  s["comm"] in STEP_COMMS)


def check_truth(label, files, recs):
    """Within one machine: the Go server's and the engine's own truth, and each family seen."""
    truth = {}
    for line in files.get("go.truth", "").splitlines():
        if line.strip():
            t = json.loads(line)
            truth[t["model"]] = t
    for model in ("fx-ttft30-itl5-n5-kcurl", "fx-ttft20-itl5-n4-kgo"):
        t = truth.get(model)
        srv = [r for r in recs if r.get("type") == "request" and r["model"] == model and
               r["role"] == "server"]
        if not check(t and len(srv) == 1, f"{label}: the Go server served {model} and its "
                                          f"record is there ({len(srv)})"):
            continue
        s = srv[0]
        check(s["transport"] == "go_tls" and s["complete"] and s["token_events"] == t["events"],
              f"{label}: {model} [server]: go_tls, complete, {t['events']} token events "
              f"({s['transport']}, {s['complete']}, {s['token_events']})")
        check(t["token_ns"][0] <= s["first_token_ns"] <= t["token_after_ns"][0],
              f"{label}: {model} [server]: the first token written inside the handler's write "
              f"({t['token_ns'][0]} <= {s['first_token_ns']} <= {t['token_after_ns'][0]})")
        # each token went out between the server's readings around its write, so the TPOT of
        # what went out lies between the writes' windows (under emulation one write may
        # stall for milliseconds inside its window, and the next ones follow it closely)
        n = t["events"] - 1
        lo = (t["token_ns"][-1] - t["token_after_ns"][0]) / n / 1e6
        hi = (t["token_after_ns"][-1] - t["token_ns"][0]) / n / 1e6
        check(s["tpot_ms"] is not None and lo - 0.001 <= s["tpot_ms"] <= hi + 0.001,
              f"{label}: {model} [server]: tpot {s['tpot_ms']} within what the server's "
              f"writes allow ({lo:.3f} to {hi:.3f} ms)")
    clients = {r["model"]: r for r in recs if r.get("type") == "request" and
               r["role"] == "client"}
    check(clients.get("fx-ttft30-itl5-n5-kcurl", {}).get("transport") == "tls",
          f"{label}: curl's request seen through OpenSSL (transport tls)")
    check(clients.get("fx-ttft20-itl5-n4-kgo", {}).get("transport") == "go_tls",
          f"{label}: the Go client's request seen through crypto/tls (transport go_tls)")
    plain = [r for r in recs if r.get("type") == "request" and
             (r.get("model") or "").startswith("kplain-")]
    check(len(plain) == 8 and all(r["transport"] == "tcp" and r["complete"] and
                                  r["token_events"] == 12 for r in plain),
          f"{label}: plaintext TCP: 4 requests from both ends, whole ({len(plain)} records)")
    unix = [r for r in recs if r.get("type") == "request" and
            (r.get("model") or "").startswith("kunix-")]
    servers = {r["id"]: r for r in unix if r["role"] == "server"}
    check(len(unix) == 4 and all(r["transport"] == "unix" and r["complete"] and
                                 r["token_events"] == 8 and r["local"].startswith("unix:/")
                                 for r in unix) and
          all(r["server_id"] in servers and servers[r["server_id"]]["model"] == r["model"] and
              servers[r["server_id"]]["peer"] == r["local"] for r in unix if r["role"] == "client"),
          f"{label}: a Unix socket: 2 requests from both ends, whole, joined by their inodes "
          f"({len(unix)} records)")
    engine_truth = [json.loads(line) for line in files.get("engine.truth", "").splitlines()
                    if line.strip()]
    want = sum(1 for t in engine_truth if t.get("type") == "step")
    got = sum(1 for s in recs if s.get("type") == "gpu_step" and s["comm"] == "engine")
    check(want and got == want, f"{label}: CUDA: the stand-in engine's {want} steps ({got})")
    prog = [s for s in recs if s.get("type") == "gpu_step" and s["comm"] == "cudaprog"]
    check(len(prog) == 3, f"{label}: CUDA: cudaprog's 3 steps on the real libcudart "
                          f"({len(prog)})")
    llama = sorted((s for s in recs if s.get("type") == "engine_step" and
                    s["comm"] == "llama_step"), key=lambda s: s["start_ns"])
    check(len(llama) == 4 and llama[0]["tokens"] == 24 and
          all(s["tokens"] == 1 for s in llama[1:]),
          f"{label}: llama.cpp: a 24-token prompt and 3 decodes "
          f"({[s['tokens'] for s in llama]}; {files.get('llama.out', '').strip()})")
    check_llama_split(label, files, recs)


def check_llama_split(label, files, recs):
    """The llama.cpp server's request, its TTFT split by the steps of its sequence, against
    the server's own clock: its prompt step's call (before, after) and its tokens' writes.
    In causal order, on any machine: the prompt step (its probes) inside the server's call,
    the first token the first write's, queue + prefill + emit the TTFT, and the step most of
    the call. Not to the microsecond: under emulation (TCG) a probe fires a few hundred
    microseconds after the clock read beside it, which is the emulator's, not the tracer's."""
    lines = [line for line in files.get("llama.truth", "").splitlines() if line.strip()]
    srv = [r for r in recs if r.get("type") == "request" and r["model"] == "kllama" and
           r["role"] == "server"]
    if not check(lines and len(srv) == 1 and srv[0].get("attribution"),
                 f"{label}: llama.cpp server: its request attributed ({len(srv)} records; "
                 f"{srv[0].get('attribution_error') if srv else ''})"):
        return
    t, r, a = json.loads(lines[0]), srv[0], srv[0]["attribution"]
    (p0, p1), first = t["steps"][0], t["token_ns"][0]
    check(a.get("sequence") == 0 and a["prefill_steps"] == 1 and a.get("cached_tokens") == 0
          and r["input_tokens"] == 24 and r["token_events"] == 4,
          f"{label}: llama.cpp server: sequence 0, one prompt step, nothing cached, 24 prompt "
          f"tokens, 4 token events ({a.get('sequence')}, {a['prefill_steps']}, "
          f"{a.get('cached_tokens')}, {r['input_tokens']}, {r['token_events']})")
    end = a["prefill_start_ns"] + a["prefill_ms"] * 1e6
    said = (f"queue {a['queue_ms']}/{(p0 - r['start_ns']) / 1e6:.3f}, prefill "
            f"{a['prefill_ms']}/{(p1 - p0) / 1e6:.3f}, emit {a['emit_ms']}/"
            f"{(first - p1) / 1e6:.3f} ms, tokenscope/the server's clock")
    check(p0 <= a["prefill_start_ns"] and end <= p1 + 1000,
          f"{label}: llama.cpp server: the prompt step inside the server's call ({said})")
    check(t["token_ns"][0] <= r["first_token_ns"] <= t["token_ns"][1],
          f"{label}: llama.cpp server: the first token its first write's ({said})")
    check(abs(a["queue_ms"] + a["prefill_ms"] + a["emit_ms"] - r["ttft_ms"]) <= 0.01,
          f"{label}: llama.cpp server: queue, prefill and emit add up to TTFT {r['ttft_ms']} "
          f"({said})")
    # The prompt step is the process's first llama_decode: under emulation its entry probe
    # fired 6.1 and 6.3 ms after the server's clock read in two runs on 6.12 (later calls 0.1
    # to 0.3 ms), most likely its first trap waiting on the process's memory-map lock while
    # the tracer attached probes to its other files. Time the tracer cannot see, not an
    # error of its clock: allowed for the first call only.
    check(a["prefill_ms"] >= 0.9 * (p1 - p0) / 1e6 - FIRST_TRAP_MS,
          f"{label}: llama.cpp server: the prompt step most of the server's call ({said})")


def run_guest(series, deb, version, booted, host_recs, build):
    """One boot of a kernel (what boot returned), its workload's files checked against the
    host's: its table row."""
    files, took, trouble = booted
    check(trouble is None, trouble)
    label = f"kernel {files.get('kernel', series)}"
    check("hung" not in files, f"{label}: every workload step within its bound: "
                               f"{files.get('hung', '').strip()}")
    if "hang.txt" in files:
        lines = files["hang.txt"].splitlines()
        check(False, f"{label}: the workload done before the guest's watchdog "
                     f"({WATCHDOG_S} s from boot); where it stood:\n" +
              "\n".join(lines[:150]) + (f"\n[{len(lines) - 150} lines more in "
                                        f"{OUT}/guest-{series}.files]"
                                        if len(lines) > 150 else ""))
        return (series, os.path.basename(deb), version, "hung", f"{took:.0f} s")
    if not check("rc" in files, f"{label}: the workload ran and the guest sent its files "
                                f"(see {OUT}/guest-{series}.console)"):
        return (series, os.path.basename(deb), version, "did not finish", f"{took:.0f} s")
    err = files.get("stderr.txt", "")
    recs = records(files)
    check(files["rc"].strip() == "0", f"{label}: tokenscope exited 0 ({err[-300:]})")
    start = [line for line in err.splitlines() if "Hit Ctrl-C" in line]
    print(f"kernels: {label}: {start[0] if start else err.strip()[-300:]}", flush=True)
    check(bool(start) and build in start[0],
          f"{label}: the build this kernel takes: {build!r} in the start line")
    check_truth(label, files, recs)
    same_requests = check(requests_of(recs) == requests_of(host_recs),
                          f"{label}: every request the host's ({requests_of(recs)} vs "
                          f"{requests_of(host_recs)})")
    same_steps = check(steps_of(recs) == steps_of(host_recs),
                       f"{label}: every engine step the host's ({steps_of(recs)} vs "
                       f"{steps_of(host_recs)})")
    return (series, os.path.basename(deb), version,
            "traced, the host's records" if same_requests and same_steps else "FAILED",
            f"{took:.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="kernel series to run (5.10, 6.1, 6.12)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="boot each kernel N times, each run checked (a rare hang's rate)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("kernels: boots guests that load eBPF and traces this host: run as root")
    os.makedirs(OUT, exist_ok=True)
    t0 = time.monotonic()
    root, initramfs = build_initramfs(build_llama_step())
    host = run_host(root)
    host_recs = records(host)
    check(host.get("rc", "").strip() == "0", f"host: tokenscope exited 0 "
                                               f"({host.get('stderr.txt', '')[-300:]})")
    check("hung" not in host, f"host: every workload step within its bound: "
                              f"{host.get('hung', '').strip()}")
    check_truth("host", host, host_recs)
    check_capabilities(root, host, host_recs)
    table = [("host", os.uname().release, "", "traced", "")]
    guests = []
    for series, suite, pattern, build in KERNELS:
        if a.only and series not in a.only:
            continue
        deb = kernel_package(series, suite, pattern)
        if not check(deb is not None, f"kernel {series}: a {pattern} package (archive or "
                                      f"{CACHE})"):
            continue
        guests.append((series, deb, *vmlinuz_of(deb), build))

    def boots(series, vmlinuz):  # a series' boots one after another (its files' names)
        return [boot(vmlinuz, initramfs, series) for _ in range(a.repeat)]

    with concurrent.futures.ThreadPoolExecutor(GUESTS_AT_ONCE) as pool:
        booting = [pool.submit(boots, series, vmlinuz) for series, _, vmlinuz, _, _ in guests]
        for (series, deb, _, version, build), done in zip(guests, booting):
            for booted in done.result():
                table.append(run_guest(series, deb, version, booted, host_recs, build))
    print("kernels: | series | package | version | result | guest run |", flush=True)
    for row in table:
        print("kernels: | " + " | ".join(row) + " |", flush=True)
    print(f"kernels: the matrix took {time.monotonic() - t0:.0f} s", flush=True)
    print(f"kernels: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
