"""Unix domain sockets: the plaintext family's AF_UNIX stream sockets, with real servers.

1. uvicorn on a Unix socket (FastAPI, --uds) behind nginx (proxy_pass http://unix:PATH), curl
   to nginx over TCP: four records for each request, curl's and nginx's over TCP, nginx's
   and uvicorn's over the Unix socket, joined in pairs as over TCP (server_id): the Unix pair
   by each end's inode, with the socket's path and each other's process (peer_pid).
2. curl --unix-socket straight to uvicorn: both ends on the socket, joined.
3. hypercorn on a Unix socket, curl with HTTP/2 prior knowledge: HTTP/2 over a Unix socket.
4. grpcio on unix:PATH, a grpcio client: gRPC (a Triton-shaped ModelStreamInfer) over a Unix
   socket.
5. A Unix socket that carries no HTTP (other bytes over a socketpair): ignored in the kernel
   after its first call, so never a record nor a stream the summary calls non-HTTP.

Every figure is checked against the servers' own truth (check_plain_record, check_grpc).
"""
import json
import os
import subprocess
import sys

from h2_checks import check_grpc, truths
from plaintext_checks import (DEBIAN_PYTHON, check_plain_record, free_port, run_nginx,
                              stop_all, wait_file)

NGINX_UNIX_CONF = """
user root;  # the Unix socket lies in the test's private work folder
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://unix:{sock}:;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""

# A process that moves other bytes over a Unix socket pair: ignored from its first call.
NOISE = r"""
import socket, sys
a, b = socket.socketpair()
for i in range(50):
    a.sendall(b"\x00\x01not http " + bytes([i]) * 64)
    b.recv(4096)
"""


def start(cmd, work, name, port_file):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(work, f"{name}.err"), "w"))
    wait_file(port_file, p, name)
    return p


def start_nginx(work, sock):
    port = free_port()
    return run_nginx(work, NGINX_UNIX_CONF.format(work=work, port=port, sock=sock), port)


def curl_args(model):
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "PROMPT-CANARY"}]}
    return ["curl", "-sS", "--fail", "-N", "-H", "Content-Type: application/json",
            "-H", "Authorization: Bearer sk-test-SECRET-unix", "-o", "/dev/null",
            "-d", json.dumps(body)]


def run_unix_checks(ctx):
    check, Tracer, run = ctx["check"], ctx["Tracer"], ctx["run"]
    root, work = ctx["root"], os.path.join(ctx["work"], "unix")
    fixtures = os.path.join(root, "tests", "fixtures")
    os.makedirs(work, exist_ok=True)
    app_sock, h2_sock, grpc_sock = (os.path.join(work, n) for n in ("app.sock", "h2.sock",
                                                                     "grpc.sock"))
    app_truth, h2_truth, grpc_truth = (os.path.join(work, n) for n in
                                       ("app.truth", "h2.truth", "grpc.truth"))
    app_py = os.path.join(fixtures, "fastapi_app.py")
    grpc_llm = os.path.join(fixtures, "grpc", "grpc_llm.py")
    procs = []
    try:
        app = start([DEBIAN_PYTHON, app_py, "--port-file", os.path.join(work, "app.port"),
                     "--truth", app_truth, "--uds", app_sock], work, "uvicorn-uds",
                    os.path.join(work, "app.port"))
        procs.append(app)
        hyper = start([DEBIAN_PYTHON, app_py, "--server", "hypercorn", "--port-file",
                       os.path.join(work, "h2.port"), "--truth", h2_truth, "--uds", h2_sock],
                      work, "hypercorn-uds", os.path.join(work, "h2.port"))
        procs.append(hyper)
        grpc = start([DEBIAN_PYTHON, grpc_llm, "serve", "--port-file",
                      os.path.join(work, "grpc.port"), "--truth", grpc_truth, "--uds",
                      grpc_sock], work, "grpc-uds", os.path.join(work, "grpc.port"))
        procs.append(grpc)
        nginx, nginx_port = start_nginx(work, app_sock)
        procs.append(nginx)

        tracer = Tracer(work)
        proxied, direct, h2, g = ("fx-ttft25-itl5-n5-ux1", "fx-ttft20-itl6-n6-ux2",
                                  "fx-ttft20-itl5-n5-ux3", "fx-ttft15-itl5-n6-ux4")
        check(run(curl_args(proxied) + [f"http://127.0.0.1:{nginx_port}/v1/chat/completions"]),
              "unix: curl through nginx to uvicorn on a Unix socket ran")
        check(run(curl_args(direct) + ["--unix-socket", app_sock,
                                       "http://localhost/v1/chat/completions"]),
              "unix: curl --unix-socket to uvicorn ran")
        check(run(curl_args(h2) + ["--http2-prior-knowledge", "--unix-socket", h2_sock,
                                   "http://localhost/v1/chat/completions"]),
              "unix: curl, HTTP/2 with prior knowledge, to hypercorn on a Unix socket ran")
        r = subprocess.run([DEBIAN_PYTHON, grpc_llm, "call", f"unix:{grpc_sock}", g],
                           capture_output=True, text=True, timeout=60)
        got = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
        check(got.get("status") == "OK", f"unix: a grpcio call over a Unix socket ran "
                                         f"({r.stderr[-200:]})")
        noise = subprocess.run([sys.executable, "-c", NOISE], timeout=60)
        check(noise.returncode == 0, "unix: the socketpair noise ran")
        rc, out, err = tracer.stop()
        check(rc == 0, f"unix: tokenscope exited 0 ({err[-300:]})")
    finally:
        stop_all(procs)
    records = [json.loads(line) for line in open(tracer.out) if line.strip()]
    reqs = [x for x in records if x.get("type") == "request"]
    t = truths(app_truth, h2_truth)

    def of(model, role, transport):
        return [x for x in reqs if x["model"] == model and x["role"] == role and
                x["transport"] == transport]

    # 1. through nginx: curl -tcp- nginx -unix- uvicorn
    srv, up = of(proxied, "server", "unix"), of(proxied, "client", "unix")
    front_srv, front_cli = of(proxied, "server", "tcp"), of(proxied, "client", "tcp")
    if check(len(srv) == 1 and len(up) == 1 and len(front_srv) == 1 and len(front_cli) == 1,
             f"unix: four records of the proxied request, two on the Unix socket "
             f"({len(front_cli)} {len(front_srv)} {len(up)} {len(srv)})"):
        srv, up, front_srv, front_cli = srv[0], up[0], front_srv[0], front_cli[0]
        check_pair(check, up, srv, app_sock, "nginx", app.pid, "unix: nginx -> uvicorn")
        check(front_cli["comm"] == "curl" and front_srv["comm"] == "nginx",
              "unix: the TCP side is curl's and nginx's")
        check(front_cli["server_id"] == srv["id"],
              f"unix: curl's record joined through nginx to uvicorn's over the Unix socket "
              f"({front_cli['server_id']} == {srv['id']})")
        check_plain_record(check, srv, t.get(proxied), "openai.chat", "server",
                           "unix: uvicorn behind nginx [server]", None)
        check_plain_record(check, up, t.get(proxied), "openai.chat", "client",
                           "unix: nginx's upstream call [client]", None)
    # 2. curl straight to the socket
    srv, cli = of(direct, "server", "unix"), of(direct, "client", "unix")
    if check(len(srv) == 1 and len(cli) == 1,
             f"unix: both ends of curl --unix-socket ({len(cli)} {len(srv)})"):
        check_pair(check, cli[0], srv[0], app_sock, "curl", app.pid, "unix: curl -> uvicorn")
        check_plain_record(check, srv[0], t.get(direct), "openai.chat", "server",
                           "unix: uvicorn [server]", None)
        check_plain_record(check, cli[0], t.get(direct), "openai.chat", "client",
                           "unix: curl --unix-socket [client]", None)
    # 3. HTTP/2 over the socket
    srv, cli = of(h2, "server", "unix"), of(h2, "client", "unix")
    if check(len(srv) == 1 and len(cli) == 1,
             f"unix: both ends of HTTP/2 over a Unix socket ({len(cli)} {len(srv)})"):
        check(srv[0]["http_version"] == "2" and cli[0]["http_version"] == "2",
              "unix: HTTP/2 at both ends")
        check_pair(check, cli[0], srv[0], h2_sock, "curl", hyper.pid, "unix: curl -> hypercorn")
        check_plain_record(check, srv[0], t.get(h2), "openai.chat", "server",
                           "unix: hypercorn, HTTP/2 [server]", None, timing=False)
        check(cli[0]["complete"] and cli[0]["token_events"] == t[h2]["events"],
              f"unix: curl HTTP/2 [client]: complete, every token ({cli[0]['token_events']})")
    # 4. gRPC over the socket
    check_grpc(check, reqs, [(g, "OK", got.get("tokens"), "unix")], grpc_truth)
    srv, cli = of(g, "server", "unix"), of(g, "client", "unix")
    if len(srv) == 1 and len(cli) == 1:
        check_pair(check, cli[0], srv[0], grpc_sock, None, grpc.pid, "unix: grpcio")
    # 5. no record of the noise, which was counted
    others = [x for x in reqs if not x["model"] or "-ux" not in x["model"]]
    check(not [x for x in others if x["transport"] == "unix"],
          f"unix: no record but the four requests' on Unix sockets "
          f"({[x['model'] for x in others if x['transport'] == 'unix'][:3]})")
    check("non-http 0" in out, "unix: the socketpair was ignored in the kernel: no stream "
                               "the summary calls non-HTTP")
    for secret in ("SECRET", "PROMPT-CANARY"):
        check(secret not in open(tracer.out).read() and secret not in out,
              f"unix: {secret} in no output")


def check_pair(check, cli, srv, path, client_comm, server_pid, label):
    """A client's and its server's record on one Unix socket: joined, with the socket's path,
    each end's inode in the other's peer address, and each other's process."""
    check(cli["local"].startswith(f"unix:{path}#") and srv["local"].startswith(f"unix:{path}#"),
          f"{label}: both ends name the socket's path ({cli['local']}, {srv['local']})")
    check(cli["local"] == srv["peer"] and cli["peer"] == srv["local"] and
          cli["local"] != cli["peer"],
          f"{label}: each end's address the other's peer ({cli['local']} {cli['peer']})")
    check(cli["server_id"] == srv["id"], f"{label}: the client's record joined to the server's "
                                         f"({cli['server_id']} == {srv['id']})")
    check(cli["peer_pid"] == server_pid == srv["pid"] and srv["peer_pid"] == cli["pid"],
          f"{label}: peer_pid names the other end ({cli['peer_pid']}/{server_pid}, "
          f"{srv['peer_pid']}/{cli['pid']})")
    if client_comm:
        check(cli["comm"] == client_comm, f"{label}: the client is {client_comm}")
