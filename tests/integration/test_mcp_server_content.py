"""An MCP server's non-text results through toolexecd's own MCP front: a
stdio server of our own (tests/mcp_servers/odd_server.py) defined as an
"mcp_server", its tools called by an MCP host over `toolexec mcp` (stdio).
The image, the embedded resources (text and blob) and the resource link
the server answers reach the host as the very blocks it sent, with its
structuredContent; a text answer is one text block; the server's isError
is the host's isError with the server's text; the listing marks each of
the server's tools as returning blocks.

Environment (set by tests/integration/meson.build): TOOLEXEC, besides what
harness.py needs."""

import os
import sys
import unittest

from test_mcp import McpCase
from test_mcp_server import odd, wait_listed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "mcp_servers"))
import odd_server  # noqa: E402


class ServerContent(McpCase):
    maxDiff = None
    TOOLS = [odd()]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = cls.d.client()  # the server's tools are listed after the start
        try:
            wait_listed(c, "odd.image")
        finally:
            c.close()

    def start(self):
        s = self.session()
        s.request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        s.response(0)
        s.notify("notifications/initialized")
        s.request(1000, "tools/list")
        return s, {t["name"]: t for t in s.response(1000)["result"]["tools"]}

    def call(self, s, rid, name, args):
        """The result, less the text block toolexec mcp adds after the
        server's when the call met refusals (the interpreter's look at
        what its view hides, as any tool's call may)."""
        s.request(rid, "tools/call", {"name": name, "arguments": args})
        msg = s.response(rid, timeout=60)
        self.assertIn("result", msg, msg)
        r = msg["result"]
        if r.get("_meta", {}).get("toolexecd/denied"):
            said = r["content"].pop()
            self.assertTrue(said["text"].startswith("[toolexec] Refused during the call"), said)
            del r["_meta"]
        return r

    def test_blocks_whole(self):
        s, tools = self.start()
        self.assertEqual(tools["odd.image"]["_meta"], {"toolexecd/content": "blocks"})
        r = self.call(s, 1, "odd.image", {})
        self.assertEqual(r, {"content": odd_server.IMAGE["content"], "isError": False,
                             "structuredContent": odd_server.IMAGE["structuredContent"]})

    def test_text_and_structured(self):
        s, _ = self.start()
        self.assertEqual(self.call(s, 1, "odd.echo", {"text": "hi"}),
                         {"content": [{"type": "text", "text": "hi"}], "isError": False})
        self.assertEqual(self.call(s, 2, "odd.add", {"a": 1, "b": 2}),
                         {"content": [{"type": "text", "text": '{"sum": 3}'}], "isError": False,
                          "structuredContent": {"sum": 3}})

    def test_server_error(self):
        s, _ = self.start()
        r = self.call(s, 1, "odd.fail", {})
        self.assertIs(r["isError"], True, r)
        self.assertIn("it failed on purpose", r["content"][0]["text"])


if __name__ == "__main__":
    unittest.main()
