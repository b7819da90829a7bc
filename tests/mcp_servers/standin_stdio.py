"""The stdio loop of our stand-ins for PyPI's MCP servers (fetch_standin.py,
git_standin.py): newline-delimited JSON-RPC on standard input and output,
as the `mcp` package's stdio_server speaks it, standard library only.

PyPI cannot be reached from the machines these tests run on, so the real
servers (tests/integration/test_mcp_server_pypi.py) skip there; these
stand-ins are ours, shaped like them, and are what runs."""

import json
import sys


class ToolError(Exception):
    """A tool's failure answered as a JSON-RPC error (code -32603), as the
    real servers raise McpError(INTERNAL_ERROR, message)."""


def text(t, error=False):
    r = {"content": [{"type": "text", "text": t}]}
    if error:
        r["isError"] = True
    return r


def _send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def serve(name, tools, call):
    """Answer initialize, ping, tools/list and tools/call (call(tool,
    arguments) -> a result, or ToolError) until standard input ends.
    tools: the tools/list entries."""
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification: nothing to answer
        if method == "initialize":
            asked = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
            _send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": asked, "capabilities": {"tools": {}},
                "serverInfo": {"name": name, "version": "0-standin"}}})
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call":
            p = msg.get("params") or {}
            known = {t["name"] for t in tools}
            if p.get("name") not in known:
                _send({"jsonrpc": "2.0", "id": mid, "error": {
                    "code": -32602, "message": "Unknown tool: %s" % p.get("name")}})
                continue
            try:
                _send({"jsonrpc": "2.0", "id": mid,
                       "result": call(p["name"], p.get("arguments") or {})})
            except ToolError as e:
                _send({"jsonrpc": "2.0", "id": mid,
                       "error": {"code": -32603, "message": str(e)}})
        else:
            _send({"jsonrpc": "2.0", "id": mid,
                   "error": {"code": -32601, "message": "Method not found"}})
