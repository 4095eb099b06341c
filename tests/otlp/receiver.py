#!/usr/bin/python3
"""An OTLP/HTTP trace receiver for tokenscope's --otlp tests: every export is decoded with
the official OpenTelemetry protos (tests/node/otlp-protos, fetched by `make deps`; compiled
here with protoc for python3-protobuf), never by hand, and each span written as one JSON line.

    receiver.py PORT_FILE OUT.jsonl [--answers 503,503,200,...] [--hang]

--answers: the status of each POST in turn (Retry-After: 1 with a 503); then 200.
--hang: accept, never answer. The port it listens on goes to PORT_FILE once it is ready.
"""
import gzip
import http.server
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = os.path.join(HERE, "..", "node", "otlp-protos")
NEEDED = ["opentelemetry/proto/common/v1/common.proto",
          "opentelemetry/proto/resource/v1/resource.proto",
          "opentelemetry/proto/trace/v1/trace.proto",
          "opentelemetry/proto/collector/trace/v1/trace_service.proto"]


def compile_protos():
    out = tempfile.mkdtemp(prefix="otlp-pb-")
    subprocess.run(["protoc", f"-I{PROTOS}", f"--python_out={out}", *NEEDED], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2")


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def main():
    port_file, out_path = sys.argv[1], sys.argv[2]
    answers = []
    if "--answers" in sys.argv:
        answers = [int(x) for x in sys.argv[sys.argv.index("--answers") + 1].split(",")]
    hang = "--hang" in sys.argv
    pb = compile_protos()
    lock = threading.Lock()
    out = open(out_path, "a")
    posts = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def read_body(self):
            """Content-Length or chunked (the OpenTelemetry JS SDK's exporter), gzip or not."""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    body += self.rfile.read(size)
                    self.rfile.readline()
                    if size == 0:
                        break
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            return body

        def do_POST(self):
            body = self.read_body()
            if hang:
                threading.Event().wait()
            with lock:
                status = answers[len(posts)] if len(posts) < len(answers) else 200
                posts.append(status)
            if status == 200:
                req = pb.ExportTraceServiceRequest()
                req.ParseFromString(body)  # raises on a body that is not one
                with lock:
                    for rs in req.resource_spans:
                        res = attrs(rs.resource.attributes)
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                out.write(json.dumps({
                                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                    "parent_span_id": s.parent_span_id.hex(), "name": s.name,
                                    "trace_state": s.trace_state,
                                    "links": [{"trace_id": k.trace_id.hex(),
                                               "span_id": k.span_id.hex()} for k in s.links],
                                    "dropped_links": s.dropped_links_count,
                                    "events": [{"time": e.time_unix_nano, "name": e.name}
                                               for e in s.events],
                                    "dropped_events": s.dropped_events_count,
                                    "kind": s.kind, "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano, "attributes": attrs(s.attributes),
                                    "status": {"code": s.status.code, "message": s.status.message},
                                    "resource": res, "scope": ss.scope.name,
                                    "content_type": self.headers.get("Content-Type"),
                                    "auth": self.headers.get("Authorization")}) + "\n")
                    out.flush()
            self.send_response(status)
            if status == 503:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
