"""An MCP server whose tools change: it sends notifications/tools/list_changed
(tests/mcp_servers/odd_server.py with "state=DIR"), and the daemon lists its
tools again and swaps them in as a reload would, root and unprivileged:

- a call of the server's add_tool adds a tool and says so: after it, the new
  tool is listed by the daemon's tools op and by `toolexec mcp` (which tells
  its host notifications/tools/list_changed first), and a call of it runs;
- a server that says so during its listing is listed once more after it;
- a listing again that fails keeps the tools listed before;
- a flood of the notice (thousands in one call, then again) costs one
  listing, not one each: coalesced, never two at once, at most one per
  --mcp-relist-interval (an hour here, so the count is exact); counted by
  the daemon's metrics (toolexecd_mcp_tools_changed_total,
  toolexecd_mcp_relists_total) and by the server's own record of listings;
- the {"tools_changed": true} frame from a tool that is not an MCP server's
  is the response, an invalid_return, as any unknown frame.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_mcp import TOOLEXEC, Session  # noqa: E402
from test_mcp_server import PY, SRV, completed, run_events, text_ok, wait_listed  # noqa: E402

HOUR = ["--mcp-relist-interval", "3600"]


def chg(state, *extra):
    return {"name": "chg", "mcp_server": {"command": [PY, SRV, "state=" + state] + list(extra)},
            "timeout_ms": 30000}


def with_server(testcase, make, *extra, args=()):
    """A started daemon (make: harness.Daemon or harness.NobodyDaemon) with the
    server "chg" whose state is in a directory of its tmp; (daemon, state)."""
    d = make(args=list(args), start=False)
    state = d.shared_dir("state")
    for f in ("added", "lists"):
        p = os.path.join(state, f)
        open(p, "a").close()
        os.chmod(p, 0o666)  # each call may be a uid of its own
    d.add_tool(chg(state, *extra))
    if make is harness.NobodyDaemon:
        harness.give_work_dir(d)
    harness.started(d)
    testcase.addCleanup(d.stop)
    return d, state


def listings(state):
    """How many times the server was listed (its own record)."""
    with open(os.path.join(state, "lists")) as f:
        return len(f.read().split())


def registered(d):
    """How many times the daemon registered chg's tools (its log)."""
    return len(re.findall(r"MCP server chg: \d+ tools registered", d.stderr()))


def metric(c, name):
    c.send({"op": "metrics"})
    text = c.recv_for(lambda e: e.get("event") == "metrics")["text"]
    m = re.search(r"^%s (\d+)$" % name, text, re.M)
    return int(m.group(1)) if m else None


def counts(c):
    return (metric(c, "toolexecd_mcp_tools_changed_total"),
            metric(c, "toolexecd_mcp_relists_total"))


class Changes:
    """Against the daemon cls.make makes."""

    def setUp(self):
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")

    def test_added_tool_listed(self):
        d, state = with_server(self, self.make)
        c = d.client()
        wait_listed(c, "chg.echo")
        s = Session(self, d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        s.response(1)
        s.notify("notifications/initialized")
        s.request(2, "tools/list")
        names = [t["name"] for t in s.response(2)["result"]["tools"]]
        self.assertIn("chg.add_tool", names)
        self.assertNotIn("chg.extra", names)
        # the call itself, through the front: the server adds a tool and
        # says so during the call
        s.request(3, "tools/call", {"name": "chg.add_tool", "arguments": {"name": "extra"}})
        r = s.response(3)["result"]
        self.assertEqual(r["content"], [{"type": "text", "text": "added extra"}], r)
        # the daemon lists it again; the front tells its host
        note = None
        while note is None:
            m = s.recv()
            if m.get("method") == "notifications/tools/list_changed":
                note = m
        s.request(4, "tools/list")
        names = [t["name"] for t in s.response(4)["result"]["tools"]]
        self.assertIn("chg.extra", names)
        s.request(5, "tools/call", {"name": "chg.extra", "arguments": {}})
        self.assertEqual(s.response(5)["result"]["content"],
                         [{"type": "text", "text": "I am extra"}])
        # the daemon's own listing has it, and its call is a call like any
        self.assertIn("chg.extra", [t["name"] for t in c.tools()["tools"]])
        self.assertEqual(completed(run_events(c, "chg.extra", {}))["result"],
                         text_ok("I am extra"))
        # one notice, one listing more
        self.assertEqual(counts(c), (1, 1))
        self.assertEqual(listings(state), 2)


class RootDaemon(Changes, unittest.TestCase):
    make = harness.Daemon

    def test_flood_costs_one_listing(self):
        d, state = with_server(self, self.make, args=HOUR)
        c = d.client()
        wait_listed(c, "chg.echo")
        self.assertEqual(counts(c), (0, 0))
        r = completed(run_events(c, "chg.changed", {"times": 5000}))["result"]
        self.assertEqual(r, text_ok("said so 5000 times"))
        # every notice came before the call's result: each counted, one
        # listing started for them all
        self.assertEqual(counts(c), (5000, 1))
        harness.deadline_wait(lambda: registered(d) == 2, what="the listing again")
        # the notices during that listing want one more, held back by the
        # interval: none has started
        self.assertEqual(counts(c), (5000, 1))
        r = completed(run_events(c, "chg.changed", {"times": 5000}))["result"]
        self.assertEqual(r, text_ok("said so 5000 times"))
        self.assertEqual(counts(c), (10000, 1))
        self.assertEqual(listings(state), 2)
        self.assertEqual(registered(d), 2)

    def test_said_during_its_listing(self):
        # each listing says the tools changed: one listing more, then the
        # interval holds the next
        d, state = with_server(self, self.make, "listnote", args=HOUR)
        c = d.client()
        harness.deadline_wait(lambda: registered(d) == 2, what="the listing again")
        self.assertEqual(counts(c), (2, 1))
        self.assertEqual(listings(state), 2)

    def test_failed_listing_keeps_the_tools(self):
        # a listing again that fails leaves the tools listed before (a
        # reload's would drop those it carried: they are not its definition's)
        d, state = with_server(self, self.make)
        c = d.client()
        wait_listed(c, "chg.echo")
        open(os.path.join(state, "broken"), "w").close()
        r = completed(run_events(c, "chg.changed", {"times": 1}))["result"]
        self.assertEqual(r, text_ok("said so 1 times"))
        harness.deadline_wait(lambda: "MCP server chg: its tools not listed" in d.stderr(),
                              what="the listing's failure")
        self.assertIn("the listing broke on purpose", d.stderr())
        self.assertIn("chg.echo", [t["name"] for t in c.tools()["tools"]])
        self.assertEqual(completed(run_events(c, "chg.echo", {"text": "still"}))["result"],
                         text_ok("still"))

    def test_frame_of_another_tool_is_its_response(self):
        frame = ("import struct, sys; b = b'{\"tools_changed\": true}'; "
                 "sys.stdout.buffer.write(struct.pack('>I', len(b)) + b)")
        with harness.Daemon([{"name": "notmcp", "command": [PY, "-c", frame]}]) as d:
            c = d.client()
            err = completed(run_events(c, "notmcp", {}))["result"]["tool_error"]
            self.assertEqual(err["reason"], "invalid_return", err)
            self.assertEqual(counts(c), (0, 0))


class UnprivilegedDaemon(Changes, unittest.TestCase):
    make = harness.NobodyDaemon


if __name__ == "__main__":
    harness.require_env()
    unittest.main()
