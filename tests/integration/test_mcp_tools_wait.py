"""toolexec mcp against a daemon that never answers its tool listing: a
tools/call waits for the listing (what each tool's result is, whether it
runs as a task), and once --tools-wait has passed it fails with a JSON-RPC
error naming the listing (data.reason "daemon_tools_listing_timeout")
instead of being held for good; nothing runs. Over stdio and over
--listen, with a fake daemon (a Unix socket that answers every request but
{"op": "tools"}).

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import unittest

import harness
from harness import WAIT
from test_mcp import Session
from test_mcp_http import TOOLEXEC, Front, modern, post

CALL = {"name": "echo", "arguments": {"x": 1}}


class SilentOnTools:
    """A fake daemon: capacity answered, a tools request read and never
    answered, a run (none should come) counted. A thread per connection."""

    def __init__(self, testcase, path):
        self.ops = []
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(path)
        self.lsock.listen(16)
        self.conns = []
        threading.Thread(target=self.accept_loop, daemon=True).start()
        testcase.addCleanup(self.close)

    def accept_loop(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return  # closed
            self.conns.append(s)
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        try:
            for line in s.makefile("rb"):
                req = json.loads(line)
                self.ops.append(req.get("op"))
                if req.get("op") == "capacity":
                    s.sendall(json.dumps({
                        "event": "capacity", "max_workers": 4, "free_workers": 4,
                        "running_calls": 0, "queued_calls": 0, "prepared_sandboxes": 0,
                        "shutting_down": False, "tools": {}}).encode() + b"\n")
        except (OSError, ValueError):
            pass  # the test closed it

    def close(self):
        for s in self.conns + [self.lsock]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class ToolsWait(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        tmp = tempfile.mkdtemp(prefix="te-toolswait-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        self.sock = os.path.join(tmp, "fake.sock")
        self.fake = SilentOnTools(self, self.sock)

    def assert_listing_error(self, msg, rid):
        self.assertEqual(msg.get("id"), rid, msg)
        err = msg.get("error")
        self.assertIsNotNone(err, msg)
        self.assertEqual(err["code"], -32603, err)
        self.assertIn("did not answer the request for its tool listing within 1 s", err["message"])
        self.assertIn("--tools-wait", err["message"])
        self.assertEqual(err["data"]["reason"], "daemon_tools_listing_timeout", err)

    def test_stdio(self):
        s = Session(self, self.sock, "--tools-wait", "1")
        s.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        s.response(1)
        s.notify("notifications/initialized")
        s.request(2, "tools/call", CALL)
        s.request(3, "tools/call", CALL)
        self.assert_listing_error(s.response(2, timeout=WAIT), 2)
        self.assert_listing_error(s.response(3, timeout=WAIT), 3)
        self.assertIn("tools", self.fake.ops)
        self.assertNotIn("run", self.fake.ops)
        # the session goes on: the end of input ends it cleanly
        status, _ = s.finish()
        self.assertEqual(status, 0, s.stderr())

    def test_http(self):
        f = Front(self, self.sock, "--tools-wait", "1", "--drain-timeout", "0")
        c = http.client.HTTPConnection("127.0.0.1", f.port, timeout=2 * WAIT)
        self.addCleanup(c.close)
        msg, h = modern(7, "tools/call", CALL, name="echo")
        # JSON alone: an event stream's keepalives would hold the read open
        h["Accept"] = "application/json"
        r = post(c, msg, h)
        self.assertEqual(r.status, 200)
        self.assert_listing_error(json.loads(r.read()), 7)
        self.assertNotIn("run", self.fake.ops)


if __name__ == "__main__":
    unittest.main()
