#!/usr/bin/python3
"""deploy/daemonset.yaml, deploy/Dockerfile and deploy/tokenscope.service against each other and
the package, since no cluster runs here to try them: the DaemonSet sees the node's processes
(hostPID), drops every capability and adds exactly the unit's bounding set, mounts BTF,
bpffs and tracefs from the host, serves metrics on the port its Prometheus annotations name
and the image's entry point listens on, and runs the image the Dockerfile builds from the
version debian/changelog packages.

    check_deploy.py [--self-test]

--self-test: the check must fail on a DaemonSet without hostPID, with a capability the unit
does not have, and with another metrics port. Needs python3-yaml (Debian's, /usr/bin/python3).
"""
import copy
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEPLOY = os.path.join(ROOT, "deploy")


def unit_caps():
    text = open(os.path.join(DEPLOY, "tokenscope.service")).read()
    line = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1)
    return sorted(c.removeprefix("CAP_") for c in line.split())


def package_version():
    first = open(os.path.join(ROOT, "debian", "changelog")).readline()
    return re.match(r"tokenscope \(([^)]+)\)", first).group(1)


def dockerfile():
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    return text, (yaml.safe_load(entry.group(1)) if entry else [])


def check(docs, caps, version, docker, entry):
    bad = []
    ds = [d for d in docs if d and d.get("kind") == "DaemonSet"]
    if len(ds) != 1:
        return [f"{len(ds)} DaemonSets in deploy/daemonset.yaml"]
    pod = ds[0]["spec"]["template"]
    spec = pod["spec"]
    if spec.get("hostPID") is not True:
        bad.append("the pod does not share the node's process namespace (hostPID)")
    containers = spec.get("containers") or []
    if len(containers) != 1:
        return bad + [f"{len(containers)} containers"]
    c = containers[0]
    sc = c.get("securityContext") or {}
    got = sorted((sc.get("capabilities") or {}).get("add") or [])
    if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
        bad.append("the container does not drop every capability first")
    if got != caps:
        bad.append(f"capabilities {got}, the unit's bounding set {caps}")
    if sc.get("privileged"):
        bad.append("the container is privileged")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for path in ("/sys/kernel/btf", "/sys/fs/bpf", "/sys/kernel/tracing"):
        m = mounts.get(path)
        host = ((volumes.get(m["name"]) or {}).get("hostPath") or {}).get("path") if m else None
        if host != path:
            bad.append(f"{path} is not the host's (a hostPath volume mounted there)")
    if not (mounts.get("/sys/kernel/btf") or {}).get("readOnly"):
        bad.append("/sys/kernel/btf is not read-only")
    ann = pod["metadata"].get("annotations") or {}
    ports = [p for p in c.get("ports") or [] if p.get("name") == "metrics"]
    listen = entry[entry.index("--metrics") + 1] if "--metrics" in entry else ""
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics":
        bad.append("the pod is not annotated for Prometheus to scrape /metrics")
    if not ports or str(ports[0]["containerPort"]) != ann.get("prometheus.io/port") or \
            not listen.endswith(f":{ann.get('prometheus.io/port')}") or \
            not listen.startswith("0.0.0.0:"):
        bad.append(f"the metrics port: container {ports and ports[0]['containerPort']}, "
                   f"annotation {ann.get('prometheus.io/port')}, the image listens on "
                   f"{listen!r} (all addresses, the same port)")
    if c.get("image") != f"tokenscope:{version}":
        bad.append(f"the image {c.get('image')}, the package's version {version}")
    if f"tokenscope_{version}_amd64.deb" not in docker or "FROM debian:12" not in docker or \
            f"docker build -t tokenscope:{version}" not in docker:
        bad.append(f"the Dockerfile does not build tokenscope:{version} from the package on "
                   f"Debian 12")
    if entry[:1] != ["/usr/bin/tokenscope"]:
        bad.append(f"the image's entry point {entry} is not the package's binary")
    return bad


def main():
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "daemonset.yaml"))))
    caps, version = unit_caps(), package_version()
    docker, entry = dockerfile()
    if "--self-test" in sys.argv[1:]:
        def ds_of(d):
            return next(x for x in d if x and x.get("kind") == "DaemonSet")
        no_pid, more_caps, other_port = (copy.deepcopy(docs) for _ in range(3))
        ds_of(no_pid)["spec"]["template"]["spec"]["hostPID"] = False
        ds_of(more_caps)["spec"]["template"]["spec"]["containers"][0]["securityContext"][
            "capabilities"]["add"].append("NET_ADMIN")
        ds_of(other_port)["spec"]["template"]["metadata"]["annotations"][
            "prometheus.io/port"] = "9999"
        if not all(check(d, caps, version, docker, entry)
                   for d in (no_pid, more_caps, other_port)):
            print("deploy: self-test FAILED: a broken DaemonSet passed")
            return 1
        print("deploy: self-test: no hostPID, an extra capability and another port each fail")
        return 0
    bad = check(docs, caps, version, docker, entry)
    for b in bad:
        print(f"deploy: {b}")
    if bad:
        return 1
    print(f"deploy: the DaemonSet (hostPID, capabilities {','.join(caps)}, BTF, bpffs, tracefs, "
          f"metrics :9464) matches the unit, the Dockerfile and package {version} (run: the "
          f"daemonset integration phase)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
