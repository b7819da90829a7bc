"""An unprivileged daemon: run as nobody (through util-linux setpriv when the
tests run as root), it gets each call's PID namespace through a user
namespace of its own. Workers keep its uid, a setsid() grandchild still dies
with its call, and network: false still cuts the network."""

import os
import pwd
import shutil
import unittest

import harness
from harness import Daemon, worker_tool, new_token, assert_token_gone, wait_token_present


NobodyDaemon = harness.NobodyDaemon


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class Unprivileged(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        nobody = pwd.getpwnam("nobody")
        cls.uid = nobody.pw_uid
        cls.d = harness.nobody_daemon([worker_tool("who", "identity"),
                                       worker_tool("sg", "setsid-grandchild", timeout_ms=30000),
                                       worker_tool("net", "connect", network=False)])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_containment_is_a_pid_namespace_in_a_user_namespace(self):
        self.assertIn("inside a user namespace", self.d.stderr())

    def test_workers_keep_the_daemon_uid(self):
        res = self.d.client().run([{"id": "w", "name": "who"}])
        ident = res.result("w")["ok"]
        self.assertEqual((ident["uid"], ident["euid"]), (self.uid, self.uid))

    def test_setsid_grandchild_is_gone_after_the_call(self):
        tok = new_token("unpriv-sg")
        c = self.d.client()
        c.start_batch([{"id": "g", "name": "sg", "arguments": {"token": tok, "then": "sleep"}}],
                      batch="b")
        wait_token_present(tok)
        c.send({"op": "cancel", "batch": "b"})
        c.finish_batch("b")
        assert_token_gone(tok, what="setsid grandchild of an unprivileged daemon's call")

    def test_no_network(self):
        res = self.d.client().run([{"id": "n", "name": "net", "arguments": {"port": 9}}])
        self.assertFalse(res.result("n")["ok"]["connected"])


if __name__ == "__main__":
    unittest.main()
