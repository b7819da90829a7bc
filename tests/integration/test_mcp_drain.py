"""toolexec mcp --listen as one replica of a fleet: GET /ready follows the
daemon's capacity (room, reachable, not shutting down), /healthz is
liveness only, and SIGTERM drains: /ready says 503 at once, new calls are
refused 503 with the draining error (-32010), the calls running finish,
or past --drain-timeout are answered with that error and cancelled; the
front exits 0 either way. SIGINT and --drain-timeout 0 exit at once
(test_mcp_http). test_mcp_fleet runs two replicas behind haproxy.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import http.client
import json
import os
import signal
import subprocess
import tempfile
import unittest

import harness
from harness import WAIT, Daemon, deadline_wait, worker_tool
from test_mcp_http import TOOLEXEC, Front, modern, post

DRAINING = -32010
TOOLS = [worker_tool("echo", "echo"), worker_tool("wait", "wait-file")]


def get(front, path):
    """GET path of the front: (status, JSON body)."""
    c = front.conn()
    c.request("GET", path)
    r = c.getresponse()
    return r.status, json.loads(r.read())


def capacity(d):
    c = d.client()
    try:
        c.send({"op": "capacity"})
        return c.recv()
    finally:
        c.close()
        d.clients.remove(c)


def running(d):
    cap = capacity(d)
    return cap["running_calls"] + cap["queued_calls"]


class Replica(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")

    def daemon(self, *args):
        d = Daemon(TOOLS, args=list(args))
        self.addCleanup(d.stop, check=False)
        files = tempfile.mkdtemp(prefix="gates-", dir=d.tmp)
        os.chmod(files, 0o1777)  # workers, perhaps another user, wait on files here
        return d, files

    def start_wait(self, front, path, rid):
        """A call of the wait tool (answers once path exists), not read."""
        c = front.conn()
        msg, h = modern(rid, "tools/call", {"name": "wait", "arguments": {"path": path}},
                        name="wait")
        h.update({"Content-Type": "application/json", "Accept": "application/json"})
        c.request("POST", "/mcp", body=json.dumps(msg).encode(), headers=h)
        return c

    def answer(self, conn, rid):
        r = conn.getresponse()
        body = json.loads(r.read())
        self.assertEqual(body.get("id"), rid, body)
        return r.status, body

    def test_ready_follows_capacity(self):
        d, files = self.daemon("--max-workers", "1")
        f = Front(self, d.sock)
        deadline_wait(lambda: get(f, "/ready")[0] == 200, what="/ready 200")
        st, body = get(f, "/ready")
        self.assertEqual((body["ready"], body["max_workers"], body["free_workers"]), (True, 1, 1))
        # one call holds the only slot: a slot busy, none queued, still room
        gate = os.path.join(files, "g")
        c1 = self.start_wait(f, gate, 1)
        deadline_wait(lambda: running(d) == 1, what="the call running")
        deadline_wait(lambda: get(f, "/ready")[1].get("free_workers") == 0,
                      what="/ready seeing the busy slot")
        self.assertEqual(get(f, "/ready")[0], 200)
        # a second queues behind it: full, 503, the reason said
        c2 = self.start_wait(f, gate, 2)
        deadline_wait(lambda: get(f, "/ready")[0] == 503, what="/ready 503 when full")
        st, body = get(f, "/ready")
        self.assertEqual(body["queued_calls"], 1, body)
        self.assertIn("full", body["reason"])
        self.assertEqual(get(f, "/healthz"), (200, {"alive": True}))
        open(gate, "w").close()
        self.assertEqual(self.answer(c1, 1)[0], 200)
        self.assertEqual(self.answer(c2, 2)[0], 200)
        deadline_wait(lambda: get(f, "/ready")[0] == 200, what="/ready 200 again")
        # the daemon gone: not ready, with why; the front itself is alive
        d.kill()
        deadline_wait(lambda: get(f, "/ready")[0] == 503, what="/ready 503 without a daemon")
        self.assertIn("daemon", get(f, "/ready")[1]["reason"])
        self.assertEqual(get(f, "/healthz")[0], 200)
        c = f.conn()
        c.request("POST", "/ready")
        self.assertEqual(c.getresponse().status, 405)

    def test_drain_lets_running_calls_finish(self):
        d, files = self.daemon()
        f = Front(self, d.sock, "--drain-timeout", "600")
        gate = os.path.join(files, "g")
        held = self.start_wait(f, gate, 1)
        deadline_wait(lambda: running(d) == 1, what="the call running")
        f.proc.send_signal(signal.SIGTERM)
        deadline_wait(lambda: get(f, "/ready")[0] == 503, what="/ready 503 once draining")
        self.assertTrue(get(f, "/ready")[1]["draining"])
        # a new call: refused, typed, 503; what serves running calls goes on
        c = f.conn()
        msg, h = modern(2, "tools/call", {"name": "echo", "arguments": {}}, name="echo")
        r = post(c, msg, h)
        body = json.loads(r.read())
        self.assertEqual(r.status, 503, body)
        self.assertEqual((body["id"], body["error"]["code"]), (2, DRAINING), body)
        self.assertEqual(body["error"]["data"]["reason"], "draining")
        msg, h = modern(3, "tools/list")
        r = post(c, msg, h)
        self.assertEqual(r.status, 200)
        self.assertIn("tools", json.loads(r.read())["result"])
        self.assertIsNone(f.proc.poll())  # a call runs: the front stays
        open(gate, "w").close()
        st, body = self.answer(held, 1)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["result"]["resultType"], "complete", body)
        self.assertFalse(body["result"].get("isError"), body)
        self.assertEqual(f.proc.wait(timeout=WAIT), 0, f.stderr())
        self.assertEqual(d.stats()["calls"], 1)  # the refused one never reached it

    def test_drain_timeout_fails_the_calls_left(self):
        d, files = self.daemon()
        f = Front(self, d.sock, "--drain-timeout", "1")
        held = self.start_wait(f, os.path.join(files, "never"), 1)
        deadline_wait(lambda: running(d) == 1, what="the call running")
        f.proc.send_signal(signal.SIGTERM)
        st, body = self.answer(held, 1)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["error"]["code"], DRAINING, body)
        self.assertEqual(body["error"]["data"], {"reason": "draining", "cancelled": True})
        self.assertEqual(f.proc.wait(timeout=WAIT), 0, f.stderr())
        deadline_wait(lambda: running(d) == 0, what="the daemon cancelling the call")

    def test_sigint_exits_at_once(self):
        d, files = self.daemon()
        f = Front(self, d.sock)  # the default drain, 30 s: SIGINT does not wait
        held = self.start_wait(f, os.path.join(files, "never"), 1)
        deadline_wait(lambda: running(d) == 1, what="the call running")
        f.proc.send_signal(signal.SIGINT)
        self.assertEqual(f.proc.wait(timeout=WAIT), 0, f.stderr())
        # no answer: the connection closes under it
        with self.assertRaises((http.client.HTTPException, ConnectionError)):
            held.getresponse()
        deadline_wait(lambda: running(d) == 0, what="the daemon cancelling the call")

    def test_drain_timeout_only_with_listen(self):
        d, _ = self.daemon()
        r = subprocess.run([TOOLEXEC, "--socket", d.sock, "mcp", "--drain-timeout", "5"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"--drain-timeout", r.stderr)
        for bad in ("-1", "x", "86401"):
            r = subprocess.run([TOOLEXEC, "--socket", d.sock, "mcp", "--listen", "127.0.0.1:0",
                                "--drain-timeout", bad],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))


if __name__ == "__main__":
    harness.main()
