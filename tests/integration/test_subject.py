"""A run request's "subject": whom a trusted front runs a batch for.

The MCP HTTP front (toolexec mcp --listen) runs unprivileged, as a user of
its own, and authenticates its clients itself; the daemon takes the subject
it names only from a uid given with --subject-from, known by the
connection's SO_PEERCRED, and refuses it from any other client. Each
subject is a bucket of its own, like a uid: its share of the worker slots,
its --max-queued-calls, and the audit trail names it.

The front here is a connection made as nobody (65534), the daemon's
--subject-from; the test itself (root) is an ordinary client. Order is read
from events, never timed: each call runs until the test lets it go."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Daemon, deadline_wait, nobody_daemon, worker_tool  # noqa: E402
from test_audit import records  # noqa: E402
from test_fair_uids import client_as, next_started, queued  # noqa: E402

FRONT = 65534
TOOLS = [worker_tool("wait", "wait-file"), worker_tool("echo", "echo")]


def front_daemon(extra=()):
    # by name: the option takes a user name as well as a uid
    name = pwd.getpwuid(FRONT).pw_name
    return Daemon(TOOLS, ["--subject-from", name, "--socket-mode", "0666"] + list(extra))


def front_of(d):
    c = client_as(d.sock, FRONT, FRONT)
    d.clients.append(c)
    return c


def wait_call(d, name):
    path = d.path("release-" + name)
    return path, [{"id": "w", "name": "wait", "arguments": {"path": path}}]


def records_in(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def error_of(c, batch):
    return c.recv_for(lambda e: e.get("event") == "error" and e.get("batch") == batch)


@unittest.skipUnless(os.geteuid() == 0, "needs root (to connect as the front's user)")
class SubjectTest(unittest.TestCase):
    def test_flooding_subject_does_not_starve_another(self):
        """One slot. Subject A holds it and has a second batch queued; B's
        one call, queued after A's, has the next turn: A holds the slot
        when B arrives and B holds none. On one connection of one uid,
        without buckets per subject, A's older batch would go first."""
        with front_daemon(["--max-workers", "1"]) as d:
            tail = d.client()
            tail.send({"op": "tail"})
            tail.recv_for(lambda e: e.get("event") == "tailing")
            front = front_of(d)
            release = {}
            release["a1"], calls = wait_call(d, "a1")
            front.start_batch(calls, batch="a1", subject="alice")
            queued(tail, "a1")
            self.assertEqual(next_started(tail)["batch"], "a1")
            for name in ("a2", "a3"):
                release[name], calls = wait_call(d, name)
                front.start_batch(calls, batch=name, subject="alice")
                queued(tail, name)
            release["b1"], calls = wait_call(d, "b1")
            front.start_batch(calls, batch="b1", subject="bob")
            queued(tail, "b1")

            open(release["a1"], "w").close()
            order = [next_started(tail)["batch"]]
            open(release[order[0]], "w").close()
            order.append(next_started(tail)["batch"])
            self.assertEqual(order, ["b1", "a2"])
            for path in release.values():
                open(path, "w").close()
            for batch in ("a1", "a2", "a3", "b1"):
                self.assertEqual(front.finish_batch(batch)[-1]["event"], "batch_completed")

    def test_untrusted_client_naming_a_subject_is_refused(self):
        with front_daemon() as d:
            c = d.client()  # root, but not the front
            c.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="u1",
                          subject="alice")
            err = error_of(c, "u1")
            self.assertEqual((err["type"], err["reason"]), ("request_error", "invalid_request"))
            self.assertIn("only a front the daemon trusts (--subject-from) may name a subject",
                          err["message"])
            self.assertIn("uid 0 is not one", err["message"])
            # nothing ran, and the client is still served without one
            res = c.run([{"id": "e", "name": "echo", "arguments": {"x": 1}}], batch="u2")
            self.assertEqual(res.result("e"), {"ok": {"x": 1}})
            self.assertNotIn("u1", [e.get("batch") for e in c.log if e["event"] != "error"])

    def test_subject_bound(self):
        with front_daemon() as d:
            front = front_of(d)
            front.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="long",
                              subject="x" * 256)
            err = error_of(front, "long")
            self.assertEqual((err["type"], err["reason"]), ("request_error", "invalid_request"))
            self.assertIn("subject: expected 1 to 255 bytes of printable ASCII", err["message"])
            front.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="sp",
                              subject="a b")
            self.assertIn("subject: expected", error_of(front, "sp")["message"])
            res = front.run([{"id": "e", "name": "echo", "arguments": {}}], batch="max",
                            subject="x" * 255)
            self.assertEqual(res.result("e"), {"ok": {}})

    def test_queued_calls_limit_per_subject(self):
        """--max-queued-calls counts each subject's calls apart: alice at
        her limit is refused, naming her; bob, behind the same front, is
        not."""
        with front_daemon(["--max-workers", "1", "--max-batch-calls", "2",
                           "--max-queued-calls", "2"]) as d:
            front = front_of(d)
            path, calls = wait_call(d, "a")
            front.start_batch(calls + [{"id": "w2", "name": "wait", "arguments": {"path": path}}],
                              batch="a1", subject="alice")
            front.recv_for(lambda e: e.get("event") == "tool_execution_started")
            front.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="a2",
                              subject="alice")
            err = error_of(front, "a2")
            self.assertIn('batches of subject "alice" (--max-queued-calls', err["message"])
            front.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="b1",
                              subject="bob")
            open(path, "w").close()
            self.assertEqual(front.finish_batch("b1")[-1]["event"], "batch_completed")
            self.assertEqual(front.finish_batch("a1")[-1]["event"], "batch_completed")

    def test_audit_and_events_carry_the_subject(self):
        tmp = tempfile.mkdtemp(prefix="te-subject-")
        self.addCleanup(shutil.rmtree, tmp, True)
        log = os.path.join(tmp, "audit.log")
        with front_daemon(["--log-format", "json", "--audit-file", log]) as d:
            tail = d.client()
            tail.send({"op": "tail"})
            tail.recv_for(lambda e: e.get("event") == "tailing")
            front = front_of(d)
            front.run([{"id": "s1", "name": "echo", "arguments": {}}], batch="sb",
                      subject="carol@example.org")
            front.run([{"id": "n1", "name": "echo", "arguments": {}}], batch="nb")
            started = tail.recv_for(lambda e: e.get("event") == "batch_started"
                                    and e.get("batch") == "sb")
            self.assertEqual(started["client"]["subject"], "carol@example.org")
            self.assertEqual(started["client"]["uid"], FRONT)
            done = tail.recv_for(lambda e: e.get("event") == "tool_execution_completed"
                                 and e.get("batch") == "sb")
            self.assertEqual(done["client"]["subject"], "carol@example.org")
            plain = tail.recv_for(lambda e: e.get("event") == "batch_started"
                                  and e.get("batch") == "nb")
            self.assertNotIn("subject", plain["client"])
            deadline_wait(lambda: len(records_in(log)) >= 2, what="2 audit records")
            recs = {r["call"]: r for r in records(d)}
        self.assertEqual(recs["s1"]["subject"], "carol@example.org")
        self.assertEqual(recs["s1"]["client_uid"], FRONT)
        self.assertNotIn("subject", recs["n1"])
        filed = {r["call"]: r for r in records_in(log)}
        self.assertEqual(filed["s1"]["subject"], "carol@example.org")
        self.assertNotIn("subject", filed["n1"])

    def test_unprivileged_daemon(self):
        """A daemon running as nobody trusts uid 65533, not itself nor
        root: the front's subject is honoured, the same from nobody's own
        uid or from root refused."""
        d = nobody_daemon(TOOLS, ["--subject-from", "65533", "--socket-mode", "0666"])
        with d:
            front = client_as(d.sock, 65533, 65533)
            d.clients.append(front)
            res = front.run([{"id": "e", "name": "echo", "arguments": {}}], batch="ok",
                            subject="dave")
            self.assertEqual(res.result("e"), {"ok": {}})
            own = client_as(d.sock, 65534, 65534)
            d.clients.append(own)
            for c, uid in ((own, 65534), (d.client(), 0)):
                c.start_batch([{"id": "e", "name": "echo", "arguments": {}}], batch="no",
                              subject="dave")
                err = error_of(c, "no")
                self.assertIn("(--subject-from) may name a subject; uid %d is not one" % uid,
                              err["message"])


class SubjectFromOption(unittest.TestCase):
    def test_unknown_user_is_refused_at_start(self):
        harness.require_env()
        for bad in ("no-such-user-te", "4294967295", "-1", ""):
            p = subprocess.run([harness.TOOLEXECD, "--subject-from", bad, "--check"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertIn("--subject-from: ", p.stderr)
            self.assertIn("no such user, nor a uid", p.stderr)


if __name__ == "__main__":
    harness.main()
