#!/usr/bin/env python3
"""bench/warm_spare.py - what a pre-forked spare P2 would take off a warm
Python call's path, measured without the daemon.

  bench/warm_spare.py [--calls N] [--rounds R]

A warm call's process (P2) is today forked per call from the template
(lib/warm.c): the fork, the copy-on-write faults of the child's way back into
the interpreter and through the handler, and its exit are the call's. A
spare P2 would be forked ahead, return into the interpreter and wait for its
call's descriptors (SCM_RIGHTS), so the call would pay the hand-over and the
handler. This compares the two in one process loaded as the bundled calc's
template is (toolexec.worker and calc imported, gc.freeze()), with no
namespaces, filter or daemon (those are the same on both paths):

  fork    per call: os.fork(); the child reads the request frame from a
          pipe, runs calc's handler, writes the response frame, _exit(0);
          the parent times from before the fork to the response read
          ("call") and to the child reaped ("reaped")
  spare   a child forked before the call (after the previous call, off its
          path) back in the interpreter, blocked in recvmsg for the call's
          two pipe ends; timed from the send to the response read ("call")
          and to the child reaped

  spare+populate  the same, the spare having written every private
          writable mapping of its own ahead (MADV_POPULATE_WRITE, Linux 5.14):
          the handler's copy-on-write faults taken before the call too

R rounds (default 5) of N calls (default 200) each way, interleaved so the
host's drift hits all. A spare is made after each call and the next call
waits until it is ready (a template with time between calls; on a loaded
host a spare still being made when its call comes gains less). Prints per
way the min and median over calls of each time, the child's minor faults
from its hand-over on (its getrusage, sent with the response), the ratios
of medians, what a waiting spare holds of its own, and the load. Standard library only; run by hand, never a
pass/fail test.
"""

import argparse
import gc
import os
import resource
import socket
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "contrib", "python"))
sys.path.insert(0, os.path.join(SRC, "contrib", "tools", "python"))

import calc  # noqa: E402
from toolexec import worker  # noqa: E402

REQ = worker.encode_frame({"tool": "calc", "arguments": {"expression": "1+2"}, "opts": {}})


def child_call(rfd, wfd, flt0=0):
    """The call in its process: request in, handler, response out with the
    process's minor faults since flt0."""
    req = worker.read_request(rfd)
    resp = worker.handle(calc.handler, req)
    resp["minflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt0
    worker._write_all(wfd, worker.encode_frame(resp))
    os._exit(0)


def read_frame(fd):
    hdr = b""
    while len(hdr) < 4:
        hdr += os.read(fd, 4 - len(hdr))
    (n,) = struct.unpack(">I", hdr)
    body = b""
    while len(body) < n:
        body += os.read(fd, n - len(body))
    return body


def minflt_of(body):
    import json
    return json.loads(body).get("minflt", -1)


def one_fork():
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    os.write(a_w, REQ)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        child_call(a_r, b_w)
    body = read_frame(b_r)
    t1 = time.perf_counter()
    os.waitpid(pid, 0)
    t2 = time.perf_counter()
    for fd in (a_r, a_w, b_r, b_w):
        os.close(fd)
    return t1 - t0, t2 - t0, minflt_of(body)


def populate():
    """Every private writable mapping of ours written ahead (its copy-on-write
    faults taken now): MADV_POPULATE_WRITE, Linux 5.14."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if parts[1][1] == "w" and parts[1][3] == "p" and (len(parts) < 6 or
                                                               parts[5] != "[vvar]"):
                libc.madvise(lo, hi - lo, 23)


def make_spare(pop=False):
    """A child back in the interpreter, waiting for its call's descriptors."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        if pop:
            populate()
        theirs.send(b"r")
        _, fds, _, _ = socket.recv_fds(theirs, 1, 2)
        child_call(fds[0], fds[1], resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
    theirs.close()
    ours.recv(1)  # ready: the template idled until its spare waits
    return pid, ours


def one_spare(spare):
    pid, sock = spare
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    os.write(a_w, REQ)
    t0 = time.perf_counter()
    socket.send_fds(sock, [b"c"], [a_r, b_w])
    body = read_frame(b_r)
    t1 = time.perf_counter()
    os.waitpid(pid, 0)
    t2 = time.perf_counter()
    for fd in (a_r, a_w, b_r, b_w):
        os.close(fd)
    sock.close()
    return t1 - t0, t2 - t0, minflt_of(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    o = ap.parse_args()
    gc.collect()
    gc.freeze()
    res = {"fork": [], "spare": [], "spare+populate": []}
    for _ in range(o.rounds):
        for _ in range(o.calls):
            res["fork"].append(one_fork())
        spare = make_spare()
        for _ in range(o.calls):
            r = one_spare(spare)
            spare = make_spare()  # the next one, after the call
            res["spare"].append(r)
        os.kill(spare[0], 9)
        os.waitpid(spare[0], 0)
        spare = make_spare(True)
        for _ in range(o.calls):
            r = one_spare(spare)
            spare = make_spare(True)
            res["spare+populate"].append(r)
        os.kill(spare[0], 9)
        os.waitpid(spare[0], 0)
    med = {}
    for way, rows in res.items():
        call = [r[0] * 1e6 for r in rows]
        reaped = [r[1] * 1e6 for r in rows]
        flt = [r[2] for r in rows]
        med[way] = statistics.median(call)
        print("%-14s call %7.0f us min %7.0f us median; reaped %7.0f min %7.0f median; "
              "child minor faults median %d" % (way, min(call), med[way], min(reaped),
                                                 statistics.median(reaped),
                                                 statistics.median(flt)))
    print("fork / spare (call, medians) %.2f; fork / spare+populate %.2f" %
          (med["fork"] / med["spare"], med["fork"] / med["spare+populate"]))
    for pop in (False, True):
        pid, sock = make_spare(pop)
        with open("/proc/%d/smaps_rollup" % pid) as f:
            priv = sum(int(line.split()[1]) for line in f if line.startswith("Private_"))
        print("a waiting spare%s: %d kB of its own (Private_Clean + Private_Dirty)" %
              (" populated" if pop else "", priv))
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sock.close()
    print("load %s" % " ".join("%.2f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
