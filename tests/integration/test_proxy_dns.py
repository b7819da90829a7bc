"""The egress proxy resolves names on threads of its own, never on libuv's
thread pool, where the daemon removes call directories and writes spills.

The daemon runs in a mount namespace of its own whose /etc/resolv.conf
names a DNS server of the test's (a UDP socket on a loopback address of
the host, port 53) that reads every query and answers only those for names
starting with "nx" (no such name). A call allowed to six other names asks
the proxy for all of them at once; once the server has seen two of them
being asked for (libuv gives lookups half its pool, UV_THREADPOOL_SIZE=4
here: before the fix, all its lookups were now held):
  - a call with no network runs and leaves a file in its directory, whose
    removal takes the pool: it completes and its directory goes;
  - another call's name is resolved (502: no such name), not left waiting
    behind the hung ones until the proxy's connect timeout (504);
  - each hung request gets 504 when that timeout (10 s) is up;
  - the daemon stops at SIGTERM while the names still hang.
The names hang for as long as glibc waits (30 s a try, 5 tries)."""

import json
import os
import random
import shutil
import socket
import tempfile
import threading
import unittest

import harness
from harness import Daemon

TOOL = r'''
import json, os, sys, threading, urllib.request, urllib.error
a = json.loads(sys.stdin.readline())
if a["op"] == "leave":
    with open("left-behind", "w") as f:
        f.write("not empty: removed on the thread pool")
    out = {"cwd": os.getcwd()}
else:
    out = {}
    def get(u):
        try:
            out[u] = urllib.request.urlopen(u, timeout=60).status
        except urllib.error.HTTPError as e:
            out[u] = e.code
        except OSError as e:
            out[u] = type(e).__name__
    ts = [threading.Thread(target=get, args=(u,)) for u in a["urls"]]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
print(json.dumps(out))
'''

NAMES = ["hang%d.toolexecd-test" % i for i in range(6)]
NX = "nx.toolexecd-test"


class HungDNS:
    """A DNS server that records the names asked for and answers only
    those starting with "nx": NXDOMAIN."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(20):
            self.addr = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(1, 254),
                                          random.randint(2, 254))
            try:
                self.sock.bind((self.addr, 53))
                break
            except OSError:
                continue
        else:
            raise unittest.SkipTest("no loopback address free for port 53")
        self.names = set()
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                q, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            labels, i = [], 12
            while i < len(q) and q[i]:
                labels.append(q[i + 1:i + 1 + q[i]].decode("latin-1"))
                i += 1 + q[i]
            name = ".".join(labels).lower()
            with self.lock:
                self.names.add(name)
            if name.startswith("nx") and i + 5 <= len(q):
                # the query's id and question; QR, RD, RA, NXDOMAIN
                answer = q[:2] + b"\x81\x83" + b"\x00\x01" + b"\x00" * 6 + q[12:i + 5]
                try:
                    self.sock.sendto(answer, peer)
                except OSError:
                    return

    def seen(self):
        with self.lock:
            return set(self.names)

    def close(self):
        self.sock.close()


class ResolvDaemon(Daemon):
    """The daemon with resolv bound over /etc/resolv.conf in a mount
    namespace of its own (unshare execs it: the daemon's pid is the one
    started)."""
    resolv = None

    def command(self):
        return ["unshare", "-m", "--propagation", "private", "--", "/bin/sh", "-c",
                'mount --bind "$0" /etc/resolv.conf && exec "$@"', self.resolv] + \
            super().command()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"),
                     "needs root (a mount namespace, port 53) and unshare")
class HungResolver(unittest.TestCase):

    def test_hung_names_leave_the_thread_pool_alone(self):
        harness.require_env()
        dns = HungDNS()
        self.addCleanup(dns.close)
        d = tempfile.mkdtemp(prefix="te-dns-")
        self.addCleanup(shutil.rmtree, d, True)
        resolv = os.path.join(d, "resolv.conf")
        with open(resolv, "w") as f:
            # the longest glibc waits: 30 s a try, 5 tries
            f.write("nameserver %s\noptions timeout:30 attempts:5\n" % dns.addr)
        os.chmod(resolv, 0o644)
        tools = [{"name": name, "description": "dns test tool", "schema": {"type": "object"},
                  "command": ["/usr/bin/python3", "-I", "-c", TOOL], "protocol": "plain",
                  "timeout_ms": 60000, **extra}
                 for name, extra in (("net", {"network": {"allow": NAMES + [NX]}}),
                                     ("leave", {}))]
        dm = ResolvDaemon(tools, start=False, env={"UV_THREADPOOL_SIZE": "4"})
        dm.resolv = resolv
        harness.started(dm)
        self.addCleanup(dm.stop)
        net = dm.client()
        calls = [{"id": "n", "name": "net", "arguments": {
            "op": "gets", "urls": ["http://%s/" % n for n in NAMES]}}]
        batch = net.start_batch(calls)
        harness.deadline_wait(lambda: len(dns.seen() & set(NAMES)) >= 2,
                              what="two names asked for")
        res = dm.client().run([{"id": "p", "name": "leave", "arguments": {"op": "leave"}}])
        r = res.result("p")
        self.assertIn("ok", r, r)
        cwd = r["ok"]["cwd"]
        self.assertTrue(cwd.startswith(os.path.realpath(dm.work_dir)), cwd)
        harness.deadline_wait(lambda: not os.path.exists(cwd),
                              what="the call's directory removed while names hang")
        # another call's name is looked up, and is no name
        res = dm.client().run([{"id": "x", "name": "net", "arguments": {
            "op": "gets", "urls": ["http://%s/" % NX]}}], timeout=60 * harness.SCALE)
        self.assertEqual(res.result("x").get("ok"), {"http://%s/" % NX: 502}, res.result("x"))
        self.assertIn(NX, dns.seen())
        # the hung names' requests end at the proxy's connect timeout
        evs = net.recv_batch(batch, timeout=60 * harness.SCALE)
        res = harness.BatchResult(calls, evs)
        self.assertEqual(res.result("n").get("ok"),
                         {"http://%s/" % n: 504 for n in NAMES}, res.result("n"))
        # still hanging, they hold no shutdown up (stop: within its wait)
        dm.stop()


if __name__ == "__main__":
    unittest.main()
