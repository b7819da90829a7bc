"""Minimal toolexecd worker helper for Python tools (standard library only).

The framed worker protocol: toolexecd writes one request frame to the
worker's stdin and closes it; the worker writes exactly one response frame to
its stdout. A frame is a 4-byte big-endian length N followed by N bytes of
UTF-8 JSON.

    request:  {"tool": NAME, "arguments": {...}}          (+ "opts" for
              tools defined with "context": true)
    response: {"ok": v} | {"error": r} | {"ask_user": q[, "opts": {...}]}
              | {"halt": reason, "result": v}
              | {"raised": {"type", "message", "stacktrace"}}

Usage:

    from toolexec_worker import ok, error, run

    def handler(arguments):           # or handler(arguments, opts) for
        return ok(arguments)          # tools with "context": true

    if __name__ == "__main__":
        run(handler)

An exception escaping the handler is reported as {"raised": ...}, which the
daemon turns into a handler_raised tool error. Return error(...) instead for
failures the model should see as the tool's own answer (bad arguments, say).
"""

import json
import os
import struct
import sys
import traceback

__all__ = ["ok", "error", "ask_user", "halt", "run", "read_request", "write_response",
           "encode_frame"]

# The daemon's default frame cap; a request can never be larger than this.
MAX_FRAME = 16 * 1024 * 1024


def ok(value):
    return {"ok": value}


def error(reason):
    return {"error": reason}


def ask_user(question, opts=None):
    if opts is None:
        return {"ask_user": question}
    return {"ask_user": question, "opts": opts}


def halt(reason, result=None):
    return {"halt": reason, "result": result}


def _read_exactly(fd, n):
    chunks = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("request frame truncated")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_request(fd=0):
    """Read and decode the request frame from fd (stdin by default)."""
    (length,) = struct.unpack(">I", _read_exactly(fd, 4))
    if length > MAX_FRAME:
        raise ValueError("request frame of %d bytes is over the limit" % length)
    request = json.loads(_read_exactly(fd, length).decode("utf-8"))
    if not isinstance(request, dict):
        raise ValueError("request frame is not a JSON object")
    return request


def encode_frame(response):
    """Encode a JSON value as one frame (header + body)."""
    # allow_nan=False: NaN and Infinity are not JSON; better to fail here
    # (and report it as raised) than to send a frame the daemon rejects.
    body = json.dumps(response, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")
    return struct.pack(">I", len(body)) + body


def write_response(response, fd=1):
    """Encode response as one frame and write it to fd (stdout by default)."""
    _write_all(fd, encode_frame(response))


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _raised(exc):
    return {"raised": {
        "type": type(exc).__name__,
        "message": str(exc),
        "stacktrace": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }}


def run(handler):
    """Run one call: read the request, call handler, write the response.

    handler(arguments) is called for ordinary tools and
    handler(arguments, opts) for tools defined with "context": true (the
    request then carries "opts"). Never returns.
    """
    # Keep the response channel to ourselves: move the real stdout to a
    # private descriptor (not inherited by subprocesses) and point fd 1 at
    # stderr, so a stray print() or a child process writing to stdout ends up
    # in the daemon's log instead of corrupting the response frame.
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    try:
        request = read_request(0)
    except (OSError, EOFError, ValueError) as exc:
        # Like the C SDK: an unreadable request is reported as raised.
        _write_all(out, encode_frame({"raised": {
            "type": "BadRequest", "message": str(exc), "stacktrace": ""}}))
        sys.exit(0)

    arguments = request.get("arguments")
    if not isinstance(arguments, dict):
        arguments = {}
    try:
        if "opts" in request:
            response = handler(arguments, request["opts"])
        else:
            response = handler(arguments)
        # Encode inside the try: an unserialisable result is the handler's
        # fault and is reported as raised, like any other exception.
        frame = encode_frame(response)
    except Exception as exc:  # report anything the handler raised
        frame = encode_frame(_raised(exc))
    _write_all(out, frame)
    sys.exit(0)
