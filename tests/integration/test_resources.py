"""Resource exhaustion and hostile sizes: the daemon runs out of descriptors
(accepting pauses and resumes, spawning fails as a handler_exit with
cause.spawn_error), a 10 MiB request to a worker that never reads it or
closes stdin at once, JSON nested 100,000 levels deep from a worker and
from a client, and clone() failing with EAGAIN under RLIMIT_NPROC. The daemon stays up and serves the next request."""

import json
import os
import shutil
import socket
import unittest

import harness
from harness import Daemon, worker_tool, WAIT

NOFILE = 64


class FewDescriptors(Daemon):
    """A daemon started under RLIMIT_NOFILE = NOFILE (util-linux prlimit)."""

    def command(self):
        return ["prlimit", "--nofile=%d:%d" % (NOFILE, NOFILE), "--"] + super().command()


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def read_event(sock, timeout=WAIT):
    sock.settimeout(timeout)
    buf = b""
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed before an event")
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])


class Descriptors(unittest.TestCase):

    def setUp(self):
        self.d = FewDescriptors(tools=[worker_tool("echo", "echo")])
        self.addCleanup(self.d.stop)
        self.socks = []
        self.addCleanup(lambda: [s.close() for s in self.socks])

    def fill(self):
        """Connect clients until the daemon runs out of descriptors."""
        for _ in range(NOFILE * 2):
            s = connect(self.d.sock)
            s.sendall(b'{"op":"tools"}\n')
            self.socks.append(s)
            if "not accepting" in self.d.stderr():
                return
        harness.deadline_wait(lambda: "not accepting" in self.d.stderr(),
                              what="the daemon to run out of descriptors")

    def test_accepting_pauses_and_resumes(self):
        self.fill()
        # Every client is eventually served, in order, as earlier ones leave.
        for s in self.socks:
            ev = read_event(s)
            self.assertEqual(ev["event"], "tools")
            s.close()
        self.socks = []
        # ... and the daemon is as good as new.
        c = self.d.client()
        res = c.run([{"id": "a", "name": "echo", "arguments": {"n": 1}}])
        self.assertEqual(res.result("a"), {"ok": {"n": 1}})

    def test_spawn_failure_is_a_handler_exit(self):
        c = self.d.client()
        self.fill()
        # c was accepted before the daemon ran out: its call cannot get pipes.
        res = c.run([{"id": "a", "name": "echo"}])
        te = res.result("a")["tool_error"]
        self.assertEqual(te["reason"], "handler_exit")
        self.assertIn("spawn_error", te["cause"])
        self.assertIn("Too many open files", te["cause"]["spawn_error"])
        for s in self.socks:
            s.close()
        self.socks = []
        res = harness.deadline_wait(
            lambda: (lambda r: r if "ok" in r.result("b") else None)(
                c.run([{"id": "b", "name": "echo"}], batch=harness.new_token("b"))),
            what="a call to succeed once descriptors are free")
        self.assertEqual(res.result("b"), {"ok": {}})


# A uid no account or other test uses: RLIMIT_NPROC counts every process of
# the uid on the host.
NPROC_UID = 64123


class FewProcesses(Daemon):
    """A daemon running as NPROC_UID under RLIMIT_NPROC = 3: itself, its
    spawner (daemon/run/spawner.c) and one worker (pgroup containment: no init in between)."""

    def command(self):
        return ["prlimit", "--nproc=3:3", "setpriv", "--reuid=%d" % NPROC_UID,
                "--regid=%d" % NPROC_UID, "--clear-groups"] + super().command()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv") and shutil.which("prlimit"),
                     "needs root (to take another uid), setpriv and prlimit")
class OutOfProcesses(unittest.TestCase):
    """fork/clone failing with EAGAIN is a handler_exit with
    cause.spawn_error for that call; the daemon goes on."""

    def test_eagain_is_a_spawn_error_and_the_daemon_recovers(self):
        d = FewProcesses([worker_tool("sleep", "sleep", timeout_ms=60000),
                          worker_tool("echo", "echo")],
                         ["--containment", "pgroup"], start=False)
        os.chmod(d.tmp, 0o777)
        os.chown(d.work_dir, NPROC_UID, NPROC_UID)  # the daemon's own
        try:
            d.start()
            c = d.client()
            # the one worker the limit allows: a sleeper
            c.start_batch([{"id": "s", "name": "sleep"}], batch="hold")
            c.recv_for(lambda e: e.get("event") == "tool_execution_started")
            harness.deadline_wait(lambda: "testworker: sleeping" in d.stderr(),
                                  what="the sleeper to run")
            c2 = d.client()
            res = c2.run([{"id": "e", "name": "echo"}])
            te = res.result("e")["tool_error"]
            self.assertEqual(te["reason"], "handler_exit", te)
            self.assertIn("clone: Resource temporarily unavailable",
                          te["cause"]["spawn_error"], te)
            # the slot frees when the sleeper goes; then calls run again
            c.send({"op": "cancel", "batch": "hold"})
            c.finish_batch("hold")
            res = harness.deadline_wait(
                lambda: (lambda r: r if "ok" in r.result("e") else None)(
                    c2.run([{"id": "e", "name": "echo"}], batch=harness.new_token("b"))),
                what="a call to run once a process slot is free")
            self.assertEqual(res.result("e"), {"ok": {}})
        finally:
            d.stop()


class HostileSizes(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(tools=[worker_tool("noread", "no-read"),
                              worker_tool("closer", "close-stdin"),
                              worker_tool("deep", "deep"),
                              worker_tool("echo", "echo")])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_10mib_request_to_workers_that_do_not_read_it(self):
        c = self.d.client()
        big = "x" * (10 << 20)
        for tool, want in (("noread", "unread"), ("closer", "closed")):
            res = c.run([{"id": "x", "name": tool, "arguments": {"blob": big}}],
                        timeout=WAIT * 2)
            self.assertEqual(res.result("x"), {"ok": want})
        self.assertEqual(c.run([{"id": "e", "name": "echo"}]).result("e"), {"ok": {}})

    def test_response_nested_100000_deep(self):
        c = self.d.client()
        res = c.run([{"id": "d", "name": "deep"}])
        te = res.result("d")["tool_error"]
        self.assertEqual(te["reason"], "invalid_return")
        self.assertIn("invalid JSON", te["message"])
        self.assertEqual(c.run([{"id": "e", "name": "echo"}]).result("e"), {"ok": {}})

    def test_error_messages_stay_utf8(self):
        # A long non-ASCII unknown key is quoted in the error and the quote
        # is cut at the message limit, mid-character: the client still gets
        # a well-formed error event, not silence.
        c = self.d.client()
        key = "x" + "\u00e9" * 300
        c.send({"op": "run", "calls": [], key: 1})
        ev = c.recv()
        self.assertEqual((ev["event"], ev["reason"]), ("error", "invalid_request"))
        self.assertIn("unknown key", ev["message"])
        c.send_raw(b'{"\\u00\xc3\xa900"}\n')
        ev = c.recv()
        self.assertEqual((ev["event"], ev["reason"]), ("error", "invalid_json"))

    def test_request_nested_100000_deep(self):
        c = self.d.client()
        depth = 100000
        c.send_raw(b'{"op":"run","calls":' + b"[" * depth + b"]" * depth + b"}\n")
        ev = c.recv()
        self.assertEqual(ev["event"], "error")
        self.assertEqual(ev["type"], "request_error")
        self.assertEqual(ev["reason"], "invalid_json")
        self.assertEqual(c.run([{"id": "e", "name": "echo"}]).result("e"), {"ok": {}})


class FairQueue(unittest.TestCase):
    """--max-workers 1: queued calls are served fairly across clients, not
    in proportion to how many batches a client sends."""

    def test_one_client_with_many_batches_does_not_starve_another(self):
        d = Daemon(tools=[worker_tool("gate", "wait-file"), worker_tool("echo", "echo")],
                   args=["--max-workers", "1"])
        self.addCleanup(d.stop)
        tail = d.client()
        tail.send({"op": "tail"})
        tail.recv_for(lambda e: e["event"] == "tailing")
        a, b = d.client(), d.client()
        gate = os.path.join(d.shared_dir("gate"), "open")
        # the gate holds the only worker while everything else queues up
        a.start_batch([{"id": "g", "name": "gate", "arguments": {"path": gate}}], batch="a0")
        tail.recv_for(lambda e: e["event"] == "tool_execution_started" and e["batch"] == "a0")
        for n in (1, 2, 3):
            a.start_batch([{"id": "c%d" % i, "name": "echo"} for i in range(4)], batch="a%d" % n)
        b.start_batch([{"id": "c%d" % i, "name": "echo"} for i in range(4)], batch="b1")
        for n in ("a1", "a2", "a3", "b1"):
            tail.recv_for(lambda e, n=n: e["event"] == "batch_started" and e["batch"] == n)
        with open(gate, "w"):
            pass
        order = []
        while len(order) < 16:
            e = tail.recv_for(lambda e: e["event"] == "tool_execution_started")
            order.append(e["batch"][0])
        # B's four calls alternate with A's instead of waiting behind its
        # batches; B first, as A's gate call was A's turn (a call started
        # at once counts as its client's turn, as a queued one does)
        self.assertEqual(order[:8], ["b", "a"] * 4, order)
        for c, name in ((a, "a3"), (b, "b1")):
            self.assertEqual(c.finish_batch(name)[-1]["event"], "batch_completed")


if __name__ == "__main__":
    unittest.main()
