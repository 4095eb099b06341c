"""Plaintext HTTP over TCP with real eBPF probes (imported by run.py).

1. A FastAPI app served by uvicorn (Debian's python3-fastapi and python3-uvicorn), once on
   asyncio's loop and once on uvloop, streaming OpenAI, Anthropic (SSE) and Ollama (NDJSON)
   on known schedules; curl and Python's http.client over plain HTTP. Client and server
   records are checked against the app's own clock.
2. nginx terminating TLS in front of that app (HTTP/1.1 upstream, proxy_buffering off), node's
   fetch as the TLS client: four records per request, each with the right addresses.
3. Noise while all that runs: random bytes both ways and a 1 GB bulk transfer over loopback
   TCP, and a Unix socket pair: no records, no drops, counted as ignored.
4. Edge cases (clients/tcp_edges.py): fd reuse with MSG_PEEK and partial reads, sendfile,
   splice, writev of many iovecs, a writev past the capture budget; and replies sent through
   io_uring (fixtures/uring_server.c) to curl.
5. --port keeps only the sockets of that port; --no-plaintext sees none of it.
"""
import json
import os
import shutil
import subprocess
import signal
import sys
import threading
import time

DEBIAN_PYTHON = "/usr/bin/python3"  # where python3-fastapi and python3-uvicorn live
# the clients' interpreter: the first python3 on PATH (the harness runs under Debian's, for
# its pytest); they use the standard library only
CLIENT_PYTHON = shutil.which("python3") or DEBIAN_PYTHON
TABLE_SIZE = 65536  # the plaintext family's socket table (TS_SOCK_STATES_MAX)
TOKEN_WINDOW_MS = 20.0  # how late a client may read a token the server wrote (busy 2-core VM)
TPOT_TOLERANCE_MS = 2.0
NOISE_BYTES = 1 << 30
RENAMED_COMM, RENAMED_REQUESTS = "ts-renamed", 40  # a process whose threads name themselves
CRASH_MODEL = "fx-ttft5-itl200-n40-crash"  # 8 s of tokens: killed long before the end

NGINX_CONF = """
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_buffer_size 1m;  # prompts stay in memory: workers cannot write to {work}
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_file(path, proc, what, timeout=30):
    """The port a server wrote to path once listening. The fixtures write it whole (a
    temporary file, then a rename); this waits for a number in it, not for its name, so that
    a file caught while being written is never read as empty."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text.isdigit():
                return int(text)
        except FileNotFoundError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{what} did not start")
        time.sleep(0.05)


def start_app(work, loop, server="uvicorn"):
    port_file = os.path.join(work, f"app-{loop}.port")
    truth = os.path.join(work, f"app-{loop}.truth.jsonl")
    p = subprocess.Popen([DEBIAN_PYTHON, os.path.join(FIXTURES, "fastapi_app.py"),
                          "--port-file", port_file, "--truth", truth, "--loop", loop,
                          "--server", server],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"app-{loop}.err"), "w"))
    return p, wait_file(port_file, p, f"uvicorn ({loop})"), truth


def start_nginx(work, upstream, cert, key, http2=False):
    """nginx terminating TLS in front of upstream (HTTP/2 to clients with http2)."""
    port = free_port()
    text = NGINX_CONF.format(work=work, port=port, upstream=upstream, cert=cert, key=key)
    return run_nginx(work, text.replace(" ssl;", " ssl http2;") if http2 else text, port)


def stop_all(procs, timeout=10):
    """Terminate the servers a phase started, then wait for each (killed past timeout)."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def run_nginx(work, conf_text, port):
    """nginx with this configuration, once it accepts connections on port."""
    import socket
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    p = subprocess.Popen(["nginx", "-c", conf, "-p", work, "-g", "daemon off;"],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, "nginx.stderr"), "w"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    raise SystemExit(f"nginx did not start: {open(os.path.join(work, 'nginx.stderr')).read()}")


FIXTURES = None


def run_plaintext_checks(ctx):
    global FIXTURES
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    root, work = ctx["root"], os.path.join(ctx["work"], "plain")
    FIXTURES = os.path.join(root, "tests", "fixtures")
    clients = os.path.join(root, "tests", "integration", "clients")
    cert, key = ctx["cert"], ctx["key"]
    os.makedirs(work, exist_ok=True)

    apps = {}
    procs = []
    try:
        for loop in ("asyncio", "uvloop"):
            p, port, truth = start_app(work, loop)
            procs.append(p)
            apps[loop] = {"proc": p, "port": port, "truth": truth}
        nginx, nginx_port = start_nginx(work, apps["asyncio"]["port"], cert, key)
        procs.append(nginx)

        tracer = Tracer(work)
        by_port = Tracer(os.path.join(work, "port"), "--port", str(apps["uvloop"]["port"]))
        no_plain = Tracer(os.path.join(work, "noplain"), "--no-plaintext")
        by_comm = Tracer(os.path.join(work, "comm"), "-c", RENAMED_COMM)
        noise = subprocess.Popen([CLIENT_PYTHON, os.path.join(clients, "noise.py"), "6",
                                  str(NOISE_BYTES)], stdout=subprocess.PIPE, text=True)
        expect = []  # (label, loop, model, api, client comm, client clock or None)
        client_clock = {}

        # phase: curl and http.client against both uvicorn loops
        for loop, app in apps.items():
            tag = "a" if loop == "asyncio" else "u"
            cases = [("/v1/chat/completions", f"fx-ttft30-itl6-n6-cache1-pc{tag}1", "openai.chat",
                      {"stream_options": {"include_usage": True}}),
                     ("/v1/messages", f"fx-ttft25-itl7-n5-tpe2-cache1-pc{tag}2",
                      "anthropic.messages", {}),
                     ("/api/chat", f"fx-ttft20-itl6-n6-pc{tag}3", "ollama", {})]
            for path, model, api, extra in cases:
                body = {"model": model, "stream": True,
                        "messages": [{"role": "user", "content": "PROMPT-CANARY"}], **extra}
                check(run(["curl", "-sS", "--fail", "-N", "-H", "Content-Type: application/json",
                           "-H", "Authorization: Bearer sk-test-SECRET-plain", "-o", "/dev/null",
                           f"http://127.0.0.1:{app['port']}{path}", "-d", json.dumps(body)]),
                      f"curl {api} over plain HTTP to uvicorn ({loop}) ran")
                expect.append((f"curl {api} ({loop})", loop, model, api, "curl", None))
            ka = [("openai.chat", f"fx-ttft25-itl5-n5-pc{tag}4"),
                  ("anthropic.messages", f"fx-ttft20-itl6-n4-pc{tag}5")]
            r = subprocess.run([CLIENT_PYTHON, os.path.join(clients, "plain_client.py"),
                                str(app["port"])] + [f"{d}={m}" for d, m in ka],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"plain keep-alive client ({loop}) ran: {r.stderr[-300:]}")
            for line in r.stdout.splitlines():
                c = json.loads(line)
                client_clock[c["model"]] = c
            for d, m in ka:
                expect.append((f"http.client keep-alive {d} ({loop})", loop, m, d, None, m))

        # phase: nginx terminating TLS in front of uvicorn, node's fetch as the client
        # node's binary embeds OpenSSL and is probed once a node process is seen; one that does
        # TLS within milliseconds of its exec can be missed while that happens (README,
        # Limits), so a node that lives a second comes first, as in run.py.
        check(run(["node", "-e", "setTimeout(() => {}, 1000)"]), "warm-up node ran")
        through = "fx-ttft30-itl6-n6-pcn1"
        check(run(["node", os.path.join(clients, "node_client.js"), "fetch", str(nginx_port),
                   through], env=dict(os.environ, NODE_EXTRA_CA_CERTS=cert)),
              "node fetch through nginx ran")

        # phase: a client whose worker threads are renamed, for -c
        r = subprocess.run([CLIENT_PYTHON, os.path.join(clients, "renamed_threads.py"),
                            str(apps["asyncio"]["port"]), str(RENAMED_REQUESTS), RENAMED_COMM,
                            "fx-ttft2-itl1-n3-rn"], capture_output=True, text=True, timeout=120)
        renamed_served = json.loads(r.stdout) if r.returncode == 0 else []
        check(len(renamed_served) == RENAMED_REQUESTS,
              f"the renamed-threads client was served ({r.stderr[-300:]})")

        # phase: curl upgrades to HTTP/2 (h2c) with hypercorn: its reply comes in HTTP/2 frames
        h2c_dir = os.path.join(work, "h2c")
        os.makedirs(h2c_dir)
        hyper, hyper_port, _ = start_app(h2c_dir, "asyncio", "hypercorn")
        procs.append(hyper)
        h2c = subprocess.run(["curl", "-sS", "--fail", "-N", "--http2", "-v",
                              f"http://127.0.0.1:{hyper_port}/v1/chat/completions?model="
                              "fx-ttft5-itl5-n4-h2c"], capture_output=True, text=True, timeout=60)
        check(h2c.returncode == 0 and "HTTP/1.1 101" in h2c.stderr and "< HTTP/2 200" in
              h2c.stderr and h2c.stdout.count("tok") == 4,
              f"curl upgraded to HTTP/2 with hypercorn and streamed 4 tokens "
              f"({h2c.returncode}, {h2c.stderr[-300:]!r})")

        # phase: a process killed mid-stream (SIGKILL), the client and then the server, while
        # the other end lives on
        crash_dir = os.path.join(work, "crash")
        os.makedirs(crash_dir)
        victim, victim_port, _ = start_app(crash_dir, "asyncio")
        procs.append(victim)
        crashes = {}
        for who, cport, model in (("client", apps["asyncio"]["port"], CRASH_MODEL + "c"),
                                  ("server", victim_port, CRASH_MODEL + "s")):
            body = {"model": model, "stream": True,
                    "messages": [{"role": "user", "content": "PROMPT-CANARY crash"}]}
            c = subprocess.Popen(["curl", "-sS", "-N", "-H", "Content-Type: application/json",
                                  f"http://127.0.0.1:{cport}/v1/chat/completions",
                                  "-d", json.dumps(body)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            while True:  # under way: its first token is through
                line = c.stdout.readline()
                if not line or b"tok0_0" in line:
                    break
            (c if who == "client" else victim).kill()
            killed_at = time.monotonic()
            c.wait(timeout=30)  # killed, or ended by the server's death
            crashes[who] = (bool(line), wait_records(tracer.out, model, 2, 15),
                            (c if who == "client" else victim).pid, killed_at)

        # phase: edge cases, each in its own process (server and client threads)
        edges = {"write": 20, "sendfile": 2, "splice": 2, "writev": 2, "bigwritev": 1,
                 "short": 2, "pipefd": 2, "tiny": 6, "forkclose": 2, "vectored": 2, "mmsg": 2}
        edge_times = {}  # pipefd: each request's write, from the client's clock
        for mode, n in edges.items():
            p = subprocess.run([CLIENT_PYTHON, os.path.join(clients, "tcp_edges.py"), mode,
                                str(n), f"edge-{mode}"], capture_output=True, text=True,
                               timeout=60)
            if check(p.returncode == 0, f"tcp edge case {mode} ran: {p.stderr[-300:]}"):
                edge_times.update(json.loads(p.stdout)["times"])

        # replies sent through io_uring: the server's side is unseen, curl's is not
        uring_port_file = os.path.join(work, "uring.port")
        uring = subprocess.Popen([os.path.join(FIXTURES, ".gen", "uring_server"),
                                  uring_port_file, "2"])
        procs.append(uring)  # ended with the others, whatever fails first
        uring_port = wait_file(uring_port_file, uring, "uring_server")
        for i in range(2):
            check(run(["curl", "-sS", "--fail", "-N", "-o", "/dev/null",
                       f"http://127.0.0.1:{uring_port}/v1/chat/completions",
                       "-d", json.dumps({"model": f"edge-uring-{i}", "stream": True})]),
                  f"curl to the io_uring server ran ({i})")
        check(uring.wait(timeout=30) == 0, "io_uring server served both")

        out, _ = noise.communicate(timeout=300)
        check(noise.returncode == 0, f"noise ran, every byte intact: {out.strip()}")

        rc, text, err = tracer.stop()
        rc_port, text_port, _ = by_port.stop()
        rc_np, text_np, _ = no_plain.stop()
        rc_comm, _, _ = by_comm.stop()
    finally:
        for p in procs:
            p.terminate()  # nginx's master takes its workers with it
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    check(rc == 0 and rc_port == 0 and rc_np == 0 and rc_comm == 0,
          f"tracers exited 0 ({err[-300:]})")
    all_records = [json.loads(line) for line in open(tracer.out)]
    records = [r for r in all_records if r.get("type") == "request"]  # not stray steps

    def find(model, role, transport=None):
        for r in records:
            if r["model"] == model and r["role"] == role and \
                    (transport is None or r["transport"] == transport):
                return r
        return None

    # phase: each request's client and server records against the app's clock
    truths = {}
    for loop, app in apps.items():
        for line in open(app["truth"]):
            t = json.loads(line)
            t["loop"] = loop
            truths[t["model"]] = t
    for label, loop, model, api, comm, clock in expect:
        t = truths.get(model)
        if not check(t is not None, f"{label}: the app served it"):
            continue
        app = apps[loop]
        for role in ("client", "server"):
            r = find(model, role)
            check_plain_record(check, r, t, api, role, f"{label} [{role}]",
                               client_clock.get(clock) if clock else None, loop=loop)
            if not r:
                continue
            app_addr = f"127.0.0.1:{app['port']}"
            check(r["transport"] == "tcp" and
                  (r["local"] if role == "server" else r["peer"]) == app_addr,
                  f"{label} [{role}]: transport tcp, app at {app_addr} "
                  f"({r['transport']}, {r['local']} -> {r['peer']})")
            if role == "server":
                check(r["pid"] == app["proc"].pid, f"{label}: server pid is uvicorn's")
            elif comm:
                check(r["comm"] == comm, f"{label}: client comm {r['comm']} == {comm}")
        c, s = find(model, "client"), find(model, "server")
        if c and s:
            check(c["local"] == s["peer"] and c["peer"] == s["local"],
                  f"{label}: client and server see the same socket from both ends")

    # phase: nginx: four records for one request, linked by their addresses
    t = truths.get(through)
    node = find(through, "client", "tls")
    ngx_in = find(through, "server", "tls")
    ngx_out = find(through, "client", "tcp")
    app_in = find(through, "server", "tcp")
    nginx_addr = f"127.0.0.1:{nginx_port}"
    app_addr = f"127.0.0.1:{apps['asyncio']['port']}"
    four = [("node client (TLS)", node, "client"), ("nginx server (TLS)", ngx_in, "server"),
            ("nginx client of the upstream (TCP)", ngx_out, "client"),
            ("app server (TCP)", app_in, "server")]
    if check(t is not None, "nginx: the app served the proxied request"):
        for label, r, role in four:
            check_plain_record(check, r, t, "openai.chat", role, f"nginx: {label}", None,
                               timing=(label == "app server (TCP)"))
    if node and ngx_in and ngx_out and app_in:
        check(node["comm"] == "node" and ngx_in["comm"] == "nginx" and ngx_out["comm"] == "nginx"
              and ngx_in["pid"] == ngx_out["pid"],
              f"nginx: the four records are node's, nginx's (both ends) and the app's "
              f"({node['comm']}, {ngx_in['comm']}, {ngx_out['comm']})")
        check(node["peer"] == nginx_addr and ngx_in["local"] == nginx_addr and
              node["local"] == ngx_in["peer"] and node["local"],
              f"nginx: node and nginx see one TLS socket ({node['local']} -> {node['peer']}, "
              f"{ngx_in['peer']} -> {ngx_in['local']})")
        check(ngx_out["peer"] == app_addr and app_in["local"] == app_addr and
              ngx_out["local"] == app_in["peer"],
              f"nginx: nginx and the app see one TCP socket ({ngx_out['local']} -> "
              f"{ngx_out['peer']}, {app_in['peer']} -> {app_in['local']})")
        # What each hop saw of the first token: in order along the path, none before the app
        # wrote it.
        firsts = [app_in["first_token_ns"], ngx_out["first_token_ns"], ngx_in["first_token_ns"],
                  node["first_token_ns"]]
        check(None not in firsts and t["token_ns"][0] <= firsts[0] and
              firsts == sorted(firsts) and firsts[-1] - firsts[0] < TOKEN_WINDOW_MS * 1e6,
              f"nginx: the first token passes app -> nginx -> node in order ({firsts})")

    # phase: edge cases
    def edge(mode, role):
        return [r for r in records if r["model"] and r["model"].startswith(f"edge-{mode}-")
                and r["role"] == role]

    for role in ("client", "server"):
        got = edge("write", role)
        check(len(got) == 20 and len({r["model"] for r in got}) == 20 and
              len({r["peer"] if role == "server" else r["local"] for r in got}) == 20 and
              all(r["complete"] and r["token_events"] == 3 and r["output_tokens"] == 3
                  for r in got),
              f"fd reuse: 20 {role} records, one per connection, none merged (got {len(got)})")
    for mode in ("writev", "bigwritev"):
        n = edges[mode]
        got = edge(mode, "client") + edge(mode, "server")
        check(len(got) == 2 * n and all(r["complete"] and r["token_events"] == 3 for r in got),
              f"{mode}: {n} request(s) measured at both ends (got {len(got)})")
    # a request whose first write (and so its server's first read) is 1, 2 or 3 bytes: the
    # socket is decided by its first bytes together (before: ignored at both ends)
    for role in ("client", "server"):
        got = edge("tiny", role)
        check(len(got) == 6 and all(r["complete"] and r["token_events"] == 3 for r in got),
              f"a first write of 1 to 3 bytes: 6 {role} records, complete "
              f"({[(r['model'], r['complete'], r['error']) for r in got]})")
    # a child that closes the fds it inherited ends nothing of its parent's (before: the
    # server's stream ended connection_closed at the child's close)
    got = edge("forkclose", "client") + edge("forkclose", "server")
    check(len(got) == 4 and all(r["complete"] and r["token_events"] == 3 for r in got),
          f"a forked child's close of inherited fds: both ends complete "
          f"({[(r['role'], r['token_events'], r['error']) for r in got]})")
    # every call that moves a socket's bytes: pwritev2, preadv2 and a sendmmsg of one
    # message are captured; a sendmmsg of several is counted and its stream marked (before:
    # the server's record was complete with the events those calls carried missing)
    got = edge("vectored", "client") + edge("vectored", "server")
    check(len(got) == 4 and all(r["complete"] and r["token_events"] == 3 and
                                r["output_tokens"] == 3 for r in got),
          f"pwritev2, sendmmsg of one message, preadv2: every event at both ends "
          f"({[(r['role'], r['token_events'], r['error']) for r in got]})")
    cl, sv = edge("mmsg", "client"), edge("mmsg", "server")
    check(len(cl) == 2 and all(r["complete"] and r["token_events"] == 3 for r in cl),
          f"sendmmsg of two messages: the client, which reads normally, is measured ({len(cl)})")
    check(len(sv) == 2 and all(not r["complete"] and r["error"] == "unsupported_io" for r in sv),
          f"sendmmsg of two messages: the server's reply is marked, never complete "
          f"({[(r['complete'], r['token_events'], r['error']) for r in sv]})")
    got = edge("short", "client") + edge("short", "server")
    check(len(got) == 4 and all(r["complete"] and r["token_events"] == 300 and
                                r["output_tokens"] == 300 for r in got),
          f"short writes and EAGAIN: 300 events of 1 KB each, all seen at both ends "
          f"({[(r['role'], r['token_events'], r['error']) for r in got]})")
    for mode in ("sendfile", "splice"):
        cl, sv = edge(mode, "client"), edge(mode, "server")
        check(len(cl) == 2 and all(r["complete"] and r["token_events"] == 3 for r in cl),
              f"{mode}: the client, which reads normally, is measured ({len(cl)})")
        check(len(sv) == 2 and all(not r["complete"] and r["error"] == "unsupported_io" and
                                   r["token_events"] == 0 for r in sv),
              f"{mode}: the server's reply is not seen: incomplete, unsupported_io, no tokens "
              f"invented ({[(r['complete'], r['error']) for r in sv]})")
    # A write's entry skips the clock for a file its thread found not captured (by inode
    # number): a socket given that file's fd number is captured and its first write stamped
    # when it began, not when it returned (the server read it 200 ms later: the write took
    # more than 100 ms, or the check would not tell the two apart).
    cl, sv = edge("pipefd", "client"), edge("pipefd", "server")
    spans = [(r["start_ns"] - edge_times[r["model"]]["sent_ns"],
              edge_times[r["model"]]["returned_ns"] - edge_times[r["model"]]["sent_ns"])
             for r in cl if r["model"] in edge_times]
    check(len(cl) == 2 and len(sv) == 2 and all(r["complete"] for r in cl + sv) and
          len(spans) == 2 and all(0 <= began < took / 2 and took > 100e6
                                  for began, took in spans),
          f"a socket on the fd number of a pipe its thread wrote: captured, its request "
          f"stamped when its write began (ns after the client's clock, of the write's "
          f"duration: {spans})")
    cl, sv = edge("uring", "client"), edge("uring", "server")
    check(len(cl) == 2 and all(r["complete"] and r["token_events"] == 2 for r in cl),
          f"io_uring: curl, which reads normally, is measured ({len(cl)})")
    check(len(sv) == 2 and all(not r["complete"] and r["error"] == "unsupported_io" and
                               r["token_events"] == 0 for r in sv),
          f"io_uring: the server's reply is not seen: incomplete, unsupported_io "
          f"({[(r['complete'], r['error']) for r in sv]})")
    tcp = [line for line in text.splitlines() if line.startswith("tcp: ")]
    tcp = tcp[0] if tcp else ""
    fields = dict(kv.split("=") for kv in tcp[5:].split()) if tcp else {}
    check(int(fields.get("mmsg", 0)) == 2, f"sendmmsg calls of several messages counted ({tcp})")
    check(int(fields.get("sendfile", 0)) == 2 and int(fields.get("splice", 0)) >= 2 and
          int(fields.get("io_uring", 0)) >= 2, f"sendfile, splice and io_uring counted ({tcp})")
    check(int(fields.get("peeks", 0)) >= 20, f"MSG_PEEK reads counted, not captured ({tcp})")
    check(int(fields.get("ignored_sockets", 0)) >= 4 and int(fields.get("tls_sockets", 0)) >= 2,
          f"non-HTTP sockets ignored, TLS sockets left to the OpenSSL probes ({tcp})")
    check("truncated_calls=1 " in text,
          "the 400 KB writev is cut at the capture budget and counted (the server reads it "
          "4 KiB at a time: nothing cut there)")

    # phase: noise: nothing from it, nothing lost
    check(all(r["pid"] != noise.pid for r in records), "noise: no records")
    check("drops=0 " in text and "lost_pieces=0 " in text and "bad_records=0 " in text,
          "noise: nothing dropped or lost")

    # phase: --port and --no-plaintext
    port_recs = [json.loads(line) for line in open(by_port.out)]
    uv = f"127.0.0.1:{apps['uvloop']['port']}"
    check(len(port_recs) >= 10 and all(uv in (r["local"], r["peer"]) for r in port_recs
                                       if r["transport"] == "tcp"),
          f"--port {apps['uvloop']['port']}: only that port's sockets "
          f"({len(port_recs)} records)")
    np_recs = [json.loads(line) for line in open(no_plain.out)]
    check(len(np_recs) >= 2 and all(r["transport"] == "tls" for r in np_recs),
          f"--no-plaintext: TLS records only ({len(np_recs)})")

    check_crashes(check, crashes)

    # phase: h2c: after the 101 the request goes on as HTTP/2 stream 1, at both ends, and its
    # reply is read from the HTTP/2 frames (nothing after the 101 is read as HTTP/1.1)
    hyper_addr = f"127.0.0.1:{hyper_port}"
    up = [r for r in records if hyper_addr in (r["local"], r["peer"])]
    check(len(up) == 2 and {r["role"] for r in up} == {"client", "server"} and
          all(r["status"] == 200 and r["http_version"] == "2" and r["stream_id"] == 1 and
              r["complete"] and r["token_events"] == 4 and not r["headers_partial"] and
              r["path"] == "/v1/chat/completions" for r in up),
          f"h2c upgrade: one record per end, stream 1 over HTTP/2, 4 tokens read from its "
          f"frames ({[(r['role'], r['status'], r['error'], r['token_events']) for r in up]})")

    # phase: -c matches the process's command name, not its threads' names
    comm_recs = [json.loads(line) for line in open(by_comm.out)]
    got = sorted(r["model"] for r in comm_recs if r["role"] == "client" and r["complete"])
    check(got == renamed_served and all(r["comm"] == RENAMED_COMM for r in comm_recs),
          f"-c {RENAMED_COMM}: every request of its renamed worker threads, nothing else, "
          f"under the process's name ({len(got)}/{len(renamed_served)} records, "
          f"{sorted({r['comm'] for r in comm_recs})})")
    renamed = [r for r in records if r["model"] and r["model"].startswith("fx-ttft2-itl1-n3-rn")
               and r["role"] == "client"]
    check(len(renamed) == RENAMED_REQUESTS and all(r["comm"] == RENAMED_COMM for r in renamed),
          f"renamed threads: records carry the process's name, not the thread's "
          f"({sorted({r['comm'] for r in renamed})})")

    # phase: replay gives the same records
    replay_out = os.path.join(work, "replay.jsonl")
    r = subprocess.run([ctx["tokenscope"], "report", tracer.rec, "-q", "-o", replay_out],
                       capture_output=True, text=True)
    replayed = [json.loads(line) for line in open(replay_out)] if r.returncode == 0 else []
    check(replayed == all_records, f"plaintext replay gives the same {len(all_records)} records")
    blob = text + err + open(tracer.out).read()
    for secret in ("SECRET", "PROMPT-CANARY", "tok0_0"):
        check(secret not in blob, f"plaintext: no '{secret}' in any output")

    check_seq_race(ctx, work)
    check_full_ring(ctx, work)
    check_socket_table(ctx, work)


SEQ_RACE = (3, 64, 200)  # runs, pipelined requests a run, tokens a response


def check_seq_race(ctx, work):
    """Two threads racing on one plaintext socket (tests/fixtures/seq_race.c): a client's write
    and its read leave the kernel together on two CPUs, 12 800 times a run. Before each
    direction had its own sequence counter, the two exits took one number or reached the ring
    in the other order than they took theirs, which read as lost pieces: 25 in three runs,
    and 129 of 384 records gone (issue 38, case 1). Every request must be whole at both ends.
    Three times: with the plaintext family as this kernel loads it, with the build Linux 6.1
    loads (TOKENSCOPE_CORE_READS=1: CO-RE reads in place of bpf_rdonly_cast), and with the one
    5.10 loads (TOKENSCOPE_LEGACY=1: no atomic fetch-and-add, the numbers taken under a lock,
    raced here on two CPUs, which the kernel matrix's guests do not race as hard)."""
    for build, env, name, start in (
            ("", None, "seq-race", "plaintext TCP (filtered)"),
            (" (CO-RE build)", {"TOKENSCOPE_CORE_READS": "1"}, "seq-race-core",
             "plaintext TCP (CO-RE reads) (filtered)"),
            (" (5.10 build)", {"TOKENSCOPE_LEGACY": "1"}, "seq-race-legacy",
             "plaintext TCP (5.10 programs) (filtered)")):
        seq_race_run(ctx, os.path.join(work, name), env, start, f"seq race{build}")


def seq_race_run(ctx, work, env, start, label):
    check = ctx["check"]
    runs, nreq, ntok = SEQ_RACE
    tracer = ctx["Tracer"](work, "--comm", "seq_race", env=env)
    tracer.stderr.seek(0)
    check(start in tracer.stderr.read(), f"{label}: the plaintext family's build loaded as asked "
                                         f"({start!r} in its start line)")
    for i in range(runs):
        r = subprocess.run([os.path.join(FIXTURES, ".gen", "seq_race"), str(nreq), str(ntok),
                            f"race{i}"], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"{label} {i} ran ({r.stderr[-300:]})")
    rc, out, err = tracer.stop()
    check(rc == 0, f"{label}: tokenscope exited 0 ({err[-300:]})")
    records = [json.loads(line) for line in open(tracer.out)]
    for role in ("client", "server"):
        got = [r for r in records if r.get("type") == "request" and r["role"] == role]
        bad = [(r["model"], r["error"], r["token_events"]) for r in got
               if not r["complete"] or r["token_events"] != ntok]
        check(len(got) == runs * nreq and not bad,
              f"{label} [{role}]: {len(got)} of {runs * nreq} records, each complete with "
              f"{ntok} tokens ({len(bad)} not: {bad[:4]})")
    check("lost_pieces=0 " in out and "drops=0 " in out and
          "without the stream's lock" not in out,
          f"{label}: nothing dropped, no piece lost, every number taken under its lock "
          f"({[line for line in out.splitlines() if 'lost_pieces' in line]})")


FULL_RING = (16, 64, 200)  # runs, requests a run, tokens a response


def check_full_ring(ctx, work):
    """A tracer that cannot keep up: with -b 8 (a 4 MiB ring, a 4 MiB backlog behind it) and
    stopped (SIGSTOP, both its threads) while seq_race streams, until four more runs have
    finished (each about 38 000 records, several MiB). What the ring could not take must be
    counted and said, the requests it cut marked incomplete, and no request reported whole
    with a wrong count. Ground truth: every response has exactly TOKENS token events."""
    check = ctx["check"]
    runs, nreq, ntok = FULL_RING
    tracer = ctx["Tracer"](os.path.join(work, "full-ring"), "--comm", "seq_race", "-b", "8")
    finished = []
    done = threading.Condition()

    def traffic():
        for i in range(runs):
            r = subprocess.run([os.path.join(FIXTURES, ".gen", "seq_race"), str(nreq),
                                str(ntok), f"full{i}"], capture_output=True, timeout=120)
            with done:
                finished.append(r.returncode)
                done.notify_all()

    t = threading.Thread(target=traffic)
    t.start()
    with done:
        done.wait_for(lambda: len(finished) >= 1, timeout=120)
        tracer.p.send_signal(signal.SIGSTOP)
        stopped_at = len(finished)
        done.wait_for(lambda: len(finished) >= min(runs, stopped_at + 4), timeout=120)
        tracer.p.send_signal(signal.SIGCONT)
    t.join()
    rc, out, err = tracer.stop()
    check(rc == 0 and finished == [0] * runs,
          f"full ring: tokenscope exited 0, the {runs} runs ran ({finished}; {err[-300:]})")
    summary = [line for line in out.splitlines() if line.startswith("capture:")]
    drops = int(summary[0].split("drops=")[1].split()[0]) if summary else 0
    check(drops > 0 and "events dropped" in err,
          f"full ring: the records the ring could not take are counted ({drops}) and said on "
          f"stderr ({[line for line in err.splitlines() if 'dropped' in line][:1]})")
    records = [json.loads(line) for line in open(tracer.out)]
    for role in ("client", "server"):
        got = [r for r in records if r.get("type") == "request" and r["role"] == role]
        whole = [r for r in got if r["complete"]]
        wrong = [(r["model"], r["token_events"]) for r in whole if r["token_events"] != ntok]
        check(not wrong and len(whole) >= nreq and len(got) <= runs * nreq,
              f"full ring [{role}]: {len(whole)} requests whole, each with its {ntok} tokens "
              f"({len(wrong)} not: {wrong[:3]}), {len(got)} of {runs * nreq} in all")
    # the connection the ring filled on had a request under way at both ends (pipelined):
    # what it lost is said as the loss, not as the capture's end
    cut = [(r["role"], r["model"], r["token_events"]) for r in records
           if r.get("type") == "request" and not r["complete"]]
    check(cut and all(r.get("error") == "capture_loss" for r in records
                      if r.get("type") == "request" and not r["complete"]),
          f"full ring: the requests the loss cut are incomplete, capture_loss ({cut[:4]}, "
          f"{sorted({r.get('error') for r in records if not r.get('complete', True)})})")


def check_socket_table(ctx, work):
    """A quiet stream through floods of sockets (clients/quiet_flood.py): 600 processes that
    open 128 Unix sockets each, half carrying HTTP, and exit without closing them, must not push
    it out of the plaintext family's socket table (before: the stream lost its last events and
    read complete with 1 of 3); 68 000 captured sockets held open at once, more than the table
    holds, may (which ones is the kernel's choice), and then the stream is marked capture_loss
    and the summary says the table was full, never complete. Ground truth: the stream's three
    events."""
    check = ctx["check"]
    clients = os.path.join(ctx["root"], "tests", "integration", "clients")
    for label, args, whole in (("exited", ["600"], True), ("held", ["10", "34000"], False)):
        tracer = ctx["Tracer"](os.path.join(work, f"table-{label}"), "--comm", "python3")
        model = f"quiet-{label}"
        p = subprocess.run([CLIENT_PYTHON, os.path.join(clients, "quiet_flood.py"), model,
                            *args], capture_output=True, text=True, timeout=240)
        rc, out, err = tracer.stop()
        ran = json.loads(p.stdout) if p.returncode == 0 else {}
        check(rc == 0 and ran.get("whole") and ran.get("flood_sockets", 0) > TABLE_SIZE,
              f"socket table, {label}: the flood ran past the table's size ({ran}, "
              f"{p.stderr[-300:]})")
        got = [r for r in (json.loads(x) for x in open(tracer.out))
               if r.get("type") == "request" and r.get("model") == model]
        full = "the plaintext socket table was full" in out
        if whole:
            check(len(got) == 2 and all(r["complete"] and r["token_events"] == 3 for r in got)
                  and not full,
                  f"socket table: sockets of exited processes push no live stream out "
                  f"({[(r['role'], r['token_events'], r['error']) for r in got]}, full: {full})")
        else:  # which sockets the kernel pushes out is its choice: either end may stay
            check(len(got) == 2 and all((r["complete"] and r["token_events"] == 3) or
                                        (not r["complete"] and r["error"] == "capture_loss")
                                        for r in got) and full,
                  f"socket table: past its size, each end of the stream is whole or marked "
                  f"capture_loss, never complete with events missing, and the table's filling "
                  f"said ({[(r['role'], r['token_events'], r['error']) for r in got]}, "
                  f"full: {full})")


def wait_records(path, model, n, timeout):
    """The records of model in the JSON Lines at path, once there are n (or at timeout).
    Read while tokenscope writes: a line without its newline yet is one still being written
    (a reader can see a write(2) to a file in part, page by page), so it waits for the next
    look."""
    deadline = time.monotonic() + timeout
    while True:
        got = [json.loads(line) for line in open(path)
               if line.endswith("\n") and f'"{model}"' in line]
        if len(got) >= n or time.monotonic() > deadline:
            return got, time.monotonic()
        time.sleep(0.1)


def check_crashes(check, crashes):
    for who, (started, (recs, seen_at), pid, killed_at) in crashes.items():
        check(started, f"crashed {who}: its stream was under way when it was killed")
        dead = [r for r in recs if r["pid"] == pid]
        other = [r for r in recs if r["pid"] != pid]
        check(len(dead) == 1 and len(other) == 1 and seen_at - killed_at < 15,
              f"crashed {who}: both ends' records written while tokenscope runs, "
              f"{seen_at - killed_at:.1f} s after the kill ({len(dead)} + {len(other)})")
        if dead and other:
            check(dead[0]["role"] == who and not dead[0]["complete"] and
                  dead[0]["error"] == "process_exited" and dead[0]["token_events"] >= 1,
                  f"crashed {who}: its own record says process_exited "
                  f"({dead[0]['role']}, {dead[0]['error']}, {dead[0]['token_events']} events)")
            check(not other[0]["complete"] and other[0]["error"] == "peer_exited",
                  f"crashed {who}: the live end's record says its peer died "
                  f"({other[0]['role']}, {other[0]['error']})")


def check_plain_record(check, rec, t, api, role, label, clock, timing=True, loop="asyncio"):
    if not check(rec is not None, f"{label}: a record exists"):
        return
    check(rec["complete"] is True, f"{label}: complete ({rec['error']})")
    check(rec["api"] == api and rec["status"] == 200, f"{label}: api {rec['api']}, status 200")
    check(rec["output_tokens"] == t["output_tokens"] and not rec["output_tokens_estimated"],
          f"{label}: output_tokens {rec['output_tokens']} == {t['output_tokens']}")
    want_cached = None if api == "ollama" else t["cached_tokens"]
    check(rec["input_tokens"] == t["input_tokens"] and rec["cached_tokens"] == want_cached,
          f"{label}: input/cached tokens {rec['input_tokens']}/{rec['cached_tokens']} == "
          f"{t['input_tokens']}/{want_cached}")
    check(rec["token_events"] == t["events"],
          f"{label}: token_events {rec['token_events']} == {t['events']}")
    if not timing:
        return
    first = rec["first_token_ns"]
    if not check(first is not None and rec["tpot_ms"] is not None, f"{label}: timed"):
        return
    last = rec["start_ns"] + round(rec["e2e_ms"] * 1e6)
    if role == "server":
        # On asyncio's loop uvicorn writes each event to the socket between the app's two
        # readings around its yield. uvloop queues the write until the loop's iteration ends,
        # after the app resumed and awaits its next sleep: before the next token's reading,
        # and the last token before the app's reading after its last send (sent_ns). Causal
        # bounds, which no preemption on a loaded machine can break.
        if loop == "asyncio":
            upper_first, upper_last = t["token_after_ns"][0], t["token_after_ns"][-1] + 2000
        else:
            upper_first = t["token_ns"][1] if len(t["token_ns"]) > 1 else t["sent_ns"]
            upper_last = t["sent_ns"]
        check(t["token_ns"][0] <= first <= upper_first,
              f"{label}: first token written inside the app's yield, or (uvloop) before its "
              f"next token ({t['token_ns'][0]} <= {first} <= {upper_first})")
        check(t["token_ns"][-1] - 2000 <= last <= upper_last,
              f"{label}: last token written inside the app's yield, or (uvloop) before its "
              f"reading after its last send ({t['token_ns'][-1]} <= {last} <= {upper_last})")
        lead = (t["recv_ns"] - rec["start_ns"]) / 1e6
        check(0 <= lead <= 20, f"{label}: request read {lead:.3f} ms before the handler ran")
    else:
        delivery = (first - t["token_ns"][0]) / 1e6
        check(0 <= delivery <= TOKEN_WINDOW_MS,
              f"{label}: first token read {delivery:.3f} ms after the app wrote it")
        check(rec["start_ns"] <= t["recv_ns"], f"{label}: request sent before the app had it")
        if clock:
            check(int(clock["start_ns"]) <= rec["start_ns"] and
                  first <= int(clock["first_ns"]),
                  f"{label}: times inside the client's own clock readings")
    tpot = (t["token_ns"][-1] - t["token_ns"][0]) / (t["output_tokens"] - 1) / 1e6
    check(abs(rec["tpot_ms"] - tpot) <= TPOT_TOLERANCE_MS,
          f"{label}: tpot {rec['tpot_ms']} near the app's {tpot:.3f}")
