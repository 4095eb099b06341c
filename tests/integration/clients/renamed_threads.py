#!/usr/bin/env python3
"""A client whose threads have names of their own, as servers and pools name their workers
(pthread_setname_np; prctl(PR_SET_NAME) here). usage: renamed_threads.py PORT N COMM PREFIX

The process (its main thread) is named COMM; N requests are made from 4 worker threads named
ts-worker-0..3, one keep-alive connection each, with models PREFIX-0..N-1. `-c COMM` must see
them all: a filter on the thread's own name would see none. Prints the models it was served."""
import ctypes
import http.client
import json
import sys
import threading

PR_SET_NAME = 15
libc = ctypes.CDLL(None, use_errno=True)


def set_thread_name(name):
    if libc.prctl(PR_SET_NAME, name.encode(), 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def worker(k, port, models, served):
    set_thread_name(f"ts-worker-{k}")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for model in models:
        body = {"model": model, "stream": True,
                "messages": [{"role": "user", "content": "PROMPT-CANARY renamed"}]}
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status == 200 and b"[DONE]" in resp.read():
            served.append(model)
    conn.close()


def main():
    port, n, comm, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    set_thread_name(comm)
    served = []
    models = [f"{prefix}-{i}" for i in range(n)]
    threads = [threading.Thread(target=worker, args=(k, port, models[k::4], served))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(sorted(served)))


if __name__ == "__main__":
    main()
