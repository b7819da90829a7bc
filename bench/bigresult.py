#!/usr/bin/env python3
"""bench/bigresult.py - a big result through the daemon against the tool run
directly, in one run.

  bench/bigresult.py [--build DIR] [--mib 7,64] [--rounds R] [--kinds x,text]
                     [--protocols framed,plain] [--whole]

For each size, payload kind and protocol it starts a fresh toolexecd (so its
peak memory is this result's alone) with one tool, tests/workers/bigtool,
whose result is a string of that many MiB ("x": all 'x'; "text": lines with
quotes, tabs, backslashes and an e-acute, so the JSON has escapes), and:

  direct   runs the same binary by hand: the request frame (framed) or the
           arguments line (plain) on its stdin, its stdout read to the end
  daemon   one one-call batch through the daemon: the run request sent, every
           event line read until batch_completed (bytes, not parsed: the
           client's JSON parser is not the daemon's cost)

R rounds each (default 3), interleaved; prints the medians and daemon /
direct. Memory: the daemon's VmHWM (/proc/PID/status) after a small call and
after the first big one; prints the peak's growth over the payload and the
whole peak over the payload. The per-call max_content_bytes is the default
(100000: the content is cut, the result whole in tool_execution_completed);
with --whole it is the payload's size, so the content is whole too (the
payload then goes out three times: result, tool_result_encoded, messages).
The daemon runs with --max-frame-bytes and --max-content-bytes large enough.
Goal: 64 MiB <= 1.5 x direct time, peak <= 1.25 x the payload.
A benchmark to run by hand, never a pass/fail test.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def read_events(s, first):
    """Every line until batch_completed; returns the bytes read. Only the
    first bytes of each line are kept: the long line is never joined."""
    total = 0
    head = b""  # the current line's first bytes
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while True:
        n = s.recv_into(view)
        if n == 0:
            raise SystemExit("the daemon closed the connection")
        total += n
        chunk = bytes(view[:n])
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:nl if nl >= 0 else n]
            if len(head) < 64:
                head += piece[:64]
            if nl < 0:
                break
            if head.startswith(b'{"event":"error"'):
                raise SystemExit("error event: %r" % chunk[start:nl][:400])
            if head.startswith(b'{"event":"batch_completed"'):
                return total
            head = b""
            start = nl + 1


def direct(tool, argv_extra, request, plain):
    t0 = time.monotonic()
    p = subprocess.Popen([tool] + argv_extra, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if plain:
        p.stdin.write(json.dumps(request["arguments"]).encode() + b"\n")
    else:
        body = json.dumps(request, separators=(",", ":")).encode()
        p.stdin.write(struct.pack(">I", len(body)) + body)
    p.stdin.close()
    got = 0
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        got += len(b)
    p.wait()
    return time.monotonic() - t0, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--mib", default="7,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="x,text")
    ap.add_argument("--protocols", default="framed,plain")
    ap.add_argument("--whole", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    daemon = os.path.join(build, "daemon", "toolexecd")
    tool = os.path.join(build, "tests", "workers", "bigtool")
    print("toolexecd %s, %d CPUs, %s; %d rounds; content %s" % (
        subprocess.run([daemon, "--version"], stdout=subprocess.PIPE).stdout.decode().split()[1],
        os.cpu_count(), os.uname().release, a.rounds, "whole" if a.whole else "cut (100000)"))
    print("%-7s %-5s %5s  %9s %9s %7s  %10s %10s" % (
        "proto", "kind", "MiB", "direct_s", "daemon_s", "ratio", "peak_grow", "peak_all"))
    for mib in [int(x) for x in a.mib.split(",")]:
        for proto in a.protocols.split(","):
            for kind in a.kinds.split(","):
                run_one(a, daemon, tool, mib, proto, kind)
    return 0


def run_one(a, daemon, tool, mib, proto, kind):
    nbytes = mib << 20
    tmp = tempfile.mkdtemp(prefix="te-bigresult-")
    os.chmod(tmp, 0o755)
    tools = os.path.join(tmp, "tools")
    os.mkdir(tools, 0o755)
    d = {"name": "big", "command": [tool] + (["plain"] if proto == "plain" else [])}
    if proto == "plain":
        d["protocol"] = "plain"
    with open(os.path.join(tools, "big.json"), "w") as f:
        json.dump(d, f)
    sock = os.path.join(tmp, "s.sock")
    limit = str(4 * nbytes + (1 << 20))
    proc = subprocess.Popen([daemon, "--socket", sock, "--tools", tools, "--work-dir",
                             os.path.join(tmp, "work"), "--log-level", "warn",
                             "--max-frame-bytes", limit, "--max-content-bytes", limit])
    try:
        for _ in range(500):
            if os.path.exists(sock):
                break
            time.sleep(0.01)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        args = {"bytes": nbytes, "kind": kind}

        def call(n):
            req = {"op": "run", "calls": [{"id": "c", "name": "big",
                                           "arguments": dict(args, bytes=n)}]}
            if a.whole:
                req["max_content_bytes"] = n + 1
            t0 = time.monotonic()
            s.sendall(json.dumps(req).encode() + b"\n")
            got = read_events(s, t0)
            return time.monotonic() - t0, got

        call(1024)  # the daemon's own start-up allocations, outside the peak
        base = hwm_kb(proc.pid)
        t_daemon, t_direct = [], []
        t, got = call(nbytes)
        peak = hwm_kb(proc.pid)
        if got < nbytes:
            raise SystemExit("only %d bytes of events for a %d-byte result" % (got, nbytes))
        t_daemon.append(t)
        request = {"tool": "big", "arguments": args}
        for r in range(a.rounds):
            t_direct.append(direct(tool, ["plain"] if proto == "plain" else [], request,
                                   proto == "plain")[0])
            if r:
                t_daemon.append(call(nbytes)[0])
        md, mx = statistics.median(t_direct), statistics.median(t_daemon)
        print("%-7s %-5s %5d  %9.3f %9.3f %6.2fx  %9.2fx %9.2fx" % (
            proto, kind, mib, md, mx, mx / md, (peak - base) * 1024 / nbytes,
            peak * 1024 / nbytes), flush=True)
        s.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
