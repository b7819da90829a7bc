"""toolexec mcp --listen, MCP's Streamable HTTP transport, against the real
daemon with real HTTP (http.client): a 2025-11-25 session (initialize with
its Mcp-Session-Id, tools/list, tools/call as JSON and as an SSE stream of
progress then the result, the GET stream, DELETE), 2026-07-28's sessionless
requests and their headers checked against the body (HeaderMismatch), the
Origin check, the size limits, parse errors, keep-alive connections, the
session cap and idle expiry, and a client closing its stream cancelling
its call (the worker killed) while other clients go on.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import base64
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import harness
from harness import (Daemon, WAIT, assert_token_gone, deadline_wait, new_token,
                     pids_with_token, wait_token_present, worker_tool)
from test_mcp import McpCase, kill_token

TOOLEXEC = os.environ.get("TOOLEXEC", "")
SLOW_TOKEN = new_token("mcphttp-slow")
OLD = "2025-11-25"
NEW = "2026-07-28"

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("ask", "ask"),
    worker_tool("wait", "wait-file"),  # answers once arguments.path exists
    worker_tool("slow", "sleep", SLOW_TOKEN, timeout_ms=60000),  # found by its token
]


class Front:
    """A `toolexec mcp --listen 127.0.0.1:0` process."""

    def __init__(self, testcase, sock, *args):
        self.stderr_f = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [TOOLEXEC, "--socket", sock, "mcp", "--listen", "127.0.0.1:0"] + list(args),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr_f)
        testcase.addCleanup(self.cleanup)
        self.conns = []
        found = {}

        def listening():
            m = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", self.stderr())
            if m:
                found["port"] = int(m.group(1))
            if self.proc.poll() is not None:
                raise AssertionError("toolexec mcp --listen exited: %s" % self.stderr())
            return bool(m)
        deadline_wait(listening, what="toolexec mcp listening")
        self.port = found["port"]

    def stderr(self):
        self.stderr_f.seek(0)
        return self.stderr_f.read().decode("utf-8", "replace")

    def cleanup(self):
        for c in self.conns:
            c.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr_f.close()

    def conn(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        self.conns.append(c)
        return c


def rpc(rid, method, params=None):
    msg = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        msg["id"] = rid
    if params is not None:
        msg["params"] = params
    return msg


def modern(rid, method, params=None, name=None):
    """A 2026-07-28 request and the headers that mirror it."""
    params = dict(params or {})
    params["_meta"] = dict(params.get("_meta", {}))
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = NEW
    params["_meta"].setdefault("io.modelcontextprotocol/clientCapabilities", {})
    headers = {"MCP-Protocol-Version": NEW, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return rpc(rid, method, params), headers


def post(conn, msg, headers=None, raw=None):
    """POST one message; returns the response (not read)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    body = raw if raw is not None else json.dumps(msg).encode()
    conn.request("POST", "/mcp", body=body, headers=h)
    return conn.getresponse()


def status(conn, verb, headers=None, body=None):
    """The status of a request whose answer is not looked at further."""
    conn.request(verb, "/mcp", body=body, headers=headers or {})
    resp = conn.getresponse()
    resp.read()
    return resp.status


def events(resp):
    """The SSE events of a response, as they come: each data's JSON, or
    None for a comment."""
    data = []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if line.startswith(b":"):
            yield None
        elif line.startswith(b"data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads(b"\n".join(data))
            data = []


class McpHttp(McpCase):
    TOOLS = TOOLS

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.files = tempfile.mkdtemp(prefix="te-mcphttp-", dir=cls.d.tmp)
        os.chmod(cls.files, 0o1777)  # workers, perhaps another user, wait on files here

    @classmethod
    def tearDownClass(cls):
        kill_token(SLOW_TOKEN)
        super().tearDownClass()

    def front(self, *args):
        return Front(self, self.d.sock, *args)

    def initialize(self, conn):
        resp = post(conn, rpc(0, "initialize", {"protocolVersion": OLD, "capabilities": {},
                                                 "clientInfo": {"name": "t", "version": "1"}}))
        body = json.loads(resp.read())
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(body["result"]["protocolVersion"], OLD, body)
        sid = resp.getheader("Mcp-Session-Id")
        self.assertRegex(sid or "", r"^[0-9a-f]{32}$")
        return {"Mcp-Session-Id": sid, "MCP-Protocol-Version": OLD}

    def json_answer(self, resp, rid):
        self.assertEqual(resp.getheader("Content-Type"), "application/json")
        body = json.loads(resp.read())
        self.assertEqual(body.get("id"), rid, body)
        return body

    # -- 2025-11-25: a session ---------------------------------------------------
    def test_session_json(self):
        f = self.front()
        c = f.conn()
        s = self.initialize(c)
        resp = post(c, rpc(None, "notifications/initialized"), s)
        self.assertEqual(resp.status, 202)
        self.assertEqual(resp.read(), b"")
        resp = post(c, rpc(1, "tools/list"), s)
        names = {t["name"] for t in self.json_answer(resp, 1)["result"]["tools"]}
        self.assertTrue({"echo", "wait", "slow"} <= names, names)
        resp = post(c, rpc(2, "tools/call", {"name": "echo", "arguments": {"x": 7}}), s)
        result = self.json_answer(resp, 2)["result"]
        self.assertFalse(result["isError"], result)
        self.assertIn('"x"', result["content"][0]["text"])
        # a request without the session, or with one that never was
        resp = post(c, rpc(3, "ping"), {"MCP-Protocol-Version": OLD})
        self.assertEqual(resp.status, 400)
        resp.read()
        resp = post(c, rpc(3, "ping"), {"Mcp-Session-Id": "0" * 32})
        self.assertEqual(resp.status, 404)
        resp.read()
        self.assertEqual(status(c, "DELETE", s), 200)  # it ends: 404 after
        resp = post(c, rpc(4, "ping"), s)
        self.assertEqual(resp.status, 404)
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32001)

    def test_sse_progress_then_result(self):
        f = self.front("--heartbeat", "50")
        c = f.conn()
        s = self.initialize(c)
        path = os.path.join(self.files, new_token("go"))
        resp = post(c, rpc(5, "tools/call", {"name": "wait", "arguments": {"path": path},
                                              "_meta": {"progressToken": "p5"}}), s)
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("Content-Type"), "text/event-stream")
        self.assertEqual(resp.getheader("X-Accel-Buffering"), "no")
        seen = []
        for ev in events(resp):
            if ev is None:
                continue
            seen.append(ev)
            if ev.get("method") == "notifications/progress" and len(seen) == 1:
                self.assertEqual(ev["params"]["progressToken"], "p5")
                open(path, "w").close()  # the tool answers now
            if "id" in ev:
                break
        self.assertEqual(seen[0]["method"], "notifications/progress", seen)
        self.assertEqual(seen[-1]["id"], 5, seen)
        self.assertFalse(seen[-1]["result"]["isError"], seen)
        self.assertEqual(resp.read(), b"")  # the response ends the stream
        # the connection is kept: another request on it
        resp = post(c, rpc(6, "ping"), s)
        self.assertEqual(self.json_answer(resp, 6)["result"], {})

    def test_keepalive_comment_opens_stream(self):
        f = self.front("--keepalive", "1")
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "wait", "arguments": {"path": os.path.join(
            self.files, new_token("ka"))}}, name="wait")
        path = msg["params"]["arguments"]["path"]
        resp = post(c, msg, h)  # no progressToken: nothing to send but comments
        self.assertEqual(resp.getheader("Content-Type"), "text/event-stream")
        seen = []
        for ev in events(resp):
            seen.append(ev)
            if ev is None and len(seen) == 2:
                open(path, "w").close()
            if ev is not None:
                break
        self.assertEqual(seen[:2], [None, None], seen)
        self.assertEqual(seen[-1]["id"], 1, seen)

    def test_cancel_notification(self):
        f = self.front()
        c, n = f.conn(), f.conn()
        s = self.initialize(c)
        c.request("POST", "/mcp", body=json.dumps(rpc(7, "tools/call", {"name": "slow"})),
                  headers=dict(s, **{"Content-Type": "application/json",
                                     "Accept": "application/json, text/event-stream"}))
        wait_token_present(SLOW_TOKEN)
        resp = post(n, rpc(None, "notifications/cancelled", {"requestId": 7}), s)
        resp.read()
        self.assertEqual(resp.status, 202)
        assert_token_gone(SLOW_TOKEN, timeout=WAIT, what="the cancelled call's worker")
        # no response: the request's connection is closed without one
        with self.assertRaises((http.client.HTTPException, OSError)):
            c.getresponse().read()

    def test_get_stream_and_delete(self):
        f = self.front()
        c = f.conn()
        s = self.initialize(c)
        self.assertEqual(status(c, "GET", {"Accept": "text/event-stream"}), 405)  # no session
        g = f.conn()
        g.request("GET", "/mcp", headers=dict(s, Accept="text/event-stream"))
        stream = g.getresponse()
        self.assertEqual(stream.status, 200)
        self.assertEqual(stream.getheader("Content-Type"), "text/event-stream")
        self.assertEqual(status(c, "GET", s), 409)  # one stream a session
        self.assertEqual(status(c, "DELETE", s), 200)
        self.assertEqual(stream.read(), b"")  # the session's end ends its stream

    def test_elicitation_on_the_call_stream(self):
        f = self.front()
        c, r = f.conn(), f.conn()
        resp = post(c, rpc(0, "initialize", {"protocolVersion": OLD,
                                              "capabilities": {"elicitation": {}}}))
        resp.read()
        s = {"Mcp-Session-Id": resp.getheader("Mcp-Session-Id"), "MCP-Protocol-Version": OLD}
        resp = post(c, rpc(1, "tools/call", {"name": "ask",
                                              "arguments": {"question": "which city?"}}), s)
        self.assertEqual(resp.getheader("Content-Type"), "text/event-stream")
        evs = events(resp)
        ask = next(e for e in evs if e is not None)
        self.assertEqual(ask["method"], "elicitation/create", ask)
        # the answer is a POST of its own: 202, and the call's stream goes on
        answer = post(r, {"jsonrpc": "2.0", "id": ask["id"],
                          "result": {"action": "accept", "content": {"answer": "Paris"}}}, s)
        answer.read()
        self.assertEqual(answer.status, 202)
        result = next(e for e in evs if e is not None)
        self.assertEqual(result["id"], 1, result)
        self.assertIn("The user answered: Paris", result["result"]["content"][0]["text"])

    def test_list_changed_on_the_get_stream(self):
        f = self.front()
        c, g = f.conn(), f.conn()
        s = self.initialize(c)
        self.json_answer(post(c, rpc(1, "tools/list"), s), 1)  # the daemon watches now
        g.request("GET", "/mcp", headers=dict(s, Accept="text/event-stream"))
        stream = g.getresponse()
        self.assertEqual(stream.status, 200)
        path = self.d.add_tool(worker_tool(new_token("added"), "echo"))
        self.addCleanup(os.unlink, path)
        os.kill(self.d.proc.pid, signal.SIGHUP)
        note = next(e for e in events(stream) if e is not None)
        self.assertEqual(note, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def test_session_cap_and_expiry(self):
        f = self.front("--sessions", "2", "--session-idle", "1")
        c = f.conn()
        a = self.initialize(c)
        self.initialize(c)
        resp = post(c, rpc(0, "initialize", {"protocolVersion": OLD, "capabilities": {}}))
        self.assertEqual(resp.status, 503)
        resp.read()
        self.assertEqual(status(c, "DELETE", a), 200)
        b = self.initialize(c)  # a place again

        def place():
            resp = post(c, rpc(0, "initialize", {"protocolVersion": OLD, "capabilities": {}}))
            resp.read()
            return resp.status == 200
        # sessions idle for a second end, the oldest first, and make room:
        # once twice, b (older than the first new one) is gone
        deadline_wait(place, interval=0.2, what="an idle session expiring")
        deadline_wait(place, interval=0.2, what="another idle session expiring")
        resp = post(c, rpc(9, "ping"), b)
        resp.read()
        self.assertEqual(resp.status, 404)

    # -- 2026-07-28: no session, headers against the body --------------------------
    def test_modern_call(self):
        f = self.front()
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "echo", "arguments": {"y": 1}}, name="echo")
        resp = post(c, msg, h)
        body = self.json_answer(resp, 1)
        self.assertIsNone(resp.getheader("Mcp-Session-Id"))
        self.assertFalse(body["result"]["isError"], body)
        # Mcp-Name in the base64 form decodes to the body's name
        enc = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
        msg, h = modern(2, "tools/call", {"name": "echo", "arguments": {}}, name=enc)
        self.assertIn("result", self.json_answer(post(c, msg, h), 2))
        # server/discover, the probe of a client not yet sure of the era, needs
        # no session and no headers
        resp = post(c, rpc(4, "server/discover"))
        self.assertIn(NEW, self.json_answer(resp, 4)["result"]["supportedVersions"])
        msg, h = modern(3, "ping")  # not a method of 2026-07-28
        resp = post(c, msg, h)
        self.assertEqual(resp.status, 404)
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32601)
        # nor is initialize: under a 2026-07-28 header it is not found, and
        # begins no session
        msg, h = modern(5, "initialize", {"protocolVersion": NEW, "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}})
        resp = post(c, msg, h)
        self.assertEqual(resp.status, 404)
        self.assertIsNone(resp.getheader("Mcp-Session-Id"))
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32601)

    def test_modern_stream(self):
        f = self.front("--heartbeat", "50")
        c = f.conn()
        path = os.path.join(self.files, new_token("go"))
        msg, h = modern(1, "tools/call", {"name": "wait", "arguments": {"path": path},
                                          "_meta": {"progressToken": 11}}, name="wait")
        resp = post(c, msg, h)
        self.assertEqual(resp.getheader("Content-Type"), "text/event-stream")
        seen = []
        for ev in events(resp):
            if ev is not None:
                seen.append(ev)
            if len(seen) == 1:
                open(path, "w").close()
            if ev is not None and "id" in ev:
                break
        self.assertEqual(seen[0]["params"]["progressToken"], 11, seen)
        self.assertEqual(seen[-1]["result"]["resultType"], "complete", seen)
        self.assertEqual(resp.read(), b"")
        # a listen's stream lasts: acknowledged, then open until closed
        msg, h = modern(2, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        resp = post(c, msg, h)
        self.assertEqual(resp.getheader("Content-Type"), "text/event-stream")
        ev = next(e for e in events(resp) if e is not None)
        self.assertEqual(ev["method"], "notifications/subscriptions/acknowledged", ev)

    def test_header_mismatch(self):
        f = self.front()
        c = f.conn()
        cases = []
        msg, h = modern(1, "tools/call", {"name": "echo"}, name="slow")
        cases.append((msg, h))  # Mcp-Name differs
        msg, h = modern(2, "tools/call", {"name": "echo"}, name="echo")
        h["Mcp-Method"] = "tools/list"
        cases.append((msg, h))  # Mcp-Method differs
        msg, h = modern(3, "tools/call", {"name": "echo"})
        cases.append((msg, h))  # Mcp-Name missing
        msg, h = modern(4, "tools/list")
        del h["Mcp-Method"]
        cases.append((msg, h))  # Mcp-Method missing
        msg, h = modern(5, "tools/list")
        h["MCP-Protocol-Version"] = OLD
        cases.append((msg, h))  # the version differs from the body's
        msg, h = modern(6, "tools/call", {"name": "echo"}, name="=?base64?!!?=")
        cases.append((msg, h))  # not base64
        for msg, h in cases:
            resp = post(c, msg, h)
            body = json.loads(resp.read())
            self.assertEqual(resp.status, 400, (h, body))
            self.assertEqual(body["error"]["code"], -32020, (h, body))
            self.assertEqual(body["id"], msg["id"], body)
        # under a 2026-07-28 header a request without the _meta that revision
        # requires is refused with 400 (server/discover too: its header says
        # which revision it speaks)
        for rid, method in ((9, "tools/list"), (10, "server/discover")):
            msg, h = modern(rid, method)
            for drop in ("io.modelcontextprotocol/protocolVersion",
                         "io.modelcontextprotocol/clientCapabilities"):
                bare = json.loads(json.dumps(msg))
                del bare["params"]["_meta"][drop]
                resp = post(c, bare, h)
                body = json.loads(resp.read())
                self.assertEqual(resp.status, 400, (method, drop, body))
                self.assertEqual(body["error"]["code"], -32602, body)
                self.assertIn(drop, body["error"]["message"])
            resp = post(c, rpc(rid, method), h)  # no _meta at all
            self.assertEqual(resp.status, 400)
            self.assertEqual(json.loads(resp.read())["error"]["code"], -32602)
        # RFC 9110 5.5: whitespace around a field value is not part of it
        msg, h = modern(8, "tools/call", {"name": "echo", "arguments": {"x": 1}}, name="  echo  ")
        h["Mcp-Method"] = " tools/call\t"
        h["MCP-Protocol-Version"] = NEW + "  "
        resp = post(c, msg, h)
        body = json.loads(resp.read())
        self.assertEqual(resp.status, 200, body)
        self.assertEqual(body["result"]["structuredContent"], {"x": 1}, body)
        msg, h = modern(7, "tools/list")
        h["MCP-Protocol-Version"] = msg["params"]["_meta"][
            "io.modelcontextprotocol/protocolVersion"] = "1999-01-01"
        resp = post(c, msg, h)
        body = json.loads(resp.read())
        self.assertEqual(resp.status, 400)
        self.assertEqual(body["error"]["code"], -32022, body)
        self.assertIn(NEW, body["error"]["data"]["supported"])

    # -- the transport's own checks ------------------------------------------------
    def test_origin(self):
        f = self.front("--allow-origin", "https://app.example")
        c = f.conn()
        msg, h = modern(1, "server/discover")
        for origin, status in [("http://evil.example", 403), ("http://localhost.evil.example", 403),
                               ("null", 403), ("http://localhost:6274", 200),
                               ("http://127.0.0.1", 200), ("https://app.example", 200)]:
            resp = post(c, msg, dict(h, Origin=origin))
            resp.read()
            self.assertEqual(resp.status, status, origin)

    def test_sizes_and_parse_errors(self):
        f = self.front("--max-body", "1024", "--max-header", "8192")
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "echo", "arguments": {"p": "x" * 2000}},
                        name="echo")
        resp = post(c, msg, h)
        self.assertEqual(resp.status, 413)
        resp.read()
        # headers past --max-header: the whole request fits the socket's
        # buffer, so that the answer is read before the server closes
        with socket.create_connection(("127.0.0.1", f.port), timeout=WAIT) as raw:
            raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 9000 +
                        b"\r\nContent-Length: 2\r\n\r\n{}")
            self.assertRegex(raw.recv(4096), rb"^HTTP/1\.1 431 ")
        c = f.conn()
        resp = post(c, None, h, raw=b'{"jsonrpc": "2.0", "id": 3, "method": ')
        body = json.loads(resp.read())
        self.assertEqual(resp.status, 400)
        self.assertEqual(body["error"]["code"], -32700, body)
        self.assertNotIn("id", body)
        resp = post(c, None, h, raw=b'[{"jsonrpc": "2.0", "id": 4, "method": "ping"}]')
        self.assertEqual(resp.status, 400)
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32600)
        msg, h = modern(4, "server/discover")
        resp = post(c, msg, dict(h, **{"Content-Type": "text/plain"}))
        self.assertEqual(resp.status, 415)
        resp.read()
        self.assertEqual(status(c, "PUT", body=b"{}"), 405)
        c.request("POST", "/other", body=b"{}")
        resp = c.getresponse()
        self.assertEqual(resp.status, 404)
        resp.read()
        msg, h = modern(5, "server/discover")  # the connection still serves
        self.assertEqual(self.json_answer(post(c, msg, h), 5)["result"]["supportedVersions"][0],
                             NEW)

    def test_refuses_non_loopback(self):
        r = subprocess.run([TOOLEXEC, "--socket", self.d.sock, "mcp", "--listen", "0.0.0.0:0"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"--listen-remote", r.stderr)

    def test_keepalive_connection(self):
        f = self.front()
        c = f.conn()
        msg, h = modern(0, "server/discover")
        post(c, msg, h).read()
        sock = c.sock
        for i in range(1, 200):
            msg, h = modern(i, "server/discover")
            self.assertEqual(self.json_answer(post(c, msg, h), i)["result"]["supportedVersions"][0],
                             NEW)
        self.assertIs(c.sock, sock)  # one connection throughout

    def test_connection_limit(self):
        f = self.front("--connections", "2")
        a, b = f.conn(), f.conn()
        for i, c in enumerate((a, b)):
            msg, h = modern(i, "server/discover")
            self.json_answer(post(c, msg, h), i)
        msg, h = modern(3, "server/discover")

        def served():  # on a new connection; False: refused (503, or closed at once)
            c = f.conn()
            try:
                status = post(c, msg, h).status
                self.assertIn(status, (200, 503))
                return status == 200
            except (http.client.HTTPException, OSError):
                return False
            finally:
                c.close()
        self.assertFalse(served())
        a.close()
        deadline_wait(served, interval=0.1, what="a place after a close")
        msg, h = modern(4, "server/discover")  # b was served throughout
        self.json_answer(post(b, msg, h), 4)

    def test_stalled_client_closed(self):
        f = self.front("--http-timeout", "1")
        with socket.create_connection(("127.0.0.1", f.port), timeout=WAIT) as raw:
            raw.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")  # and no more
            self.assertEqual(raw.recv(4096), b"")

    def test_waiting_is_not_stalling(self):
        # a request whose call outlasts --http-timeout is answered all the same
        f = self.front("--http-timeout", "1")
        c = f.conn()
        path = os.path.join(self.files, new_token("late"))
        msg, h = modern(1, "tools/call", {"name": "wait", "arguments": {"path": path}},
                        name="wait")
        h["Accept"] = "application/json"
        c.request("POST", "/mcp", body=json.dumps(msg).encode(),
                  headers=dict(h, **{"Content-Type": "application/json"}))
        time.sleep(2.5)  # the thing tested: longer than the timeout
        open(path, "w").close()
        self.assertEqual(self.json_answer(c.getresponse(), 1)["result"]["resultType"], "complete")

    def test_sigterm_ends_the_front(self):
        # --drain-timeout 0: no drain (test_mcp_drain has it), the old exit
        f = self.front("--drain-timeout", "0")
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "slow"}, name="slow")
        c.request("POST", "/mcp", body=json.dumps(msg).encode(),
                  headers=dict(h, **{"Content-Type": "application/json"}))
        wait_token_present(SLOW_TOKEN)
        f.proc.send_signal(signal.SIGTERM)
        self.assertEqual(f.proc.wait(timeout=WAIT), 0, f.stderr())
        assert_token_gone(SLOW_TOKEN, timeout=WAIT, what="the call of a front that ended")

    def test_daemon_lost(self):
        token = new_token("mcphttp-lost")
        self.addCleanup(kill_token, token)
        d = Daemon([worker_tool("slow", "sleep", token, timeout_ms=60000)])
        self.addCleanup(d.stop, check=False)
        f = Front(self, d.sock)
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "slow"}, name="slow")
        c.request("POST", "/mcp", body=json.dumps(msg).encode(),
                  headers=dict(h, **{"Content-Type": "application/json",
                                     "Accept": "application/json"}))
        wait_token_present(token)
        d.kill()
        body = self.json_answer(c.getresponse(), 1)
        self.assertEqual(body["error"]["code"], -32603, body)
        # the front stays: what needs no daemon is served, what does is refused
        msg, h = modern(2, "server/discover")
        self.json_answer(post(c, msg, h), 2)
        msg, h = modern(3, "tools/list")
        self.assertEqual(self.json_answer(post(c, msg, h), 3)["error"]["code"], -32603)

    # -- a client going away -------------------------------------------------------
    def test_close_cancels_call(self):
        f = self.front()
        c = f.conn()
        msg, h = modern(1, "tools/call", {"name": "slow", "arguments": {}}, name="slow")
        h["Accept"] = "application/json"
        c.request("POST", "/mcp", body=json.dumps(msg).encode(),
                  headers=dict(h, **{"Content-Type": "application/json"}))
        wait_token_present(SLOW_TOKEN)
        other = f.conn()  # another client, meanwhile
        msg2, h2 = modern(2, "tools/call", {"name": "echo", "arguments": {}}, name="echo")
        self.assertFalse(self.json_answer(post(other, msg2, h2), 2)["result"]["isError"])
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        assert_token_gone(SLOW_TOKEN, timeout=WAIT, what="the closed request's worker")
        # the other client is served still
        msg3, h3 = modern(3, "server/discover")
        self.assertEqual(self.json_answer(post(other, msg3, h3), 3)["result"]["supportedVersions"][0],
                             NEW)
        self.assertEqual(pids_with_token(SLOW_TOKEN), [])

    # -- tasks (io.modelcontextprotocol/tasks) over HTTP ---------------------------
    def test_task_over_http(self):
        """The front's cores take the task options (--task-after 0: every
        call of a client that accepts tasks is one), and tasks/* name their
        task in Mcp-Name (taskId), checked like a tool's name."""
        f = self.front("--task-after", "0", "--replica-id", "r1")
        c = f.conn()
        ext = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        msg, h = modern(1, "tools/call", {"name": "echo", "arguments": {"y": 2},
                                          "_meta": {"io.modelcontextprotocol/clientCapabilities": ext}},
                        name="echo")
        created = self.json_answer(post(c, msg, h), 1)["result"]
        self.assertEqual(created["resultType"], "task", created)
        tid = created["taskId"]
        self.assertTrue(tid.startswith("r1."), tid)
        params = {"taskId": tid, "_meta": {"io.modelcontextprotocol/clientCapabilities": ext}}
        deadline = time.monotonic() + WAIT
        while True:
            msg, h = modern(2, "tasks/get", params, name=tid)
            got = self.json_answer(post(c, msg, h), 2)
            self.assertIn("result", got, got)
            if got["result"]["status"] != "working" or time.monotonic() > deadline:
                break
        self.assertEqual(got["result"]["status"], "completed", got)
        # a header naming another task is a mismatch, as for a tool
        msg, h = modern(3, "tasks/get", params, name="r1." + "0" * 32)
        resp = post(c, msg, h)
        self.assertEqual(resp.status, 400)
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32020)
        # tasks/result (removed from the extension) names no task: unknown
        # (404, -32601), not a header mismatch
        msg, h = modern(4, "tasks/result", params)
        resp = post(c, msg, h)
        self.assertEqual(resp.status, 404)
        self.assertEqual(json.loads(resp.read())["error"]["code"], -32601)


if __name__ == "__main__":
    harness.main()
