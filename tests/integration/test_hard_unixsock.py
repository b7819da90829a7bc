""""network": false must not reach the host's Unix sockets by path. A
network namespace cuts interfaces and abstract sockets only; a socket in the
file system is a file. The worker's system-call filter
(daemon/confine/sysfilter.c) refuses socket(AF_UNIX) for such calls.

A real listening socket of the host, open to everyone (mode 0666 in a
0755 directory), as a database's or a session bus's would be; a hostile
tool tries to connect to it, with and without network, under a root
daemon and an unprivileged one."""

import os
import pwd
import shutil
import socket
import tempfile
import unittest

import harness
from harness import Daemon, worker_tool


TOOLS = [worker_tool("offline", "hostile", network=False),
         worker_tool("online", "hostile", network=True)]


class HostSocket:
    """A listening Unix socket anyone may connect to."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="te-host-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "service.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)
        self.sock.listen(16)

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.host = HostSocket()
        # the host's socket is in its /tmp, which a call sees a private
        # one of: the definitions name it, as an operator would
        tools = [dict(t, filesystem=harness.with_tree({"read": [cls.host.dir]})) for t in TOOLS]
        d = cls.DAEMON(tools, start=False)
        harness.give_work_dir(d)
        try:
            d.start()
        except BaseException:
            d.stop(check=False)
            cls.host.close()
            raise
        cls.d = d

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.host.close()

    def ok_of(self, res):
        r = res.result("c")
        self.assertEqual(set(r), {"ok"}, r)
        return r["ok"]

    def attempt(self, tool):
        res = self.d.client().run([{"id": "c", "name": tool,
                                    "arguments": {"connect": [self.host.path]}}])
        return self.ok_of(res)["connect"][0]

    def test_offline_call_cannot_connect_to_a_host_socket_by_path(self):
        self.assertEqual(self.attempt("offline"), "EACCES")

    def test_online_call_still_can(self):
        # the same socket, the same attempt: only "network" differs, so the
        # refusal above is the filter's and not a missing path or mode
        self.assertEqual(self.attempt("online"), "ok:connected")

    def test_offline_call_keeps_socketpair(self):
        # a pipe with two ends reaches nothing; interpreters use it
        res = self.d.client().run([{"id": "c", "name": "offline",
                                    "arguments": {"socketpair": True}}])
        self.assertEqual(self.ok_of(res)["socketpair"], "ok")


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Checks, needs_root=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
