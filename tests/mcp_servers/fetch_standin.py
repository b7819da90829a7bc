"""A stand-in of ours for PyPI's mcp-server-fetch, which cannot be installed
here (PyPI is out of reach): a stdio MCP server, standard library only,
shaped like it. Its one tool, fetch (url; max_length, start_index, raw as
the real one takes them), GETs the URL with urllib, which goes through the
proxy the environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) as the real
server's httpx does, and answers "Contents of URL:" and the body; a status
of 400 or more is a JSON-RPC error "Failed to fetch URL - status code N", as
the real one raises it. Its options (--ignore-robots-txt, --user-agent,
--proxy-url) are the real server's; robots.txt is never read here.

For tests/integration/test_mcp_server_standins.py."""

import argparse
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standin_stdio import ToolError, serve, text  # noqa: E402

TOOLS = [{
    "name": "fetch",
    "description": "Fetches a URL from the internet and extracts its contents.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "minLength": 1},
            "max_length": {"type": "integer", "default": 5000, "exclusiveMinimum": 0,
                           "exclusiveMaximum": 1000000},
            "start_index": {"type": "integer", "default": 0, "minimum": 0},
            "raw": {"type": "boolean", "default": False},
        },
        "required": ["url"],
    },
}]


def main():
    ap = argparse.ArgumentParser(description="a stand-in for mcp-server-fetch")
    ap.add_argument("--user-agent", default="ModelContextProtocol/1.0 (Autonomous; standin)")
    ap.add_argument("--ignore-robots-txt", action="store_true")
    ap.add_argument("--proxy-url")
    args = ap.parse_args()
    handlers = []
    if args.proxy_url:
        handlers.append(urllib.request.ProxyHandler({"http": args.proxy_url,
                                                     "https": args.proxy_url}))
    opener = urllib.request.build_opener(*handlers)  # else the environment's proxies

    def call(name, a):
        url = a["url"]
        req = urllib.request.Request(url, headers={"User-Agent": args.user_agent})
        try:
            with opener.open(req, timeout=30) as r:
                body = r.read().decode("utf-8", "replace")
                ctype = r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raise ToolError("Failed to fetch %s - status code %d" % (url, e.code))
        except OSError as e:
            raise ToolError("Failed to fetch %s: %s" % (url, e))
        prefix = "" if a.get("raw") or "text/html" in ctype else (
            "Content type %s cannot be simplified to markdown, but here is the raw "
            "content:\n" % ctype)
        start = a.get("start_index", 0)
        part = body[start:start + a.get("max_length", 5000)]
        if not part:
            return text("<error>No more content available.</error>", error=True)
        return text("%sContents of %s:\n%s" % (prefix, url, part))

    serve("mcp-fetch", TOOLS, call)


if __name__ == "__main__":
    main()
