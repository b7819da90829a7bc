"""A warm template may not join its calls' namespaces nor make its own.

A template makes the user namespace of each call's PID 1 (P1), so it owns
it: had its filter let setns() through, it could join one, with every
capability there, and take the call's uid (a root daemon's lent one)
outside the call's PID namespace, where nothing ends it with the call and
the uid goes back to the pool with it still running. Nothing in the warm
runtime (lib/warm*.c) calls setns() or unshare(): the template's filter
refuses both, as a cold call's does; and umount2, pivot_root and fspick,
which it does not call either.

The testworker's "nsjoin" template really tries, before each fork, from a
child of its own: setns() into a spare P1's user namespace (nstype
CLONE_NEWUSER and 0) and unshare(CLONE_NEWUSER); each call answers what
the template got, and what it gets itself trying the same against its
parent. A cold call of the same tool answers its own. Against a root
daemon and an unprivileged one.
"""

import os
import unittest

import harness
from harness import Daemon, deadline_wait, syscall_names

TOOLS = [
    harness.worker_tool("w_ns", "nsjoin", start="warm", timeout_ms=60000),
    harness.worker_tool("c_ns", "nsjoin", timeout_ms=60000),
]
REFUSED = {"setns_user": "EPERM", "setns_any": "EPERM", "unshare_user": "EPERM"}
# mount calls the warm runtime does not make either, tried on a path that is
# not there (ENOENT or EINVAL had the filter let them through)
MOUNTS = {"umount2": "EPERM", "pivot_root": "EPERM", "fspick": "EPERM"}


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if harness.LSAN_WORKER:
            # seen in CI's sanitized pass: the ASan-built template found no
            # spare P1 of its own to try against in 3 calls; the plain
            # build's run is the check
            raise unittest.SkipTest("an ASan-built template finds no spare P1 to try against")
        d = cls.DAEMON(TOOLS, start=False)
        harness.give_work_dir(d)
        harness.started(d)
        cls.d = d
        harness.wait_template(d, "w_ns")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def call(self, name, start):
        res = self.d.client().run([{"id": "x", "name": name, "arguments": {}}], timeout=120)
        done = res.completed("x")
        self.assertEqual(done.get("start", "cold"), start, done)
        self.assertEqual(set(done["result"]), {"ok"}, done)
        return done["result"]["ok"], done

    def test_template_cannot_join_a_call_or_unshare(self):
        # the first call makes a spare P1 for the next: the template tries
        # against it before the second
        tried = []
        for _ in range(3):
            got, done = self.call("w_ns", "warm")
            tried.append(got)
            if got["template"]["p1"]:
                break
        self.assertTrue(got["template"]["p1"], tried)
        self.assertEqual(got["template"], dict(REFUSED, p1=True, **MOUNTS), tried)
        # the call's own stacked filter refuses them too, unreported
        self.assertEqual(got["call"], REFUSED, got)
        self.assertEqual(syscall_names(done), [], done)
        # the template's own denials: logged as its own, in no call
        for name in ("setns", "unshare", "umount2", "pivot_root", "fspick"):
            deadline_wait(lambda: "denied system call %s (the template's own" % name
                          in self.d.stderr(), what="the template's own %s denial logged" % name)

    def test_cold_call_is_refused_too(self):
        got, done = self.call("c_ns", "cold")
        self.assertNotIn("template", got)
        self.assertEqual(got["call"], REFUSED, got)
        self.assertEqual(syscall_names(done), ["setns", "unshare"], done)


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Checks)


if __name__ == "__main__":
    unittest.main()
