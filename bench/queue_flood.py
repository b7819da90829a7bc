#!/usr/bin/env python3
"""bench/queue_flood.py - a well-behaved client's latency while another
connection floods the daemon with queued work and then disconnects, and the
daemon's memory. Run by hand:

    python3 bench/queue_flood.py [--toolexecd build/daemon/toolexecd]
        [--testworker build/tests/workers/testworker] [--batches 200]
        [--daemon-arg=--max-queued-calls=300000 ...] [scenario ...]

Scenarios (all by default):
  flood       one connection sends BATCHES batches of 1024 calls of a tool
              that blocks (--max-workers 1, so they queue), then closes: a
              probe client's stats round trip (p50/max) during the flood and
              during the disconnect, the daemon's RSS, and how long the
              cancelled queue takes to settle
  nonreading  a client that never reads runs 128 calls returning ~1 MiB each
              (16 at a time): the daemon's peak RSS growth
  lines       12 clients each send 16 MiB of an unfinished request line: the
              daemon's peak RSS growth

The daemon runs with its defaults (plus --max-workers 1 for flood): batches
beyond its limits show up as refused.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj):
        self.s.sendall((json.dumps(obj, separators=(",", ":")) + "\n").encode())

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def stats(self):
        self.send({"op": "stats"})
        while True:
            ev = self.recv()
            if ev is None or ev.get("event") == "stats":
                return ev


class Daemon:
    def __init__(self, exe, testworker, args):
        self.tmp = tempfile.mkdtemp(prefix="te-bench-")
        os.chmod(self.tmp, 0o755)
        tools = os.path.join(self.tmp, "tools")
        os.mkdir(tools)
        for name, mode in (("wait", "wait-file"), ("echo", "echo"), ("fill", "fill-pipe")):
            with open(os.path.join(tools, name + ".json"), "w") as f:
                json.dump({"name": name, "description": name, "command": [testworker, mode]}, f)
        self.sock = os.path.join(self.tmp, "s.sock")
        self.log = open(os.path.join(self.tmp, "log"), "wb")
        self.proc = subprocess.Popen([exe, "--socket", self.sock, "--tools", tools,
                                      "--work-dir", os.path.join(self.tmp, "work"),
                                      "--log-level", "warn"] + args,
                                     stdout=self.log, stderr=self.log)
        for _ in range(500):
            try:
                Conn(self.sock).s.close()
                break
            except OSError:
                time.sleep(0.01)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Probe(threading.Thread):
    """A client asking for stats in a loop: (time, round trip) samples."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.c = Conn(path)
        self.samples = []
        self.stop = False

    def run(self):
        while not self.stop:
            t0 = time.monotonic()
            st = self.c.stats()
            self.samples.append((t0, time.monotonic() - t0, st))

    def between(self, a, b):
        rtts = sorted(r for t, r, _ in self.samples if a <= t <= b)
        if not rtts:
            return "no answer at all"
        return "%d answers, p50 %.2f ms, max %.1f ms" % (len(rtts), rtts[len(rtts) // 2] * 1e3,
                                                        rtts[-1] * 1e3)


def flood(exe, tw, batches, extra):
    d = Daemon(exe, tw, ["--max-workers", "1"] + extra)
    try:
        probe = Probe(d.sock)
        probe.start()
        rss0 = status_kib(d.proc.pid, "VmRSS")
        a = Conn(d.sock)
        never = os.path.join(d.tmp, "never")
        calls = [{"id": "c%d" % k, "name": "wait", "arguments": {"path": never}}
                 for k in range(1024)]
        refused = [0]

        def count_refusals():
            while True:
                try:
                    ev = a.recv()
                except (OSError, ValueError):
                    return
                if ev is None:
                    return
                refused[0] += ev.get("event") == "error"
        reader = threading.Thread(target=count_refusals, daemon=True)
        reader.start()
        lines = [(json.dumps({"op": "run", "batch": "f%d" % i, "calls": calls},
                             separators=(",", ":")) + "\n").encode() for i in range(batches)]
        t0 = time.monotonic()
        for i in range(batches):
            a.s.sendall(lines[i])
        q = Conn(d.sock)
        while True:
            s = q.stats()
            if s["workers"]["queued"] + s["workers"]["running"] + 1024 * refused[0] >= \
                    1024 * batches:
                break
            time.sleep(0.05)
        t1 = time.monotonic()
        rss1 = status_kib(d.proc.pid, "VmRSS")
        print("flood: %d batches x 1024 calls sent in %.2f s; %d refused; daemon RSS %d -> %d KiB"
              % (batches, t1 - t0, refused[0], rss0, rss1))
        print("  probe during the flood: " + probe.between(t0, t1))
        a.s.shutdown(socket.SHUT_RDWR)
        a.s.close()
        t2 = time.monotonic()
        while True:
            s = q.stats()
            if s["batches"]["running"] == 0:
                break
            time.sleep(0.005)
        t3 = time.monotonic()
        time.sleep(0.05)
        probe.stop = True
        probe.join(5)
        print("  disconnect: queue settled in %.0f ms; probe meanwhile: %s"
              % ((t3 - t2) * 1e3, probe.between(t2, t3 + 0.05)))
    finally:
        d.stop()


def nonreading(exe, tw):
    d = Daemon(exe, tw, [])
    try:
        q = Conn(d.sock)
        q.stats()
        hwm0 = status_kib(d.proc.pid, "VmHWM")
        slow = Conn(d.sock)
        slow.send({"op": "run", "batch": "nr", "max_concurrency": 16, "tool_timeout": 500,
                   "calls": [{"id": "c%d" % i, "name": "fill", "arguments": {"n": MIB - 8192}}
                             for i in range(128)]})
        t0 = time.monotonic()
        while q.stats()["batches"]["served"] < 1:
            time.sleep(0.05)
        print("nonreading: 128 x ~1 MiB results, client never reads: batch done in %.1f s, "
              "daemon peak RSS +%d KiB" % (time.monotonic() - t0,
                                           status_kib(d.proc.pid, "VmHWM") - hwm0))
        slow.s.close()
    finally:
        d.stop()


def lines(exe, tw):
    d = Daemon(exe, tw, [])
    try:
        q = Conn(d.sock)
        q.stats()
        hwm0 = status_kib(d.proc.pid, "VmHWM")
        cs = [Conn(d.sock) for _ in range(12)]
        chunk = b"x" * MIB
        for _ in range(16):
            for c in cs:
                c.s.sendall(chunk)
        q.stats()
        t0 = time.monotonic()
        q.send({"op": "tools"})
        q.recv()
        print("lines: 12 unfinished 16 MiB lines: daemon peak RSS +%d KiB; a tools request "
              "meanwhile %.1f ms" % (status_kib(d.proc.pid, "VmHWM") - hwm0,
                                     (time.monotonic() - t0) * 1e3))
    finally:
        d.stop()


def main():
    root = os.path.dirname(HERE)
    ap = argparse.ArgumentParser()
    ap.add_argument("--toolexecd", default=os.path.join(root, "build", "daemon", "toolexecd"))
    ap.add_argument("--testworker",
                    default=os.path.join(root, "build", "tests", "workers", "testworker"))
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="extra daemon option for flood (repeat), e.g. "
                    "--daemon-arg=--max-queued-calls=300000")
    ap.add_argument("scenario", nargs="*", default=["flood", "nonreading", "lines"])
    o = ap.parse_args()
    print("toolexecd %s" % o.toolexecd)
    for s in o.scenario:
        if s == "flood":
            flood(o.toolexecd, o.testworker, o.batches, o.daemon_arg)
        elif s == "nonreading":
            nonreading(o.toolexecd, o.testworker)
        elif s == "lines":
            lines(o.toolexecd, o.testworker)
        else:
            sys.exit("unknown scenario " + s)


if __name__ == "__main__":
    main()
