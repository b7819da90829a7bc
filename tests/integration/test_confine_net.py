"""Egress allow-list: "network": {"allow": [...]} puts
a call in a network namespace of its own with only loopback, where the
daemon serves an HTTP proxy that lets out CONNECT tunnels and plain HTTP
requests to the hosts on the list, and nothing else.

Hostile tools (python3 through the real daemon, root and unprivileged) try a
direct connect, a connect that ignores the proxy, a DNS lookup and proxy
requests to hosts not on the list; a test HTTP server on the host's
127.0.0.1, named in the list, is reached through the proxy. Limits, the end
of a call's proxy connections and hostile proxy clients are shown too."""

import json
import os
import pwd
import shutil
import socket
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness
from harness import Daemon, deadline_wait
from test_mcp import TOOLEXEC, Session

# The tool: one python3 program, what to try in its arguments; it prints
# one JSON object (plain protocol).
TOOL = r'''
import json, os, socket, sys
a = json.loads(sys.stdin.readline())
op = a["op"]
PROXY = ("127.0.0.1", 3128)

def err(e):
    return {"error": type(e).__name__, "errno": getattr(e, "errno", None), "msg": str(e)}

def head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return data

def read_all(s):
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError as e:
        return data, type(e).__name__
    return data, None

def tunnel(target, path="/hello"):
    s = socket.create_connection(PROXY, timeout=20)
    s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\nHost: " + target.encode() + b"\r\n\r\n")
    h = head(s)
    status = h.split(b"\r\n", 1)[0].decode()
    if " 200 " not in status:
        body, _ = read_all(s)
        return {"status": status, "body": (h + body).split(b"\r\n\r\n", 1)[-1].decode()}
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data, e = read_all(s)
    return {"status": status, "inner": data.split(b"\r\n", 1)[0].decode(), "bytes": len(data),
            "body": data.split(b"\r\n\r\n", 1)[-1].decode("latin-1")[:200], "error": e}

def get(url):
    import urllib.request, urllib.error
    try:
        r = urllib.request.urlopen(url, timeout=20)
        return {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode()}
    except OSError as e:
        return err(e)

def raw(data):
    s = socket.create_connection(PROXY, timeout=20)
    try:
        s.sendall(data)
    except OSError as e:
        return err(e)
    got, e = read_all(s)
    return {"status": got.split(b"\r\n", 1)[0].decode("latin-1"), "error": e}

if op == "env":
    out = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY")}
elif op == "connect":
    try:
        socket.create_connection((a["host"], a["port"]), timeout=5).close()
        out = {"connected": True}
    except OSError as e:
        out = err(e)
elif op == "unix":
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        out = {"created": True}
    except OSError as e:
        out = err(e)
elif op == "dns":
    try:
        out = {"addr": socket.getaddrinfo(a["host"], 80)[0][4][0]}
    except OSError as e:
        out = err(e)
elif op == "get":
    out = get(a["url"])
elif op == "noproxy":
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        out = {"status": opener.open(a["url"], timeout=5).status}
    except OSError as e:
        out = err(e)
elif op == "tunnel":
    out = tunnel(a["target"], a.get("path", "/hello"))
elif op == "tunnels":
    out = [tunnel(a["target"], a.get("path", "/hello")) for _ in range(a["n"])]
elif op == "hold":
    # a tunnel to the server, whose handler blocks until the call is cancelled
    s = socket.create_connection(PROXY, timeout=20)
    t = a["target"].encode()
    s.sendall(b"CONNECT " + t + b" HTTP/1.1\r\n\r\nGET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
    head(s)
    print("holding", file=sys.stderr, flush=True)
    import time
    time.sleep(3600)
elif op == "connections":
    # max_connections + 1 connections that send nothing: the last is closed
    held = [socket.create_connection(PROXY, timeout=20) for _ in range(a["n"])]
    try:
        d = held[-1].recv(100)
        out = {"last": "eof" if d == b"" else d.decode("latin-1")}
    except OSError as e:
        out = {"last": type(e).__name__}
    try:
        held[0].sendall(b"CONNECT " + a["target"].encode() + b" HTTP/1.1\r\n\r\n")
        out["first"] = head(held[0]).split(b"\r\n", 1)[0].decode()
    except OSError as e:
        out["first"] = type(e).__name__
elif op == "churn":
    # one answered request per connection, n of them, then one more connect
    for i in range(a["n"]):
        r = raw(b"x\r\n\r\n")
        if " 400 " not in r["status"]:
            out = {"at": i, "got": r}
            break
    else:
        try:
            socket.create_connection(PROXY, timeout=20).close()
            out = {"after": "connected"}
        except OSError as e:
            out = {"after": err(e)}
elif op == "hostile":
    out = {}
    slow = []
    for i in range(a["slow"]):
        s = socket.create_connection(PROXY, timeout=20)
        s.sendall(b"GET http://x/ HTTP/1.1\r\nX-Slow: ")
        slow.append(s)
    out["garbage"] = raw(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
    out["huge"] = raw(b"GET http://x/ HTTP/1.1\r\n" + b"X-Big: " + b"a" * 20000 + b"\r\n\r\n")
    out["origin_form"] = raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    out["https_absolute"] = raw(b"GET https://x/ HTTP/1.1\r\nHost: x\r\n\r\n")
    out["many_headers"] = raw(b"GET http://x/ HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n")
    out["ok"] = tunnel(a["target"])
    # the first stalled head is answered when its 10 s are up
    got, e = read_all(slow[0])
    out["slowloris"] = got.split(b"\r\n", 1)[0].decode("latin-1")
print(json.dumps(out))
'''


class Server(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        st = self.server.state
        with st["lock"]:
            st["requests"].append({"line": self.requestline, "headers": dict(self.headers)})
        if self.path == "/hold":
            st["held"].set()
            self.rfile.read()  # until the proxy closes the connection (or its half)
            st["released"].set()
            # and this side stays open: only the daemon can end the proxy's
            # connection to here now
            st["linger"].wait()
            return
        body = b"hello from the host" if self.path != "/big" else b"x" * 200000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def start_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    srv.daemon_threads = True
    srv.state = {"lock": threading.Lock(), "requests": [], "held": threading.Event(),
                 "released": threading.Event(), "linger": threading.Event()}
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def tool(name, network, **fields):
    d = {"name": name, "description": "egress test tool", "schema": {"type": "object"},
         "command": ["/usr/bin/python3",
                     "-I", "-c", TOOL],
         "protocol": "plain", "network": network, "timeout_ms": 60000}
    d.update(fields)
    return d


def daemon_sockets(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


class EgressCases:
    """The promises; run against a root daemon and an unprivileged one."""

    def daemon_command(self, cmd):
        return cmd

    @classmethod
    def make_daemon(cls, tools):
        return Daemon(tools)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.srv = start_server()
        cls.port = cls.srv.server_address[1]
        target = "127.0.0.1:%d" % cls.port
        cls.target = target
        # a port bound and not listening: a connection to it is refused
        cls.closed = socket.socket()
        cls.closed.bind(("127.0.0.1", 0))
        cls.closed_target = "127.0.0.1:%d" % cls.closed.getsockname()[1]
        allow = {"allow": [target, "allowed.invalid", cls.closed_target]}
        cls.d = cls.make_daemon([
            tool("net", allow),
            tool("lim", {"allow": [target], "max_connections": 2, "max_bytes": 50000}),
            tool("rebind", {"allow": ["localhost:%d" % cls.port]}),
            tool("hold", allow),
            tool("off", False),
            tool("own", {"allow": []}, env={"ALL_PROXY": "socks5://example.invalid:1"}),
        ])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.srv.state["linger"].set()
        cls.srv.shutdown()
        cls.srv.server_close()
        cls.closed.close()

    def call(self, name, **args):
        res = self.d.client().run([{"id": "c", "name": name, "arguments": args}])
        done = res.completed("c")
        r = res.result("c")
        self.assertIn("ok", r, r)
        return r["ok"], done.get("denied", [])

    # -- no way out but the proxy ------------------------------------------
    def test_proxy_is_announced(self):
        out, _ = self.call("net", op="env")
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
            self.assertEqual(out[k], "http://127.0.0.1:3128")
        # the list names the host's 127.0.0.1: loopback goes through the proxy
        self.assertIsNone(out["NO_PROXY"])

    def test_no_proxy_is_the_calls_own_loopback_and_env_wins(self):
        out, _ = self.call("own", op="env")
        self.assertEqual(out["NO_PROXY"], "localhost,127.0.0.1,::1")
        self.assertEqual(out["HTTPS_PROXY"], "http://127.0.0.1:3128")
        self.assertEqual(out["ALL_PROXY"], "socks5://example.invalid:1")

    def test_direct_connect_fails(self):
        out, _ = self.call("net", op="connect", host="192.0.2.1", port=80)
        self.assertIn(out.get("errno"), (101, 113), out)  # ENETUNREACH, EHOSTUNREACH

    def test_connect_ignoring_the_proxy_fails(self):
        # the listed server itself, straight: the call's loopback is its own
        out, _ = self.call("net", op="connect", host="127.0.0.1", port=self.port)
        self.assertEqual(out.get("errno"), 111, out)  # ECONNREFUSED
        out, _ = self.call("net", op="noproxy", url="http://%s/hello" % self.target)
        self.assertIn("error", out)
        with self.srv.state["lock"]:
            self.assertEqual(self.srv.state["requests"], [])

    def test_no_unix_sockets_but_inet_for_the_proxy(self):
        # the filter of an allow-list call: AF_INET for the proxy, and no
        # AF_UNIX (host sockets reachable by path), as with "network": false
        out, _ = self.call("net", op="unix")
        self.assertEqual(out.get("errno"), 13, out)  # EACCES

    def test_dns_lookup_fails(self):
        out, _ = self.call("net", op="dns", host="example.com")
        self.assertEqual(out.get("error"), "gaierror", out)

    # -- the list ----------------------------------------------------------
    def test_host_not_on_the_list_is_403_and_reported(self):
        out, denied = self.call("net", op="get", url="http://evil.example/x")
        self.assertEqual(out["status"], 403, out)
        self.assertIn("evil.example port 80 refused", out["body"])
        self.assertIn({"kind": "network", "host": "evil.example", "port": 80}, denied)
        out, denied = self.call("net", op="tunnel", target="evil.example:443")
        self.assertIn(" 403 ", out["status"])
        self.assertIn({"kind": "network", "host": "evil.example", "port": 443}, denied)
        # the listed address on another port is another host:port
        out, denied = self.call("net", op="tunnel", target="127.0.0.1:%d" % (self.port + 1))
        self.assertIn(" 403 ", out["status"])
        self.assertEqual(denied, [{"kind": "network", "host": "127.0.0.1",
                                   "port": self.port + 1}])

    def test_listed_host_plain_http(self):
        out, denied = self.call("net", op="get", url="http://%s/hello?q=1" % self.target)
        self.assertEqual(out, {"status": 200, "body": "hello from the host"})
        self.assertEqual(denied, [])
        with self.srv.state["lock"]:
            req = [r for r in self.srv.state["requests"] if r["line"].startswith("GET /hello?q=1")]
        self.assertEqual(req[-1]["line"], "GET /hello?q=1 HTTP/1.1")  # origin form
        self.assertEqual(req[-1]["headers"].get("Connection"), "close")

    def test_listed_host_connect_tunnel(self):
        out, denied = self.call("net", op="tunnel", target=self.target)
        self.assertIn(" 200 ", out["status"])
        self.assertEqual(out["inner"], "HTTP/1.1 200 OK")
        self.assertEqual(out["body"], "hello from the host")
        self.assertEqual(denied, [])

    def test_name_resolving_to_loopback_is_refused(self):
        # "localhost:PORT" is a name: resolved by the daemon to 127.0.0.1, a
        # loopback address, refused (what DNS rebinding would exploit)
        out, denied = self.call("rebind", op="get", url="http://localhost:%d/hello" % self.port)
        self.assertEqual(out["status"], 403, out)
        self.assertIn({"kind": "network", "host": "localhost", "port": self.port,
                       "reason": "private_address"}, denied)

    def test_unresolvable_listed_name_is_502(self):
        out, denied = self.call("net", op="get", url="http://allowed.invalid/")
        self.assertEqual(out["status"], 502, out)
        # not a refusal, but listed: the tool may report only "502"
        self.assertEqual(len(denied), 1, denied)
        self.assertEqual({k: v for k, v in denied[0].items() if k != "cause"},
                         {"kind": "egress_failure", "host": "allowed.invalid", "port": 80})
        self.assertTrue(denied[0]["cause"].startswith("the name does not resolve: "), denied)

    def test_refused_connection_is_502(self):
        out, denied = self.call("net", op="tunnel", target=self.closed_target)
        self.assertIn(" 502 ", out["status"])
        self.assertIn("could not connect", out["body"])
        host, port = self.closed_target.split(":")
        failed = {"kind": "egress_failure", "host": host, "port": int(port),
                  "cause": "could not connect: connection refused"}
        self.assertEqual(denied, [failed])
        out, denied = self.call("net", op="get", url="http://%s/" % self.closed_target)
        self.assertEqual(out["status"], 502, out)
        self.assertEqual(denied, [failed])
        self.assertIsNone(self.d.proc.poll())

    def test_mcp_says_why_to_the_model(self):
        # through toolexec mcp: each entry of denied as a sentence in the text
        if not TOOLEXEC:
            self.skipTest("environment lacks TOOLEXEC (run through meson test)")
        s = Session(self, self.d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_confine_net", "version": "1"}})
        self.assertIn("result", s.recv())
        s.notify("notifications/initialized")
        s.request(2, "tools/call", {"name": "net", "arguments": {
            "op": "get", "url": "http://evil.example/x"}})
        r = s.response(2)["result"]
        refused = ("Network access to evil.example port 80 was refused: it is not in the tool's "
                   "network allow-list; only the tool's definition (\"network\": {\"allow\": "
                   "[\"evil.example:80\"]}) allows it, within what a run request's \"policy\" "
                   "leaves.")
        self.assertIn("\n- " + refused, r["content"][0]["text"])
        self.assertEqual(r["_meta"]["toolexecd/denied"],
                         [{"kind": "network", "host": "evil.example", "port": 80,
                           "why": refused}])
        host, port = self.closed_target.split(":")
        s.request(3, "tools/call", {"name": "net", "arguments": {
            "op": "get", "url": "http://%s/" % self.closed_target}})
        r = s.response(3)["result"]
        self.assertIn("\n- Connecting to %s port %s failed (not a refusal): could not connect: "
                      "connection refused." % (host, port), r["content"][0]["text"])

    # -- limits ------------------------------------------------------------
    def test_max_connections(self):
        out, denied = self.call("lim", op="connections", n=3, target=self.target)
        self.assertIn(out["last"], ("eof", "ConnectionResetError"), out)
        self.assertIn(" 200 ", out["first"])
        self.assertIn({"kind": "network", "reason": "max_connections"}, denied)

    def test_max_bytes(self):
        out, denied = self.call("lim", op="tunnels", n=2, target=self.target, path="/big")
        self.assertLess(out[0]["bytes"], 200000, out[0])  # cut at 50000
        self.assertIn(" 403 ", out[1]["status"])
        self.assertIn("max_bytes", out[1]["body"])
        self.assertIn({"kind": "network", "host": "127.0.0.1", "port": self.port,
                       "reason": "max_bytes"}, denied)

    def test_connections_in_all(self):
        out, denied = self.call("net", op="churn", n=4096)
        self.assertEqual(out["after"].get("errno"), 111, out)  # ECONNREFUSED
        self.assertIn({"kind": "network", "reason": "connections_total"}, denied)

    # -- the end of a call -------------------------------------------------
    def test_proxy_connections_end_with_the_call(self):
        c = self.d.client()
        c.run([{"id": "w", "name": "net", "arguments": {"op": "env"}}])
        before = daemon_sockets(self.d.proc.pid)
        st = self.srv.state
        st["held"].clear()
        st["released"].clear()
        c.start_batch([{"id": "h", "name": "hold",
                        "arguments": {"op": "hold", "target": self.target}}], batch="hb")
        self.assertTrue(st["held"].wait(harness.WAIT))  # the tunnel is through
        self.assertFalse(st["released"].is_set())
        c.send({"op": "cancel", "batch": "hb"})
        c.finish_batch("hb")
        self.assertTrue(st["released"].wait(harness.WAIT), "the tunnel outlived its call")
        deadline_wait(lambda: daemon_sockets(self.d.proc.pid) == before,
                      what="the daemon's sockets back to %d" % before)

    def test_hostile_proxy_clients(self):
        out, _ = self.call("net", op="hostile", slow=40, target=self.target)
        self.assertIn(" 400 ", out["garbage"]["status"])
        self.assertIn(" 431 ", out["huge"]["status"])
        self.assertIn(" 400 ", out["origin_form"]["status"])
        self.assertIn(" 400 ", out["https_absolute"]["status"])
        self.assertIn(" 431 ", out["many_headers"]["status"])
        # forty stalled heads stall neither the proxy nor the daemon
        self.assertEqual(out["ok"]["body"], "hello from the host")
        self.assertIn(" 408 ", out["slowloris"])
        self.assertIsNone(self.d.proc.poll())
        out, _ = self.call("net", op="env")
        self.assertEqual(out["HTTP_PROXY"], "http://127.0.0.1:3128")

    def test_network_false_still_has_nothing(self):
        out, _ = self.call("off", op="connect", host="127.0.0.1", port=3128)
        self.assertIn("error", out)


class RootDaemon(EgressCases, unittest.TestCase):
    pass


NobodyDaemon = harness.NobodyDaemon


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(EgressCases, unittest.TestCase):

    @classmethod
    def make_daemon(cls, tools):
        d = NobodyDaemon(tools, start=False)
        harness.give_work_dir(d)
        harness.started(d)
        return d


class Definitions(unittest.TestCase):

    def test_bad_network_object_is_refused_at_load(self):
        d = Daemon([tool("bad", {"allow": ["a.*.org"]})], start=False)
        try:
            d.spawn()
            rc = d.proc.wait(timeout=harness.WAIT)
            self.assertNotEqual(rc, 0)
            self.assertIn('bad.json: network: allow[0]: "a.*.org"', d.stderr())
        finally:
            d.stop(check=False)


if __name__ == "__main__":
    unittest.main()
