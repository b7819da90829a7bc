"""A small Streamable HTTP MCP server of the tests' own (test_mcp_server_url.py),
run in the test's process so the test sees what reached it (each request's
headers) and says when a hanging answer may end.

Revisions: "legacy" speaks 2025-11-25 with a session (Mcp-Session-Id made at
initialize, required after, ended by DELETE); "modern" speaks 2026-07-28 alone
(initialize refused with 400, server/discover, each request's _meta and
headers checked against each other: MCP-Protocol-Version, Mcp-Method,
Mcp-Name).

Tools: echo (a JSON answer), progress (an SSE stream: two progress
notifications, then the result; in legacy, a ping of the server's first, whose
answer the client POSTs), fail (isError), hang (answers once released, or sees
its stream closed), moved (a 307 to a host no allow-list names)."""
import http.server
import json
import select
import threading
import uuid

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

TOOLS = [
    {"name": "echo", "description": "says it back",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "progress", "description": "reports progress",
     "inputSchema": {"type": "object"}},
    {"name": "fail", "description": "fails", "inputSchema": {"type": "object"}},
    {"name": "twice", "description": "doubles n (over SSE with sse: true)",
     "inputSchema": {"type": "object", "properties": {"n": {"type": "number"},
                                                       "sse": {"type": "boolean"}}}},
    {"name": "hang", "description": "answers when released", "inputSchema": {"type": "object"}},
    {"name": "moved", "description": "redirected elsewhere", "inputSchema": {"type": "object"}},
    # 2026-07-28: parameters mirrored in Mcp-Param-* headers, one nested
    {"name": "region", "description": "says its headers",
     "inputSchema": {"type": "object", "properties": {
         "region": {"type": "string", "x-mcp-header": "Region"},
         "opts": {"type": "object", "properties": {
             "n": {"type": "integer", "x-mcp-header": "N"},
             "fast": {"type": "boolean", "x-mcp-header": "Fast"}}}}}},
    # ... but not under "items": a tool a client must leave out
    {"name": "badheader", "description": "an x-mcp-header out of reach",
     "inputSchema": {"type": "object", "properties": {
         "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}}}},
]


class Server:
    def __init__(self, mode="legacy", host="127.0.0.1", tls=None):
        self.mode = mode
        self.requests = []  # (method or None, headers as a dict of lower-case names)
        self.sessions_ended = []
        self.release = threading.Event()
        self.hanging = threading.Event()  # a hang call is being answered
        self.stream_closed = threading.Event()  # ... and its stream was closed
        self.pinged = threading.Event()  # a ping's answer came back
        self.sessions = set()  # made at initialize (two listings may be at it at once)
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_DELETE(self):
                srv.sessions_ended.append(self.headers.get("Mcp-Session-Id"))
                self.reply(200, None)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n))
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                srv.requests.append((body.get("method"), hdrs))
                srv.handle(self, body, hdrs)

            def reply(self, status, obj, extra=()):
                data = json.dumps(obj).encode() if obj is not None else b""
                self.send_response(status)
                for k, v in extra:
                    self.send_header(k, v)
                if obj is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def sse_start(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                # a priming event, as the TypeScript SDK's: an id, empty data
                self.wfile.write(b"id: 0\ndata:\n\n")

            def sse(self, obj):
                # a comment, and the message's data over two lines, as SSE allows
                text = json.dumps(obj, indent=1).split("\n")
                self.wfile.write(b": keep-alive\r\n" + b"".join(
                    b"data: " + t.encode() + b"\r\n" for t in text) + b"\r\n")
                self.wfile.flush()

        self.httpd = http.server.ThreadingHTTPServer((host, 0), H)
        self.httpd.daemon_threads = True
        if tls:  # an ssl.SSLContext: HTTPS
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = "%s://%s:%d/mcp" % ("https" if tls else "http", host, self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def headers_of(self, method):
        return [h for m, h in self.requests if m == method]

    def handle(self, h, body, hdrs):
        method, rid, params = body.get("method"), body.get("id"), body.get("params") or {}

        def result(r):
            return {"jsonrpc": "2.0", "id": rid, "result": r}

        if rid is None or method is None:
            # a notification, or our ping's answer (legacy)
            if rid == "ping-1" and "result" in body:
                self.pinged.set()
            return h.reply(202, None)
        if self.mode == "modern":
            meta = params.get("_meta") or {}
            if method == "initialize":
                return h.reply(400, {"jsonrpc": "2.0", "id": rid, "error": {
                    "code": -32602, "message": "unsupported protocol version",
                    "data": {"supported": [MODERN]}}})
            want = {"mcp-protocol-version": meta.get("io.modelcontextprotocol/protocolVersion"),
                    "mcp-method": method}
            if method == "tools/call":
                want["mcp-name"] = params.get("name")
            if any(hdrs.get(k) != v for k, v in want.items()) or want[
                    "mcp-protocol-version"] != MODERN:
                return h.reply(400, {"jsonrpc": "2.0", "id": rid, "error": {
                    "code": -32020, "message": "header mismatch: %r" % want}})
            if method == "server/discover":
                return h.reply(200, result({"supportedVersions": [MODERN], "capabilities": {
                    "tools": {}}}))
        else:
            if method == "initialize":
                session = uuid.uuid4().hex
                self.sessions.add(session)
                return h.reply(200, result({"protocolVersion": LEGACY,
                                            "capabilities": {"tools": {}},
                                            "serverInfo": {"name": "http-test", "version": "1"}}),
                               [("Mcp-Session-Id", session)])
            if hdrs.get("mcp-session-id") not in self.sessions or hdrs.get(
                    "mcp-protocol-version") != LEGACY:
                return h.reply(400, {"jsonrpc": "2.0", "id": rid,
                                     "error": {"code": -32600, "message": "no session"}})
        if method == "tools/list":
            return h.reply(200, result({"tools": TOOLS}))
        if method != "tools/call":
            return h.reply(404, {"jsonrpc": "2.0", "id": rid,
                                 "error": {"code": -32601, "message": "no " + method}})
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "region":
            got = {k: v for k, v in hdrs.items() if k.startswith("mcp-param-")}
            return h.reply(200, result({"content": [{"type": "text", "text": "region"}],
                                        "structuredContent": got}))
        if name == "echo":
            return h.reply(200, result({"content": [{"type": "text", "text": args.get("text")}]}))
        if name == "twice" and not args.get("sse"):
            return h.reply(200, result({"content": [{"type": "text", "text": "twice"}],
                                        "structuredContent": {"n": 2 * args["n"]}}))
        if name == "fail":
            return h.reply(200, result({"content": [{"type": "text", "text": "it broke"}],
                                        "isError": True}))
        if name == "moved":
            h.send_response(307)
            h.send_header("Location", "http://evil.example/mcp")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        token = (params.get("_meta") or {}).get("progressToken")
        h.sse_start()
        if name == "twice":
            return h.sse(result({"content": [{"type": "text", "text": "twice"}],
                                 "structuredContent": {"n": 2 * args["n"]}}))
        if name == "progress":
            if self.mode == "legacy":
                h.sse({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
                self.pinged.wait(30)
            for i in (1, 2):
                h.sse({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": i, "total": 2,
                                  "message": "step %d" % i}})
            return h.sse(result({"content": [{"type": "text", "text": "done"}],
                                 "structuredContent": {"steps": 2}}))
        if name == "hang":
            self.hanging.set()
            # answer once released, or see the client close the stream
            while not self.release.is_set():
                r, _, _ = select.select([h.connection], [], [], 0.05)
                if r and not h.connection.recv(1, 0x40):  # MSG_DONTWAIT: EOF
                    self.stream_closed.set()
                    return
            return h.sse(result({"content": [{"type": "text", "text": "released"}]}))
        h.sse(result({"content": [], "isError": True}))
