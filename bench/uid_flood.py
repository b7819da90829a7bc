#!/usr/bin/env python3
"""bench/uid_flood.py - a second user's wait while one user floods the queue.
Run by hand, as root (the second user is nobody):

    python3 bench/uid_flood.py [--toolexecd build/daemon/toolexecd]
        [--testworker build/tests/workers/testworker]
        [--conns 40] [--workers 4] [--call-ms 1000]

Root opens CONNS connections, each running one call that takes CALL_MS
(the testworker's echo with delay_ms), with --max-workers WORKERS; once all
are taken, nobody runs one call taking no time. Printed: the seconds from
nobody's request to its result, and what a queue served in arrival order
would make it wait (CONNS / WORKERS x CALL_MS).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def connect_as(path, uid, gid):
    """A socket connected by uid:gid (a forked child connects, passes it)."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(theirs, [b"s"], [s.fileno()])
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    os.waitpid(pid, 0)
    return socket.socket(fileno=fds[0])


_bufs = {}


def read_until(s, pred):
    """The first event on s satisfying pred (the lines after it are kept)."""
    buf = _bufs.get(s.fileno(), b"")
    try:
        while True:
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                ev = json.loads(line)
                if pred(ev):
                    return ev
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("toolexecd closed the connection")
            buf += chunk
    finally:
        _bufs[s.fileno()] = buf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--toolexecd", default=os.path.join(HERE, "..", "build", "daemon",
                                                        "toolexecd"))
    ap.add_argument("--testworker", default=os.path.join(HERE, "..", "build", "tests",
                                                         "workers", "testworker"))
    ap.add_argument("--conns", type=int, default=40)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--call-ms", type=int, default=1000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (the second user is nobody)")
    tmp = tempfile.mkdtemp(prefix="te-uidflood-", dir="/tmp")
    os.chmod(tmp, 0o755)
    tools = os.path.join(tmp, "tools")
    os.mkdir(tools, 0o755)
    os.mkdir(os.path.join(tmp, "work"))
    with open(os.path.join(tools, "echo.json"), "w") as f:
        json.dump({"name": "echo", "description": "echo", "schema": {"type": "object"},
                   "command": [os.path.abspath(a.testworker), "echo"]}, f)
    os.chmod(os.path.join(tools, "echo.json"), 0o644)
    sock = os.path.join(tmp, "s.sock")
    d = subprocess.Popen([a.toolexecd, "--socket", sock, "--tools", tools, "--work-dir",
                          os.path.join(tmp, "work"), "--max-workers", str(a.workers),
                          "--socket-mode", "0666", "--max-clients-per-uid",
                          str(a.conns + 8)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(sock):
            time.sleep(0.01)
        time.sleep(0.1)
        tail = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tail.connect(sock)
        tail.sendall(b'{"op":"tail"}\n')
        read_until(tail, lambda e: e["event"] == "tailing")
        flood = []
        call = {"id": "c", "name": "echo", "arguments": {"delay_ms": a.call_ms}}
        for i in range(a.conns):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            s.sendall((json.dumps({"op": "run", "batch": "f%d" % i, "calls": [call]}) +
                       "\n").encode())
            flood.append(s)
        for i in range(a.conns):
            read_until(tail, lambda e: e["event"] == "batch_started")
        other = connect_as(sock, 65534, 65534)
        t0 = time.monotonic()
        other.sendall(b'{"op":"run","batch":"o","calls":[{"id":"c","name":"echo"}]}\n')
        read_until(other, lambda e: e["event"] == "batch_completed")
        waited = time.monotonic() - t0
        print("conns %d, --max-workers %d, calls of %d ms: nobody waited %.2f s "
              "(arrival order: %.1f s)" % (a.conns, a.workers, a.call_ms, waited,
                                           a.conns / a.workers * a.call_ms / 1000.0))
    finally:
        d.terminate()
        d.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
