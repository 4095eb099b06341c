"""Container and pod identity (capture/identity.c) with real eBPF probes (imported by run.py;
`run.sh --only identity`).

The test builds the layouts itself, as a node's runtime would leave them:
  pod        a FastAPI server (uvicorn) in a cgroup named as containerd and the kubelet's
             systemd driver name it (kubepods-burstable-pod<uid>.slice/cri-containerd-<id>
             .scope), in a private mount namespace whose /run holds a service account's
             namespace file (the container's /var/run is a symlink to /run, as in most
             images: read in its own root), with HOSTNAME set to the pod's name;
  container  the same server in a Docker-named cgroup (docker-<id>.scope) and no pod: its
             HOSTNAME is not taken for a pod's name.
curl, on the host, calls each. Checked: each server's records carry its container id, pod uid,
pod name and namespace, exactly those the test made (null where none); curl's carry none;
the metrics' GenAI series of the pod's server carry k8s_namespace_name, k8s_pod_name and
container_id; the summary's group names the pod; a second tracer with --pod keeps only the
pod's server's records (its processes were running before it started: the filter applies
as each is first seen).
"""
import json
import os
import re
import subprocess
import uuid

from plaintext_checks import DEBIAN_PYTHON, stop_all, wait_file
from unix_checks import curl_args

NAMESPACE, POD_NAME = "inference", "vllm-pod-0"


def cgroup_root():
    """Where cgroup v2 is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid
    host (this one)."""
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, "cgroup.procs")):
            return root
    return None


def start_in(cgroup, cmd, work, name, port_file, sa_namespace=None, hostname=None):
    """cmd in cgroup (created), in a private mount namespace with a service account's
    namespace file under /run where asked, HOSTNAME set where asked."""
    os.makedirs(cgroup, exist_ok=True)
    inner = " ".join(f"'{c}'" for c in cmd)
    if hostname:
        inner = f"env HOSTNAME={hostname} {inner}"
    if sa_namespace:
        sa = "/run/secrets/kubernetes.io/serviceaccount"
        inner = (f"unshare -m --propagation private sh -c \"mount -t tmpfs tmpfs /run && "
                 f"mkdir -p {sa} && echo {sa_namespace} > {sa}/namespace && exec {inner}\"")
    script = f"echo $$ > {cgroup}/cgroup.procs && exec {inner}"
    p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{name}.err"), "w"))
    wait_file(port_file, p, name)
    return p


def run_identity_checks(ctx):
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    root, work = ctx["root"], os.path.join(ctx["work"], "identity")
    os.makedirs(work, exist_ok=True)
    cg = cgroup_root()
    if not check(cg is not None, "identity: cgroup v2 is mounted (the test makes its cgroups "
                                 "there)"):
        return
    pod_uid = str(uuid.uuid4())
    pod_cid, docker_cid = uuid.uuid4().hex * 2, uuid.uuid4().hex * 2
    top = os.path.join(cg, f"tokenscope-test-{os.getpid()}.slice")
    pod_cg = os.path.join(top, "kubepods-burstable.slice",
                          f"kubepods-burstable-pod{pod_uid.replace('-', '_')}.slice",
                          f"cri-containerd-{pod_cid}.scope")
    docker_cg = os.path.join(top, f"docker-{docker_cid}.scope")
    app = os.path.join(root, "tests", "fixtures", "fastapi_app.py")
    metrics = os.path.join(work, "metrics.prom")
    procs = []
    tracer = Tracer(work, "--metrics-file", metrics)
    try:
        pod = start_in(pod_cg, [DEBIAN_PYTHON, app, "--port-file", os.path.join(work, "pod.port"),
                                "--truth", os.path.join(work, "pod.truth")], work, "pod",
                       os.path.join(work, "pod.port"), sa_namespace=NAMESPACE,
                       hostname=POD_NAME)
        procs.append(pod)
        cont = start_in(docker_cg, [DEBIAN_PYTHON, app, "--port-file",
                                    os.path.join(work, "docker.port"), "--truth",
                                    os.path.join(work, "docker.truth")], work, "docker",
                        os.path.join(work, "docker.port"), hostname="not-a-pod")
        procs.append(cont)
        ports = {name: open(os.path.join(work, f"{name}.port")).read().strip()
                 for name in ("pod", "docker")}

        def calls(tag):
            for name, port in ports.items():
                check(run(curl_args(f"fx-ttft15-itl5-n4-{tag}{name}") +
                          [f"http://127.0.0.1:{port}/v1/chat/completions"]),
                      f"identity: curl to the {name} server ran")
        calls("id")
        rc, out, err = tracer.stop()
        check(rc == 0, f"identity: tokenscope exited 0 ({err[-300:]})")
        check(re.search(rf"^python3\[\d+\] server openai\.chat model=\S+idpod "
                        rf"pod={NAMESPACE}/{POD_NAME} requests=1 ", out, re.M) is not None and
              re.search(r"^python3\[\d+\] server openai\.chat model=\S+iddocker requests=1 ",
                        out, re.M) is not None,
              "identity: the summary's groups name the pod (and none for the other server)")
        # the same servers, a tracer that keeps only the pod's processes
        filtered = Tracer(os.path.join(work, "filtered"), "--pod", POD_NAME)
        calls("fl")
        rc, out, err = filtered.stop()
        check(rc == 0, f"identity: tokenscope --pod exited 0 ({err[-300:]})")
    finally:
        stop_all(procs)
        for d in (pod_cg, os.path.dirname(pod_cg), os.path.dirname(os.path.dirname(pod_cg)),
                  docker_cg, top):
            try:
                os.rmdir(d)
            except OSError:
                pass
    recs = [json.loads(l) for l in open(tracer.out) if l.strip()]
    reqs = [r for r in recs if r.get("type") == "request"]

    def ident(r):
        return (r.get("container_id"), r.get("k8s_pod_uid"), r.get("k8s_pod_name"),
                r.get("k8s_namespace_name"))

    want = {"idpod": (pod_cid, pod_uid, POD_NAME, NAMESPACE),
            "iddocker": (docker_cid, None, None, None)}
    for tag, w in want.items():
        srv = [r for r in reqs if r["role"] == "server" and (r["model"] or "").endswith(tag)]
        cli = [r for r in reqs if r["role"] == "client" and (r["model"] or "").endswith(tag)]
        check(len(srv) == 1 and ident(srv[0]) == w,
              f"identity: the {tag[2:]} server's record names its container and pod "
              f"({[ident(r) for r in srv]}, want {w})")
        check(len(cli) == 1 and ident(cli[0]) == (None, None, None, None),
              f"identity: curl's record (on the host) names none ({[ident(r) for r in cli]})")
    kept = [json.loads(l) for l in open(filtered.out) if l.strip()]
    kept = [r for r in kept if r.get("type") == "request"]
    check(len(kept) == 1 and kept[0]["role"] == "server" and
          kept[0]["model"].endswith("flpod") and kept[0]["k8s_pod_name"] == POD_NAME,
          f"identity: --pod {POD_NAME} keeps only the pod's records (not the other server's, "
          f"not curl's on the host) ({[(r['role'], r['model']) for r in kept]})")
    text = open(metrics).read() if os.path.exists(metrics) else ""
    check(re.search(r'^gen_ai_server_time_to_first_token_seconds_count\{[^}]*'
                    rf'k8s_namespace_name="{NAMESPACE}",k8s_pod_name="{POD_NAME}",'
                    rf'container_id="{pod_cid}"\}} 1$', text, re.M) is not None,
          "identity: the pod's server TTFT series carries its namespace, pod and container")
