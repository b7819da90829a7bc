#!/usr/bin/env python3
"""bench/tail_filter_load.py - what subscribers' filters cost everyone else.
Run by hand, never as a timed test:

    python3 bench/tail_filter_load.py [--toolexecd build/daemon/toolexecd]
        [--worker build/tests/workers/testworker] [--names 400000]
        [--subscribers 2] [--calls 1024]

Starts a private toolexecd with one tool, attaches SUBSCRIBERS subscribers
whose "tools" filter lists NAMES names that match nothing (every event is
checked against the whole filter), runs one CALLS-call batch from another
client, and meanwhile measures a well-behaved client's one-call batches
(send to batch_completed). A daemon that refuses filters that big gets the
largest it accepts (from the error's message) instead, and says so. The
same probe runs first with nothing else going on.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def send(self, obj):
        self.s.sendall(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def recv(self):
        line = self.f.readline()
        if not line:
            raise EOFError("toolexecd closed the connection")
        return json.loads(line)

    def until(self, pred):
        while True:
            ev = self.recv()
            if pred(ev):
                return ev


def one_call(c, n):
    t0 = time.monotonic()
    c.send({"op": "run", "batch": "p%d" % n, "calls": [{"id": "a", "name": "echo"}]})
    c.until(lambda e: e.get("batch") == "p%d" % n and e["event"] == "batch_completed")
    return (time.monotonic() - t0) * 1000


def drain(c):
    try:
        while True:
            c.recv()
    except (EOFError, OSError, ValueError):
        pass


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def describe(name, xs):
    return "%s: %d calls, p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        name, len(xs), statistics.median(xs), pct(xs, 99), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--toolexecd", default=os.path.join(ROOT, "build", "daemon", "toolexecd"))
    ap.add_argument("--worker", default=os.path.join(ROOT, "build", "tests", "workers",
                                                     "testworker"))
    ap.add_argument("--names", type=int, default=400000)
    ap.add_argument("--subscribers", type=int, default=2)
    ap.add_argument("--calls", type=int, default=1024)
    ap.add_argument("--baseline", type=int, default=50, help="probe calls with no load")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="te-bench-", dir="/tmp")
    os.chmod(tmp, 0o755)
    os.mkdir(os.path.join(tmp, "tools"))
    os.mkdir(os.path.join(tmp, "work"))
    with open(os.path.join(tmp, "tools", "echo.json"), "w") as f:
        json.dump({"name": "echo", "schema": {"type": "object"}, "command": [a.worker, "echo"]}, f)
    sock = os.path.join(tmp, "s.sock")
    err = open(os.path.join(tmp, "stderr"), "wb")
    d = subprocess.Popen([a.toolexecd, "--socket", sock, "--tools", os.path.join(tmp, "tools"),
                          "--work-dir", os.path.join(tmp, "work"), "--log-level", "warn",
                          "--max-request-bytes", str(64 << 20)],
                         stdout=err, stderr=err, stdin=subprocess.DEVNULL)
    try:
        while not os.path.exists(sock):
            if d.poll() is not None:
                sys.exit("toolexecd exited: " + open(err.name).read())
            time.sleep(0.01)
        time.sleep(0.1)
        print("toolexecd %s, %d CPUs" % (a.toolexecd, os.cpu_count()))
        probe = Conn(sock)
        base = [one_call(probe, i) for i in range(a.baseline)]
        print(describe("idle daemon", base))

        names = a.names
        subs = []
        for _ in range(a.subscribers):
            s = Conn(sock)
            s.send({"op": "tail", "tools": ["n%d" % i for i in range(names)]})
            ev = s.recv()
            if ev["event"] == "error":
                m = re.search(r"at most (\d+) names", ev.get("message", ""))
                print("a %d-name filter is refused: %s" % (names, ev["message"]))
                if not m:
                    sys.exit(1)
                names = int(m.group(1))
                s.send({"op": "tail", "tools": ["n%d" % i for i in range(names)]})
                ev = s.recv()
            assert ev["event"] == "tailing", ev
            subs.append(s)
            # a subscriber that reads: only the filter costs
            threading.Thread(target=drain, args=(s,), daemon=True).start()
        print("%d subscribers with a %d-name tools filter each" % (len(subs), names))

        big = Conn(sock)
        done = threading.Event()
        t0 = time.monotonic()

        def run_big():
            big.send({"op": "run", "batch": "big",
                      "calls": [{"id": "c%d" % i, "name": "echo"} for i in range(a.calls)]})
            big.until(lambda e: e.get("batch") == "big" and e["event"] == "batch_completed")
            done.set()
        threading.Thread(target=run_big, daemon=True).start()
        loaded = []
        n = a.baseline
        while not done.is_set():
            loaded.append(one_call(probe, n))
            n += 1
        print("the %d-call batch took %.1f s" % (a.calls, time.monotonic() - t0))
        print(describe("during the batch", loaded))
    finally:
        d.terminate()
        try:
            d.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
