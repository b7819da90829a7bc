#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py - (re)write the seed corpora in tests/fuzz/corpus/.

The seeds are committed; run this only to regenerate them after changing the
list below. Each seed is small and shows one meaningful case.
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def frame(body):
    if isinstance(body, str):
        body = body.encode()
    return struct.pack(">I", len(body)) + body


def frame_seed(sel=6, cap=0, splits=(), feed_again=False, stream=b""):
    """fuzz_frame input: [sel][cap hi][cap lo][flags][splits...][stream].
    sel 0-6: caps 0 1 4 16 255 4096 65536; 7: cap given; 6 with cap 0xffff:
    TE_FRAME_MAX_DEFAULT (16 MiB)."""
    assert len(splits) < 16
    flags = len(splits) | (16 if feed_again else 0)
    return bytes([sel, cap >> 8 & 255, cap & 255, flags]) + bytes(splits) + stream


FRAME = {
    "one-ok": frame_seed(cap=0xffff, stream=frame('{"ok":"hello"}')),
    "two-frames-split": frame_seed(splits=(1, 3, 7), stream=frame('{"ok":1}') + frame('{"error":"x"}')),
    "byte-at-a-time": frame_seed(splits=(1,), stream=frame('{"ask_user":"q?"}')),
    "empty-body": frame_seed(stream=frame(b"") + frame(b"") + frame("{}")),
    "cap0-empty-frames": frame_seed(sel=0, stream=frame(b"") * 3),
    "cap0-refuses-one": frame_seed(sel=0, stream=frame(b"x")),
    "over-64k": frame_seed(stream=struct.pack(">I", 65537) + b"x"),
    "over-cap-custom": frame_seed(sel=7, cap=16, stream=frame(b"a" * 17)),
    "at-cap-custom": frame_seed(sel=7, cap=16, splits=(2, 0, 5), stream=frame(b"a" * 16)),
    "huge-announced": frame_seed(cap=0xffff, stream=b"\xff\xff\xff\xff" + b"junk"),
    "default-cap-plus-one": frame_seed(cap=0xffff, stream=struct.pack(">I", 16 * 1024 * 1024 + 1)),
    "truncated-body": frame_seed(splits=(4, 2), stream=frame('{"ok":"trunc"}')[:9]),
    "truncated-header": frame_seed(stream=b"\x00\x00"),
    "trailing-bytes": frame_seed(sel=5, splits=(200,), stream=frame('{"ok":null}') + b"after the frame"),
    "feed-again": frame_seed(splits=(3, 20), feed_again=True,
                             stream=frame('{"halt":"done","result":1}') + frame('{"raised":{}}')),
    "zero-splits": frame_seed(sel=3, splits=(0, 0, 6), stream=frame("0123456789abcdef")),
}

REQUEST = {
    "minimal": {"op": "run", "calls": [{"id": "c0", "name": "echo"}]},
    "full": {"op": "run", "batch": "b1", "calls": [{"id": "c0", "name": "echo", "arguments": {"x": 1}}],
             "on_tool_error": "continue", "tool_timeout": 30000, "max_concurrency": 4,
             "context": {}, "session_id": None, "request_id": "r-1", "engine": {"name": "e"}},
    "halt-policy": {"op": "run", "batch": "h", "on_tool_error": "halt",
                    "calls": [{"id": "c0", "name": "echo", "arguments": {"x": 1}},
                              {"id": "c1", "name": "fail", "arguments": {"reason": "boom"}}]},
    "empty-calls": {"op": "run", "batch": "e", "calls": []},
    "arguments-null": {"op": "run", "calls": [{"id": "a", "name": "t.x-1", "arguments": None}]},
    "context": {"op": "run", "batch": "c", "request_id": "r-7", "context": {"user": "u"},
                "calls": [{"id": "c0", "name": "ctx", "arguments": {"x": 1}}]},
    "nulls": {"op": "run", "batch": None, "on_tool_error": None, "tool_timeout": None,
              "max_concurrency": None, "calls": [{"id": "", "name": ""}]},
    "unicode-ids": {"op": "run", "calls": [{"id": "\u00e9t\u00e9", "name": "echo"},
                                           {"id": "\u65e5\u672c", "name": "echo"}]},
    "bad-duplicate-id": {"op": "run", "batch": "b8", "calls": [{"id": "a", "name": "echo"}, {"id": "a", "name": "echo"}]},
    "bad-missing-id": {"op": "run", "calls": [{"id": "a", "name": "echo"}, {"name": "echo"}]},
    "bad-policy": {"op": "run", "calls": [], "on_tool_error": "sometimes"},
    "bad-concurrency": {"op": "run", "calls": [{"id": "a", "name": "echo"}], "max_concurrency": 0},
    "bad-timeout": {"op": "run", "calls": [], "tool_timeout": -5},
    "bad-timeout-real": {"op": "run", "calls": [], "tool_timeout": 1.5},
    "bad-arguments": {"op": "run", "calls": [{"id": "a", "name": "echo", "arguments": [1]}]},
    "bad-calls": {"op": "run", "calls": "nope"},
    "bad-no-calls": {"op": "run"},
    "bad-call-key": {"op": "run", "calls": [{"id": "a", "name": "echo", "args": {}}]},
    "bad-unknown-key": {"op": "run", "calls": [], "pad": "x"},
    "bad-batch-empty": {"op": "run", "batch": "", "calls": []},
    "tools-op": {"op": "tools"},
}
REQUEST_RAW = {
    "not-json": b"this is not json",
    "array": b"[1, 2, 3]",
    "duplicate-keys": b'{"op":"run","op":"run","calls":[]}',
    "big-int": b'{"op":"run","calls":[],"tool_timeout":9223372036854775807}',
}

# Request lines the daemon answers with exactly one request_error, one per
# line of corpus/request_errors.jsonl: a shape for each error of each op.
# tests/integration/request_leakcheck.py feeds them (and the fuzz_request
# seeds) to a daemon built with LeakSanitizer (issue 20: one of them leaked).
GOOD = {"id": "c0", "name": "echo"}
REQUEST_ERRORS = [
    b"this is not json", b'{"op": "tools"', b"\xff\xfe", b'{"op":"tools"} trailing', b"{]",
    b"\x00\x01\x02", b'{"op":"run","op":"run","calls":[]}', b'{"op":"x","pad":"\ud800"',
    b"[1, 2]", b'"run"', b"42", b"null", b"true",
    {"op": "dance"}, {}, {"op": 5}, {"op": None}, {"calls": []}, {"op": "RUN", "calls": []},
    {"op": ["run"]}, b'{"op":5e1021}',
    {"op": "run"}, {"op": "run", "calls": "c0"}, {"op": "run", "calls": None},
    {"op": "run", "calls": ["c0"]}, {"op": "run", "calls": [{"name": "echo"}]},
    {"op": "run", "calls": [{"id": 5, "name": "echo"}]}, {"op": "run", "calls": [{"id": "a"}]},
    {"op": "run", "calls": [{"id": "a", "name": "echo", "arguments": [1]}]},
    {"op": "run", "calls": [GOOD, {"id": "c1", "name": "echo"}, GOOD]},
    {"op": "run", "calls": [GOOD], "on_tool_error": "explode"},
    {"op": "run", "calls": [GOOD], "on_tool_error": {"echo": "nope"}},
    {"op": "run", "calls": [GOOD], "max_concurrency": 0},
    {"op": "run", "calls": [GOOD], "max_concurrency": 1.5},
    {"op": "run", "calls": [GOOD], "tool_timeout": "fast"},
    {"op": "run", "calls": [GOOD], "tool_timeout": -5},
    {"op": "run", "calls": [GOOD], "bogus_key": {"deep": [1, {"x": "y"}]}},
    {"op": "run", "batch": 5, "calls": [GOOD]}, {"op": "run", "batch": "", "calls": []},
    b'{"op":"run","batch":5e1021,"calls":[{"id":"c0","name":"echo"}]}',
    b'{"op":"run","calls":[{"id":6e1021,"name":"echo"}]}',
    {"op": "cancel"}, {"op": "cancel", "batch": 5}, {"op": "cancel", "batch": "no-such"},
    b'{"op":"cancel","batch":5e1021}',
    {"op": "decide"}, {"op": "decide", "batch": "x", "id": "y"},
    {"op": "decide", "batch": "no-such", "id": "a", "decision": "continue"},
    {"op": "tools", "watch": 1}, {"op": "tools", "watch": "yes"}, {"op": "tools", "watch": None},
    {"op": "tools", "watch": [True]}, {"op": "tools", "watch": {"a": 1}},
    {"op": "tools", "format": "nope"}, {"op": "tools", "format": 5},
    {"op": "tools", "format": {"a": [1]}}, b'{"op":"tools","format":1e999}',
    {"op": "tools", "watch": 0, "format": "nope"},
    {"op": "tail", "tools": "x"}, {"op": "tail", "tools": [1]}, {"op": "tail", "batches": 5},
    b'{"op":"tail","tools":[1e999]}',
]

RESPONSE = {
    "ok-string": b'{"ok":"hello"}',
    "ok-value": b'{"ok":[1,null,true,{"a":1.5}]}',
    "ok-null": b'{"ok":null}',
    "error-string": b'{"error":"boom"}',
    "error-object": b'{"error":{"code":42,"why":"no"}}',
    "ask-user": b'{"ask_user":"which city?"}',
    "ask-user-opts": b'{"ask_user":"where?","opts":{"choices":["Paris","Oslo"]}}',
    "halt": b'{"halt":"plan_submitted","result":{"plan":"p"}}',
    "halt-string-result": b'{"halt":"done","result":"text"}',
    "halt-reserved": b'{"halt":"completed","result":null}',
    "raised": b'{"raised":{"type":"ValueError","message":"bad value","stacktrace":"line 1"}}',
    "raised-empty": b'{"raised":{}}',
    "unicode": '{"ok":"\u00e9t\u00e9 \u65e5\u672c \U0001f600"}'.encode(),
    "bad-unknown-key": b'{"result":1}',
    "bad-extra-key": b'{"ok":1,"x":2}',
    "bad-empty-object": b"{}",
    "bad-not-object": b"[1]",
    "bad-scalar": b"42",
    "bad-json": b'{"ok":',
    "bad-duplicate": b'{"ok":1,"ok":2}',
    "bad-halt-no-result": b'{"halt":"x"}',
    "bad-halt-reason": b'{"halt":1,"result":2}',
    "bad-ask-opts": b'{"ask_user":"q","opts":[]}',
    "bad-raised": b'{"raised":"boom"}',
    "bad-tool-error": b'{"tool_error":{"reason":"timeout","message":"m"}}',
    "bad-tool-error-nonstring": b'{"tool_error":{"message":{"m":1}}}',
    "bad-tool-error-scalar": b'{"tool_error":7}',
    "halt-reason-name": b'{"halt":"timeout","result":[1,2]}',
    "bad-utf8": b'{"ok":"\xff\xfe"}',
    "bad-nul": b'{"ok":"a\\u0000b"}',
}


def lines_seed(sel=5, cap=0, splits=(), ask=False, drop_some=False, keep0=False, stream=b""):
    """fuzz_lines input: [sel][cap hi][cap lo][flags][splits...][stream].
    sel 0-6: caps 0 1 4 16 255 4096 65536; 7: cap given. flags: split count,
    16 ask mode (growth on request), 32 drop every other growth, 64 keep 0."""
    assert len(splits) < 16
    flags = len(splits) | (16 if ask else 0) | (32 if drop_some else 0) | (64 if keep0 else 0)
    return bytes([sel, cap >> 8 & 255, cap & 255, flags]) + bytes(splits) + stream


LINES = {
    "two-requests": lines_seed(stream=b'{"op":"run","calls":[]}\n{"op":"stats"}\n'),
    "byte-at-a-time": lines_seed(splits=(1,), stream=b'{"op":"tools"}\n\n{"a":1}\n'),
    "blank-lines": lines_seed(sel=2, stream=b"\n\n \t\r\n\n"),
    "last-without-newline": lines_seed(splits=(3, 5), stream=b'{"op":"run"}\n{"op":"cancel"}'),
    "at-cap": lines_seed(sel=7, cap=8, stream=b"12345678\nok\n"),
    "over-cap-then-ok": lines_seed(sel=7, cap=8, splits=(4, 1, 9), stream=b"123456789abcdef\nok\n"),
    "over-cap-last": lines_seed(sel=3, stream=b"x" * 40),
    "cap0": lines_seed(sel=0, stream=b"\n\nx\n\n"),
    "ask-grow": lines_seed(sel=6, ask=True, splits=(200, 0, 255), stream=(b"y" * 9000) + b"\nz\n"),
    "ask-drop": lines_seed(sel=6, ask=True, drop_some=True, splits=(100,),
                           stream=(b"a" * 5000) + b"\n" + (b"b" * 10000) + b"\nc\n"),
    "keep0": lines_seed(sel=5, keep0=True, ask=True, stream=b"first\nsecond\n" + b"t" * 300),
    "crlf-utf8": lines_seed(sel=4, splits=(2,), stream='{"k":"\u00e9\u4e2d"}\r\n'.encode()),
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in seeds.items():
        if not isinstance(data, bytes):
            data = json_line(data)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def json_line(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def write_lines(name, lines):
    with open(os.path.join(HERE, "corpus", name), "wb") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else json_line(line)) + b"\n")


MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
          "io.modelcontextprotocol/logLevel": "debug", "progressToken": "p"}


def mcp_seed(*cmds):
    """fuzz_mcp input: one command a line, C<stream><json> a client message,
    D<json> a daemon event ("batch": "@" the latest run), G<stream>, E, H, L."""
    out = []
    for c in cmds:
        if isinstance(c, tuple):
            kind, obj = c
            out.append(kind.encode() + json_line(obj))
        else:
            out.append(c.encode())
    return b"\n".join(out) + b"\n"


def rpc(rid, method, params=None):
    m = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        m["params"] = params
    return m


CALL_EVENTS = [
    ("D", {"event": "tool_execution_started", "batch": "@", "id": "c0", "name": "echo"}),
    ("D", {"event": "tool_execution_progress", "batch": "@", "id": "c0",
           "progress": {"progress": 1, "total": 2, "message": "half"}}),
    ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0",
           "result": {"ok": {"n": 1}}}),
    ("D", {"event": "batch_completed", "batch": "@",
           "messages": [{"role": "tool", "content": "{\"n\":1}"}]}),
]
ASK_EVENTS = [
    ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0",
           "result": {"ask_user": "which city?"}}),
    ("D", {"event": "batch_completed", "batch": "@", "messages": []}),
]
MCP = {
    "legacy-call": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25",
                                     "capabilities": {"elicitation": {}}})),
        ("C0", rpc(1, "tools/call", {"name": "echo", "arguments": {},
                                     "_meta": {"progressToken": 1}})),
        *CALL_EVENTS, "H", "E"),
    "legacy-elicit": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25",
                                     "capabilities": {"elicitation": {}}})),
        ("C0", rpc(1, "tools/call", {"name": "ask", "arguments": {"question": "q"}})),
        *ASK_EVENTS,
        ("C0", {"jsonrpc": "2.0", "id": "toolexec-elicit-1",
                "result": {"action": "accept", "content": {"answer": "Paris"}}})),
    "batch-2025-03-26": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-03-26"})),
        ("C0", [rpc(1, "ping"), rpc(2, "tools/list"), {"jsonrpc": "2.0", "method": "x"}, 5]),
        ("D", {"event": "tools", "tools": [{"name": "echo"}]})),
    "modern-call": mcp_seed(
        ("C1", rpc("d", "server/discover")),
        ("C1", rpc(1, "tools/call", {"name": "echo", "arguments": {"a": 1}, "_meta": MODERN})),
        *CALL_EVENTS,
        ("C2", rpc(2, "tools/list", {"_meta": MODERN})),
        ("D", {"event": "tools", "tools": []}), "G1"),
    "modern-ask": mcp_seed(
        ("C1", rpc(1, "tools/call", {"name": "ask", "arguments": {"question": "q"},
                                     "_meta": MODERN})),
        *ASK_EVENTS,
        ("C1", rpc(2, "tools/call", {"name": "ask", "arguments": {"question": "q"},
                                     "_meta": MODERN, "requestState": "e30.AAAA",
                                     "inputResponses": {"ask_user": {"action": "accept"}}}))),
    "modern-listen": mcp_seed(
        ("C3", rpc("L", "subscriptions/listen",
                   {"_meta": MODERN, "notifications": {"toolsListChanged": True}})),
        ("D", {"event": "tools", "tools": []}),
        ("D", {"event": "tools_changed", "count": 2}),
        ("C3", {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "L"}}),
        ("C3", rpc("M", "subscriptions/listen",
                   {"_meta": MODERN, "notifications": {"toolsListChanged": True}})),
        "L"),
    "modern-errors": mcp_seed(
        ("C0", rpc(1, "tools/call", {"name": "e", "_meta": dict(
            MODERN, **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})})),
        ("C0", rpc(2, "tools/list", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}})),
        ("C0", rpc(3, "ping", {"_meta": MODERN})),
        ("C0", rpc(4, "tools/call", {"name": "echo", "_meta": MODERN})),
        ("D", {"event": "error", "batch": "@", "type": "request_error",
               "reason": "unknown_tool", "metadata": {"tool_name": "echo"}})),
}


if __name__ == "__main__":
    write("fuzz_frame", FRAME)
    write("fuzz_lines", LINES)
    write("fuzz_request", {**REQUEST, **REQUEST_RAW})
    write("fuzz_response", RESPONSE)
    write("fuzz_mcp", MCP)
    write_lines("request_errors.jsonl", REQUEST_ERRORS)
