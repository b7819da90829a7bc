"""mcp_server_standin - a stand-in for a PyPI MCP server such as
mcp_server_time (PyPI cannot be reached from here), laid out and started as
one is: a package whose __init__ imports its server, a main() parsing its
arguments and running the server on stdio, run as `python3 -m
mcp_server_standin`.

Its import is a PyPI server's in kind: what the `mcp` package pulls in that
Debian packages (pydantic, anyio, httpx, starlette, jsonschema, tzlocal),
about 0.35 s on the CI machine, against some 0.4 to 1 s for `mcp` itself
(it adds pydantic 2, pydantic-settings, uvicorn, sse-starlette...). The
MCP itself is a small hand-written loop (stdio, newline-delimited
JSON-RPC, 2025-11-25) on anyio's wrapped files, as `mcp`'s stdio_server
reads and writes, with pydantic models for the arguments and results.

For tests/integration/test_mcp_server_warm.py and bench/mcpwarm.py."""

from .server import serve


def main():
    """The server on stdio, as mcp_server_time's main()."""
    import argparse

    import anyio

    parser = argparse.ArgumentParser(description="a stand-in MCP server")
    parser.add_argument("--local-timezone", default="UTC")
    args = parser.parse_args()
    anyio.run(serve, args.local_timezone)
