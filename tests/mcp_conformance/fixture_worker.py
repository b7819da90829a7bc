#!/usr/bin/env python3
"""The conformance suite's fixture tools as one toolexecd framed worker
(proto/PROTOCOL.md 2.2): the request frame names the tool, the answer is
what the suite's scenario asks of a server's tool, in the shape a toolexecd
tool can give it (a value, an error, progress frames, a question).

Standard library only: it runs inside the call's sandbox with the host's
python3 and nothing else."""

import json
import struct
import sys
import time

SIMPLE = "This is a simple text response for testing."
ERROR = "This tool intentionally returns an error for testing"
# 1x1 red pixel PNG, the suite's own example of a minimal image
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
# 1 sample of 8-bit mono silence, a minimal WAV
WAV = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA"
RESOURCE = {"type": "resource", "resource": {
    "uri": "test://embedded-resource", "mimeType": "text/plain",
    "text": "This is an embedded resource content."}}


def frame(obj):
    body = json.dumps(obj).encode()
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()


def read_frame():
    head = sys.stdin.buffer.read(4)
    (n,) = struct.unpack(">I", head)
    return json.loads(sys.stdin.buffer.read(n))


def progress():
    # the scenario's own pacing (~50 ms apart): three increasing values
    for i, p in enumerate((0, 50, 100)):
        if i:
            time.sleep(0.05)
        frame({"progress": {"progress": p, "total": 100}})
    return {"ok": "progress reported: 0, 50, 100 of 100"}


def logging():
    # what a tool can say as it runs: a progress frame's message, which the
    # front sends a client that asked for logs as notifications/message
    for i, said in enumerate(("Tool execution started", "Tool processing data",
                              "Tool execution completed")):
        if i:
            time.sleep(0.05)
        frame({"progress": {"progress": i, "message": said}})
    return {"ok": "logged three messages"}


def slow_compute(args):
    # what the tasks scenarios ask for: a call that takes `seconds`
    time.sleep(max(0, min(float(args.get("seconds", 0)), 120)))
    return {"ok": "computed %s" % args.get("label", "")}


def answer(tool, args):
    # The content-block tools return the blocks the scenario expects as
    # the tool's value; their definitions say "mcp": {"content": "blocks"},
    # so the front sends the blocks as the result's content.
    table = {
        "test_simple_text": lambda: {"ok": SIMPLE},
        "test_error_handling": lambda: {"error": ERROR},
        "test_tool_with_progress": progress,
        "test_tool_with_logging": logging,
        "test_image_content": lambda: {"ok": {"content": [
            {"type": "image", "data": PNG, "mimeType": "image/png"}]}},
        "test_audio_content": lambda: {"ok": {"content": [
            {"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}},
        "test_embedded_resource": lambda: {"ok": {"content": [RESOURCE]}},
        "test_multiple_content_types": lambda: {"ok": {"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                                              "mimeType": "application/json",
                                              "text": "{\"test\":\"data\",\"value\":123}"}}]}},
        "json_schema_2020_12_tool": lambda: {"ok": args},
        "test_elicitation": lambda: {"ask_user": args.get("message", "Please provide input")},
        "test_elicitation_sep1034_defaults": lambda: {"ask_user": "Please review the defaults"},
        "test_elicitation_sep1330_enums": lambda: {"ask_user": "Please pick options"},
        "test_sampling": lambda: {"ok": "sampling: a toolexecd worker cannot ask the client's model"},
        # 2026-07-28's diagnostic tools (server-stateless, input-required-*)
        "test_logging_tool": logging,
        "test_missing_capability": lambda: {"ask_user": "This needs elicitation"},
        "test_streaming_elicitation": lambda: {"ask_user": "Please confirm"},
        "test_input_required_result_elicitation": lambda: {"ask_user": "What is your name?"},
        "test_input_required_result_request_state": lambda: {"ask_user": "Please confirm"},
        "test_input_required_result_tampered_state": lambda: {"ask_user": "Please confirm"},
        "test_input_required_result_capabilities": lambda: {"ask_user": "Please confirm"},
        "test_input_required_result_multi_round": lambda: {"ask_user": "Round 1: please confirm"},
        # the tasks extension's tools
        "greet": lambda: {"ok": "Hello, %s!" % args.get("name", "World")},
        "slow_compute": lambda: slow_compute(args),
        "failing_job": lambda: {"error": "failing_job always fails"},
        "protocol_error_job": lambda: {"raised": {"type": "RuntimeError",
                                                  "message": "protocol_error_job always raises"}},
        "confirm_delete": lambda: {"ask_user": "Delete %s?" % args.get("filename", "the file")},
        "multi_input": lambda: {"ask_user": "Please confirm"},
        "test_tool_with_task": lambda: {"ask_user": "Please confirm"},
    }
    f = table.get(tool)
    return f() if f else {"error": "fixture_worker: no fixture named %r" % tool}


def main():
    req = read_frame()
    frame(answer(req.get("tool"), req.get("arguments") or {}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
