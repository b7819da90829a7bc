"""Warm calls of a tool with an egress allow-list (a warm call gets
the same confinement as a cold one; proto/PROTOCOL.md 2.4, "proxy").

A warm tool with "network": {"allow": [...]} runs warm, and each call gets
what a cold call gets (test_confine_net.py): a network namespace of its own
with only loopback, a proxy the daemon serves on 127.0.0.1:3128 inside it
for that call alone, announced in the same environment variables. Through
the real daemon, root and unprivileged: a listed host (a test HTTP server on
the host's 127.0.0.1) is reached through the proxy, an unlisted one is
refused with the denial in the call's completed event, nothing is reached
directly, two calls at once each have their own proxy and namespace, and a
template that answers a fork without the listener, or with something else in
its place, is garbage: restarted, the daemon up.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import Daemon, WAIT, deadline_wait

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY")


class Server(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/hold":
            st = self.server.state
            st["held"].set()
            self.rfile.read()  # until the proxy closes the connection
            st["released"].set()
            return
        if self.path.startswith("/both"):
            # answered only once two requests are in at the same time: two
            # calls each tunnelling through its own proxy at once
            try:
                self.server.barrier.wait(WAIT)
                body = b"both"
            except threading.BrokenBarrierError:
                body = b"alone"
        else:
            body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def tool(name, mode, allow, **fields):
    d = harness.worker_tool(name, mode, start="warm", network={"allow": allow},
                            timeout_ms=60000, **fields)
    # the file-system view is built only for cold calls so far (another gap
    # of warm_gap(), not this file's): a warm tool sees the host's
    d.setdefault("filesystem", "host")
    return d


def py_fetch(name, allow):
    return {"name": name, "description": "python warm_fetch.py", "schema": {"type": "object"},
            "command": [PYTHON, os.path.join(harness.WORKERS_SRC, "warm_fetch.py")],
            "env": {"PYTHONPATH": os.path.join(SRC, "contrib", "python"),
                    "PYTHONDONTWRITEBYTECODE": "1"},
            "start": "warm", "network": {"allow": allow}, "filesystem": "host",
            "timeout_ms": 60000}


def python_loads_lib():
    """Not a build with ASan, whose runtime must come first (test_warm.py)."""
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(harness.TOOLEXECD))),
                       "lib", "libtoolexec.so.0")
    return subprocess.run([PYTHON, "-c", "import ctypes, sys; ctypes.PyDLL(sys.argv[1])", lib],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def hostile(name, mode, allow):
    return {"name": name, "description": "warm_hostile " + mode, "schema": {"type": "object"},
            "command": [PYTHON, os.path.join(harness.WORKERS_SRC, "warm_hostile.py"), mode],
            "start": "warm", "network": {"allow": allow}, "filesystem": "host"}


def daemon_sockets(pid):
    """Its sockets (proxy connections among them; not the directories the
    removal of a call's directory holds a moment after the call)."""
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def wait_ready(d, name, other_than=None):
    # a warm tool has its template's entry from its load on; none: the
    # daemon runs its calls cold (main before this work: "its egress
    # allow-list (a proxy per call) is built only for cold calls")
    assert name in (d.stats().get("templates") or {}), "no template for %s: %s" % (
        name, [l for l in d.stderr().splitlines() if "tool %s:" % name in l])

    def ready():
        t = (d.stats().get("templates") or {}).get(name)
        return t if t and t["state"] == "ready" and t["pid"] != other_than else None
    return deadline_wait(ready, what="the warm template of %s to be ready" % name)


class WarmEgressCases:
    """The promises; run against a root daemon and an unprivileged one."""

    @classmethod
    def make_daemon(cls, tools):
        return Daemon(tools)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.srv = ThreadingHTTPServer(("127.0.0.1", 0), Server)
        cls.srv.daemon_threads = True
        cls.srv.barrier = threading.Barrier(2)
        cls.srv.state = {"held": threading.Event(), "released": threading.Event()}
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.port = cls.srv.server_address[1]
        cls.target = "127.0.0.1:%d" % cls.port
        cls.d = cls.make_daemon([
            tool("we", None, [cls.target]),
            dict(tool("ce", None, [cls.target]), start="cold"),
            py_fetch("py", [cls.target]),
            hostile("h_nolisten", "fork-no-listener", [cls.target]),
            hostile("h_badlisten", "fork-bad-listener", [cls.target]),
        ])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.srv.shutdown()
        cls.srv.server_close()

    def call(self, name, **args):
        if name != "ce":
            wait_ready(self.d, name)
        res = self.d.client().run([{"id": "c", "name": name, "arguments": args}])
        done = res.completed("c")
        if name == "we":
            self.assertEqual(done.get("start"), "warm", done)
        r = res.result("c")
        self.assertIn("ok", r, r)
        return r["ok"], done.get("denied", [])

    def test_listed_host_through_the_proxy(self):
        out, denied = self.call("we", mode="proxy-tunnel", target=self.target)
        self.assertIn(" 200 ", out["status"], out)
        self.assertEqual(out["inner"], "HTTP/1.1 200 OK", out)
        self.assertEqual(out["body"], "hello from the host", out)
        self.assertEqual(denied, [])

    def test_unlisted_host_is_refused_and_reported(self):
        out, denied = self.call("we", mode="proxy-tunnel", target="evil.example:443")
        self.assertIn(" 403 ", out["status"], out)
        self.assertEqual(denied, [{"kind": "network", "host": "evil.example", "port": 443}])
        # the listed address on another port is another host:port
        out, denied = self.call("we", mode="proxy-tunnel",
                                target="127.0.0.1:%d" % (self.port + 1))
        self.assertIn(" 403 ", out["status"], out)
        self.assertEqual(denied, [{"kind": "network", "host": "127.0.0.1",
                                   "port": self.port + 1}])

    def test_python_sdk_tool_through_the_proxy(self):
        # urllib takes the proxy from the environment the warm call has
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        wait_ready(self.d, "py")
        res = self.d.client().run([{"id": "a", "name": "py",
                                    "arguments": {"url": "http://%s/hello" % self.target}},
                                   {"id": "b", "name": "py",
                                    "arguments": {"url": "http://evil.example/x"}}])
        self.assertEqual(res.completed("a").get("start"), "warm")
        a, b = res.result("a")["ok"], res.result("b")["ok"]
        self.assertEqual((a["status"], a["body"]), (200, "hello from the host"), a)
        self.assertEqual(a["env"]["HTTP_PROXY"], "http://127.0.0.1:3128")
        self.assertEqual(b["status"], 403, b)
        self.assertNotIn("denied", res.completed("a"))
        self.assertEqual(res.completed("b")["denied"],
                         [{"kind": "network", "host": "evil.example", "port": 80}])

    def test_nothing_is_reached_directly(self):
        out, _ = self.call("we", mode="connect", host="192.0.2.1", port=80)
        self.assertIn(out.get("errno"), ("ENETUNREACH", "EHOSTUNREACH"), out)
        # the listed server itself, straight: the call's loopback is its own
        out, _ = self.call("we", mode="connect", host="127.0.0.1", port=self.port)
        self.assertEqual(out.get("errno"), "ECONNREFUSED", out)

    def test_proxy_environment_as_cold(self):
        warm, _ = self.call("we", mode="env")
        cold, _ = self.call("ce", mode="env")
        want = {k: cold["env"].get(k) for k in PROXY_VARS}
        self.assertEqual(want["HTTPS_PROXY"], "http://127.0.0.1:3128")
        self.assertEqual({k: warm["env"].get(k) for k in PROXY_VARS}, want)

    def test_two_calls_at_once_each_have_their_own_proxy(self):
        wait_ready(self.d, "we")
        self.srv.barrier.reset()
        calls = [{"id": "a", "name": "we", "arguments": {"mode": "proxy-tunnel",
                                                         "target": self.target,
                                                         "path": "/both"}},
                 {"id": "b", "name": "we", "arguments": {"mode": "proxy-tunnel",
                                                         "target": self.target,
                                                         "path": "/both"}},
                 {"id": "x", "name": "we", "arguments": {"mode": "proxy-tunnel",
                                                         "target": "evil.example:443"}}]
        res = self.d.client().run(calls, max_concurrency=3)
        starts = {c["id"]: res.completed(c["id"]).get("start") for c in calls}
        self.assertEqual(starts, {"a": "warm", "b": "warm", "x": "warm"})
        for cid in ("a", "b"):
            out = res.result(cid)["ok"]
            self.assertEqual(out.get("body"), "both", (cid, out))
            # each call's denials are its own
            self.assertNotIn("denied", res.completed(cid))
        self.assertEqual(res.completed("x")["denied"],
                         [{"kind": "network", "host": "evil.example", "port": 443}])
        # each in a network namespace of its own, neither the host's
        nets = {res.result(cid)["ok"]["net"] for cid in ("a", "b", "x")}
        self.assertEqual(len(nets), 3, nets)
        self.assertNotIn(os.readlink("/proc/self/ns/net"), nets)

    def test_quick_calls_keep_their_template(self):
        # a call that ends before the daemon reads its "forked" frame: its
        # PID 1 gone, the listener (which keeps its namespace) is still good
        first = wait_ready(self.d, "we")
        calls = [{"id": "q%d" % i, "name": "we", "arguments": {"mode": "echo", "i": i}}
                 for i in range(60)]
        res = self.d.client().run(calls, max_concurrency=4)
        for c in calls:
            self.assertEqual(res.result(c["id"]), {"ok": c["arguments"]})
            self.assertEqual(res.completed(c["id"]).get("start"), "warm")
        t = self.d.stats()["templates"]["we"]
        self.assertEqual((t["pid"], t["restarts"]), (first["pid"], first["restarts"]),
                         [l for l in self.d.stderr().splitlines() if "tool we:" in l])

    def test_proxy_connections_end_with_the_call(self):
        wait_ready(self.d, "we")
        c = self.d.client()
        c.run([{"id": "w", "name": "we", "arguments": {"mode": "echo"}}])
        before = daemon_sockets(self.d.proc.pid)
        st = self.srv.state
        st["held"].clear()
        st["released"].clear()
        c.start_batch([{"id": "h", "name": "we", "arguments": {
            "mode": "proxy-tunnel", "target": self.target, "path": "/hold"}}], batch="hb")
        self.assertTrue(st["held"].wait(WAIT))  # the tunnel is through
        self.assertFalse(st["released"].is_set())
        c.send({"op": "cancel", "batch": "hb"})
        evs = c.finish_batch("hb")
        done = [e for e in evs if e["event"] == "tool_execution_completed"][0]
        self.assertEqual(done.get("start"), "warm", done)
        self.assertTrue(st["released"].wait(WAIT), "the tunnel outlived its call")
        deadline_wait(lambda: daemon_sockets(self.d.proc.pid) == before,
                      what="the daemon's sockets back to %d" % before)

    def template_garbage(self, name, why):
        first = wait_ready(self.d, name)
        res = self.d.client().run([{"id": "c", "name": name, "arguments": {}}])
        te = res.result("c")["tool_error"]
        self.assertIn("warm template died", te["message"], te)
        self.assertEqual(res.completed("c")["start"], "warm")
        deadline_wait(lambda: why in self.d.stderr(), timeout=3 * WAIT, what=why)
        wait_ready(self.d, name, other_than=first["pid"])
        self.assertIsNone(self.d.proc.poll())

    def test_template_without_the_listener_is_garbage(self):
        self.template_garbage("h_nolisten", "tool h_nolisten: warm template answered garbage: "
                              "\"forked\" without the call's proxy listener")

    def test_template_with_a_bad_listener_is_garbage(self):
        self.template_garbage("h_badlisten", "tool h_badlisten: warm template answered garbage: "
                              "\"forked\" without the call's proxy listener")


class WarmEgress(WarmEgressCases, unittest.TestCase):
    pass


class Reload(unittest.TestCase):

    def test_an_allow_list_added_on_reload_replaces_the_template(self):
        # "network": false to an allow-list: the template's filter must let
        # AF_INET through for its calls' listeners, so it is replaced
        harness.require_env()
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Server)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        target = "127.0.0.1:%d" % srv.server_address[1]
        try:
            off = dict(tool("t", None, [target]), network=False)  # and nothing else
            with Daemon(tools=[off]) as d:
                first = wait_ready(d, "t")
                d.add_tool(tool("t", None, [target]), "t.json")
                d.proc.send_signal(signal.SIGHUP)
                wait_ready(d, "t", other_than=first["pid"])
                res = d.client().run([{"id": "c", "name": "t", "arguments": {
                    "mode": "proxy-tunnel", "target": target}}])
                self.assertEqual(res.completed("c").get("start"), "warm")
                self.assertEqual(res.result("c")["ok"].get("body"), "hello from the host",
                                 res.result("c"))
        finally:
            srv.shutdown()
            srv.server_close()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class WarmEgressUnprivileged(WarmEgressCases, unittest.TestCase):
    """The same from a daemon running as nobody (the calls' network
    namespaces inside user namespaces of its own)."""

    @classmethod
    def make_daemon(cls, tools):
        d = harness.NobodyDaemon(tools, start=False)
        d.gid = pwd.getpwnam("nobody").pw_gid
        harness.give_work_dir(d)
        return harness.started(d)


if __name__ == "__main__":
    unittest.main()
