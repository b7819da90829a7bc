"""Issue 21: calls are started by the spawner (daemon/spawner.c,
spawnproc.c), a process of their own, off the daemon's loop.

- A call's process is the spawner's child, and the spawner the daemon's.
- The spawner holds few descriptors whatever runs: a start copies its table,
  not the daemon's, which grows with the calls in flight.
- A spawner that dies (SIGKILL) takes its running calls with it: each ends
  with a typed error (handler_exit, cause.spawner_error); a new spawner is
  started, and the next calls run.
- No spawner outlives the daemon (SIGKILL of the daemon).
- "--spawner no": the loop starts calls itself, as before.
Root and unprivileged daemon.
"""

import os
import shutil
import signal
import unittest

import harness
from harness import Daemon, DaemonTestCase, worker_tool

TOOLS = [worker_tool("echo", "echo"),
         worker_tool("sleep", "sleep", timeout_ms=60000)]


def stat_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    return s[s.index("(") + 1:s.rindex(")")], s[s.rindex(")") + 2:].split()


def children(pid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                comm, fields = stat_of(int(name))
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append((int(name), comm))
    return out


def spawner_of(daemon_pid):
    found = [p for p, comm in children(daemon_pid) if comm == "toolexecd-spawn"]
    return found[0] if len(found) == 1 else None


def alive(pid):
    try:
        return stat_of(pid)[1][0] != "Z"
    except OSError:
        return False


class Checks:
    def spawner(self):
        return harness.deadline_wait(lambda: spawner_of(self.daemon.proc.pid),
                                     what="the daemon's one spawner")

    def test_calls_are_the_spawners_children(self):
        sp = self.spawner()
        c = self.daemon.client()
        calls = [{"id": "s%d" % i, "name": "sleep"} for i in range(6)]
        c.start_batch(calls, batch="hold", max_concurrency=6)
        kids = harness.deadline_wait(
            lambda: (lambda k: k if len(k) == 6 else None)(
                [p for p, _ in children(sp)]), what="six calls under the spawner")
        # each call's process is the spawner's, none the daemon's own
        self.assertEqual([p for p, comm in children(self.daemon.proc.pid)
                          if comm != "toolexecd-spawn" and p in kids], [])
        # its table: 0-2, its socket and its signalfd, however many run
        self.assertLessEqual(len(os.listdir("/proc/%d/fd" % sp)), 5,
                             os.listdir("/proc/%d/fd" % sp))
        c.send({"op": "cancel", "batch": "hold"})
        c.finish_batch("hold")

    def test_a_spawner_that_dies_ends_its_calls_and_is_replaced(self):
        sp = self.spawner()
        c = self.daemon.client()
        calls = [{"id": "s", "name": "sleep"}]
        c.start_batch(calls, batch="victim")
        harness.deadline_wait(lambda: children(sp), what="the call to run")
        os.kill(sp, signal.SIGKILL)
        res = harness.BatchResult(calls, c.finish_batch("victim"))
        te = res.result("s")["tool_error"]
        self.assertEqual(te["reason"], "handler_exit", te)
        self.assertIn("spawner", te["cause"].get("spawner_error", ""), te)
        new = harness.deadline_wait(
            lambda: (lambda p: p if p and p != sp else None)(spawner_of(self.daemon.proc.pid)),
            what="a new spawner")
        self.assertNotEqual(new, sp)
        self.assertIn("the spawner exited", self.daemon.stderr())
        c.send({"op": "stats"})
        st = c.recv_for(lambda e: e.get("event") == "stats")["spawner"]
        self.assertEqual((st["pid"], st["calls"]), (new, 0), st)
        self.assertGreaterEqual(st["restarts"], 1, st)
        res = c.run([{"id": "e", "name": "echo", "arguments": {"n": 1}}],
                    batch=harness.new_token("after"))
        self.assertEqual(res.result("e"), {"ok": {"n": 1}})
        self.assertEqual(self.daemon.proc.poll(), None)


class RootDaemon(Checks, DaemonTestCase):
    TOOLS = TOOLS


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.daemon = harness.nobody_daemon(TOOLS)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()


class Lifetime(unittest.TestCase):
    def test_no_spawner_outlives_the_daemon(self):
        d = Daemon(TOOLS)
        try:
            sp = harness.deadline_wait(lambda: spawner_of(d.proc.pid), what="the spawner")
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            harness.deadline_wait(lambda: not alive(sp), what="the spawner to die with the daemon")
        finally:
            d.kill()
            d.stop(check=False)

    def test_spawner_no_starts_calls_on_the_loop(self):
        d = Daemon(TOOLS, ["--spawner", "no"])
        try:
            self.assertIsNone(spawner_of(d.proc.pid))
            res = d.client().run([{"id": "e", "name": "echo", "arguments": {"n": 2}}])
            self.assertEqual(res.result("e"), {"ok": {"n": 2}})
        finally:
            d.stop()


if __name__ == "__main__":
    harness.main()
