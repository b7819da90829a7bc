"""toolexec mcp --listen against hostile HTTP clients, with the real daemon
and the real front: oversized bodies (413) and headers (431), slowloris
(a request trickled byte by byte is closed after --http-timeout), 10,000
half-open connections (held ones time out, those past --connections get
503), malformed JSON-RPC, Content-Length against the body and chunked
bodies, a thousand sessions of 2025-11-25 (past --sessions an initialize
is refused with 503; the live ones are not displaced).

After each: the front is still running, a good client's call succeeds,
another client of the daemon (a plain socket client) is served, and the
front's memory stays bounded.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import http.client
import json
import os
import resource
import selectors
import socket
import time

import harness
from harness import WAIT, deadline_wait, worker_tool
from test_mcp import McpCase
from test_mcp_http import NEW, OLD, Front, modern, post, rpc

# the front's, after any of it: generous; under ASan its shadow and
# quarantine are most of it (114 MiB seen), so four times that
RSS_BOUND_KB = (256 if harness.SANITIZED else 64) << 10
HALF_OPEN = 10000
BATCH = 1000  # half-open connections open at once


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def response(sock):
    """One HTTP response read off a raw socket: (status, body), or None when
    the server closed (or reset) the connection first."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return int(head[9:12]), body
    except ConnectionResetError:
        return None


def closed(sock):
    """Whether the server closed sock: EOF (or a reset) before any data."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def request(headers, body=b"", path=b"/mcp"):
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n" + body


def json_headers(length=None):
    h = b"Content-Type: application/json\r\nAccept: application/json\r\n"
    if length is not None:
        h += b"Content-Length: %d\r\n" % length
    return h


class McpHttpHostile(McpCase):
    TOOLS = [worker_tool("echo", "echo")]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        cls.nofile = (soft, hard)
        want = min(hard, BATCH + 1024)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    @classmethod
    def tearDownClass(cls):
        resource.setrlimit(resource.RLIMIT_NOFILE, cls.nofile)
        super().tearDownClass()

    def setUp(self):
        # another client of the daemon, connected throughout
        self.plain = self.d.client()
        self.addCleanup(self.plain.close)
        self.assertTrue(self.plain.run([{"id": "c0", "name": "echo", "arguments": {}}]).ok)

    def front(self, *args):
        return Front(self, self.d.sock, *args)

    def raw(self, f):
        s = socket.create_connection(("127.0.0.1", f.port), timeout=WAIT)
        self.addCleanup(s.close)
        return s

    def good_call(self, f, rid=1):
        """A well-behaved client's tools/call on a new connection; True once
        served (False: refused with 503, the front at --connections)."""
        c = f.conn()
        msg, h = modern(rid, "tools/call", {"name": "echo", "arguments": {"k": rid}}, name="echo")
        h["Accept"] = "application/json"
        try:
            resp = post(c, msg, h)
            body = resp.read()
        finally:
            c.close()
        if resp.status == 503:
            return False
        self.assertEqual(resp.status, 200, body)
        answer = json.loads(body)
        self.assertEqual(answer["id"], rid, answer)
        self.assertFalse(answer["result"]["isError"], answer)
        return True

    def assert_unharmed(self, f):
        """The front runs, serves a good client, the daemon serves a plain
        socket client, and the front's memory is bounded."""
        self.assertIsNone(f.proc.poll(), f.stderr())
        deadline_wait(lambda: self.good_call(f), interval=0.05, what="a good client served")
        self.assertTrue(self.plain.run([{"id": "c1", "name": "echo", "arguments": {}}]).ok)
        self.assertLess(rss_kb(f.proc.pid), RSS_BOUND_KB)

    # -- sizes ---------------------------------------------------------------------
    def test_oversized_body(self):
        f = self.front("--max-body", "4096")
        big = json.dumps(rpc(1, "tools/call", {"name": "echo",
                                               "arguments": {"p": "x" * 100000}})).encode()
        s = self.raw(f)
        s.sendall(request(json_headers(len(big)), big))  # said and sent
        self.assertEqual(response(s)[0], 413)
        # said small, a huge length: refused on the headers, before any body
        for length in (b"1000000000000000000", b"99999999999999999999999999"):
            s = self.raw(f)
            s.sendall(request(json_headers() + b"Content-Length: " + length + b"\r\n"))
            self.assertIn(response(s)[0], (400, 413), length)
        # chunked, no length said: refused once the chunks pass the limit
        s = self.raw(f)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 1000]), big[i:i + 1000])
                          for i in range(0, len(big), 1000)) + b"0\r\n\r\n"
        s.sendall(request(json_headers() + b"Transfer-Encoding: chunked\r\n", chunks))
        self.assertEqual(response(s)[0], 413)
        self.assert_unharmed(f)

    def test_oversized_headers(self):
        f = self.front("--max-header", "8192")
        cases = [b"X-Big: " + b"y" * 9000 + b"\r\n",  # one header too big
                 b"".join(b"X-H%d: %s\r\n" % (i, b"z" * 60) for i in range(200))]  # many
        for extra in cases:
            s = self.raw(f)
            s.sendall(request(json_headers(2) + extra, b"{}"))
            self.assertEqual(response(s)[0], 431)
            self.assertTrue(closed(s))
        s = self.raw(f)  # the request line alone too long
        s.sendall(request(json_headers(2), b"{}", path=b"/mcp?" + b"q" * 9000))
        self.assertIn(response(s)[0], (414, 431))
        self.assert_unharmed(f)

    def test_idle_connection_memory(self):
        # an idle keep-alive connection costs the front its libmicrohttpd
        # memory pool, --max-header, written whole after each request; the
        # default is 15 KiB (with the connection's own state, ~15.6 KiB)
        n = 256
        f = self.front("--connections", str(n + 16))
        self.good_call(f)
        rss0 = rss_kb(f.proc.pid)
        msg, h = modern(1, "server/discover")
        for _ in range(n):
            c = f.conn()
            resp = post(c, msg, h)
            resp.read()
            self.assertEqual(resp.status, 200)
        per_conn_kb = (rss_kb(f.proc.pid) - rss0) / n
        # ASan's redzones and shadow add to each allocation (35.7 KiB seen)
        self.assertLess(per_conn_kb, 48 if harness.SANITIZED else 24, "KiB a connection")
        for c in f.conns:
            c.close()
        self.assert_unharmed(f)

    # -- slow and silent clients ---------------------------------------------------
    def test_slowloris(self):
        # a byte every 0.2 s is never idle for the 1 s timeout; the request
        # still has to arrive whole within its time
        f = self.front("--http-timeout", "1")
        s = self.raw(f)
        s.settimeout(0.2)  # the trickle's pace: the attack itself, not a wait
        head = request(json_headers(2) + b"X-Slow: " + b"s" * 200 + b"\r\n", b"{}")
        end = time.monotonic() + WAIT
        shut = False
        for b in head:
            try:
                s.send(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                shut = True
                break
            try:
                if s.recv(4096) == b"":
                    shut = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                shut = True
                break
            self.assertLess(time.monotonic(), end, "a trickled request kept for WAIT")
        self.assertTrue(shut, "the whole trickled request was taken")
        self.assert_unharmed(f)

    def test_half_open_flood(self):
        conns = 64
        f = self.front("--http-timeout", "1", "--connections", str(conns))
        refused = held = 0
        for _ in range(HALF_OPEN // BATCH):
            sel = selectors.DefaultSelector()
            socks = []
            for _ in range(BATCH):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
                s.connect_ex(("127.0.0.1", f.port))
                socks.append(s)
                sel.register(s, selectors.EVENT_READ)
            # meanwhile a good client is answered, or refused at once (503,
            # or closed before its request is read), never left hanging
            c = f.conn()
            msg, h = modern(0, "server/discover")
            try:
                resp = post(c, msg, h)
                self.assertIn(resp.status, (200, 503))
                resp.read()
            except socket.timeout:
                raise
            except (http.client.HTTPException, OSError):
                pass
            c.close()
            # every one ends: refused at once with 503, or held and timed out
            left = len(socks)
            end = time.monotonic() + WAIT
            while left:
                self.assertLess(time.monotonic(), end, "%d half-open connections left" % left)
                for key, _ in sel.select(timeout=0.5):
                    s = key.fileobj
                    try:
                        data = s.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except ConnectionResetError:
                        data = b""
                    if data.startswith(b"HTTP/1.1 503 "):
                        refused += 1
                    elif data:
                        self.fail("a half-open connection got %r" % data[:100])
                    else:
                        held += 1
                    sel.unregister(s)
                    s.close()
                    left -= 1
            sel.close()
            self.assertLess(fds_of(f.proc.pid), conns + 64)
        self.assertEqual(refused + held, HALF_OPEN)
        self.assertGreater(refused, 0)
        self.assertGreater(held, 0)
        self.assert_unharmed(f)

    # -- bad messages --------------------------------------------------------------
    def test_malformed_jsonrpc(self):
        f = self.front()
        c = f.conn()
        _, h = modern(1, "tools/call", {"name": "echo"}, name="echo")
        meta = {"io.modelcontextprotocol/protocolVersion": NEW,
                "io.modelcontextprotocol/clientCapabilities": {}}
        deep = 100000
        bodies = [
            b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}',
            b'{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}',
            b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
            b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}',
            b'{"jsonrpc": "2.0", "id": 1e400, "method": "tools/list"}',
            b'{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "method": "ping"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": 7}',
            b'{"jsonrpc": "2.0", "id": 1, "method": null}',
            b'{"jsonrpc": "2.0", "id": 1, "method": {"m": 1}}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "echo"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 3}',
            b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}',
            b'{"id": 1, "method": "tools/list"}',
            b'[]',
            b'[[[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]]]',
            b'null', b'7', b'"x"', b'', b' ', b'{', b'{"a": 1}{"b": 2}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "\\u0000"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "\xff\xfe"}',
            b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}',
            b'[' * deep + b']' * deep,
            b'{"a":' * deep + b'1' + b'}' * deep,
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "echo", "_meta": meta,
                "arguments": json.loads('{"a":' * 500 + '1' + '}' * 500)}}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": {"n": "echo"}, "_meta": meta}}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "echo", "arguments": [1], "_meta": meta}}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "echo", "_meta": "m"}}).encode(),
            json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}).encode(),
        ]
        for body in bodies:
            for headers in (h, {"MCP-Protocol-Version": OLD}, {}):
                resp = post(c, None, headers, raw=body)
                out = resp.read()
                what = (headers, body[:120], resp.status, out[:300])
                self.assertIn(resp.status, (200, 202, 400, 404, 413), what)
                if resp.status != 202:
                    answer = json.loads(out)
                    self.assertEqual(answer.get("jsonrpc"), "2.0", what)
                    self.assertTrue("error" in answer or "result" in answer, what)
        self.assert_unharmed(f)

    def test_length_against_body(self):
        f = self.front("--http-timeout", "1")
        msg, h = modern(1, "tools/call", {"name": "echo", "arguments": {}}, name="echo")
        body = json.dumps(msg).encode()
        head = json_headers() + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode())
                                         for k, v in h.items())
        # longer than said: the rest is the next request, which is no HTTP
        s = self.raw(f)
        s.sendall(request(head + b"Content-Length: %d\r\n" % (len(body) - 5), body))
        first = response(s)
        self.assertTrue(first is None or first[0] == 400, first)
        self.assertTrue(response(s) in (None,) or closed(s))
        # shorter than said: the request is never whole; the connection
        # is closed after the timeout, or at once once the client closes
        s = self.raw(f)
        s.sendall(request(head + b"Content-Length: %d\r\n" % (len(body) + 100), body))
        self.assertIsNone(response(s))
        s = self.raw(f)
        s.sendall(request(head + b"Content-Length: %d\r\n" % (len(body) + 100), body))
        s.shutdown(socket.SHUT_WR)
        self.assertIsNone(response(s))
        # a negative, a non-numeric, two different lengths
        for bad in (b"Content-Length: -5\r\n", b"Content-Length: abc\r\n",
                    b"Content-Length: %d\r\nContent-Length: 3\r\n" % len(body)):
            s = self.raw(f)
            s.sendall(request(head + bad, body))
            r = response(s)
            self.assertTrue(r is None or r[0] == 400, (bad, r))
        # chunked: served as the same body whole
        s = self.raw(f)
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                           for i in range(0, len(body), 7)) + b"0\r\n\r\n"
        s.sendall(request(head + b"Transfer-Encoding: chunked\r\n", chunked))
        status, out = response(s)
        self.assertEqual(status, 200, out)
        self.assertFalse(json.loads(out)["result"]["isError"], out)
        # chunked and a length both: refused, as two readers (a proxy, the
        # front) could each take another body from it
        s = self.raw(f)
        s.sendall(request(head + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", chunked))
        r = response(s)
        self.assertTrue(r is None or r[0] == 400, r)
        # a chunk size that is no number, one that lies
        for bad in (b"zz\r\n" + body + b"\r\n0\r\n\r\n",
                    b"%x\r\n" % (len(body) + 50) + body + b"\r\n0\r\n\r\n"):
            s = self.raw(f)
            s.sendall(request(head + b"Transfer-Encoding: chunked\r\n", bad))
            r = response(s)
            self.assertTrue(r is None or r[0] == 400, (bad[:20], r))
        self.assert_unharmed(f)

    # -- sessions ------------------------------------------------------------------
    def test_thousand_sessions(self):
        # past --sessions (32 by default) an initialize is refused: the live
        # sessions are not displaced (only idleness ends one, after
        # --session-idle, 1800 s by default)
        f = self.front()
        c = f.conn()
        init = rpc(0, "initialize", {"protocolVersion": OLD, "capabilities": {},
                                      "clientInfo": {"name": "flood", "version": "1"}})
        sessions, refused = [], 0
        for _ in range(1000):
            resp = post(c, init)
            body = json.loads(resp.read())
            if resp.status == 200:
                sessions.append({"Mcp-Session-Id": resp.getheader("Mcp-Session-Id"),
                                 "MCP-Protocol-Version": OLD})
            else:
                self.assertEqual(resp.status, 503, body)
                refused += 1
        self.assertEqual((len(sessions), refused), (32, 968))
        self.assertLess(fds_of(f.proc.pid), 64 + 32 + 16)
        for i, s in enumerate((sessions[0], sessions[-1])):  # both still live
            resp = post(c, rpc(i + 1, "ping"), s)
            self.assertEqual(json.loads(resp.read())["result"], {})
        resp = post(c, rpc(3, "ping"), {"MCP-Protocol-Version": OLD})
        resp.read()
        self.assertEqual(resp.status, 400)  # no session
        resp = post(c, init)  # still full
        resp.read()
        self.assertEqual(resp.status, 503)
        c.request("DELETE", "/mcp", headers=sessions[0])
        resp = c.getresponse()
        resp.read()
        self.assertEqual(resp.status, 200)
        resp = post(c, init)  # a place again
        resp.read()
        self.assertEqual(resp.status, 200)
        self.assert_unharmed(f)


if __name__ == "__main__":
    harness.main()
