"""toolexec mcp speaking current MCP exactly, against the real
daemon: ask_user through elicitation (and marked text without it),
notifications/tools/list_changed after a reload, structuredContent, the
2025-11-25 revision, JSON-RPC batches under 2025-03-26, no "id": null,
an unknown tool as a protocol error, and the socket found without
XDG_RUNTIME_DIR.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import json
import os
import signal
import subprocess
import unittest

import harness
from harness import Daemon, worker_tool
from test_mcp import TOOLEXEC, McpCase, Session

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("ask", "ask"),
    worker_tool("progress", "progress"),
    worker_tool("value", "ok-value",
                output_schema={"type": "object", "properties": {"n": {"type": "integer"}}}),
]


class McpExact(McpCase):
    TOOLS = TOOLS

    def session(self, version="2025-11-25", capabilities=None, args=()):
        s = Session(self, self.d.sock, *args)
        s.request(0, "initialize", {"protocolVersion": version,
                                    "capabilities": capabilities or {},
                                    "clientInfo": {"name": "test_mcp_exact", "version": "1"}})
        r = s.response(0)["result"]
        self.assertEqual(r["protocolVersion"], version)
        s.notify("notifications/initialized")
        return s, r

    def call(self, s, rid, name, args):
        s.request(rid, "tools/call", {"name": name, "arguments": args})
        return s.response(rid)

    # -- ask_user through elicitation --------------------------------------
    def test_ask_user_through_elicitation(self):
        s, _ = self.session(capabilities={"elicitation": {}})
        s.request(1, "tools/call", {"name": "ask", "arguments": {"question": "which city?"}})
        req = s.recv()
        self.assertEqual(req["method"], "elicitation/create", req)
        self.assertEqual(req["params"]["message"], "which city?")
        self.assertEqual(req["params"]["requestedSchema"]["type"], "object")
        s.send({"jsonrpc": "2.0", "id": req["id"],
                "result": {"action": "accept", "content": {"answer": "Paris"}}})
        r = s.response(1)["result"]
        self.assertIs(r["isError"], False)
        self.assertIn("which city?", r["content"][0]["text"])
        self.assertIn("The user answered: Paris", r["content"][0]["text"])
        # declined: said so, still not an error
        s.request(2, "tools/call", {"name": "ask", "arguments": {"question": "age?"}})
        req = s.recv()
        s.send({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "decline"}})
        r = s.response(2)["result"]
        self.assertIn("did not answer (decline)", r["content"][0]["text"])
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))

    def test_ask_user_without_elicitation_is_marked_text(self):
        s, _ = self.session()
        r = self.call(s, 1, "ask", {"question": "which city?"})["result"]
        text = r["content"][0]["text"]
        self.assertTrue(text.startswith("[ask_user] "), text)
        self.assertIn("which city?", text)
        self.assertNotIn("<awaiting user response>", text)

    # -- progress notifications --------------------------------------------
    def test_progress_notifications(self):
        s, _ = self.session()
        s.request(1, "tools/call", {"name": "progress", "arguments": {"steps": 3},
                                    "_meta": {"progressToken": "tok"}})
        notes = [s.recv() for _ in range(3)]
        for i, n in enumerate(notes, 1):
            self.assertEqual(n, {"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": "tok", "progress": i, "total": 3,
                                            "message": "step %d" % i}})
        self.assertEqual(json.loads(s.response(1)["result"]["content"][0]["text"]), {"steps": 3})
        # without a progressToken: no notification
        r = self.call(s, 2, "progress", {"steps": 2})
        self.assertIn("result", r)
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))
        # the three of the first call only
        self.assertEqual([m.get("method") for m in s.log].count("notifications/progress"), 3)

    def test_heartbeat_for_a_quiet_call(self):
        s, _ = self.session(args=("--heartbeat", "50"))
        flag = os.path.join(self.d.shared_dir("hb"), "go")
        s.request(1, "tools/call", {"name": "progress", "arguments": {"steps": 1, "path": flag},
                                    "_meta": {"progressToken": 7}})
        # heartbeats may come before the worker's own progress (a slow start)
        notes = [s.recv()]
        while notes[-1]["params"].get("message") != "step 1":
            notes.append(s.recv())
        notes += [s.recv() for _ in range(3)]
        last = 0
        for n in notes:
            self.assertGreater(n["params"]["progress"], last, notes)
            last = n["params"]["progress"]
        last = 0
        for b in notes[-3:]:
            self.assertEqual(b["method"], "notifications/progress")
            self.assertEqual(b["params"]["progressToken"], 7)
            self.assertGreater(b["params"]["progress"], last)
            self.assertTrue(b["params"]["message"].startswith("running for "), b)
            last = b["params"]["progress"]
        with open(flag, "w"):
            pass
        self.assertIn("result", s.response(1))

    # -- list_changed after a reload ---------------------------------------
    def test_list_changed_after_reload(self):
        s, init = self.session()
        self.assertEqual(init["capabilities"]["tools"], {"listChanged": True})
        s.request(1, "tools/list")
        before = [t["name"] for t in s.response(1)["result"]["tools"]]
        self.assertNotIn("added", before)
        path = self.d.add_tool(worker_tool("added", "echo"))
        self.addCleanup(os.unlink, path)
        os.kill(self.d.proc.pid, signal.SIGHUP)
        note = s.recv()
        self.assertEqual(note, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        s.request(2, "tools/list")
        self.assertIn("added", [t["name"] for t in s.response(2)["result"]["tools"]])
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))

    def test_watching_session_is_not_closed_for_idling(self):
        d = Daemon([worker_tool("echo", "echo")], args=["--idle-timeout", "1"])
        self.addCleanup(d.stop)
        s = Session(self, d.sock)
        s.request(1, "tools/list")  # watches the tools from now on
        self.assertIn("result", s.response(1))
        control = d.client()  # connected later, so idle for less time
        ev = control.recv(timeout=harness.WAIT)
        self.assertEqual(ev["reason"], "idle_timeout", ev)
        s.request(2, "tools/call", {"name": "echo", "arguments": {"still": "here"}})
        self.assertEqual(json.loads(s.response(2)["result"]["content"][0]["text"]),
                         {"still": "here"})

    # -- structuredContent -------------------------------------------------
    def test_structured_content(self):
        s, _ = self.session()
        s.request(1, "tools/list")
        tools = {t["name"]: t for t in s.response(1)["result"]["tools"]}
        self.assertEqual(tools["value"]["outputSchema"]["properties"], {"n": {"type": "integer"}})
        r = self.call(s, 2, "value", {"value": {"n": 7}})["result"]
        self.assertEqual(r["structuredContent"], {"n": 7})
        self.assertEqual(json.loads(r["content"][0]["text"]), {"n": 7})
        self.assertIs(r["isError"], False)
        r = self.call(s, 3, "value", {"value": {"n": "seven"}})["result"]
        self.assertIs(r["isError"], True)
        self.assertNotIn("structuredContent", r)
        self.assertIn("/n", r["content"][0]["text"])

    # -- JSON-RPC batches under 2025-03-26 ---------------------------------
    def test_batches_under_2025_03_26(self):
        s, _ = self.session("2025-03-26")
        s.send_raw(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                               {"jsonrpc": "2.0", "method": "notifications/initialized"},
                               {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "echo", "arguments": {"a": 1}}},
                               {"jsonrpc": "2.0", "id": 3, "method": "nope"}]))
        out = s.recv()
        self.assertIsInstance(out, list, out)
        by_id = {m["id"]: m for m in out}
        self.assertEqual(sorted(by_id), [1, 2, 3])
        self.assertEqual(by_id[1]["result"], {})
        self.assertEqual(json.loads(by_id[2]["result"]["content"][0]["text"]), {"a": 1})
        self.assertEqual(by_id[3]["error"]["code"], -32601)
        s.send_raw("[]")
        err = s.recv()
        self.assertEqual(err["error"]["code"], -32600)
        self.assertNotIn("id", err)

    def test_batches_refused_after_2025_03_26(self):
        s, _ = self.session("2025-11-25")
        s.send_raw(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
        err = s.recv()
        self.assertEqual(err["error"]["code"], -32600)
        self.assertNotIn("id", err)

    def test_never_a_null_id(self):
        s, _ = self.session()
        for line in ("not json", "42", '{"jsonrpc": "2.0", "id": true, "method": "ping"}'):
            s.send_raw(line)
            err = s.recv()
            self.assertIn("error", err)
            self.assertNotIn("id", err, line)

    # -- an unknown tool ---------------------------------------------------
    def test_unknown_tool_is_a_protocol_error(self):
        s, _ = self.session()
        r = self.call(s, 1, "no_such_tool", {})
        self.assertNotIn("result", r)
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIn("no_such_tool", r["error"]["message"])

    # -- the socket without XDG_RUNTIME_DIR --------------------------------
    def test_socket_without_xdg_runtime_dir(self):
        """A bare environment: /run/user/UID/toolexecd.sock, then the system
        socket; the error names what was tried."""
        uid = 65534  # nobody
        rundir = "/run/user/%d" % uid
        if os.path.exists(rundir):
            self.skipTest(rundir + " exists on this machine")
        os.makedirs(rundir)
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", rundir]))
        env = {"PATH": "/usr/bin:/bin"}
        setpriv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
        # nothing there: both paths are named
        p = subprocess.run(setpriv + [TOOLEXEC, "tools"], env=env, capture_output=True,
                           text=True, timeout=harness.WAIT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(rundir + "/toolexecd.sock", p.stderr)
        self.assertIn("XDG_RUNTIME_DIR is not set", p.stderr)
        # the daemon's socket there: found
        os.symlink(self.d.sock, rundir + "/toolexecd.sock")
        os.chmod(self.d.tmp, 0o755)
        sock_mode = os.stat(self.d.sock).st_mode & 0o777
        os.chmod(self.d.sock, 0o777)
        self.addCleanup(os.chmod, self.d.sock, sock_mode)
        p = subprocess.run(setpriv + [TOOLEXEC, "--json", "tools"], env=env,
                           capture_output=True, text=True, timeout=harness.WAIT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("echo", p.stdout)


if __name__ == "__main__":
    unittest.main()
