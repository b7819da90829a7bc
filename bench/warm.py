#!/usr/bin/env python3
"""bench/warm.py - warm start against cold start, in one run.

  bench/warm.py [--build DIR] [--calls N] [--only NAME[,NAME...]] [--rounds R]

Starts the real daemon (BUILD/daemon/toolexecd, default build/) on a private
socket with three tools: the bundled Python calc cold ("calc"), the same
definition with "start": "warm" ("calc_warm"), and the bundled C echo tool
("echo", cold). Once calc_warm's template is ready, it runs R rounds (default
5); each round runs N one-call batches (default 100) of each tool in turn,
one after another, and prints per tool the median of the rounds' mean
seconds per call; then the ratios cold/warm and warm/echo, the template's
proportional set size (its /proc/PID/smaps_rollup) and a running warm
child's (a calc call held open: a variant of calc whose handler waits for a
file).

With --only, just those tools and no memory figures: for timing the whole
process from outside, e.g. a run with --calls 0 against one with --calls N.
Standard library only; a benchmark to run by hand, never a pass/fail test.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)

# calc, with a handler that first waits for the file arguments.hold names
HOLD = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import calc
from toolexec.worker import serve
def handler(arguments):
    while not os.path.exists(arguments["hold"]):
        time.sleep(0.01)
    return calc.handler({"expression": "1+2"})
serve(handler)
"""


class Lines:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\n")

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, name, args):
        self.send({"op": "run", "calls": [{"id": "c", "name": name, "arguments": args}]})
        done = None
        while True:
            ev = self.recv()
            if ev.get("event") == "tool_execution_completed":
                done = ev
            if ev.get("event") == "error":
                raise SystemExit("error event: %s" % ev)
            if ev.get("event") == "batch_completed":
                return done


def pss_kb(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return None


def shares_memory(a, b):
    """kcmp(KCMP_VM): whether two processes share one address space (a warm
    call's PID 1 shares its template's: lib/warm.c clones it with CLONE_VM)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(312 if os.uname().machine == "x86_64" else 272, a, b, 1, 0, 0) == 0


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(p) for p in f.read().split()]


def tool_defs(build):
    """The tools by name: (definition, arguments of a call); and calc_hold's
    definition."""
    tools_d = os.path.join(build, "contrib", "tools.d")
    calc = json.load(open(os.path.join(tools_d, "calc.json")))
    echo = json.load(open(os.path.join(tools_d, "echo.json")))
    pysrc = os.path.join(SRC, "contrib", "tools", "python")
    hold = dict(calc, name="calc_hold", start="warm", timeout_ms=60000,
                command=[calc["command"][0], "-c", HOLD, pysrc], schema={"type": "object"})
    tools = {"calc": (calc, {"expression": "1+2"}),
             "calc_warm": (dict(calc, name="calc_warm", start="warm"), {"expression": "1+2"}),
             "echo": (echo, {"x": 1})}
    return tools, hold


class Bench:
    """A private daemon (from build) with the tools of names (and calc_hold
    if hold), started and its warm templates ready."""

    def __init__(self, build, names, hold):
        self.tools, hold_def = tool_defs(build)
        self.tmp = tempfile.mkdtemp(prefix="bench-warm-")
        os.makedirs(os.path.join(self.tmp, "tools"))
        for name in names + (["calc_hold"] if hold else []):
            d = hold_def if name == "calc_hold" else self.tools[name][0]
            with open(os.path.join(self.tmp, "tools", name + ".json"), "w") as f:
                json.dump(d, f)
        self.sock = os.path.join(self.tmp, "s.sock")
        self.daemon = subprocess.Popen(
            [os.path.join(build, "daemon", "toolexecd"), "--socket", self.sock, "--tools",
             os.path.join(self.tmp, "tools"), "--work-dir", os.path.join(self.tmp, "work"),
             "--log-level", "warn"], stderr=subprocess.DEVNULL)
        try:
            end = time.monotonic() + 30
            while True:
                try:
                    self.c = Lines(self.sock)
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise SystemExit("the daemon did not start")
                    time.sleep(0.01)
            warm = [n for n in names if n == "calc_warm"] + (["calc_hold"] if hold else [])
            while not all(self.templates().get(n, {}).get("state") == "ready" for n in warm):
                if time.monotonic() > end:
                    raise SystemExit("the warm templates did not start")
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise

    def templates(self):
        self.c.send({"op": "stats"})
        return self.c.recv().get("templates") or {}

    def rounds(self, names, calls, rounds):
        """rounds rounds of calls one-call batches of each tool of names in
        turn: each round's mean seconds per call, and each call's CPU
        (wait4 of its processes) in ms, by name."""
        means = {n: [] for n in names}
        cpu = {n: [] for n in names}
        for _ in range(rounds if calls else 0):
            for n in names:
                t0 = time.monotonic()
                for _ in range(calls):
                    done = self.c.call(n, self.tools[n][1])
                    assert "ok" in done["result"], done
                    assert n != "calc_warm" or done.get("start") == "warm", done
                    cpu[n].append(done.get("cpu_user_ms", 0) + done.get("cpu_sys_ms", 0))
                means[n].append((time.monotonic() - t0) / calls)
        return means, cpu

    def stop(self):
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n] or ["calc", "calc_warm", "echo"]
    b = Bench(a.build, only, not a.only)
    tmp, sock, templates = b.tmp, b.sock, b.templates
    try:
        means, cpu = b.rounds(only, a.calls, a.rounds)
        if not a.calls:
            return
        med = {n: statistics.median(v) for n, v in means.items()}
        for n in only:
            print("%-10s %8.3f ms per call (median of %d rounds of %d calls; rounds %s)" % (
                n, med[n] * 1e3, a.rounds, a.calls,
                " ".join("%.3f" % (v * 1e3) for v in means[n])))
        for n in only:
            print("%-10s %8.3f ms CPU per call (the call's processes, as wait4 reports them)" % (
                n, statistics.mean(cpu[n])))
        if "calc" in med and "calc_warm" in med:
            print("cold / warm        %6.2f" % (med["calc"] / med["calc_warm"]))
        if "echo" in med and "calc_warm" in med:
            print("warm / C echo      %6.2f" % (med["calc_warm"] / med["echo"]))
        if a.only:
            return
        t = templates()["calc_hold"]
        gate = os.path.join(tmp, "gate")
        os.makedirs(gate + ".d")
        c2 = Lines(sock)
        c2.send({"op": "run", "calls": [{"id": "h", "name": "calc_hold",
                                           "arguments": {"hold": gate}}]})
        # the call's PID 1 is the template's child; the handler's process, its child
        end = time.monotonic() + 30
        while not children(t["pid"]) or not children(children(t["pid"])[0]):
            if time.monotonic() > end:
                raise SystemExit("the held call did not start")
            time.sleep(0.01)
        time.sleep(0.2)  # let it reach the handler's wait
        p1 = children(t["pid"])[0]
        p2 = children(p1)[0]
        p1_pss = ("0 kB of its own (it shares the template's memory)"
                  if shares_memory(t["pid"], p1) else "%d kB" % pss_kb(p1))
        print("PSS template %d kB (calc_hold, stats: %s kB); a running child %d kB; "
              "its PID 1 %s" % (pss_kb(t["pid"]), templates()["calc_hold"]["pss_kb"],
                                 pss_kb(p2), p1_pss))
        open(gate, "w").close()
        while c2.recv().get("event") != "batch_completed":
            pass
    finally:
        b.stop()


if __name__ == "__main__":
    main()
