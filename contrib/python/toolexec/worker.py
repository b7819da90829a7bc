"""toolexec.worker - write a toolexecd tool in Python (standard library only).

A tool is a handler; the daemon runs it in a fresh worker process per call
and talks to it with the framed protocol (proto/PROTOCOL.md, 2.2): one
request frame on stdin, exactly one response frame on stdout, a frame being
a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.

    #!/usr/bin/env python3
    from toolexec.worker import tool, serve, error

    @tool
    def wordcount(arguments):
        text = arguments.get("text")
        if not isinstance(text, str):
            return error("argument 'text' must be a string")
        return {"words": len(text.split())}     # a plain value means ok

    if __name__ == "__main__":
        serve()

What a handler returns:

  a plain value v (anything JSON can encode)   -> {"ok": v}
  ok(v)                                        -> {"ok": v}
  error(reason)                                -> {"error": reason}
  ask_user(question, opts=None)                -> {"ask_user": question[, "opts": {...}]}
  halt(reason, result=None)                    -> {"halt": reason, "result": result}
  raised(type, message, stacktrace="")         -> {"raised": {...}}

A plain dict is a plain value: `return {"error": "x"}` is {"ok": {"error":
"x"}}; use error("x") for a handler error. Raising ToolError(reason) is the
same as returning error(reason). Any other exception escaping the handler is
reported as {"raised": {"type", "message", "stacktrace"}}, which the daemon
turns into a handler_raised tool error; so is a result that cannot be
encoded (NaN, a set, a lone surrogate) or whose frame would exceed the frame
limit (16 MiB by default).

Context: a tool defined with "context": true gets "opts" in its request
(the batch's context, session_id, request_id and engine, and the call's
tool_call). The handler receives it as a second argument, a Context (a dict
with attribute access), when it accepts one: handler(arguments) is called
with the arguments only, handler(arguments, context) with both. Without
"opts" in the request a handler that requires two arguments gets None as the
context, and handler(arguments, context=None) gets its default.
@tool(context=True / False) forces either way.

While the handler runs, sys.stdout and file descriptor 1 point at stderr:
print() output and the output of child processes go to the daemon's log,
never into the response frame. They stay that way after serve() returns.
"""

import json
import os
import struct
import sys
from collections.abc import Mapping

__all__ = [
    "serve", "tool", "handle", "Tool", "progress",
    "ok", "error", "ask_user", "halt", "raised", "Result",
    "ToolError", "Context", "FrameTooLarge",
    "encode_frame", "decode_frame", "read_frame", "read_request", "write_frame",
    "MAX_FRAME_BYTES",
]

# The daemon's default limit on a worker's response frame (--max-frame-bytes).
MAX_FRAME_BYTES = 16 * 1024 * 1024
# The largest request frame read: a request line is at most 16 MiB by
# default, and a context tool's request carries the arguments twice.
MAX_REQUEST_BYTES = 64 * 1024 * 1024

# Bounds on the text of a raised report, so that it always fits a frame.
_MAX_RAISED_MESSAGE = 64 * 1024
_MAX_RAISED_STACKTRACE = 256 * 1024

_HEADER = struct.Struct(">I")


# ---------------------------------------------------------------------------
# Results

class Result(dict):
    """A handler result, as built by ok(), error(), ask_user(), halt() and
    raised(). It is the response object itself (a dict), marked so that
    serve() sends it as it is instead of wrapping it in {"ok": ...}."""

    __slots__ = ()

    def __repr__(self):
        return "Result(%s)" % dict.__repr__(self)


def ok(value=None):
    """The call succeeded with value: {"ok": value}."""
    return Result(ok=value)


def error(reason):
    """The tool reports a failure the model should see: {"error": reason}.
    reason is any JSON value, passed to the client unchanged."""
    return Result(error=reason)


def ask_user(question, opts=None):
    """Ask the user: {"ask_user": question[, "opts": opts]}. The batch halts
    with the question pending."""
    if not isinstance(question, str):
        raise TypeError("ask_user(): the question must be a string, not %s"
                        % type(question).__name__)
    if opts is None:
        return Result(ask_user=question)
    if not isinstance(opts, Mapping):
        raise TypeError("ask_user(): opts must be a mapping, not %s" % type(opts).__name__)
    return Result(ask_user=question, opts=dict(opts))


def halt(reason, result=None):
    """Halt the agent loop: {"halt": reason, "result": result}. The reasons
    ask_user, max_turns, halt_when, tool_error, cancelled and completed are
    reserved; the daemon answers them with an invalid_return tool error."""
    if not isinstance(reason, str):
        raise TypeError("halt(): the reason must be a string, not %s" % type(reason).__name__)
    return Result(halt=reason, result=result)


def raised(type, message, stacktrace=""):  # noqa: A002 - the protocol's name
    """Report a failure of the handler itself, as an escaping exception
    would: {"raised": {"type", "message", "stacktrace"}}."""
    return Result(raised={"type": str(type), "message": str(message),
                          "stacktrace": str(stacktrace)})


class ToolError(Exception):
    """Raise ToolError(reason) anywhere in a handler to answer
    {"error": reason}, as returning error(reason) would."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason

    def __str__(self):
        if isinstance(self.reason, str):
            return self.reason
        return json.dumps(self.reason)


class FrameTooLarge(ValueError):
    """A response frame over the frame limit; it is never sent."""

    def __init__(self, size, limit):
        super().__init__("response frame of %d bytes is over the limit of %d bytes"
                         % (size, limit))
        self.size = size
        self.limit = limit


class Context(dict):
    """The call context of a "context": true tool: the request's "opts",
    a dict with the keys below, also readable as attributes (None when
    absent)."""

    __slots__ = ()

    @property
    def context(self):
        """The batch's "context" (any JSON)."""
        return self.get("context")

    @property
    def session_id(self):
        return self.get("session_id")

    @property
    def request_id(self):
        return self.get("request_id")

    @property
    def engine(self):
        return self.get("engine")

    @property
    def tool_call(self):
        """{"id", "name", "arguments"} of this call."""
        return self.get("tool_call")

    @property
    def call_id(self):
        tc = self.get("tool_call")
        return tc.get("id") if isinstance(tc, dict) else None

    @property
    def tool_name(self):
        tc = self.get("tool_call")
        return tc.get("name") if isinstance(tc, dict) else None

    def __repr__(self):
        return "Context(%s)" % dict.__repr__(self)


# ---------------------------------------------------------------------------
# Frames

def encode_frame(value, max_frame_bytes=MAX_FRAME_BYTES):
    """One frame (header and body) holding value as compact UTF-8 JSON.
    Raises TypeError or ValueError for a value JSON cannot encode (NaN and
    infinities included) and FrameTooLarge for a body over max_frame_bytes."""
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")
    if max_frame_bytes is not None and len(body) > max_frame_bytes:
        raise FrameTooLarge(len(body), max_frame_bytes)
    return _HEADER.pack(len(body)) + body


def decode_frame(data):
    """The JSON value of data, which must hold exactly one whole frame."""
    if len(data) < 4:
        raise ValueError("frame truncated: %d of 4 header bytes" % len(data))
    (length,) = _HEADER.unpack_from(data)
    if len(data) != 4 + length:
        raise ValueError("frame of %d bytes announced, %d bytes present"
                         % (length, len(data) - 4))
    return json.loads(data[4:].decode("utf-8"))


def _read_exactly(fd, n, what):
    chunks = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("%s truncated: %d of %d bytes" % (what, got, n))
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd=0, max_bytes=MAX_REQUEST_BYTES):
    """Read one frame from descriptor fd; its body as bytes."""
    (length,) = _HEADER.unpack(_read_exactly(fd, 4, "frame header"))
    if max_bytes is not None and length > max_bytes:
        raise ValueError("frame of %d bytes is over the limit of %d bytes" % (length, max_bytes))
    return _read_exactly(fd, length, "frame body")


def read_request(fd=0):
    """Read and decode the request frame (a JSON object) from fd."""
    body = read_frame(fd)
    request = json.loads(body.decode("utf-8"))
    if not isinstance(request, dict):
        raise ValueError("request frame is not a JSON object")
    return request


def write_frame(fd, value, max_frame_bytes=MAX_FRAME_BYTES):
    """Encode value as one frame and write all of it to descriptor fd."""
    _write_all(fd, encode_frame(value, max_frame_bytes))


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------
# Calling the handler

class Tool:
    """A handler marked with @tool. Calling it calls the function; .serve()
    runs it as a worker; .handle(request) computes a response without any
    frames (for tests)."""

    def __init__(self, func, name=None, context=None):
        if not callable(func):
            raise TypeError("@tool needs a callable, not %s" % type(func).__name__)
        self.func = func
        self.name = name or getattr(func, "__name__", None)
        self.context = context
        self.__doc__ = getattr(func, "__doc__", None)
        self.__name__ = getattr(func, "__name__", self.name)
        self.__wrapped__ = func

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def handle(self, request):
        return handle(self, request)

    def serve(self, **kwargs):
        return serve(self, **kwargs)

    def __repr__(self):
        return "<toolexec tool %r>" % (self.name,)


_registered = []


def tool(func=None, *, name=None, context=None):
    """Mark a handler as a tool: @tool, or @tool(name=..., context=...).

    name: the tool name the handler answers to when one script defines
    several tools (default: the function's name); serve() picks the handler
    by the request's "tool". context: True to always pass the context
    (None when the request has none), False never, None (default) to decide
    by the handler's signature (see the module documentation)."""
    def wrap(f):
        t = Tool(f, name=name, context=context)
        _registered.append(t)
        return t
    if func is not None:
        return wrap(func)
    return wrap


def _positional_range(func):
    """(fewest, most) positional arguments func accepts, or None."""
    f = func
    drop = 0
    if getattr(f, "__self__", None) is not None and hasattr(f, "__func__"):
        f, drop = f.__func__, 1  # a bound method
    code = getattr(f, "__code__", None)
    if code is not None and hasattr(f, "__defaults__"):
        n = code.co_argcount
        most = float("inf") if code.co_flags & 0x04 else n  # CO_VARARGS
        return max(0, n - len(f.__defaults__ or ()) - drop), most - drop
    import inspect  # rare: a partial, a class, a callable object
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    fewest, most = 0, 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            most = float("inf")
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            most += 1
            if p.default is p.empty:
                fewest += 1
    return fewest, most


def _invoke(handler, arguments, context, has_opts):
    want = None
    if isinstance(handler, Tool):
        want = handler.context
        handler = handler.func
    if want is None:
        span = _positional_range(handler)
        if span is None:
            want = has_opts
        else:
            fewest, most = span
            want = most >= 2 and (has_opts or fewest >= 2)
    if want:
        return handler(arguments, context)
    return handler(arguments)


def _text(s, limit, keep_tail=False):
    s = s.encode("utf-8", "replace").decode("utf-8")  # no lone surrogates
    if len(s) > limit:
        cut = len(s) - limit
        if keep_tail:
            s = "[%d characters left out]\n" % cut + s[cut:]
        else:
            s = s[:limit] + "\n[%d characters left out]" % cut
    return s


def _raised_report(exc):
    """{"raised": ...} for an exception, without the SDK's own frames at the
    top of its traceback."""
    import traceback
    t = type(exc)
    if t.__module__ in ("builtins", "__main__"):
        type_name = t.__qualname__
    else:
        type_name = "%s.%s" % (t.__module__, t.__qualname__)
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not lose the report
        message = "<unprintable %s>" % t.__name__
    tb = exc.__traceback__
    here = _invoke.__code__.co_filename
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == here:
        tb = tb.tb_next
    try:
        stacktrace = "".join(traceback.format_exception(t, exc, tb))
    except Exception:
        stacktrace = ""
    return {"raised": {
        "type": _text(type_name, 1024),
        "message": _text(message, _MAX_RAISED_MESSAGE),
        "stacktrace": _text(stacktrace, _MAX_RAISED_STACKTRACE, keep_tail=True),
    }}


def _pick(handler, request):
    """The handler for this request: handler itself, or from a mapping or the
    @tool registry by the request's tool name."""
    if handler is not None and not isinstance(handler, Mapping):
        return handler
    table = handler
    if table is None:
        if not _registered:
            raise LookupError("serve(): no handler given and no @tool defined")
        if len(_registered) == 1:
            return _registered[0]
        table = {t.name: t for t in _registered}
    name = request.get("tool")
    if not isinstance(name, str):
        name = os.environ.get("TOOLEXEC_TOOL")
    if name in table:
        return table[name]
    raise LookupError("no handler for tool %r in this worker (it has %s)"
                      % (name, ", ".join(sorted(str(k) for k in table))))


def handle(handler, request):
    """The response (a plain dict) of handler for one decoded request,
    without any I/O: the result it returned or the report of what it raised.
    handler may also be a mapping from tool names to handlers, or None for
    the @tool-decorated ones."""
    try:
        if not isinstance(request, Mapping):
            raise ValueError("request is not a JSON object")
        target = _pick(handler, request)
        arguments = request.get("arguments")
        if not isinstance(arguments, dict):
            arguments = {}
        has_opts = "opts" in request
        context = None
        if has_opts:
            opts = request.get("opts")
            context = Context(opts if isinstance(opts, dict) else {})
        value = _invoke(target, arguments, context, has_opts)
    except ToolError as exc:
        return {"error": exc.reason}
    except Exception as exc:
        return _raised_report(exc)
    if isinstance(value, Result):
        return dict(value)
    return {"ok": value}


def _redirect_stdout(fd):
    """Keep the response channel to ourselves: the real stdout moves to a
    private descriptor (not inherited by child processes) and fd, sys.stdout
    included, is pointed at stderr. Returns the private descriptor."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    out = os.dup(fd)
    try:
        os.dup2(2, fd)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    if sys.stderr is not None:
        sys.stdout = sys.stderr
    return out


def serve(handler=None, *, max_frame_bytes=MAX_FRAME_BYTES, stdin=0, stdout=1):
    """Run one call: read the request frame from stdin, call the handler,
    write exactly one response frame to stdout, and return the response.

    handler: a function (or @tool); a mapping from tool names to handlers;
    or None for the @tool-decorated functions of the program (picked by the
    request's "tool" when there are several). Whatever goes wrong (an
    unreadable request, an exception in the handler, a result that does not
    encode or is over max_frame_bytes) is reported as {"raised": ...}."""
    global _progress_fd
    out = _redirect_stdout(stdout)
    _progress_fd = out
    warm = False
    try:
        try:
            request = read_request(stdin)
            if (isinstance(request, dict) and isinstance(request.get("template"), dict)
                    and stdin == 0 and stdout == 1):
                # warm start: returns in each call's process, set up
                os.close(out)
                out = None
                _warm_template(request["template"])
                warm = True
                out = _redirect_stdout(stdout)
                _progress_fd = out
                request = read_request(stdin)
        except Exception as exc:
            response = {"raised": {"type": "BadRequest",
                                   "message": "cannot read the request frame: %s" % exc,
                                   "stacktrace": ""}}
        else:
            response = handle(handler, request)
        try:
            frame = encode_frame(response, max_frame_bytes)
        except Exception as exc:
            response = _raised_report(exc)
            frame = encode_frame(response, None)
        try:
            _write_all(out, frame)
        except BrokenPipeError:
            sys.stderr.write("toolexec.worker: the daemon closed the response pipe\n")
    finally:
        _progress_fd = None
        if out is not None:
            os.close(out)
    if warm:
        # A warm call's process: the daemon ends the call at its response
        # (as it kills a cold worker then); leaving now spares the
        # interpreter's finalisation, which would only copy the template's
        # pages.
        try:
            sys.stderr.flush()
        finally:
            os._exit(0)
    return response


_progress_fd = None  # the response channel while serve() runs a handler


def progress(progress, total=None, message=None):
    """Report progress from inside a handler run by serve(): a frame
    {"progress": {"progress": n, "total": m, "message": "..."}} before the
    response. The daemon forwards it as a tool_execution_progress event (and
    `toolexec mcp` as notifications/progress). Outside serve() it does
    nothing and returns False."""
    if isinstance(progress, bool) or not isinstance(progress, (int, float)):
        raise TypeError("progress must be a number")
    p = {"progress": progress}
    if total is not None:
        if isinstance(total, bool) or not isinstance(total, (int, float)):
            raise TypeError("total must be a number")
        p["total"] = total
    if message is not None:
        p["message"] = str(message)
    if _progress_fd is None:
        return False
    _write_all(_progress_fd, encode_frame({"progress": p}))
    return True


# ---------------------------------------------------------------------------
# Warm start (proto/PROTOCOL.md, "Warm start")

def _warm_lib(first):
    """libtoolexec, whose warm.c does the template's loop and each call's
    set-up (the same code as the C SDK's): the path the daemon names, else
    the installed library. A PyDLL: its calls keep the GIL, as os.fork()
    does around fork()."""
    import ctypes
    for name in (first.get("lib"), os.environ.get("TOOLEXEC_LIB"), "libtoolexec.so.0"):
        if not name:
            continue
        try:
            return ctypes.PyDLL(name)
        except OSError:
            continue
    return None


def _warm_template(first):
    """The template: loads nothing more, forks on the daemon's request.
    Returns only in a call's process, which the C side has set up like a
    cold worker (own PID, user and mount namespace, its fds, its directory,
    the stacked filter); the template itself ends with SystemExit."""
    import ctypes
    import gc

    class ForkRequest(ctypes.Structure):
        _fields_ = [("id", ctypes.c_uint), ("fd_in", ctypes.c_int), ("fd_out", ctypes.c_int),
                    ("fd_err", ctypes.c_int), ("fd_report", ctypes.c_int),
                    ("newnet", ctypes.c_int), ("dir", ctypes.c_char * 256),
                    ("call_id", ctypes.c_char * 128), ("batch", ctypes.c_char * 128),
                    ("proxy_port", ctypes.c_int)]

    lib = _warm_lib(first)
    if lib is None:
        # not a control message: the daemon restarts us later and runs the
        # calls cold meanwhile; the reason goes to its log
        sys.stderr.write("toolexec.worker: warm start needs libtoolexec (not found)\n")
        raise SystemExit(1)
    lib.te_template_next.argtypes = [ctypes.POINTER(ForkRequest)]
    lib.te_template_fork.argtypes = [ctypes.POINTER(ForkRequest)]
    api = ctypes.pythonapi
    req = ForkRequest()
    gc.collect()
    while True:
        rc = lib.te_template_next(ctypes.byref(req))
        if rc <= 0:
            raise SystemExit(0 if rc == 0 else 1)
        # what the template has allocated stays shared with its children:
        # their collector never touches (and so copies) those pages
        gc.freeze()
        api.PyOS_BeforeFork()
        pid = lib.te_template_fork(ctypes.byref(req))
        if pid == 0:
            # at-fork hooks run here: random reseeds itself
            api.PyOS_AfterFork_Child()
            os.environ["TOOLEXEC_CALL_ID"] = req.call_id.decode("utf-8", "replace")
            os.environ["TOOLEXEC_BATCH"] = req.batch.decode("utf-8", "replace")
            numpy_random = sys.modules.get("numpy.random")
            if numpy_random is not None:
                numpy_random.seed()
            return
        api.PyOS_AfterFork_Parent()
