"""A call without the host's network has a loopback of its own, and name
resolution under the host's network reports no denial.

"network": false (and `toolexec sandbox --net off`) is a network namespace
of the call's own whose lo is up: a command may serve and reach itself on
127.0.0.1 (a local HTTP server, a test suite that binds localhost), and
reaches nothing beyond: neither the host's 127.0.0.1 (the namespace's lo is
its own) nor the host's other addresses. Under the host's network, glibc's
getaddrinfo (which asks NETLINK_ROUTE for the interfaces) reports no
denial, and a refused socket() names its address family,
"socket(AF_PACKET)". Real processes throughout: the sandbox command as the
caller and as nobody, and the daemon's tools cold and warm under a root and
an unprivileged daemon."""

import errno
import http.server
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import unittest

import harness
from harness import Daemon
from test_sandbox_cmd import _Quiet as _Hello  # its server's handler

TOOLEXEC = os.environ.get("TOOLEXEC", "")
PY = "/usr/bin/python3"


def host_address():
    """An address of this host other than loopback (the one its route out
    would use), or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
        a = s.getsockname()[0]
        return None if a.startswith("127.") else a
    except OSError:
        return None
    finally:
        s.close()


class HostServer:
    """An HTTP server on every address of the host (0.0.0.0)."""

    @classmethod
    def start_server(cls):
        cls.srv = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Hello)
        cls.srv.daemon_threads = True
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.port = cls.srv.server_address[1]
        cls.addrs = ["127.0.0.1"] + ([host_address()] if host_address() else [])

    @classmethod
    def stop_server(cls):
        cls.srv.shutdown()
        cls.srv.server_close()


# python3 -m http.server, as people run it, and a fetch from it: the port
# it took is on the first line it prints
SERVE_AND_FETCH = """
import re, subprocess, sys, urllib.request
srv = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/")
port = int(re.search(rb"port (\\d+)", srv.stdout.readline()).group(1))
status = urllib.request.urlopen("http://localhost:%d/" % port, timeout=10).status
srv.kill()
print("served", status)
"""

CONNECT = """
import socket, sys
port = int(sys.argv[1])
for a in sys.argv[2:]:
    try:
        socket.create_connection((a, port), timeout=5).close()
        print(a, "connected")
    except OSError as e:
        print(a, "refused", e.errno)
"""


class SandboxCases(HostServer):
    """toolexec sandbox; prefix() says as whom."""

    as_nobody = False

    @classmethod
    def setUpClass(cls):
        cls.start_server()
        cls.runtime = tempfile.mkdtemp(prefix="sbxnet-rt-")
        if cls.as_nobody:
            nb = pwd.getpwnam("nobody")
            os.chown(cls.runtime, nb.pw_uid, nb.pw_gid)
        os.chmod(cls.runtime, 0o700)

    @classmethod
    def tearDownClass(cls):
        cls.stop_server()
        shutil.rmtree(cls.runtime, ignore_errors=True)

    def sandbox(self, *args):
        prefix = []
        if self.as_nobody:
            nb = pwd.getpwnam("nobody")
            prefix = ["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                      "--clear-groups"]
        p = subprocess.run(prefix + [TOOLEXEC, "sandbox", "--json"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=harness.sandbox_env(XDG_RUNTIME_DIR=self.runtime),
                           timeout=60 * harness.SCALE)
        err = p.stderr.decode()
        lines = [l for l in err.splitlines() if l.startswith("{")]
        self.assertTrue(lines, err)
        return p.returncode, p.stdout.decode(), err, json.loads(lines[-1])

    def test_off_serves_and_reaches_itself_on_loopback(self):
        rc, out, err, s = self.sandbox("--net", "off", "--timeout", "30", "--", PY, "-c",
                                       SERVE_AND_FETCH)
        self.assertEqual((rc, out), (0, "served 200\n"), err)
        self.assertEqual(s["denied"], [], err)

    def test_off_reaches_nothing_of_the_host(self):
        argv = ["--", PY, "-c", CONNECT, str(self.port)] + self.addrs
        # the host's network reaches the server on each address
        rc, out, err, _ = self.sandbox("--net", "host", *argv)
        self.assertEqual(out.count("connected"), len(self.addrs), out + err)
        rc, out, err, s = self.sandbox("--net", "off", *argv)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("connected", out, err)
        self.assertIn("127.0.0.1 refused %d" % errno.ECONNREFUSED, out)  # its own lo
        self.assertEqual(out.count("refused"), len(self.addrs), out)
        self.assertEqual(s["denied"], [], err)

    def test_name_resolution_reports_no_denial(self):
        # glibc asks NETLINK_ROUTE which families the host has with
        # AI_ADDRCONFIG, and to sort several answers (getent ahosts)
        script = ("import socket\n"
                  "socket.getaddrinfo('localhost', 80)\n"
                  "socket.getaddrinfo('localhost', 80, flags=socket.AI_ADDRCONFIG)\n")
        for net in ("host", "off"):
            for argv in ([PY, "-c", script], ["getent", "ahosts", "localhost"]):
                rc, out, err, s = self.sandbox("--net", net, "--", *argv)
                self.assertEqual(rc, 0, err)
                self.assertEqual(s["denied"], [], (net, argv, err))
                self.assertNotIn("denied:", err, (net, argv))

    def test_socket_denial_names_the_family(self):
        script = ("import socket\n"
                  "try:\n"
                  "    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
                  "except OSError as e:\n"
                  "    print(e.errno)\n")
        rc, out, err, s = self.sandbox("--net", "host", "--", PY, "-c", script)
        self.assertEqual((rc, out), (0, "%d\n" % errno.EPERM), err)
        self.assertIn("denied: system call socket(AF_PACKET)\n", err)
        self.assertEqual(s["denied"], [{"kind": "syscall", "name": "socket(AF_PACKET)"}], err)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class SandboxAsCaller(SandboxCases, unittest.TestCase):
    pass


@unittest.skipUnless(TOOLEXEC and os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class SandboxAsNobody(SandboxCases, unittest.TestCase):
    as_nobody = True


def tools():
    def tool(name, **fields):
        d = harness.worker_tool(name, None, timeout_ms=60000, **fields)
        if d.get("start") == "warm":  # warm calls need the host's view so far
            d.setdefault("filesystem", "host")
        return d
    return [tool("cold_off", network=False), tool("warm_off", network=False, start="warm"),
            tool("cold_host", network=True)]


class DaemonCases(HostServer):
    """A tool with "network": false, cold and warm."""

    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.start_server()
        d = cls.DAEMON(tools(), start=False)
        harness.give_work_dir(d)
        cls.d = harness.started(d)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.stop_server()

    def call(self, name, **args):
        if name.startswith("warm"):
            harness.wait_template(self.d, name)
        res = self.d.client().run([{"id": "x", "name": name, "arguments": args}], timeout=120)
        done = res.completed("x")
        self.assertEqual(done.get("start", "cold"), "warm" if name.startswith("warm") else "cold",
                         done)
        self.assertEqual(set(done["result"]), {"ok"}, done)
        return done["result"]["ok"], done

    def test_serves_and_reaches_itself_on_loopback(self):
        for name in ("cold_off", "warm_off"):
            got, done = self.call(name, mode="loopback")
            self.assertEqual(got, {"served": True, "got": "ping"}, (name, got))
            self.assertNotIn("denied", done)

    def test_reaches_nothing_of_the_host(self):
        for a in self.addrs:
            got, _ = self.call("cold_host", mode="connect", host=a, port=self.port)
            self.assertTrue(got["connected"], (a, got))  # the server is there
            for name in ("cold_off", "warm_off"):
                got, done = self.call(name, mode="connect", host=a, port=self.port)
                self.assertFalse(got["connected"], (name, a, got))
                self.assertEqual(got["step"], "connect", got)
                self.assertNotIn("denied", done)


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(DaemonCases)


if __name__ == "__main__":
    harness.main()
