"""mcp_server_tinypy - an MCP server (stdio, 2025-11-25) laid out as PyPI's
are: a distribution with a console script calling main(). One tool, where,
which says which interpreter and which file run it, so that a test sees the
server run from the virtual environment toolexec mcp-add made."""

import json
import sys

TOOLS = [{"name": "where", "description": "Which interpreter and file run this server",
          "inputSchema": {"type": "object"}}]


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "tinypy", "version": "1.0"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            where = {"prefix": sys.prefix, "file": __file__, "args": sys.argv[1:]}
            result = {"content": [{"type": "text", "text": json.dumps(where)}]}
        elif mid is not None:
            result = {}
        else:
            continue
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        sys.stdout.flush()
