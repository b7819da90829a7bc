"""MCP servers as tool sources ("mcp_server" definitions, toolexecd.tools(5)):
a stdio MCP server of our own (tests/mcp_servers/odd_server.py), normal and
hostile, run as NAME.TOOL through the real daemon, root and unprivileged.

- its tools are listed at start (the listing itself a confined call) with
  their schemas, output schemas and annotations; arguments are checked
  against the server's inputSchema before anything runs;
- results: the server's content whole as ok ({"content": [...],
  "structuredContent"}, an image and embedded resources too), isError and a JSON-RPC error
  as the handler's own error, progress forwarded, a crash mid-call a
  handler_exit, a flood of output a handler_exit, a server that never
  answers a timeout with its processes killed;
- confinement as for any tool: /etc/shadow and the daemon's definitions are
  out of reach, a daemonised child is reaped, a file written in one call is
  gone for the next (a fresh server per call);
- --check --tools refuses a definition with both a command and a url.
"""
import json
import os
import subprocess
import sys
import tempfile
import shutil
import signal
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

sys.path.insert(0, os.path.join(harness.HERE, "..", "mcp_servers"))
import odd_server  # noqa: E402

SRV = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "odd_server.py"))
PY = "/usr/bin/python3"  # a shim in a home directory would be hidden by the view


def odd(name="odd", *extra, **fields):
    d = {"name": name, "mcp_server": {"command": [PY, SRV] + list(extra),
                                      "env": {"ODD_VAR": "from-definition"}},
         "timeout_ms": 10000}
    d.update(fields)
    return d


def text_ok(t):
    """A call's result whose server answered text t: its content whole."""
    return {"ok": {"content": [{"type": "text", "text": t}]}}


def run_events(c, name, args, timeout=harness.WAIT):
    """The events of a one-call batch (progress events included)."""
    b = c.start_batch([{"id": "c", "name": name, "arguments": args}])
    return c.recv_batch(b, timeout=timeout)


def completed(events):
    return [e for e in events if e["event"] == "tool_execution_completed"][0]


def wait_listed(c, name):
    harness.deadline_wait(lambda: any(t["name"] == name for t in c.tools()["tools"]),
                          what="%s listed" % name)


class Calls:
    """The calls of one server, against the daemon cls.daemon() makes."""

    @classmethod
    def setUpClass(cls):
        cls.d = cls.daemon([odd()])
        cls.c = cls.d.client()
        wait_listed(cls.c, "odd.echo")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()

    def call(self, name, args, **kw):
        return completed(run_events(self.c, name, args, **kw))

    def test_listed_with_schemas(self):
        names = [t["name"] for t in self.c.tools()["tools"]]
        self.assertIn("odd.echo", names)
        self.assertNotIn("odd", names)  # the listing tool is no client's
        self.c.send({"op": "tools", "format": "mcp"})
        mcp = {t["name"]: t for t in self.c.recv_for(lambda e: e.get("event") == "tools")["tools"]}
        self.assertEqual(mcp["odd.add"]["outputSchema"]["required"], ["sum"])
        self.assertEqual(mcp["odd.echo"]["annotations"], {"readOnlyHint": True})
        self.assertEqual(mcp["odd.echo"]["description"], "Echo the text")
        self.assertEqual(mcp["odd.echo"]["inputSchema"]["required"], ["text"])
        # its results are the server's content, handed on as blocks
        self.assertEqual(mcp["odd.echo"]["_meta"], {"toolexecd/content": "blocks"})

    def test_results(self):
        self.assertEqual(self.call("odd.echo", {"text": "hi"})["result"], text_ok("hi"))
        self.assertEqual(self.call("odd.add", {"a": 2, "b": 3})["result"],
                         {"ok": {"content": [{"type": "text", "text": '{"sum": 5}'}],
                                 "structuredContent": {"sum": 5}}})
        # numbers as the call gave them, both ways: an integer beyond 64
        # bits reaches the server as a number (jansson's printer made it a
        # string) and the server's sum of it comes back whole
        big = 12345678901234567890123
        self.assertEqual(self.call("odd.add", {"a": big, "b": 1})["result"]["ok"],
                         {"content": [{"type": "text", "text": '{"sum": %d}' % (big + 1)}],
                          "structuredContent": {"sum": big + 1}})
        self.assertEqual(self.call("odd.fail", {})["result"], {"error": "it failed on purpose"})
        self.assertEqual(self.call("odd.env", {"name": "ODD_VAR"})["result"],
                         text_ok("from-definition"))
        # an image and embedded resources: the server's content whole
        img = self.call("odd.image", {})["result"]["ok"]
        self.assertEqual(img, odd_server.IMAGE)
        # the server's inputSchema, checked before any process starts
        bad = self.call("odd.echo", {"text": 3})
        self.assertIn("/text: expected string", bad["result"]["error"])
        self.assertNotIn("cpu_user_ms", bad)

    def test_progress(self):
        events = run_events(self.c, "odd.progress", {})
        prog = [e["progress"] for e in events if e["event"] == "tool_execution_progress"]
        self.assertEqual([p["progress"] for p in prog], [1, 2, 3])
        self.assertEqual(prog[-1]["message"], "step 3")
        self.assertEqual(completed(events)["result"], text_ok("done"))

    def test_crash_is_handler_exit(self):
        err = self.call("odd.crash", {})["result"]["tool_error"]
        self.assertEqual(err["reason"], "handler_exit")
        self.assertIn("exited with status 3", err["message"])

    def test_flood_is_cut(self):
        err = self.call("odd.flood", {}, timeout=60 * harness.SCALE)["result"]["tool_error"]
        self.assertEqual(err["reason"], "handler_exit")
        self.assertIn("over 16777216 bytes", err["message"])

    def test_daemonised_child_reaped(self):
        token = harness.new_token("mcpchild")
        self.assertEqual(self.call("odd.daemon", {"mark": token})["result"], text_ok("left a child"))
        harness.assert_token_gone(token)

    def test_secrets_out_of_reach(self):
        for path in ("/etc/shadow", os.path.join(self.d.tools_dir, "odd.json")):
            r = self.call("odd.read", {"path": path})["result"]
            self.assertIn("error", r, path)
            self.assertNotIn("root:", json.dumps(r))

    def test_nothing_survives_a_call(self):
        self.assertEqual(self.call("odd.write", {"path": "/tmp/left", "text": "x"})["result"],
                         text_ok("written"))
        r = self.call("odd.read", {"path": "/tmp/left"})["result"]
        self.assertIn("No such file", r["error"])


class RootDaemon(Calls, unittest.TestCase):
    daemon = harness.Daemon

    def test_unknown_tool_is_the_servers_error(self):
        # the listing tool called by name answers the server's tools; a
        # tool the server does not know is its JSON-RPC error, as said
        listing = self.call("odd", {})["result"]["ok"]
        self.assertIn("echo", [t["name"] for t in listing["tools"]])


class UnprivilegedDaemon(Calls, unittest.TestCase):
    daemon = staticmethod(harness.nobody_daemon)


class Allowed(unittest.TestCase):
    def test_allow_uids_bind_its_tools_not_its_listing(self):
        with harness.Daemon([odd(allow_uids=[12345])]) as d:
            c = d.client()
            wait_listed(c, "odd.echo")  # the daemon listed it all the same
            c.send({"op": "run", "batch": "f",
                    "calls": [{"id": "c", "name": "odd.echo", "arguments": {"text": "x"}}]})
            ev = c.recv_for(lambda e: e.get("batch") == "f")
            self.assertEqual(ev.get("reason"), "forbidden_tool", ev)


class Modern(unittest.TestCase):
    def test_stateless_revision(self):
        # a server of 2026-07-28 alone: initialize refused, server/discover
        # says so, each request carries the version in its _meta
        with harness.Daemon([odd("modern", "modern")]) as d:
            c = d.client()
            wait_listed(c, "modern.echo")
            r = completed(run_events(c, "modern.add", {"a": 1, "b": 1}))["result"]
            self.assertEqual(r["ok"]["structuredContent"], {"sum": 2})


class Hangs(unittest.TestCase):
    def test_never_answers_the_handshake(self):
        token = harness.new_token("mcphang")
        sleepy = harness.new_token("mcpsleepy")
        with harness.Daemon([odd("hang", "hang", token, timeout_ms=1500),
                             odd("sleepy", sleepy, timeout_ms=1500)]) as d:
            c = d.client()
            wait_listed(c, "sleepy.echo")
            # a call the server never answers: the call's timeout, its
            # server and bridge killed
            done = completed(run_events(c, "sleepy.hang", {}))
            self.assertEqual(done["result"]["tool_error"]["reason"], "timeout")
            harness.assert_token_gone(sleepy)
            harness.deadline_wait(lambda: "MCP server hang: its tools not listed" in d.stderr(),
                                  what="the listing's failure logged")
            self.assertIn("timeout", d.stderr())
            self.assertFalse([t for t in c.tools()["tools"] if t["name"].startswith("hang.")])
            harness.assert_token_gone(token)


    def test_stop_while_listing(self):
        # a listing in flight does not hold the daemon's stop (the
        # harness's stop wants status 0 within 15 s; the listing's timeout
        # is 60 s), nor does anything of it stay
        token = harness.new_token("mcpstop")
        d = harness.Daemon([odd("hang", "hang", token, timeout_ms=60000)])
        try:
            harness.wait_token_present(token)
        finally:
            d.stop()
        harness.assert_token_gone(token)


class Reload(unittest.TestCase):
    def test_relisted_and_kept_meanwhile(self):
        with harness.Daemon([odd()]) as d:
            c = d.client()
            wait_listed(c, "odd.echo")
            gate = d.path("gate")  # the new listing waits for it
            d.add_tool(dict(odd(), mcp_server={"command": [PY, SRV, "gate=" + gate],
                                                "env": {"ODD_VAR": "reloaded"}}))
            os.kill(d.proc.pid, signal.SIGHUP)
            harness.deadline_wait(lambda: " reloaded " in d.stderr(), what="the reload")
            # meanwhile the tools listed before are kept, not unknown
            r = completed(run_events(c, "odd.env", {"name": "ODD_VAR"}))["result"]
            self.assertEqual(r, text_ok("from-definition"))
            open(gate, "w").close()
            harness.deadline_wait(
                lambda: completed(run_events(c, "odd.env", {"name": "ODD_VAR"}))["result"] ==
                text_ok("reloaded"), what="the reloaded definition's tools")


class Check(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        self.dir = tempfile.mkdtemp(prefix="te-mcpdefs-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.chmod(self.dir, 0o755)

    def check(self, **defs):
        for name, d in defs.items():
            path = os.path.join(self.dir, name + ".json")
            with open(path, "w") as f:
                json.dump(d, f)
            os.chmod(path, 0o600)  # its env is nobody else's
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", self.dir],
                           capture_output=True, text=True, timeout=harness.WAIT)
        return p.returncode, p.stdout + p.stderr

    def test_good(self):
        # the tree shown, as the harness shows it to a daemon's tools: under
        # /tmp or /var/tmp (a CI clone) the default view hides the script
        status, out = self.check(good=odd(filesystem=harness.with_tree({})))
        self.assertEqual(status, 0, out)

    def test_not_supported_yet(self):
        for bad, says in (({"mcp_server": {"url": "https://example.com/mcp",
                                           "command": [PY, SRV]}}, "not both"),
                          ({"command": ["/bin/true"]}, "not with \"mcp_server\""),
                          ({"name": "a.b"}, "has no '.'")):
            status, out = self.check(bad=odd(**bad))
            self.assertNotEqual(status, 0, bad)
            self.assertIn(says, out, bad)

    def test_server_script_hidden_by_the_view(self):
        hidden = tempfile.mkdtemp(dir="/var/tmp")  # hidden by the default view
        self.addCleanup(shutil.rmtree, hidden, ignore_errors=True)
        script = os.path.join(hidden, "server.py")
        shutil.copy(SRV, script)
        d = odd()
        d["mcp_server"]["command"] = [PY, script]
        status, out = self.check(hid=d)
        self.assertNotEqual(status, 0, out)
        self.assertIn("mcp_server.command[1]: the script %s: not in the view" % script, out)

    def test_instance_only_for_servers(self):
        status, out = self.check(t={"name": "t", "command": ["/bin/true"], "instance": "call"})
        self.assertNotEqual(status, 0)
        self.assertIn("only with", out)


if __name__ == "__main__":
    unittest.main()
