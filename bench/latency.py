#!/usr/bin/env python3
"""bench/latency.py - how long a well-behaved client waits while another
client runs a hostile load.

  bench/latency.py [--build DIR | --socket PATH] [--mode MODE] [--probes N]
                   [--calls N] [--bytes N] [--daemon-arg ARG]...

Starts the real daemon (BUILD/daemon/toolexecd, default build/) on a private
socket with the tools the modes need, or talks to a running one (--socket:
it must define the tools listed by --list-tools). Then:

  1. without load: the probe client sends --probes probes one after another;
  2. under load: a hostile client starts MODE; once its load is under way
     the probe client probes one after another until the load ends.

A probe is two round trips, timed separately: a "tools" request (the loop
alone) and a one-call batch of a trivial framed tool (the loop plus a worker
slot and a fork). For each it prints min / median / p99 / max without and
with load, and the ratios loaded / unloaded. Standard library only; a
benchmark to run by hand, never a pass/fail test.

Modes (see MODES; add one as a subclass of Load):
  bigexit   one batch of --calls calls (default 400), each returning a
            --bytes (default 1 MB) string written whole into a 1 MiB stdout
            pipe before it exits (testworker big-exit), so the daemon meets
            the output at the exit; the hostile client reads everything.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 300.0  # any single round trip; a daemon that takes longer is broken


def now():
    return time.monotonic()


class LineSocket:
    """JSON lines over a Unix socket; lines may be many MB."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(path)
        self.buf = bytearray()
        self.scan = 0

    def send(self, obj):
        self.sock.sendall(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def line(self):
        """The next line as bytes, None at end of stream."""
        while True:
            i = self.buf.find(b"\n", self.scan)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                self.scan = 0
                return line
            self.scan = len(self.buf)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def event(self):
        line = self.line()
        return None if line is None else json.loads(line)

    def close(self):
        self.sock.close()


def event_name(line):
    """The "event" of a reply line without parsing a large line whole (the
    daemon writes "event" first)."""
    head = line[:200]
    k = head.find(b'"event":"')
    if k < 0:
        return json.loads(line).get("event")
    k += 9
    return head[k:head.index(b'"', k)].decode()


# ---- hostile loads -----------------------------------------------------------


class Load:
    """A hostile client's load. tools(): definitions it needs; start():
    begin (returns once the load is under way); running(): still going;
    finish(): wait for the end and return a one-line summary."""

    name = None
    help = ""

    def __init__(self, args, testworker):
        self.args = args
        self.testworker = testworker

    def tools(self):
        return []

    def daemon_args(self):
        return []

    def start(self, sock_path):
        raise NotImplementedError

    def running(self):
        raise NotImplementedError

    def finish(self):
        raise NotImplementedError


class BigExit(Load):
    name = "bigexit"
    help = "one batch of --calls calls each returning --bytes bytes"

    def tools(self):
        return [{"name": "bigexit", "description": "a big result",
                 "schema": {"type": "object"},
                 "command": [self.testworker, "big-exit"]}]

    def start(self, sock_path):
        self.conn = LineSocket(sock_path)
        n = self.args.calls
        calls = [{"id": "h%d" % i, "name": "bigexit", "arguments": {"n": self.args.bytes}}
                 for i in range(n)]
        self.completed = 0
        self.bytes_in = 0
        self.done = threading.Event()
        self.first = threading.Event()
        self.t0 = now()
        self.conn.send({"op": "run", "batch": "hostile", "calls": calls, "max_concurrency": n})
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        self.first.wait(TIMEOUT)

    def _read(self):
        while True:
            line = self.conn.line()
            if line is None:
                break
            self.bytes_in += len(line) + 1
            ev = event_name(line)
            if ev == "tool_execution_started":
                self.first.set()
            elif ev == "tool_execution_completed":
                self.completed += 1
            elif ev in ("batch_completed", "error"):
                break
        self.t1 = now()
        self.first.set()
        self.done.set()

    def running(self):
        return not self.done.is_set()

    def finish(self):
        self.done.wait(TIMEOUT)
        self.conn.close()
        return "%d of %d calls completed, %.0f MB read by the hostile client, in %.2f s" % (
            self.completed, self.args.calls, self.bytes_in / 1e6, self.t1 - self.t0)


MODES = {m.name: m for m in (BigExit,)}


# ---- the probe -------------------------------------------------------------------


class Prober:
    def __init__(self, sock_path):
        self.conn = LineSocket(sock_path)
        self.seq = 0

    def _until(self, pred):
        while True:
            ev = self.conn.event()
            if ev is None:
                raise SystemExit("latency: the daemon closed the probe connection")
            if pred(ev):
                return ev

    def tools(self):
        t0 = now()
        self.conn.send({"op": "tools"})
        self._until(lambda e: e.get("event") == "tools")
        return now() - t0

    def call(self):
        self.seq += 1
        b = "p%d" % self.seq
        t0 = now()
        self.conn.send({"op": "run", "batch": b,
                        "calls": [{"id": "c", "name": "probe", "arguments": {"x": 1}}]})
        ev = self._until(lambda e: e.get("batch") == b and e["event"] in ("batch_completed",
                                                                           "error"))
        if ev["event"] != "batch_completed":
            raise SystemExit("latency: probe batch failed: %r" % ev)
        return now() - t0

    def probe(self, out):
        out["tools"].append(self.tools())
        out["call"].append(self.call())


def probe_tool(testworker):
    return {"name": "probe", "description": "trivial echo", "schema": {"type": "object"},
            "command": [testworker, "echo"]}


def stats(xs):
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]
    return {"n": len(xs), "min": xs[0], "median": statistics.median(xs), "p99": p99,
            "max": xs[-1]}


def ms(x):
    return "%9.2f" % (x * 1e3)


def report(base, loaded):
    print("%-6s %-8s %6s %9s %9s %9s %9s   (ms)" % ("probe", "load", "n", "min", "median", "p99",
                                                   "max"))
    for kind in ("tools", "call"):
        b, l = stats(base[kind]), stats(loaded[kind])
        for label, s in (("none", b), ("hostile", l)):
            print("%-6s %-8s %6d %s %s %s %s" % (kind, label, s["n"], ms(s["min"]),
                                                 ms(s["median"]), ms(s["p99"]), ms(s["max"])))
        print("%-6s %-8s %6s %9s %9.1f %9.1f %9.1f" % (
            kind, "ratio", "", "", l["median"] / b["median"], l["p99"] / b["p99"],
            l["max"] / b["max"]))


# ---- the daemon ------------------------------------------------------------------


class Daemon:
    def __init__(self, build, tools, extra):
        exe = os.path.join(build, "daemon", "toolexecd")
        self.tmp = tempfile.mkdtemp(prefix="te-latency-", dir="/tmp")
        os.chmod(self.tmp, 0o755)
        self.sock = os.path.join(self.tmp, "s.sock")
        tdir = os.path.join(self.tmp, "tools")
        os.mkdir(tdir)
        os.mkdir(os.path.join(self.tmp, "work"))
        for t in tools:
            with open(os.path.join(tdir, t["name"] + ".json"), "w") as f:
                json.dump(t, f)
        self.log = open(os.path.join(self.tmp, "daemon.log"), "wb")
        self.proc = subprocess.Popen(
            [exe, "--socket", self.sock, "--tools", tdir, "--work-dir",
             os.path.join(self.tmp, "work"), "--log-level", "warn"] + extra,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True)
        end = now() + 30
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("latency: toolexecd exited at start:\n" + self.stderr())
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.sock)
                break
            except OSError:
                if now() > end:
                    raise SystemExit("latency: toolexecd did not start")
                time.sleep(0.01)
            finally:
                s.close()

    def stderr(self):
        with open(os.path.join(self.tmp, "daemon.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        if os.environ.get("TE_KEEP_LOG"):  # a copy of the daemon's log
            shutil.copy(os.path.join(self.tmp, "daemon.log"), os.environ["TE_KEEP_LOG"])
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="modes:\n" + "\n".join(
                                     "  %-10s %s" % (m.name, m.help) for m in MODES.values()))
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"),
                    help="build directory holding daemon/toolexecd and tests/workers/testworker")
    ap.add_argument("--socket", help="use the daemon on this socket instead of starting one")
    ap.add_argument("--testworker", help="the testworker (default BUILD/tests/workers/testworker)")
    ap.add_argument("--mode", default="bigexit", choices=sorted(MODES))
    ap.add_argument("--probes", type=int, default=50, help="probes without load (default 50)")
    ap.add_argument("--calls", type=int, default=400, help="hostile calls (default 400)")
    ap.add_argument("--bytes", type=int, default=1000000,
                    help="bytes per result (default 1000000)")
    ap.add_argument("--daemon-arg", action="append", default=[], help="extra daemon argument")
    ap.add_argument("--list-tools", action="store_true",
                    help="print the tool definitions a --socket daemon needs, and exit")
    args = ap.parse_args()

    testworker = os.path.abspath(args.testworker or
                                 os.path.join(args.build, "tests", "workers", "testworker"))
    load = MODES[args.mode](args, testworker)
    tools = [probe_tool(testworker)] + load.tools()
    if args.list_tools:
        for t in tools:
            print(json.dumps(t))
        return
    daemon = None
    if args.socket:
        sock = args.socket
    else:
        daemon = Daemon(os.path.abspath(args.build), tools, load.daemon_args() + args.daemon_arg)
        sock = daemon.sock
    try:
        p = Prober(sock)
        for _ in range(3):  # warm up
            p.probe({"tools": [], "call": []})
        base = {"tools": [], "call": []}
        for _ in range(args.probes):
            p.probe(base)
        loaded = {"tools": [], "call": []}
        load.start(sock)
        # every probe that starts while the load runs counts (it overlaps
        # the load); later ones would only dilute the figure
        n = 0
        while load.running() or n == 0:
            p.probe(loaded)
            n += 1
        summary = load.finish()
        print("mode %s: %s; %d probes during the load" % (args.mode, summary, n))
        report(base, loaded)
    finally:
        if daemon:
            daemon.stop()


if __name__ == "__main__":
    main()
