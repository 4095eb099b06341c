"""The DaemonSet's pod, run as written (imported by run.py; `run.sh --only daemonset`).

- The image: a Debian 12 base made by mmdebstrap from Debian's archive (minbase; cached in
  /var/cache/tokenscope), imported into podman under the name deploy/Dockerfile builds FROM,
  then `podman build` of deploy/ with the package `make package-check` built.
- The pod: deploy/daemonset.yaml's pod template taken out mechanically (a Pod of its metadata
  and spec), run by `podman kube play`. Podman 4.3 cannot honour three of its fields, each
  tested otherwise:
    ports           kube play maps container ports, which it refuses with hostNetwork; with
                    hostNetwork the port is the node's own, and the test reads it there;
    readinessProbe  kube play runs no readiness probe; the test makes the probe's GET;
    hostPID         kube play ignores it before podman 4.4 (its pod gets a PID namespace of
                    its own); the same container is run again by `podman run`, its options
                    translated from the manifest mechanically, hostPID as --pid host.
- Checked: podman ran each with the spec's rights (the host's network namespace, and PID
  namespace where it honours it; a read-only root; no privilege escalation; exactly the
  capabilities added, less any the host's own bounding set lacks; the three host mounts);
  every probe attached (no warning); the metrics port answers on the node's port; with the
  host's PID namespace it traces an LLM server in another container and curl on the host, and
  a real Prometheus scrapes the server's series with its container's id.
"""
import json
import os
import shutil
import subprocess
import time
import urllib.request

import yaml

from containers_checks import Podman, app_cmd, make_rootfs, wait_port
from metrics_checks import promql, start_prometheus, wait_counted
from plaintext_checks import stop_all
from unix_checks import curl_args

BASE_CACHE = "/var/cache/tokenscope/debian-12-base.tar"
MIRROR = os.environ.get("TOKENSCOPE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
METRICS_PORT = 9464  # the manifest's and the image's
UNHONOURED = ("ports", "readinessProbe")


def pod_of_daemonset(path, out):
    """The DaemonSet's pod template as a Pod, less what podman cannot honour."""
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    ds = next(d for d in docs if d.get("kind") == "DaemonSet")
    t = ds["spec"]["template"]
    spec = dict(t["spec"])
    spec["containers"] = [{k: v for k, v in c.items() if k not in UNHONOURED}
                          for c in spec["containers"]]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": dict(t["metadata"], name=ds["metadata"]["name"]), "spec": spec}
    with open(out, "w") as f:
        yaml.safe_dump(pod, f, sort_keys=False)
    return t["spec"]["containers"][0]


def run_args_of(pod_yaml, name):
    """`podman run` options for the pod's one container, from the Pod manifest: its host
    namespaces, security context, resources, host mounts, image and arguments."""
    pod = yaml.safe_load(open(pod_yaml))
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    sc = c.get("securityContext", {})
    args = ["run", "-d", "--name", name]
    args += ["--pid", "host"] if spec.get("hostPID") else []
    args += ["--network", "host"] if spec.get("hostNetwork") else []
    args += ["--read-only"] if sc.get("readOnlyRootFilesystem") else []
    args += ["--security-opt", "no-new-privileges"] \
        if sc.get("allowPrivilegeEscalation") is False else []
    args += ["--privileged"] if sc.get("privileged") else []
    args += ["--user", str(sc["runAsUser"])] if "runAsUser" in sc else []
    for cap in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    for cap in sc.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    mem = c.get("resources", {}).get("limits", {}).get("memory")
    args += ["--memory", mem.replace("Gi", "g").replace("Mi", "m")] if mem else []
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        args += ["-v", f"{volumes[m['name']]}:{m['mountPath']}" +
                 (":ro" if m.get("readOnly") else "")]
    return args + [c["image"], *(c.get("args") or [])]


def host_caps():
    """The capabilities this process's bounding set holds (a container gets no more)."""
    names = subprocess.run(["capsh", "--decode=" + next(
        line.split()[1] for line in open("/proc/self/status") if line.startswith("CapBnd"))],
        capture_output=True, text=True).stdout.strip().split("=", 1)[-1]
    return {n.upper() for n in names.split(",") if n}


def base_image(pm, image, work):
    """The Dockerfile's FROM, from a cached mmdebstrap of Debian 12 (made once)."""
    if pm.run("image", "exists", image)[0] == 0:
        return True, ""
    if os.path.isdir(BASE_CACHE):  # left by a run whose mmdebstrap wrote a directory
        shutil.rmtree(BASE_CACHE)
    if not os.path.isfile(BASE_CACHE):
        os.makedirs(os.path.dirname(BASE_CACHE), exist_ok=True)
        # --format: mmdebstrap reads the format from the target's suffix, and ".tmp" says a
        # directory
        r = subprocess.run(["mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
                            "bookworm", BASE_CACHE + ".tmp", MIRROR], capture_output=True,
                           text=True, timeout=900)
        if r.returncode:
            return False, r.stderr[-500:]
        os.rename(BASE_CACHE + ".tmp", BASE_CACHE)
    rc, _, err = pm.run("import", BASE_CACHE, image)
    return rc == 0, err


def build_image(pm, root, work):
    deb = os.path.join(root, ".output", "package")
    debs = sorted(f for f in os.listdir(deb) if f.endswith(".deb")) if os.path.isdir(deb) else []
    binary = os.path.join(root, "tokenscope")
    if debs and os.path.exists(binary) and \
            os.path.getmtime(os.path.join(deb, debs[-1])) < os.path.getmtime(binary):
        debs = []  # older than the build: made again
    if not debs:
        r = subprocess.run(["make", "-s", "-C", root, "package-check"], capture_output=True,
                           text=True, timeout=900)
        debs = sorted(f for f in os.listdir(deb) if f.endswith(".deb")) if r.returncode == 0 \
            else []
        if not debs:
            return None, f"no package to build the image from ({r.stdout[-300:]})"
    dockerfile = open(os.path.join(root, "deploy", "Dockerfile")).read()
    base = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM "))
    ok, err = base_image(pm, f"docker.io/library/{base}" if "/" not in base else base, work)
    if not ok:
        return None, f"the base image: {err}"
    ctx = os.path.join(work, "image")
    os.makedirs(ctx, exist_ok=True)
    with open(os.path.join(ctx, "Dockerfile"), "w") as f:
        f.write(dockerfile)
    subprocess.run(["cp", os.path.join(deb, debs[-1]), ctx], check=True)
    rc, out, err = pm.run("build", "--network", "host", "-t", "tokenscope:0.1.0", ctx)
    pm.run("image", "prune", "-f")  # the image this tag named before
    return (rc == 0, (out + err)[-500:])


def metrics_text():
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as r:
        return r.status, r.read().decode()


def wait_started(pm, name, timeout=60):
    deadline = time.monotonic() + timeout
    logs = ""
    while time.monotonic() < deadline:
        _, out, err = pm.run("logs", name)
        logs = err + out
        if "Hit Ctrl-C to end." in logs:
            return logs
        time.sleep(0.2)
    return None if not logs else logs


def check_rights(check, pm, name, container, how, host_pid=True):
    rc, out, _ = pm.run("inspect", name)
    info = json.loads(out)[0] if rc == 0 else {}
    hc = info.get("HostConfig", {})
    sc = container["securityContext"]
    bounding = host_caps()
    spec_caps = {f"CAP_{c}" for c in sc["capabilities"]["add"]}
    want_caps = sorted(spec_caps & bounding)
    caps = sorted(info.get("EffectiveCaps") or [])
    mounts = {m["Destination"]: m for m in info.get("Mounts", [])}
    want_mounts = {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]}
    check(hc.get("NetworkMode") == "host" and (not host_pid or hc.get("PidMode") == "host"),
          f"daemonset ({how}): the host's network namespace"
          f"{', and its PID namespace' if host_pid else ''} "
          f"({hc.get('NetworkMode')}, {hc.get('PidMode')})")
    check(hc.get("ReadonlyRootfs") is True and "no-new-privileges" in
          (hc.get("SecurityOpt") or []) and not hc.get("Privileged"),
          f"daemonset ({how}): a read-only root, no privilege escalation, not privileged "
          f"({hc.get('ReadonlyRootfs')}, {hc.get('SecurityOpt')}, {hc.get('Privileged')})")
    check(caps == want_caps, f"daemonset ({how}): exactly the capabilities the spec adds "
          f"({caps} vs {want_caps}; not in this host's bounding set: "
          f"{sorted(spec_caps - bounding)})")
    check(all(p in mounts and (not mounts[p].get("RW", True)) == ro
              for p, ro in want_mounts.items()),
          f"daemonset ({how}): the host's BTF (read-only), bpffs and tracefs mounted "
          f"({[(p, mounts.get(p, {}).get('RW')) for p in want_mounts]})")


def run_daemonset_checks(ctx):
    check, run, root = ctx["check"], ctx["run"], ctx["root"]
    work = os.path.join(ctx["work"], "daemonset")
    os.makedirs(work, exist_ok=True)
    pm = Podman(work)
    prom = None
    pod_yaml = os.path.join(work, "pod.yaml")
    try:
        ok, why = build_image(pm, root, work)
        if not check(ok, f"daemonset: podman built the image from deploy/Dockerfile ({why})"):
            return
        container = pod_of_daemonset(os.path.join(root, "deploy", "daemonset.yaml"), pod_yaml)
        pm.run("pod", "rm", "-f", "tokenscope")  # one a killed run left
        # (from the work folder: kube play looks for a folder named as the image to build)
        rc, out, err = pm.run("kube", "play", pod_yaml, cwd=work)
        if not check(rc == 0, f"daemonset: podman kube play ran the pod ({err[-400:]})"):
            return
        pm.made.append(("kube", pod_yaml))
        name = f"tokenscope-{container['name']}"
        logs = wait_started(pm, name)
        check(logs is not None and "Hit Ctrl-C to end." in logs and "warning" not in logs,
              f"daemonset (kube play): tokenscope started in the pod, every probe attached "
              f"({(logs or '')[-400:]})")
        check_rights(check, pm, name, container, "kube play", host_pid=False)
        status, _ = metrics_text()
        check(status == 200, "daemonset (kube play): the readiness probe's GET /metrics "
                             "answers 200 on the node's port")
        pm.run("kube", "down", pod_yaml)
        pm.made.remove(("kube", pod_yaml))
        # hostPID, which kube play ignores: the same container by podman run
        name = "tokenscope-hostpid"
        pm.run("rm", "-f", name)
        rc, cid_ts, err = pm.run(*run_args_of(pod_yaml, name))
        if not check(rc == 0, f"daemonset (run): podman ran the pod's container ({err[-300:]})"):
            return
        pm.made.append(("container", cid_ts))
        logs = wait_started(pm, name)
        check(logs is not None and "Hit Ctrl-C to end." in logs and "warning" not in logs,
              f"daemonset (run): tokenscope started, every probe attached "
              f"({(logs or '')[-400:]})")
        check_rights(check, pm, name, container, "run")
        prom, prom_port = start_prometheus(work, METRICS_PORT)
        # an LLM server in a container of its own, curl on the host
        rootfs = make_rootfs(work)
        rc, cid, err = pm.run("run", "-d", "--network", "host", "-v", "/usr:/usr:ro",
                              "-v", f"{root}:{root}:ro", "-v", f"{work}:{work}",
                              "--rootfs", rootfs, *app_cmd(root, work, "llm"))
        if not check(rc == 0, f"daemonset: the LLM server's container ran ({err[-300:]})"):
            return
        pm.made.append(("container", cid))
        port = wait_port(os.path.join(work, "llm.port"), "the LLM server")
        n = 3
        for i in range(n):
            check(run(curl_args("fx-ttft10-itl5-n3-daemonset") +
                      [f"http://127.0.0.1:{port}/v1/chat/completions"]),
                  f"daemonset: curl to the server ran ({i})")
        series = ('gen_ai_server_time_to_first_token_seconds_count{'
                  f'gen_ai_request_model="fx-ttft10-itl5-n3-daemonset",container_id="{cid}"}}')
        client = ('gen_ai_client_operation_time_to_first_chunk_seconds_count{'
                  'gen_ai_request_model="fx-ttft10-itl5-n3-daemonset",process="curl"}')
        check(wait_counted(prom_port, series, n) and wait_counted(prom_port, f"sum({client})", n),
              f"daemonset (run): Prometheus scraped it: the server's {n} requests under its "
              f"container's id, curl's {n} on the host "
              f"({promql(prom_port, series)}, {promql(prom_port, f'sum({client})')})")
    finally:
        if prom:
            stop_all([prom])
        pm.close()
