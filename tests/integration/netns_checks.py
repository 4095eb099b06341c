"""Network namespaces kept apart in the client <-> server join (stream/match.c), with real eBPF
probes (imported by run.py; `run.sh --only netns`).

The test builds its own namespaces, as pods have them:
  a, b   each a FastAPI server (uvicorn) on 127.0.0.1:PORT, the same port, and its own curl
         client; in every round both clients take the same local port (--local-port), at the
         same time, so that the two connections have the very same addresses;
  c, d   a veth pair between them (10.X.0.1 in c, 10.X.0.2 in d), a server in d; curl in c
         calls it directly (a connection that really crosses namespaces), and through a
         Service address, 10.96.X.10:80, that an nftables DNAT rule in c sends to d's server
         (as kube-proxy's rules do; here in the client's own namespace).
Checked, against what the test made: every client record is joined to the server record of
its own request (same model, served by the server process of its own namespace), never the
other namespace's; each record's netns is its namespace's inode; the veth call is joined
across; each Service call is joined through its conntrack entry, its nat naming the server's
real address, also a client's that exited before the tracer read its socket's record (the
tracer stopped while it ran: gone_clients); the summary counts the translated connections.
"""
import json
import os
import re
import signal
import subprocess
import time

from plaintext_checks import DEBIAN_PYTHON, stop_all, wait_file
from unix_checks import curl_args

ROUNDS = 4
SERVICE_CALLS = 4  # svc0 and svc1 while the tracer runs, svc2 and svc3 (gone_clients)


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def gone_clients(ns, service, tracer, procs):
    """Two Service calls from namespace ns made while the tracer is stopped (SIGSTOP), so that
    each client has exited before its socket's record is read and its conntrack entry looked
    up: the namespace is then entered through what still holds it. svc2: the name `ip netns`
    mounted; svc3, that name deleted: a process still in it (as a pod's pause container).
    The curls' errors, if any."""
    holder = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])
    procs.append(holder)
    want = os.stat(f"/run/netns/{ns}").st_ino
    deadline = time.monotonic() + 30
    while os.stat(f"/proc/{holder.pid}/ns/net").st_ino != want:  # ip netns exec execs sleep
        if holder.poll() is not None or time.monotonic() > deadline:
            return [f"the holder of namespace {ns} did not start in it"]
        time.sleep(0.01)
    failed = []
    for k, enter in ((2, ["ip", "netns", "exec", ns]),
                     (3, ["nsenter", f"--net=/proc/{holder.pid}/ns/net"])):
        if k == 3:
            sh("ip", "netns", "del", ns)
        os.kill(tracer.p.pid, signal.SIGSTOP)
        try:
            r = subprocess.run(enter + curl_args(f"fx-ttft15-itl5-n4-svc{k}") +
                               [f"http://{service}/v1/chat/completions"],
                               capture_output=True, text=True, timeout=60)
        finally:
            os.kill(tracer.p.pid, signal.SIGCONT)
        failed += [r.stderr] if r.returncode else []
    return failed


def run_netns_checks(ctx):
    check, Tracer = ctx["check"], ctx["Tracer"]
    root, work = ctx["root"], os.path.join(ctx["work"], "netns")
    os.makedirs(work, exist_ok=True)
    tag = os.getpid() % 100000
    names = {k: f"ts{k}{tag}" for k in "abcd"}
    subnet = 64 + tag % 128  # 10.<subnet>.0.0/24 lives only inside c and d
    veth_c, veth_d = f"tsv{tag}c", f"tsv{tag}d"
    service = f"10.96.{subnet}.10"
    server_d = f"10.{subnet}.0.2"
    app = os.path.join(root, "tests", "fixtures", "fastapi_app.py")
    procs, tracer = [], None
    try:
        for ns in names.values():
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        inode = {k: os.stat(f"/run/netns/{ns}").st_ino for k, ns in names.items()}
        sh("ip", "link", "add", veth_c, "type", "veth", "peer", "name", veth_d)
        sh("ip", "link", "set", veth_c, "netns", names["c"])
        sh("ip", "link", "set", veth_d, "netns", names["d"])
        sh("ip", "-n", names["c"], "addr", "add", f"10.{subnet}.0.1/24", "dev", veth_c)
        sh("ip", "-n", names["d"], "addr", "add", f"{server_d}/24", "dev", veth_d)
        sh("ip", "-n", names["c"], "link", "set", veth_c, "up")
        sh("ip", "-n", names["d"], "link", "set", veth_d, "up")
        sh("ip", "-n", names["c"], "route", "add", "default", "dev", veth_c)
        nft = ["ip", "netns", "exec", names["c"], "nft"]
        sh(*nft, "add table ip tokenscope_test")
        sh(*nft, "add chain ip tokenscope_test out { type nat hook output priority -100 ; }")
        sh(*nft, f"add rule ip tokenscope_test out ip daddr {service} tcp dport 80 "
                 f"dnat to {server_d}:8000")
        servers = {}
        for key, host, port in (("a", "127.0.0.1", 18000), ("b", "127.0.0.1", 18000),
                                ("d", server_d, 8000)):
            port_file = os.path.join(work, f"{key}.port")
            p = subprocess.Popen(["ip", "netns", "exec", names[key], DEBIAN_PYTHON, app,
                                  "--host", host, "--port", str(port), "--port-file",
                                  port_file, "--truth", os.path.join(work, f"{key}.truth")],
                                 stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, f"{key}.err"), "w"))
            procs.append(p)
            wait_file(port_file, p, f"the server in namespace {key}")
            servers[key] = p.pid  # ip netns exec execs the server: the same process
        tracer = Tracer(work)

        def curl(ns, model, url, local_port=None):
            extra = ["--local-port", str(local_port)] if local_port else []
            return subprocess.Popen(["ip", "netns", "exec", names[ns]] + curl_args(model) +
                                    extra + [url], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)

        failed = []
        for k in range(ROUNDS):
            both = [curl(ns, f"fx-ttft15-itl5-n4-ns{ns}{k}", "http://127.0.0.1:18000/v1/chat/"
                         "completions", local_port=41000 + 10 * (tag % 100) + k)
                    for ns in "ab"]
            failed += [p.communicate()[1] for p in both if p.wait(timeout=60)]
        for k in range(2):
            for kind, url in (("veth", f"http://{server_d}:8000"), ("svc", f"http://{service}")):
                p = curl("c", f"fx-ttft15-itl5-n4-{kind}{k}", url + "/v1/chat/completions")
                failed += [p.communicate()[1]] if p.wait(timeout=60) else []
        failed += gone_clients(names["c"], service, tracer, procs)
        check(not failed, f"netns: every curl ran ({failed[:2]})")
        rc, out, err = tracer.stop()
        tracer = None
        check(rc == 0, f"netns: tokenscope exited 0 ({err[-300:]})")
        check(re.search(rf"^network: connections through NAT={SERVICE_CALLS} ", out, re.M)
              is not None, f"netns: the summary counts the {SERVICE_CALLS} connections NAT "
                           f"changed ({[l for l in out.splitlines() if l.startswith('network')]})")
    finally:
        if tracer:
            tracer.stop()
        stop_all(procs)
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    recs = [json.loads(l) for l in open(os.path.join(work, "requests.jsonl")) if l.strip()]
    reqs = {r["id"]: r for r in recs if r.get("type") == "request"}
    by_model = {}
    for r in reqs.values():
        by_model.setdefault((r["model"] or "")[len("fx-ttft15-itl5-n4-"):], {})[r["role"]] = r

    def joined(model, srv_ns, cli_ns):
        pair = by_model.get(model, {})
        cli, srv = pair.get("client"), pair.get("server")
        if not cli or not srv:
            return f"{model}: records {sorted(pair)}"
        if cli.get("server_id") != srv["id"]:
            other = reqs.get(cli.get("server_id"), {})
            return (f"{model}: client joined to {cli.get('server_id')} ({other.get('model')}, "
                    f"pid {other.get('pid')}), not {srv['id']}")
        if srv["pid"] != servers[srv_ns]:
            return f"{model}: served by pid {srv['pid']}, not namespace {srv_ns}'s server"
        if (cli["netns"], srv["netns"]) != (inode[cli_ns], inode[srv_ns]):
            return f"{model}: netns {cli['netns']}, {srv['netns']}"
        return None

    same = [joined(f"ns{ns}{k}", ns, ns) for ns in "ab" for k in range(ROUNDS)]
    check(all(e is None for e in same),
          f"netns: each of {2 * ROUNDS} clients on 127.0.0.1:18000 from the same local port in "
          f"two namespaces is joined to its own namespace's server record, never the other's "
          f"({[e for e in same if e][:3]})")
    cross = [joined(f"veth{k}", "d", "c") for k in range(2)]
    check(all(e is None for e in cross),
          f"netns: calls over a veth pair are joined across namespaces ({cross})")
    svc = [joined(f"svc{k}", "d", "c") for k in range(SERVICE_CALLS)]
    check(all(e is None for e in svc),
          f"netns: calls to a Service address DNAT'd to another namespace's server are joined "
          f"through their conntrack entry ({svc})")
    clients = [by_model.get(f"svc{k}", {}).get("client") or {} for k in range(SERVICE_CALLS)]
    check(all(c.get("peer") == f"{service}:80" and
              (c.get("nat") or {}).get("peer") == f"{server_d}:8000" for c in clients),
          f"netns: those clients' peer is the Service address, their nat.peer the server's "
          f"({[(c.get('peer'), c.get('nat')) for c in clients]})")
    direct = [by_model.get(f"{m}", {}).get("client") or {} for m in ("nsa0", "veth0")]
    check(all("nat" in c and c["nat"] is None for c in direct),
          f"netns: connections NAT did not change have nat null ({[c.get('nat') for c in direct]})")
