"""Container identity from real container runtimes (imported by run.py; `run.sh --only
containers`): the FastAPI server runs in a container made by each runtime Debian 12 ships that
runs here, and curl on the host calls it.

  podman alone   `podman run --rootfs` (runc, the cgroupfs manager on this hybrid host):
                 /libpod_parent/libpod-<id>
  podman in pod  the same in a pod of its own (an infra container, catatonit):
                 /libpod_parent/<pod id>/libpod-<id>
  ctr            containerd 1.6's ctr, its own containerd: /default/<id>
  docker         dockerd with the cgroupfs driver, an image imported from a folder:
                 /docker/<id>

No image is pulled: each container's root is a folder whose /usr is the host's, read-only
(or, for docker, an image imported from that folder). Checked: each server's records carry the
container id the runtime itself reports (never a pod's id) and, in a podman pod, the pod's
name; curl's records carry none. Then podman's bridge (check_nat): a published port and a
client in a second container, each joined to its server, with nat only where NAT was.
"""
import json
import os
import subprocess
import time

import plaintext_checks
from plaintext_checks import DEBIAN_PYTHON
from unix_checks import curl_args

CONTAINERS_CONF = """[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
"""


def make_rootfs(work):
    """A container root: empty folders, and the merged-/usr links (/usr comes from the host)."""
    rootfs = os.path.join(work, "rootfs")
    for d in ("usr", "etc", "tmp", "proc", "sys", "dev", "run", "var"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    for link, to in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                     ("sbin", "usr/sbin")):
        if not os.path.islink(os.path.join(rootfs, link)):
            os.symlink(to, os.path.join(rootfs, link))
    return rootfs


def app_cmd(root, work, name):
    return [DEBIAN_PYTHON, os.path.join(root, "tests", "fixtures", "fastapi_app.py"),
            "--port-file", os.path.join(work, f"{name}.port"), "--truth",
            os.path.join(work, f"{name}.truth")]


def wait_port(path, what, timeout=60):
    """The port the server in a container wrote (the fixture writes it whole)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip().isdigit():
            return int(open(path).read().strip())
        time.sleep(0.05)
    raise SystemExit(f"{what} did not start")


def out_of(cmd, env=None, timeout=120, cwd=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


class Podman:
    def __init__(self, work):
        conf = os.path.join(work, "containers.conf")
        with open(conf, "w") as f:
            f.write(CONTAINERS_CONF)
        self.env = dict(os.environ, CONTAINERS_CONF=conf)
        self.made = []  # ("pod" | "container", id), ("kube", the manifest played)

    def run(self, *args, cwd=None):
        return out_of(["podman", *args], env=self.env, cwd=cwd)

    def close(self):
        for kind, ident in reversed(self.made):
            if kind == "kube":
                self.run("kube", "down", ident)
            else:
                self.run("pod" if kind == "pod" else "container", "rm", "-f", ident)


class Containerd:
    """containerd of the test's own (its root, state and socket in the work folder)."""

    def __init__(self, work):
        self.work = work
        self.sock = os.path.join(work, "containerd.sock")
        self.p = subprocess.Popen(["containerd", "--root", os.path.join(work, "containerd"),
                                   "--state", os.path.join(work, "containerd-state"),
                                   "--address", self.sock],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "containerd.log"), "w"))
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock) and time.monotonic() < deadline:
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.tasks = []

    def ctr(self, *args):
        return out_of(["ctr", "--address", self.sock, *args])

    def close(self):
        for ident in self.tasks:
            self.ctr("task", "kill", "-s", "KILL", ident)
            for _ in range(100):
                if self.ctr("container", "rm", ident)[0] == 0:
                    break
                time.sleep(0.05)
        self.p.terminate()
        self.p.wait(timeout=30)
        for d in ("containerd", "containerd-state"):
            unmount_under(os.path.join(self.work, d))


class Docker:
    """dockerd of the test's own (cgroupfs driver, no iptables or bridge: host network)."""

    def __init__(self, work):
        self.work = work
        self.sock = os.path.join(work, "docker.sock")
        self.host = f"unix://{self.sock}"
        self.p = subprocess.Popen(["dockerd", "--data-root", os.path.join(work, "docker"),
                                   "--exec-root", os.path.join(work, "docker-exec"),
                                   "-H", self.host, "--pidfile", os.path.join(work, "docker.pid"),
                                   "--iptables=false", "--bridge=none", "--ip-forward=false",
                                   "--ip-masq=false"],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "dockerd.log"), "w"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.p.poll() is None:
            if self.docker("version")[0] == 0:
                break
            time.sleep(0.2)
        self.made = []

    def docker(self, *args, stdin=None):
        r = subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True,
                           input=stdin, timeout=120)
        return r.returncode, r.stdout.strip(), r.stderr.strip()

    def close(self):
        for ident in self.made:
            self.docker("rm", "-f", ident)
        self.p.terminate()
        self.p.wait(timeout=60)
        for d in ("docker", "docker-exec"):  # dockerd leaves its netns mount behind
            unmount_under(os.path.join(self.work, d))


def unmount_under(folder):
    """Mounts a daemon left below folder, deepest first (/proc/self/mounts' order reversed)."""
    mounts = [line.split()[1] for line in open("/proc/self/mounts")]
    for m in reversed(mounts):
        if m.startswith(folder.rstrip("/") + "/"):
            subprocess.run(["umount", m], capture_output=True)


def start_docker(dk, rootfs, root, work, name):
    tar = subprocess.run(["tar", "-C", rootfs, "-c", "."], capture_output=True, check=True).stdout
    r = subprocess.run(["docker", "-H", dk.host, "import", "-", "tokenscope-rootfs:test"],
                       input=tar, capture_output=True, timeout=120)
    if r.returncode:
        return None, r.stderr.decode()[-300:]
    rc, cid, err = dk.docker("run", "-d", "--network", "host", "-v", "/usr:/usr:ro",
                             "-v", f"{root}:{root}:ro", "-v", f"{work}:{work}",
                             "tokenscope-rootfs:test", *app_cmd(root, work, name))
    if rc == 0:
        dk.made.append(cid)
    return (cid if rc == 0 else None), err


def start_podman(pm, rootfs, root, work, name, pod=None):
    args = ["run", "-d", "--network", "host"] if not pod else ["run", "-d", "--pod", pod]
    rc, cid, err = pm.run(*args, "-v", "/usr:/usr:ro", "-v", f"{root}:{root}:ro",
                          "-v", f"{work}:{work}", "--rootfs", rootfs, *app_cmd(root, work, name))
    if rc == 0:
        pm.made.append(("container", cid))
    return cid if rc == 0 else None, err


def start_ctr(cd, rootfs, root, work, name):
    ident = f"tokenscope-{name}.{os.getpid()}"
    p = subprocess.Popen(["ctr", "--address", cd.sock, "run", "--net-host",
                          "--mount", "type=bind,src=/usr,dst=/usr,options=rbind:ro",
                          "--mount", f"type=bind,src={root},dst={root},options=rbind:ro",
                          "--mount", f"type=bind,src={work},dst={work},options=rbind:rw",
                          "--rootfs", rootfs, ident, *app_cmd(root, work, name)],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{name}.err"), "w"))
    cd.tasks.append(ident)
    return ident, p


def check_nat(ctx, work, pm, rootfs):
    """podman's bridge: the FastAPI server in a container, its port published on the host's
    loopback (-p 127.0.0.1:PORT:8000, a DNAT rule); curl on the host calls the published
    port, and a client in a second container calls the server's bridge address (no NAT).
    Each client record is joined to the server's record (server_id), with nat where NAT
    changed its connection (the server's ends as the server sees them) and none where it did
    not; the server's records never carry nat, and each record names its own container."""
    check, Tracer, run, root = ctx["check"], ctx["Tracer"], ctx["run"], ctx["root"]
    port = plaintext_checks.free_port()
    rc, cid, err = pm.run("run", "-d", "-p", f"127.0.0.1:{port}:8000", "-v", "/usr:/usr:ro",
                          "-v", f"{root}:{root}:ro", "-v", f"{work}:{work}", "--rootfs", rootfs,
                          *app_cmd(root, work, "natsrv"), "--host", "0.0.0.0", "--port", "8000")
    if not check(rc == 0, f"containers nat: podman published a server's port ({err[-300:]})"):
        return
    pm.made.append(("container", cid))
    wait_port(os.path.join(work, "natsrv.port"), "the published server")
    rc, ip, err = pm.run("inspect", "-f", "{{.NetworkSettings.IPAddress}}", cid)
    check(rc == 0 and ip, f"containers nat: the server's bridge address ({ip} {err[-200:]})")
    tracer = Tracer(os.path.join(work, "nat"))
    n = 3
    for i in range(n):
        check(run(curl_args(f"fx-ttft10-itl5-n3-natpub{i}") +
                  [f"http://127.0.0.1:{port}/v1/chat/completions"]),
              f"containers nat: curl to the published port ran ({i})")
    body = json.dumps({"model": "fx-ttft10-itl5-n3-natbridge", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    client = ("import sys, urllib.request\n"
              "for i in range(int(sys.argv[2])):\n"
              "    r = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode(),\n"
              "                               headers={'content-type': 'application/json'})\n"
              "    urllib.request.urlopen(r).read()\n")
    rc, ccid, err = pm.run("run", "-d", "-v", "/usr:/usr:ro", "--rootfs", rootfs,
                           DEBIAN_PYTHON, "-c", client,
                           f"http://{ip}:8000/v1/chat/completions", str(n), body)
    if rc == 0:
        pm.made.append(("container", ccid))
        check(pm.run("wait", ccid)[1] == "0", "containers nat: the bridge client ran")
    rc, _, err = tracer.stop()
    check(rc == 0, f"containers nat: tokenscope exited 0 ({err[-300:]})")
    reqs = [r for r in map(json.loads, open(tracer.out)) if r.get("type") == "request"]
    servers = {r["id"]: r for r in reqs if r["role"] == "server"}
    pub = [r for r in reqs if r["role"] == "client" and "natpub" in r["model"]]
    bridge = [r for r in reqs if r["role"] == "client" and "natbridge" in r["model"]]
    check(len(servers) == 2 * n and all(r["nat"] is None and r["container_id"] == cid
                                        for r in servers.values()),
          f"containers nat: the server's {2 * n} records carry no nat and name its container "
          f"({[(r['nat'], r['container_id'] == cid) for r in servers.values()]})")
    check(len(pub) == n and all(
        r["nat"] and r["nat"]["peer"] == f"{ip}:8000" and r["container_id"] is None and
        servers.get(r["server_id"], {}).get("model") == r["model"] for r in pub),
        f"containers nat: each client of the published port has its DNAT (the server at "
        f"{ip}:8000) and is joined to its server's record "
        f"({[(r['nat'], r['server_id']) for r in pub]})")
    check(len(bridge) == n and all(
        r["nat"] is None and r["container_id"] == ccid and
        servers.get(r["server_id"], {}).get("model") == r["model"] for r in bridge),
        f"containers nat: each bridge client (no NAT) has none, names its own container and is "
        f"joined to its server's record ({[(r['nat'], r['server_id']) for r in bridge]})")


def run_containers_checks(ctx):
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    root, work = ctx["root"], os.path.join(ctx["work"], "containers")
    os.makedirs(work, exist_ok=True)
    rootfs = make_rootfs(work)
    pm, cd, dk = Podman(work), None, None
    want = {}  # name -> (container id, runtime)
    try:
        # podman alone, and in a pod: the pod's id is its cgroup's parent, not the container's
        cid, err = start_podman(pm, rootfs, root, work, "podman")
        check(cid is not None, f"containers: podman ran a container ({err[-300:]})")
        if cid:
            want["podman"] = (cid, "podman")
        rc, pod_id, err = pm.run("pod", "create", "--network", "host",
                                 "--name", f"tokenscope-{os.getpid()}")
        check(rc == 0, f"containers: podman made a pod ({err[-300:]})")
        if rc == 0:
            pm.made.insert(0, ("pod", pod_id))
            cid, err = start_podman(pm, rootfs, root, work, "podpod", pod=pod_id)
            check(cid is not None and cid != pod_id,
                  f"containers: podman ran a container in the pod ({err[-300:]})")
            if cid:
                want["podpod"] = (cid, "podman")
        cd = Containerd(work)
        ident, _ = start_ctr(cd, rootfs, root, work, "ctr")
        want["ctr"] = (ident, "containerd")
        dk = Docker(work)
        cid, err = start_docker(dk, rootfs, root, work, "docker")
        check(cid is not None, f"containers: dockerd ran a container ({err[-300:]})")
        if cid:
            want["docker"] = (cid, "docker")
        for name in want:
            wait_port(os.path.join(work, f"{name}.port"), f"the {name} server")
        tracer = Tracer(work)
        for name in want:
            port = open(os.path.join(work, f"{name}.port")).read().strip()
            check(run(curl_args(f"fx-ttft10-itl5-n3-ct{name}") +
                      [f"http://127.0.0.1:{port}/v1/chat/completions"]),
                  f"containers: curl to the {name} server ran")
        rc, _, err = tracer.stop()
        check(rc == 0, f"containers: tokenscope exited 0 ({err[-300:]})")
        check_nat(ctx, work, pm, rootfs)
    finally:
        pm.close()
        if cd:
            cd.close()
        if dk:
            dk.close()
    reqs = [r for r in map(json.loads, open(tracer.out)) if r.get("type") == "request"]
    pod_name = f"tokenscope-{os.getpid()}"
    for name, (cid, runtime) in want.items():
        srv = [r for r in reqs if r["role"] == "server" and r["model"].endswith(f"ct{name}")]
        cli = [r for r in reqs if r["role"] == "client" and r["model"].endswith(f"ct{name}")]
        check(len(srv) == 1 and srv[0]["container_id"] == cid and not srv[0]["k8s_pod_uid"],
              f"containers: the {name} server's record names its container as {runtime} "
              f"reports it ({[r['container_id'] for r in srv]}, want {cid})")
        pod = pod_name if name == "podpod" else None
        check(len(srv) == 1 and srv[0]["k8s_pod_name"] == pod,
              f"containers: the {name} server's record names its pod ({pod}: "
              f"{[r['k8s_pod_name'] for r in srv]})")
        check(len(cli) == 1 and cli[0]["container_id"] is None,
              f"containers: curl's record ({name}, on the host) names none")
