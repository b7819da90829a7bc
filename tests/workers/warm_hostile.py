#!/usr/bin/env python3
"""warm_hostile.py MODE - a tool whose warm template misbehaves (test_warm.py).

Run cold (its first frame is a request) it answers {"ok": "cold"}. Told it is
a template (proto/PROTOCOL.md, "Warm start"), it misbehaves by MODE:
  crash-start    exits 3 at once
  hang-start     never says ready
  garbage-start  answers bytes that are not a frame
  garbage-fork   says ready, then answers a fork request with a frame that
                 is not a control message
  hang-fork      says ready, then never answers a fork request
  fork-no-listener   answers a fork request (for a tool with an egress
                 allow-list) with "forked" and a pidfd, but no proxy listener
  fork-bad-listener  the same with a Unix socket where the listener goes
"""
import array
import json
import os
import socket
import struct
import sys
import time


def read_frame(fd):
    def exactly(n):
        b = b""
        while len(b) < n:
            chunk = os.read(fd, n - len(b))
            if not chunk:
                raise SystemExit(0)
            b += chunk
        return b
    (n,) = struct.unpack(">I", exactly(4))
    return json.loads(exactly(n))


def send(sock, obj, fds=()):
    body = json.dumps(obj).encode()
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([struct.pack(">I", len(body)) + body], anc)


mode = sys.argv[1]
first = read_frame(0)
if "template" not in first:
    body = json.dumps({"ok": "cold"}).encode()
    os.write(1, struct.pack(">I", len(body)) + body)
    raise SystemExit(0)
sock = socket.socket(fileno=0)
if mode == "crash-start":
    os._exit(3)
if mode == "hang-start":
    time.sleep(3600)
if mode == "garbage-start":
    os.write(0, b"\xff\xff\xff\xffnot a frame")
    time.sleep(3600)
send(sock, {"ready": {}}, [os.pidfd_open(os.getpid())])
msg, anc, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
if mode == "garbage-fork":
    send(sock, {"surprise": True})
if mode in ("fork-no-listener", "fork-bad-listener"):
    req = json.loads(msg[4:])["fork"]
    fds = [os.pidfd_open(os.getpid())]
    if mode == "fork-bad-listener":
        pair = socket.socketpair()  # held: sent as it is
        fds.append(pair[0].fileno())
    send(sock, {"forked": {"id": req["id"]}}, fds)
time.sleep(3600)
