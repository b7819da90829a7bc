"""A tool's own MCP content through the real daemon and `toolexec mcp`:
a tool whose definition says "mcp": {"content": "blocks"} returns MCP
content blocks as its ok value, which the front checks and passes through
as the tools/call result's content; the same value from a tool without the
key is data, as before (one text block, structuredContent). Hostile shapes
(huge base64, bad base64, an unknown type, nested junk) get an isError
result naming what is wrong, and the session goes on. Logging: what a tool
says in its progress frames reaches a 2025 client that set a level as
notifications/message, and no other. Task support ("mcp": {"task_support":
"required"}): a 2026-07-28 client without the tasks extension is refused
before the tool runs; one with it gets a task at once.

Environment (set by tests/integration/meson.build): TOOLEXEC, besides what
harness.py needs."""

import base64
import time
import unittest

from harness import WAIT
from test_mcp import McpCase

# A framed worker (proto/PROTOCOL.md 2.2): its ok value is arguments.value,
# or an image of arguments.huge base64 characters; arguments.say, progress
# messages first.
WORKER = r"""
import json, struct, sys
n, = struct.unpack(">I", sys.stdin.buffer.read(4))
args = json.loads(sys.stdin.buffer.read(n)).get("arguments") or {}
def frame(o):
    b = json.dumps(o).encode()
    sys.stdout.buffer.write(struct.pack(">I", len(b)) + b)
    sys.stdout.buffer.flush()
for i, s in enumerate(args.get("say", [])):
    frame({"progress": {"progress": i, "message": s}})
if "huge" in args:
    frame({"ok": {"content": [{"type": "image", "data": "A" * args["huge"],
                               "mimeType": "image/png"}]}})
else:
    frame({"ok": args.get("value")})
"""

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n not really a picture").decode()
BLOCKS = {"content": [
    {"type": "text", "text": "three blocks:"},
    {"type": "image", "data": PNG, "mimeType": "image/png"},
    {"type": "resource", "resource": {"uri": "test://r", "mimeType": "application/json",
                                      "text": "{\"a\": 1}"}},
    {"type": "resource_link", "uri": "file:///srv/report.pdf", "name": "report.pdf",
     "mimeType": "application/pdf", "size": 1234},
], "structuredContent": {"n": 3}}


def tool(name, **fields):
    d = {"name": name, "description": "returns its arguments' value",
         "schema": {"type": "object"}, "command": ["/usr/bin/python3", "-c", WORKER]}
    d.update(fields)
    return d


class McpContent(McpCase):
    TOOLS = [
        tool("blocks", mcp={"content": "blocks"}),
        tool("plain"),
        tool("plain_said", mcp={"content": "value"}),
        tool("job", mcp={"task_support": "required"}),
        tool("shaped", mcp={"content": "blocks"},
             output_schema={"type": "object", "required": ["n"],
                            "properties": {"n": {"type": "integer"}}}),
    ]

    def start(self):
        s = self.session()
        s.request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        r = s.response(0)["result"]
        self.assertEqual(r["capabilities"].get("logging"), {})
        s.notify("notifications/initialized")
        return s

    def call(self, s, rid, name, args):
        s.request(rid, "tools/call", {"name": name, "arguments": args})
        msg = s.response(rid, timeout=60)
        self.assertIn("result", msg, msg)
        return msg["result"]

    def refused(self, s, rid, args, says):
        r = self.call(s, rid, "blocks", args)
        self.assertIs(r["isError"], True, r)
        self.assertEqual(len(r["content"]), 1, r)
        self.assertEqual(r["content"][0]["type"], "text")
        self.assertIn("is not MCP content", r["content"][0]["text"])
        self.assertIn(says, r["content"][0]["text"])
        self.assertNotIn("structuredContent", r)

    def test_listing_marks_blocks(self):
        s = self.start()
        s.request(1, "tools/list")
        tools = {t["name"]: t for t in s.response(1)["result"]["tools"]}
        self.assertEqual(tools["blocks"]["_meta"], {"toolexecd/content": "blocks"})
        self.assertNotIn("_meta", tools["plain"])
        self.assertNotIn("_meta", tools["plain_said"])

    def test_blocks_passed_through(self):
        s = self.start()
        r = self.call(s, 1, "blocks", {"value": BLOCKS})
        self.assertEqual(r, {"content": BLOCKS["content"], "isError": False,
                             "structuredContent": {"n": 3}})

    def test_without_the_key_a_value_is_data(self):
        s = self.start()
        for rid, name in ((1, "plain"), (2, "plain_said")):
            r = self.call(s, rid, name, {"value": BLOCKS})
            self.assertEqual(len(r["content"]), 1, r)
            self.assertEqual(r["content"][0]["type"], "text")
            self.assertIn('"type":"image"', r["content"][0]["text"])
            self.assertEqual(r["structuredContent"], BLOCKS)
            self.assertIs(r["isError"], False)

    def test_hostile_shapes(self):
        s = self.start()
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        # over the front's bound (8 MiB of JSON), under the daemon's 16 MiB
        self.refused(s, 1, {"huge": 9 * 1024 * 1024}, "bytes of JSON, over the")
        self.refused(s, 2, {"value": {"content": [dict(image, data=PNG[:-2] + "*=")]}},
                     "content[0].data: not base64")
        self.refused(s, 3, {"value": {"content": [dict(image, data=PNG[:-1])]}},
                     "content[0].data: not base64")
        self.refused(s, 4, {"value": {"content": [{"type": "video", "data": PNG}]}},
                     "content[0].type: \"video\" is not")
        self.refused(s, 5, {"value": {"content": [image, dict(image, junk=[[{"a": [[[1]]]}]])]}},
                     "content[1].junk: unknown key")
        self.refused(s, 6, {"value": {"content": [{"type": "text", "text": {"a": [1, {"b": 2}]}}]}},
                     "content[0].text: expected a string")
        self.refused(s, 7, {"value": [image]}, "not an object")
        self.refused(s, 8, {"value": {"content": [image], "extra": {}}}, "unknown key")
        self.refused(s, 9, {"value": {"content": [dict(image, mimeType="text/html")]}},
                     "media type of image")
        # the session goes on
        r = self.call(s, 10, "blocks", {"value": {"content": [image]}})
        self.assertEqual(r["content"], [image])

    def test_output_schema_is_structured_contents(self):
        s = self.start()
        r = self.call(s, 1, "shaped", {"value": {"content": [], "structuredContent": {"n": 1}}})
        self.assertEqual(r, {"content": [], "isError": False, "structuredContent": {"n": 1}})
        r = self.call(s, 2, "shaped", {"value": {"content": [],
                                                 "structuredContent": {"n": "one"}}})
        self.assertIs(r["isError"], True, r)
        self.assertIn("output_schema", r["content"][0]["text"])
        r = self.call(s, 3, "shaped", {"value": {"content": []}})
        self.assertIs(r["isError"], True, r)
        self.assertIn("no structuredContent", r["content"][0]["text"])

    def test_progress_messages_are_logs_when_asked(self):
        s = self.start()
        said = ["started", "half way"]
        self.call(s, 1, "plain", {"say": said, "value": 1})
        self.assertEqual([m for m in s.pending if m.get("method") == "notifications/message"], [])
        s.request(2, "logging/setLevel", {"level": "warning"})
        self.assertEqual(s.response(2)["result"], {})
        self.call(s, 3, "plain", {"say": said, "value": 1})
        self.assertEqual([m for m in s.pending if m.get("method") == "notifications/message"], [])
        s.request(4, "logging/setLevel", {"level": "info"})
        self.assertEqual(s.response(4)["result"], {})
        self.call(s, 5, "plain", {"say": said, "value": 1})
        logs = [m["params"] for m in s.pending if m.get("method") == "notifications/message"]
        self.assertEqual([(p["level"], p["logger"], p["data"]) for p in logs
                          if p["logger"] == "plain"],
                         [("info", "plain", "started"), ("info", "plain", "half way")])
        s.request(6, "logging/setLevel", {"level": "loud"})
        self.assertEqual(s.response(6)["error"]["code"], -32602)

    def test_required_task_support(self):
        s = self.session()
        caps = {}
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps}
        s.request(1, "tools/list", {"_meta": meta})
        tools = {t["name"]: t for t in s.response(1)["result"]["tools"]}
        self.assertEqual(tools["job"]["execution"], {"taskSupport": "required"})
        self.assertNotIn("execution", tools["plain"])
        # without the extension: refused (before it runs: test_mcp_content.c)
        s.request(2, "tools/call", {"name": "job", "_meta": meta, "arguments": {"value": 1}})
        err = s.response(2)["error"]
        self.assertEqual(err["code"], -32021, err)
        self.assertEqual(err["data"], {"requiredCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}}})
        # with it: a task at once, whose result is the tool's
        caps["extensions"] = {"io.modelcontextprotocol/tasks": {}}
        s.request(3, "tools/call", {"name": "job", "_meta": meta, "arguments": {"value": 7}})
        r = s.response(3)["result"]
        self.assertEqual(r["resultType"], "task", r)
        end, rid = time.monotonic() + WAIT, 4
        while True:  # a deadline, not a sleep standing in for the event
            s.request(rid, "tasks/get", {"taskId": r["taskId"], "_meta": meta})
            got = s.response(rid)["result"]
            if got["status"] != "working" or time.monotonic() > end:
                break
            rid += 1
            time.sleep(0.05)
        self.assertEqual(got["status"], "completed", got)
        self.assertEqual(got["result"]["content"][0]["text"], "7")


if __name__ == "__main__":
    unittest.main()
