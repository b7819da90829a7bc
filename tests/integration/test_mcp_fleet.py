"""A fleet: two toolexecd + `toolexec mcp --listen` replicas behind haproxy
(roundrobin, its health check on each front's /ready), as
contrib/kubernetes/toolexecd-mcp-fleet.yaml runs them behind a Service.
Stateless 2026-07-28 calls:

  - spread over both replicas (each replica's calls counted by its own
    daemon's stats, not by timing);
  - one front SIGKILLed while calls run on both: its calls end with
    haproxy's 502 at the client, the other's finish with their results,
    the balancer marks it down and new calls all go to the other;
  - a front SIGTERMed (drained) while calls run on both: /ready says 503,
    the balancer marks it down, new calls all go to the other, and every
    call it was running finishes with its result; it exits 0.

Every call is accounted for: a result, or an explicit error status (502
from the balancer for a replica that died under it), never a dropped
connection. Exit 77 (skip) only when haproxy is not installed.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import harness
from harness import WAIT, Daemon, deadline_wait, with_tree, worker_tool
from test_mcp_drain import capacity, get
from test_mcp_http import TOOLEXEC, Front, modern

HAPROXY = shutil.which("haproxy") or ("/usr/sbin/haproxy"
                                      if os.access("/usr/sbin/haproxy", os.X_OK) else None)

HAPROXY_CFG = """\
global
    stats socket {stats} mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 1s
    # a replica refusing connections: try another (nothing was sent)
    retries 2
    option redispatch 1
frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /ready
    http-check expect status 200
    default-server check inter 100ms fastinter 100ms downinter 100ms fall 1 rise 1
    server r0 127.0.0.1:{p0}
    server r1 127.0.0.1:{p1}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Fleet(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        self.gates = tempfile.mkdtemp(prefix="te-fleet-gates-")
        os.chmod(self.gates, 0o755)
        self.addCleanup(shutil.rmtree, self.gates, True)
        self.daemons = [self.daemon(), self.daemon()]
        self.fronts = [Front(self, d.sock, "--drain-timeout", "600") for d in self.daemons]
        self.ports = [f.port for f in self.fronts]
        self.haproxy()

    def daemon(self):
        d = Daemon(start=False)
        # the gates are the test's, outside each daemon's own directory
        view = with_tree({"write": [os.path.realpath(d.tmp), os.path.realpath(self.gates)]})
        d.add_tool(worker_tool("echo", "echo"))
        d.add_tool(worker_tool("wait", "wait-file", filesystem=view))
        d.start()
        self.addCleanup(d.stop, check=False)
        return d

    def haproxy(self):
        tmp = tempfile.mkdtemp(prefix="te-fleet-lb-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.stats_sock = os.path.join(tmp, "stats.sock")
        self.lb_port = free_port()
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(HAPROXY_CFG.format(stats=self.stats_sock, port=self.lb_port,
                                       p0=self.ports[0], p1=self.ports[1]))
        self.lb_log = open(os.path.join(tmp, "haproxy.log"), "w+")
        self.lb = subprocess.Popen([HAPROXY, "-db", "-f", cfg], stdin=subprocess.DEVNULL,
                                   stdout=self.lb_log, stderr=subprocess.STDOUT)

        def stop():
            self.lb.kill()
            self.lb.wait()
            self.lb_log.close()
        self.addCleanup(stop)

        def up():
            if self.lb.poll() is not None:
                self.lb_log.seek(0)
                raise AssertionError("haproxy exited: " + self.lb_log.read())
            return self.servers() == {"r0": "UP", "r1": "UP"}
        deadline_wait(up, what="haproxy up, both replicas UP")

    def servers(self):
        """haproxy's view of each replica: UP, DOWN, ... ({} until it answers)."""
        data = b""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(WAIT)
                s.connect(self.stats_sock)
                s.sendall(b"show stat\n")
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            return {}
        out = {}
        lines = data.decode().splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "replicas" and row.get("svname") in ("r0", "r1"):
                out[row["svname"]] = row["status"].split(" ")[0]
        return out

    def wait_status(self, name, status):
        deadline_wait(lambda: self.servers().get(name) == status,
                      what="haproxy seeing %s %s" % (name, status))

    # -- calls through the balancer ------------------------------------------
    def call(self, rid, name, arguments):
        """One tools/call on a connection of its own: (status, body or text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.lb_port, timeout=WAIT * 4)
        try:
            msg, h = modern(rid, "tools/call", {"name": name, "arguments": arguments}, name=name)
            h.update({"Content-Type": "application/json", "Accept": "application/json"})
            c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=h)
            r = c.getresponse()
            raw = r.read()
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw.decode("utf-8", "replace")
        finally:
            c.close()

    def echo_calls(self, n, base):
        """n echo calls one after another, each answered with its result."""
        for i in range(n):
            st, body = self.call(base + i, "echo", {"i": i})
            self.assertEqual(st, 200, body)
            self.assertEqual(body["result"]["resultType"], "complete", body)
            self.assertFalse(body["result"].get("isError"), body)

    def echoes(self):
        return [d.stats()["tools"].get("echo", {}).get("calls", 0) for d in self.daemons]

    def running(self, i):
        cap = capacity(self.daemons[i])
        return cap["running_calls"] + cap["queued_calls"]

    def held_calls(self, n, gate, base):
        """n calls of the wait tool, in threads, until gate exists; returns
        the threads' results (filled in as they end) and the threads."""
        results = {}

        def run(rid):
            try:
                results[rid] = self.call(rid, "wait", {"path": gate})
            except Exception as e:  # recorded: a call lost is a failure below
                results[rid] = ("exception", repr(e))
        threads = [threading.Thread(target=run, args=(base + i,)) for i in range(n)]
        for t in threads:
            t.start()
        self.addCleanup(lambda: [t.join(WAIT) for t in threads])
        self.addCleanup(lambda: open(gate, "a").close())  # a failed test's calls end
        deadline_wait(lambda: self.running(0) + self.running(1) == n,
                      what="%d calls running over the fleet" % n)
        return results, threads

    def test_fleet(self):
        # 1. spread: roundrobin over both, counted by each daemon
        before = self.echoes()
        self.echo_calls(8, 100)
        after = self.echoes()
        delta = [a - b for a, b in zip(after, before)]
        self.assertEqual(sum(delta), 8, delta)
        self.assertTrue(all(x > 0 for x in delta), "a replica got no call: %s" % delta)

        # 2. r0's front SIGKILLed with calls running on both
        gate = os.path.join(self.gates, "kill")
        results, threads = self.held_calls(4, gate, 200)
        on = [self.running(0), self.running(1)]
        self.assertTrue(on[0] > 0 and on[1] > 0, "calls on one replica only: %s" % on)
        self.fronts[0].proc.kill()
        self.fronts[0].proc.wait()
        # its calls: haproxy's 502 (the replica died under them), explicit
        deadline_wait(lambda: len(results) == on[0], what="the killed replica's calls answered")
        self.assertEqual(sorted(st for st, _ in results.values()), [502] * on[0], results)
        self.wait_status("r0", "DOWN")
        # the daemon cancels what the dead front ran; new calls go to r1 only
        deadline_wait(lambda: self.running(0) == 0, what="r0's daemon cancelling the calls")
        before = self.echoes()
        self.echo_calls(4, 300)
        after = self.echoes()
        self.assertEqual([a - b for a, b in zip(after, before)], [0, 4])
        # r1's calls were not disturbed: they finish with their results
        open(gate, "w").close()
        for t in threads:
            t.join(WAIT)
        self.assertEqual(len(results), 4, results)
        ok = [b for st, b in results.values() if st == 200]
        self.assertEqual(len(ok), on[1], results)
        for b in ok:
            self.assertEqual(b["result"]["resultType"], "complete", b)
            self.assertFalse(b["result"].get("isError"), b)

        # r0 back on its port
        self.fronts[0] = Front(self, self.daemons[0].sock, "--listen",
                               "127.0.0.1:%d" % self.ports[0], "--drain-timeout", "600")
        self.assertEqual(self.fronts[0].port, self.ports[0])
        self.wait_status("r0", "UP")

        # 3. r0 drained (SIGTERM) with calls running on both
        gate = os.path.join(self.gates, "drain")
        results, threads = self.held_calls(4, gate, 400)
        on = [self.running(0), self.running(1)]
        self.assertTrue(on[0] > 0 and on[1] > 0, "calls on one replica only: %s" % on)
        self.fronts[0].proc.send_signal(signal.SIGTERM)
        self.wait_status("r0", "DOWN")
        st, body = get(self.fronts[0], "/ready")
        self.assertEqual((st, body["draining"]), (503, True), body)
        before = self.echoes()
        self.echo_calls(4, 500)
        after = self.echoes()
        self.assertEqual([a - b for a, b in zip(after, before)], [0, 4])
        self.assertIsNone(self.fronts[0].proc.poll(), "the draining front left its calls")
        open(gate, "w").close()
        for t in threads:
            t.join(WAIT)
        self.assertEqual(len(results), 4, results)
        for st, b in results.values():
            self.assertEqual(st, 200, b)
            self.assertEqual(b["result"]["resultType"], "complete", b)
            self.assertFalse(b["result"].get("isError"), b)
        self.assertEqual(self.fronts[0].proc.wait(timeout=WAIT), 0, self.fronts[0].stderr())


if __name__ == "__main__":
    if not HAPROXY:
        print("SKIP: haproxy is not installed (apt-get install haproxy)")
        sys.exit(77)
    harness.main()
