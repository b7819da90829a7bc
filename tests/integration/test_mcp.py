"""toolexec mcp, the Model Context Protocol server, against the real daemon:
a scripted MCP session over stdio (initialize, tools/list, tools/call that
succeed and fail, concurrent calls answered in completion order, a call
cancelled by notifications/cancelled, ping, JSON-RPC errors, the end of
input), the end of input cancelling what still runs, and the daemon going
away.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import json
import os
import select
import signal
import subprocess
import tempfile
import time
import unittest

import harness
from harness import (Daemon, WAIT, assert_token_gone, new_token, pids_with_token,
                     wait_token_present, worker_tool)

TOOLEXEC = os.environ.get("TOOLEXEC", "")
SLOW_TOKEN = new_token("mcp-slow")

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("fail", "error"),          # the handler reports an error: {"error": "boom"}
    worker_tool("crash", "exit", "3"),     # tool_error handler_exit
    worker_tool("ask", "ask"),
    worker_tool("wait", "wait-file"),      # answers once arguments.path exists
    worker_tool("slow", "sleep", SLOW_TOKEN, timeout_ms=60000),  # found by its token
    worker_tool("strict", "echo", schema={"type": "object", "required": ["x"],
                                          "properties": {"x": {"type": "integer"}}}),
]


def kill_token(token):
    for pid in pids_with_token(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Session:
    """A `toolexec mcp` process, spoken to as an MCP host would."""

    def __init__(self, testcase, sock, *args):
        self.stderr_f = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([TOOLEXEC, "--socket", sock, "mcp"] + list(args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr_f)
        testcase.addCleanup(self.cleanup)
        self.buf = b""
        self.eof = False
        self.pending = []  # messages read but not yet asked for
        self.log = []      # every message, in arrival order

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.stderr_f.close()

    def stderr(self):
        self.stderr_f.seek(0)
        return self.stderr_f.read().decode("utf-8", "replace")

    # -- writing ---------------------------------------------------------------
    def send_raw(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj))

    def request(self, rid, method, params=None):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def close_stdin(self):
        self.proc.stdin.close()

    # -- reading ---------------------------------------------------------------
    def _line(self, timeout):
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                return None
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no message from toolexec mcp within %.1fs; so far: %s; "
                                     "stderr: %s" % (timeout, self.log[-5:], self.stderr()))
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self.eof = True
                if self.buf:
                    raise AssertionError("output ends in a partial line: %r" % self.buf[:200])
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def _next(self, timeout):
        line = self._line(timeout)
        if line is None:
            return None
        msg = json.loads(line.decode("utf-8"))  # every line is one JSON-RPC message
        self.log.append(msg)
        return msg

    def recv(self, timeout=WAIT):
        """The next message."""
        if self.pending:
            return self.pending.pop(0)
        msg = self._next(timeout)
        if msg is None:
            raise AssertionError("toolexec mcp closed its output; stderr: %s" % self.stderr())
        return msg

    def response(self, rid, timeout=WAIT):
        """The response to request rid; others are kept for later."""
        for i, msg in enumerate(self.pending):
            if msg.get("id") == rid:
                return self.pending.pop(i)
        end = time.monotonic() + timeout
        while True:
            msg = self._next(max(0.0, end - time.monotonic()))
            if msg is None:
                raise AssertionError("toolexec mcp closed its output before answering %r; "
                                     "stderr: %s" % (rid, self.stderr()))
            if msg.get("id") == rid:
                return msg
            self.pending.append(msg)

    def finish(self, timeout=WAIT):
        """Close standard input; returns (exit status, what was left on stdout)."""
        self.close_stdin()
        rest = []
        while True:
            msg = self._next(timeout)
            if msg is None:
                break
            rest.append(msg)
        return self.proc.wait(timeout=timeout), self.pending + rest


class McpCase(unittest.TestCase):
    """Tests of toolexec mcp against one daemon serving the class's TOOLS;
    cls.files a directory for the workers' files, TOKENS those of workers
    killed at the end should a test leave one."""
    TOOLS = TOOLS
    TOKENS = ()
    ARGS = ()  # the daemon's

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        cls.d = Daemon(cls.TOOLS, args=cls.ARGS)
        cls.files = tempfile.mkdtemp(prefix="te-mcp-", dir=cls.d.tmp)
        os.chmod(cls.files, 0o1777)  # workers, perhaps another user, wait on files here

    @classmethod
    def tearDownClass(cls):
        for token in cls.TOKENS:
            kill_token(token)
        cls.d.stop()

    def session(self, *args):
        return Session(self, self.d.sock, *args)


class Mcp(McpCase):
    TOKENS = (SLOW_TOKEN,)

    # -- checks ----------------------------------------------------------------
    def assertResult(self, msg, rid):
        self.assertEqual(msg.get("jsonrpc"), "2.0", msg)
        self.assertEqual(msg.get("id"), rid, msg)
        self.assertIn("result", msg, msg)
        self.assertNotIn("error", msg, msg)
        return msg["result"]

    def assertError(self, msg, rid, code):
        self.assertEqual(msg.get("jsonrpc"), "2.0", msg)
        self.assertEqual(msg.get("id"), rid, msg)
        if rid is None:  # never "id": null
            self.assertNotIn("id", msg)
        self.assertNotIn("result", msg, msg)
        self.assertEqual(msg["error"]["code"], code, msg)
        self.assertIsInstance(msg["error"]["message"], str)
        return msg["error"]

    def assertCall(self, msg, rid, is_error):
        """A tools/call result: one text content; returns its text."""
        r = self.assertResult(msg, rid)
        self.assertLessEqual(set(r), {"content", "isError", "structuredContent"}, r)
        self.assertIs(r["isError"], is_error, r)
        self.assertEqual(len(r["content"]), 1, r)
        self.assertEqual(r["content"][0]["type"], "text", r)
        return r["content"][0]["text"]

    def tail(self, tools):
        """A second client following the batches of these tools."""
        c = self.d.client()
        self.addCleanup(c.close)
        c.send({"op": "tail", "tools": tools})
        self.assertEqual(c.recv()["event"], "tailing")
        return c

    # -- the scripted session --------------------------------------------------
    def test_scripted_session(self):
        s = self.session()
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_mcp", "version": "1"}})
        r = self.assertResult(s.recv(), 1)
        self.assertEqual(r["protocolVersion"], "2025-06-18")
        self.assertEqual(r["capabilities"], {"tools": {"listChanged": True}, "logging": {}})
        self.assertEqual(r["serverInfo"]["name"], "toolexec")
        self.assertIsInstance(r["serverInfo"]["version"], str)
        s.notify("notifications/initialized")  # no response

        # tools/list: the daemon's mcp format, one page
        s.request(2, "tools/list")
        r = self.assertResult(s.recv(), 2)
        self.assertEqual(set(r), {"tools"})
        by_name = {t["name"]: t for t in r["tools"]}
        self.assertEqual(sorted(by_name), sorted(t["name"] for t in TOOLS))
        for t in r["tools"]:
            self.assertEqual(set(t), {"name", "description", "inputSchema"}, t)
        self.assertEqual(by_name["strict"]["inputSchema"]["required"], ["x"])
        self.assertEqual(by_name["echo"]["description"], "testworker echo")
        s.request(3, "tools/list", {"cursor": "ignored"})
        self.assertEqual(self.assertResult(s.recv(), 3), r)

        # a call that succeeds: its content, as it goes back to the model
        s.request(4, "tools/call", {"name": "echo", "arguments": {"x": 1, "s": "é"}})
        self.assertEqual(json.loads(self.assertCall(s.recv(), 4, False)), {"x": 1, "s": "é"})
        s.request("str-id", "tools/call", {"name": "echo"})  # no arguments: {}
        self.assertEqual(self.assertCall(s.recv(), "str-id", False), "{}")

        # failures are results with isError: a handler error, a tool error,
        # arguments against the schema; an unknown tool is a protocol error
        s.request(5, "tools/call", {"name": "fail", "arguments": {}})
        self.assertEqual(json.loads(self.assertCall(s.recv(), 5, True)), {"error": "boom"})
        s.request(6, "tools/call", {"name": "crash"})
        self.assertIn("handler_exit", json.loads(self.assertCall(s.recv(), 6, True))["error"])
        s.request(7, "tools/call", {"name": "strict", "arguments": {"x": "one"}})
        self.assertIn("invalid arguments", self.assertCall(s.recv(), 7, True))
        s.request(8, "tools/call", {"name": "no_such_tool", "arguments": {}})
        self.assertIn("no_such_tool", self.assertError(s.recv(), 8, -32602)["message"])
        # asking the user is not an error; without elicitation the question
        # goes to the model, marked
        s.request(9, "tools/call", {"name": "ask", "arguments": {"question": "which city?"}})
        text = self.assertCall(s.recv(), 9, False)
        self.assertTrue(text.startswith("[ask_user] "), text)
        self.assertTrue(text.endswith(": which city?"), text)

        # two calls at once: the first waits for a file, the second answers first
        flag = os.path.join(self.files, "go")
        s.request(10, "tools/call", {"name": "wait", "arguments": {"path": flag}})
        s.request(11, "tools/call", {"name": "echo", "arguments": {"second": True}})
        self.assertEqual(json.loads(self.assertCall(s.recv(), 11, False)), {"second": True})
        with open(flag, "w"):
            pass
        self.assertEqual(json.loads(self.assertCall(s.recv(), 10, False)), {"path": flag})

        # notifications/cancelled: the worker is killed and no response comes
        watcher = self.tail(["slow"])
        s.request(12, "tools/call", {"name": "slow"})
        wait_token_present(SLOW_TOKEN)
        s.notify("notifications/cancelled", {"requestId": 12, "reason": "user gave up"})
        assert_token_gone(SLOW_TOKEN, what="the cancelled call's worker")
        done = watcher.recv_for(lambda e: e["event"] == "batch_completed")
        self.assertEqual(done["halt"], {"halted_reason": "cancelled"})
        self.assertTrue(done["batch"].startswith("mcp-") and done["batch"].endswith("-12"),
                        done["batch"])
        # The daemon has sent the batch's end to toolexec before the answer to
        # a later request on the same connection: after that answer, no
        # response to 12 can be on its way any more.
        s.request(13, "tools/list")
        self.assertResult(s.recv(), 13)
        s.notify("notifications/cancelled", {"requestId": 12})  # too late: ignored
        s.notify("notifications/cancelled", {"requestId": 999})  # unknown: ignored

        # ping, an unknown method, a line that is not JSON
        s.request(14, "ping")
        self.assertEqual(self.assertResult(s.recv(), 14), {})
        s.request(15, "resources/list")
        self.assertIn("resources/list", self.assertError(s.recv(), 15, -32601)["message"])
        s.send_raw("this is not json")
        self.assertError(s.recv(), None, -32700)
        s.notify("notifications/unknown")  # a notification never gets a response

        # the end of input: exit 0, and nothing more was written
        status, rest = s.finish()
        self.assertEqual(status, 0, s.stderr())
        self.assertEqual(rest, [])
        self.assertNotIn(12, [m.get("id") for m in s.log])
        self.assertEqual(s.stderr(), "")

    # -- the rest of JSON-RPC ----------------------------------------------------
    def test_json_rpc_errors(self):
        s = self.session()
        # requests before initialize are answered (lenient)
        s.request(1, "ping")
        self.assertEqual(self.assertResult(s.recv(), 1), {})
        # a protocol revision it does not know: the latest it speaks
        s.request(2, "initialize", {"protocolVersion": "1999-01-01"})
        self.assertEqual(self.assertResult(s.recv(), 2)["protocolVersion"], "2025-11-25")
        for v in ("2024-11-05", "2025-03-26", "2025-11-25", "2025-06-18"):
            s.request(v, "initialize", {"protocolVersion": v})
            self.assertEqual(self.assertResult(s.recv(), v)["protocolVersion"], v)
        # not JSON-RPC requests: -32600
        s.send({"id": 3, "method": "ping"})  # no "jsonrpc": "2.0"
        self.assertError(s.recv(), 3, -32600)
        s.send({"jsonrpc": "2.0", "id": True, "method": "ping"})
        self.assertError(s.recv(), None, -32600)
        s.send({"jsonrpc": "2.0", "id": 4})
        self.assertError(s.recv(), 4, -32600)
        s.send_raw("42")
        self.assertError(s.recv(), None, -32600)
        s.send_raw('[{"jsonrpc": "2.0", "id": 5, "method": "ping"}]')
        self.assertError(s.recv(), None, -32600)
        s.send_raw('{"jsonrpc": "2.0", "id": 6, "method": "ping"')  # cut short
        self.assertError(s.recv(), None, -32700)
        # bad params: -32602
        s.request(7, "tools/call", {"arguments": {}})
        self.assertError(s.recv(), 7, -32602)
        s.request(8, "tools/call", {"name": "echo", "arguments": [1]})
        self.assertError(s.recv(), 8, -32602)
        s.request(9, "tools/call", [1])
        self.assertError(s.recv(), 9, -32602)
        # a response (this server sends no requests) and blank lines: ignored
        s.send({"jsonrpc": "2.0", "id": 10, "result": {}})
        s.send_raw("")
        s.send_raw("   ")
        # an id still in use by a call in progress
        flag = os.path.join(self.files, "dup")
        s.request(11, "tools/call", {"name": "wait", "arguments": {"path": flag}})
        s.request(11, "tools/call", {"name": "echo"})
        self.assertError(s.recv(), 11, -32600)
        with open(flag, "w"):
            pass
        self.assertEqual(json.loads(self.assertCall(s.recv(), 11, False)), {"path": flag})
        s.request(12, "ping")
        self.assertEqual(self.assertResult(s.recv(), 12), {})
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []), s.stderr())

    def test_tool_timeout_option(self):
        s = self.session("--tool-timeout", "100")
        s.request(1, "tools/call", {"name": "slow"})
        text = self.assertCall(s.recv(), 1, True)
        self.assertIn("timeout", json.loads(text)["error"])
        assert_token_gone(SLOW_TOKEN, what="the timed-out call's worker")
        status, _ = s.finish()
        self.assertEqual(status, 0, s.stderr())

    def test_end_of_input_cancels_running_calls(self):
        watcher = self.tail(["slow"])
        s = self.session()
        s.request(1, "tools/call", {"name": "slow"})
        s.request(2, "tools/list")
        self.assertResult(s.response(2), 2)
        wait_token_present(SLOW_TOKEN)
        status, rest = s.finish()
        self.assertEqual(status, 0, s.stderr())
        self.assertEqual(rest, [])  # no response for the cancelled call
        # toolexec waited for the daemon: the batch was over when it exited
        done = watcher.recv_for(lambda e: e["event"] == "batch_completed", timeout=0.5 * WAIT)
        self.assertEqual(done["halt"], {"halted_reason": "cancelled"})
        assert_token_gone(SLOW_TOKEN, what="the worker of a call running at the end of input")

    def test_usage_and_unreachable_daemon(self):
        p = subprocess.run([TOOLEXEC, "mcp", "--help"], capture_output=True, text=True,
                           timeout=WAIT)
        self.assertEqual(p.returncode, 0)
        self.assertIn("usage: toolexec mcp", p.stdout)
        p = subprocess.run([TOOLEXEC, "mcp", "extra"], capture_output=True, text=True,
                           timeout=WAIT)
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        missing = os.path.join(self.files, "missing.sock")
        p = subprocess.run([TOOLEXEC, "--socket", missing, "mcp"], input="", capture_output=True,
                           text=True, timeout=WAIT)
        self.assertEqual((p.returncode, p.stdout), (3, ""))
        self.assertIn(missing, p.stderr)


class McpDaemonLost(unittest.TestCase):
    """The daemon goes away mid-session: what is in progress gets an error,
    and toolexec exits 3 with a message on standard error."""

    def test_daemon_lost(self):
        harness.require_env()
        if not TOOLEXEC:
            self.skipTest("environment lacks TOOLEXEC (run through meson test)")
        token = new_token("mcp-lost")
        self.addCleanup(kill_token, token)
        d = Daemon([worker_tool("slow", "sleep", token, timeout_ms=60000)])
        self.addCleanup(d.stop, check=False)
        s = Session(self, d.sock)
        s.request(1, "tools/call", {"name": "slow"})
        wait_token_present(token)
        d.kill()
        msg = s.recv()
        self.assertEqual((msg.get("id"), msg.get("error", {}).get("code")), (1, -32603), msg)
        self.assertEqual(s.proc.wait(timeout=WAIT), 3)
        self.assertIn(d.sock, s.stderr())
        self.assertIsNone(s._next(WAIT))  # nothing after it


if __name__ == "__main__":
    harness.main()
