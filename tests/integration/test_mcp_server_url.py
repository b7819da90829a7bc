"""An MCP server at a URL: "mcp_server": {"url": "http://127.0.0.1:PORT/mcp"}
(Streamable HTTP, toolexecd.tools(5)), the bridge in the call's sandbox
reaching it through the daemon's egress proxy, root and unprivileged daemon.
The server is the tests' own (tests/mcp_servers/http_server.py, in this
process), in both revisions: 2025-11-25 with a session, 2026-07-28 stateless.

- its tools listed as NAME.TOOL with their schemas; a call (a JSON answer, an
  SSE stream with progress and, in 2025-11-25, a ping of the server's that the
  bridge answers by a POST of its own), isError as the tool's error;
- the session: made at initialize, sent on each request, ended by DELETE;
  2026-07-28: the version, method and tool name in headers matching _meta;
- a credential header (network.headers) reaches the server, added by the
  proxy: never in the bridge's environment or command line, an event, the log;
  over HTTPS too (the proxy ends TLS with the daemon's CA, which the bridge
  trusts, and checks the server's certificate against --upstream-ca);
- a redirect to a host the allow-list does not name: refused by the proxy,
  the denial in the call's denied, the call handler_exit;
- the server down: handler_exit naming its URL, denied saying egress_failure;
- a call the server never answers: the call's timeout, the stream closed (the
  server sees it: cancellation on Streamable HTTP); a call cancelled: the same;
- --check --tools: the URL's scheme, host and port, network, the keys that do
  not go with a url.
"""
import json
import os
import pwd
import shutil
import sys
import tempfile
import unittest

import harness
import test_mcp_server_creds
from test_credentials import make_certs, tls_context
from test_mcp_server import completed, run_events, wait_listed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mcp_servers"))
import http_server  # noqa: E402

SECRET = "Bearer url-s3cr3t-" + os.urandom(8).hex()


def web(name, url, **fields):
    d = {"name": name, "mcp_server": {"url": url}, "timeout_ms": 10000}
    d.update(fields)
    return d


def bridge_pids(port):
    """The bridges of calls of the server at port (their command lines)."""
    return harness.pids_with_token("127.0.0.1:%d/mcp" % port)


class Cases:
    owner = 0  # of the credentials: root, or the unprivileged daemon's uid

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.dir = tempfile.mkdtemp(prefix="te-mcpurl-")
        os.chmod(cls.dir, 0o755)
        cls.creddir = os.path.join(cls.dir, "creds")
        os.mkdir(cls.creddir, 0o700)
        os.chown(cls.creddir, cls.owner, -1)
        path = os.path.join(cls.creddir, "web_key")
        with open(path, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(path, 0o600)
        os.chown(path, cls.owner, -1)
        cls.legacy = http_server.Server("legacy")
        cls.modern = http_server.Server("modern")
        cls.down = http_server.Server("legacy")
        make_certs(cls.dir)
        cls.tls = http_server.Server("legacy", tls=tls_context(cls.dir, "srv"))
        hp = "127.0.0.1:%d" % cls.legacy.port
        hs = "127.0.0.1:%d" % cls.tls.port
        cls.d = cls.make_daemon(
            [web("web", cls.legacy.url,
                 network={"allow": [], "headers": {hp: {"Authorization": {"credential":
                                                                          "web_key"}}}}),
             web("now", cls.modern.url),
             web("down", cls.down.url),
             web("slow", cls.legacy.url, timeout_ms=1500),
             # HTTPS: the proxy ends TLS (the daemon's CA, which the bridge
             # trusts) to add the header, and checks the server's certificate
             web("tls", cls.tls.url,
                 network={"headers": {hs: {"Authorization": {"credential": "web_key"}}}})],
            ["--credentials-dir", cls.creddir, "--log-level", "debug",
             "--upstream-ca", os.path.join(cls.dir, "ca.pem")])
        cls.c = cls.d.client()
        try:
            for t in ("web.echo", "now.echo", "down.echo", "slow.hang", "tls.echo"):
                wait_listed(cls.c, t)
        except AssertionError:
            print(cls.d.stderr()[-6000:])
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()
        for s in (cls.legacy, cls.modern, cls.down, cls.tls):
            s.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_tools_listed_with_their_schemas(self):
        self.c.send({"op": "tools", "format": "mcp"})
        tools = {t["name"]: t for t in self.c.recv_for(lambda e: e.get("event") == "tools")["tools"]}
        for server in ("web", "now"):
            self.assertEqual(tools[server + ".echo"]["description"], "says it back")
            self.assertEqual(tools[server + ".echo"]["inputSchema"]["required"], ["text"])
            self.assertIn(server + ".progress", tools)
        self.assertNotIn("web", tools)  # the listing tool is listed to no client

    def test_calls(self):
        for server in ("web", "now"):
            r = completed(run_events(self.c, server + ".echo", {"text": "hi"}))["result"]
            self.assertEqual(r, {"ok": {"content": [{"type": "text", "text": "hi"}]}}, server)
            err = completed(run_events(self.c, server + ".fail", {}))["result"]
            self.assertEqual(err["error"], "it broke", server)
            # numbers as given, both ways, in a JSON answer and over SSE: an
            # integer beyond 64 bits is sent as a number and its double
            # comes back whole
            big = 12345678901234567890123
            for sse in (False, True):
                r = completed(run_events(self.c, server + ".twice", {"n": big, "sse": sse}))
                self.assertEqual(r["result"]["ok"]["structuredContent"], {"n": 2 * big},
                                 (server, sse))

    def test_param_headers(self):
        # 2026-07-28's x-mcp-header: the marked arguments present mirrored,
        # a value that is not plain ASCII in the base64 form; a tool whose
        # mark is out of reach left out (the log says why)
        r = completed(run_events(self.c, "now.region", {"region": "Hello, 世界",
                                                        "opts": {"n": -7, "fast": False}}))
        self.assertEqual(r["result"]["ok"]["structuredContent"], {
            "mcp-param-region": "=?base64?SGVsbG8sIOS4lueVjA==?=", "mcp-param-n": "-7",
            "mcp-param-fast": "false"})
        r = completed(run_events(self.c, "now.region", {"region": "us-west1"}))
        self.assertEqual(r["result"]["ok"]["structuredContent"], {"mcp-param-region": "us-west1"})
        names = [t["name"] for t in self.c.tools()["tools"]]
        self.assertIn("now.region", names)
        self.assertNotIn("now.badheader", names)
        self.assertIn("now: a tool left out: badheader: x-mcp-header", self.d.stderr())

    def test_sse_progress_and_the_servers_ping(self):
        for server, s in (("web", self.legacy), ("now", self.modern)):
            events = run_events(self.c, server + ".progress", {})
            r = completed(events)["result"]
            self.assertEqual(r["ok"]["structuredContent"], {"steps": 2}, server)
            prog = [e for e in events if e["event"] == "tool_execution_progress"]
            self.assertEqual([(p["progress"]["progress"], p["progress"]["message"]) for p in prog],
                             [(1, "step 1"), (2, "step 2")], server)
        self.assertTrue(self.legacy.pinged.is_set())  # the bridge POSTed its answer

    def test_session_and_headers(self):
        completed(run_events(self.c, "web.echo", {"text": "s"}))
        calls = self.legacy.headers_of("tools/call")
        self.assertTrue(calls)
        self.assertTrue(all(h.get("mcp-session-id") for h in calls))
        self.assertTrue(all("text/event-stream" in h["accept"] and
                            "application/json" in h["accept"] for h in calls))
        harness.deadline_wait(lambda: calls[-1]["mcp-session-id"] in self.legacy.sessions_ended,
                              what="the session ended (DELETE)")
        completed(run_events(self.c, "now.echo", {"text": "s"}))
        h = self.modern.headers_of("tools/call")[-1]
        self.assertEqual((h["mcp-protocol-version"], h["mcp-method"], h["mcp-name"]),
                         ("2026-07-28", "tools/call", "echo"))
        self.assertNotIn("mcp-session-id", h)

    def test_credential_header_at_the_proxy_only(self):
        t = self.d.client()
        self.addCleanup(t.close)
        t.send({"op": "tail"})
        self.assertEqual(t.recv()["event"], "tailing")
        self.legacy.release.clear()
        self.legacy.hanging.clear()
        b = self.c.start_batch([{"id": "h", "name": "web.hang", "arguments": {}}])
        self.legacy.hanging.wait(harness.WAIT)
        pids = harness.deadline_wait(lambda: bridge_pids(self.legacy.port),
                                     what="the call's bridge")
        for pid in pids:
            for what in ("environ", "cmdline"):
                with open("/proc/%d/%s" % (pid, what), "rb") as f:
                    self.assertNotIn(SECRET.encode(), f.read(), what)
        self.legacy.release.set()
        events = self.c.recv_batch(b)
        self.assertEqual(completed(events)["result"]["ok"]["content"][0]["text"], "released")
        tailed = t.recv_for(lambda e: e.get("event") == "tool_execution_completed" and
                            e.get("batch") == b)
        got = self.legacy.headers_of("tools/call")[-1]
        self.assertEqual(got.get("authorization"), SECRET)
        # the other server's (no headers for it) got none
        self.assertTrue(all("authorization" not in h for _, h in self.modern.requests))
        for where, text in (("the caller's events", json.dumps(events)),
                            ("a tail's event", json.dumps(tailed)),
                            ("the daemon's log", self.d.stderr())):
            self.assertNotIn(SECRET, text, where)

    def test_https_with_the_credential(self):
        events = run_events(self.c, "tls.progress", {})
        self.assertEqual(completed(events)["result"]["ok"]["structuredContent"], {"steps": 2})
        self.assertEqual(len([e for e in events if e["event"] == "tool_execution_progress"]), 2)
        self.assertTrue(self.tls.headers_of("tools/call"))
        self.assertTrue(all(h.get("authorization") == SECRET
                            for _, h in self.tls.requests), self.tls.requests)

    def test_redirect_to_a_host_not_allowed(self):
        done = completed(run_events(self.c, "web.moved", {}))
        err = done["result"]["tool_error"]
        self.assertEqual(err["reason"], "handler_exit", err)
        self.assertIn(self.legacy.url, err["message"])
        self.assertIn({"kind": "network", "host": "evil.example", "port": 80}, done["denied"])

    def test_server_down(self):
        self.down.stop()
        done = completed(run_events(self.c, "down.echo", {"text": "x"}))
        err = done["result"]["tool_error"]
        self.assertEqual(err["reason"], "handler_exit", err)
        self.assertIn("the MCP server at %s" % self.down.url, err["message"])
        self.assertIn("502", err["message"])
        self.assertTrue([x for x in done["denied"] if x.get("kind") == "egress_failure" and
                         x.get("port") == self.down.port], done["denied"])

    def test_cancel_closes_the_stream(self):
        self.legacy.release.clear()
        self.legacy.hanging.clear()
        self.legacy.stream_closed.clear()
        b = self.c.start_batch([{"id": "h", "name": "web.hang", "arguments": {}}])
        self.assertTrue(self.legacy.hanging.wait(harness.WAIT))
        self.c.send({"op": "cancel", "batch": b})
        evs = self.c.finish_batch(b)
        self.assertEqual(evs[-1]["halt"], {"halted_reason": "cancelled"})
        harness.deadline_wait(self.legacy.stream_closed.is_set,
                              what="the server to see its stream closed")

    def test_hang_is_the_timeout_and_closes_the_stream(self):
        self.legacy.release.clear()
        self.legacy.stream_closed.clear()
        done = completed(run_events(self.c, "slow.hang", {}))
        self.assertEqual(done["result"]["tool_error"]["reason"], "timeout")
        harness.deadline_wait(self.legacy.stream_closed.is_set,
                              what="the server to see its stream closed")
        harness.deadline_wait(lambda: not bridge_pids(self.legacy.port), what="no bridge left")


class RootDaemon(Cases, unittest.TestCase):
    @classmethod
    def make_daemon(cls, tools, args):
        return harness.Daemon(tools, args=args)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Cases, unittest.TestCase):
    owner = pwd.getpwnam("nobody").pw_uid

    @classmethod
    def make_daemon(cls, tools, args):
        return harness.nobody_daemon(tools, args=args)


class Check(unittest.TestCase):
    # --check --tools with a credentials directory holding "there"
    check = test_mcp_server_creds.Check.check

    def test_refused(self):
        for d, says in (
                (web("bad", "ftp://mcp.example.com/"), "expected an https:// URL"),
                (web("bad", "http://mcp.example.com/mcp"), "http:// only to a loopback"),
                (web("bad", "http://127.evil.example/mcp"), "http:// only to a loopback"),
                (web("bad", "https://a.example:+443/"), "the port must be 1-65535"),
                (web("bad", "https://user@mcp.example.com/"), "without user info"),
                (web("bad", "https://mcp.example.com:0/"), "the port must be 1-65535"),
                (web("bad", "https://mcp.example.com/#x"), "fragment"),
                (web("bad", "https:///mcp"), "no host"),
                (web("bad", 7), "expected a string"),
                (web("bad", "https://a.example/", network=False), "reached through the egress"),
                (web("bad", "https://a.example/", network=True), "reached through the egress"),
                ({"name": "bad", "mcp_server": {"url": "https://a.example/", "command": ["x"]}},
                 "not both"),
                ({"name": "bad", "mcp_server": {"url": "https://a.example/",
                                              "env_credentials": {"K": "k"}}},
                 "network.headers"),
                ({"name": "bad", "mcp_server": {"url": "https://a.example/", "env": {"A": "b"}}},
                 "no process of the server's"),
                (web("bad", "https://a.example/", network={"allow": ["b.example"], "headers": {
                    "c.example": {"Authorization": {"credential": "there"}}}}), "not in allow")):
            status, out = self.check(d)
            self.assertNotEqual(status, 0, d)
            self.assertIn(says, out, d)

    def test_good(self):
        for url in ("https://mcp.example.com/mcp", "https://[2001:db8::1]:8443/mcp?x=1",
                    "http://127.0.0.1:8080/mcp", "http://localhost:9/"):
            status, out = self.check(web("bad", url, network={"allow": ["other.example"]},
                                         filesystem=harness.with_tree({})))
            self.assertEqual(status, 0, url + ": " + out)
        # the man page's: headers for the URL's host, no allow of its own
        status, out = self.check(web("bad", "https://mcp.example.com/mcp", network={
            "headers": {"mcp.example.com": {"Authorization": {"credential": "there"}}}},
            filesystem=harness.with_tree({})))
        self.assertEqual(status, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
