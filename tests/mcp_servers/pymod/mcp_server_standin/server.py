"""The stand-in's server: its imports are the point (see __init__)."""

import io
import json
import os
import sys
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import anyio
import httpx  # noqa: F401 - imported as mcp imports it
import jsonschema  # noqa: F401
import starlette.applications  # noqa: F401
import starlette.routing  # noqa: F401
import tzlocal  # noqa: F401
from pydantic import BaseModel, ValidationError

# calls this process has answered: 1 in every call where each call is a
# fresh process (or a fresh fork of a template that has answered none)
ANSWERED = 0


class TimeArgs(BaseModel):
    timezone: str


class TextArgs(BaseModel):
    text: str = ""


class PathArgs(BaseModel):
    path: str
    text: str = ""


class MarkArgs(BaseModel):
    mark: str = ""


class TimeResult(BaseModel):
    timezone: str
    datetime: str


def _schema(model):
    # pydantic 2 (what mcp uses) and 1 (Debian 12's)
    s = model.model_json_schema() if hasattr(model, "model_json_schema") else model.schema()
    s.pop("title", None)
    return s


TOOLS = {
    "get_current_time": (TimeArgs, "The current time in a timezone"),
    "echo": (TextArgs, "Echo the text"),
    "answered": (TextArgs, "How many calls this server process has answered"),
    "write": (PathArgs, "Write a file"),
    "read": (PathArgs, "Read a file"),
    "crash": (TextArgs, "Exit in the middle of the call"),
    "hang": (MarkArgs, "Leave a child marked MARK running and never answer"),
}


def _text(t, error=False):
    return {"content": [{"type": "text", "text": t}], "isError": error}


def _call(name, arguments):
    global ANSWERED
    ANSWERED += 1
    model, _ = TOOLS[name]
    try:
        a = model(**arguments)
    except ValidationError as e:
        return _text(str(e), error=True)
    if name == "get_current_time":
        r = TimeResult(timezone=a.timezone,
                       datetime=datetime.now(ZoneInfo(a.timezone)).isoformat(timespec="seconds"))
        d = r.model_dump() if hasattr(r, "model_dump") else r.dict()
        return {"content": [{"type": "text", "text": json.dumps(d)}], "structuredContent": d}
    if name == "echo":
        return _text(a.text)
    if name == "answered":
        return _text(str(ANSWERED))
    if name == "write":
        try:
            with open(a.path, "w") as f:
                f.write(a.text)
            return _text("written")
        except OSError as e:
            return _text("write %s: %s" % (a.path, e), error=True)
    if name == "read":
        try:
            with open(a.path) as f:
                return _text(f.read())
        except OSError as e:
            return _text("read %s: %s" % (a.path, e), error=True)
    if name == "crash":
        sys.stderr.write("mcp_server_standin: crashing now\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "hang":
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "1000", a.mark])
        while True:
            time.sleep(1000)
    return None


def _answer(msg):
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-server-standin", "version": "1"}}
    if method == "tools/list":
        return {"tools": [{"name": n, "description": d, "inputSchema": _schema(m)}
                          for n, (m, d) in TOOLS.items()]}
    if method == "tools/call":
        p = msg.get("params") or {}
        if p.get("name") not in TOOLS:
            return {"error": {"code": -32602, "message": "Unknown tool: %s" % p.get("name")}}
        return _call(p["name"], p.get("arguments") or {})
    if mid is not None:
        return {}
    return None


async def serve(local_timezone):
    # as mcp.server.stdio.stdio_server: the process's stdio, wrapped
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"))
    stdout = anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    async for line in stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        r = _answer(msg)
        if r is None or msg.get("id") is None:
            continue
        if "error" in r and "content" not in r and len(r) == 1:
            out = {"jsonrpc": "2.0", "id": msg["id"], "error": r["error"]}
        else:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": r}
        await stdout.write(json.dumps(out) + "\n")
        await stdout.flush()
