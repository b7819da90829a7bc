"""toolexec.client - talk to toolexecd over its Unix socket (standard library
only).

    from toolexec.client import Client

    with Client() as client:                      # the default socket
        for event in client.run([{"id": "c0", "name": "echo",
                                  "arguments": {"x": 1}}]):
            print(event["event"])                 # ... batch_completed
        done = client.run_batch(calls)            # just the batch_completed
        tools = client.tools()

The client protocol is JSON lines (proto/PROTOCOL.md, 1). One Client is one
connection. Batches on it run concurrently; the client gives each batch an
id and sorts the daemon's events into per-batch queues, so several batches
(and threads) can use one Client at once. tail() opens a connection of its
own.

Errors: ToolexecdConnectionError (a ConnectionError naming the socket path)
when the daemon cannot be reached or goes away; ToolexecdError for an
"error" event (request_error / engine_error, with type, reason, message);
ToolexecdTimeout (a TimeoutError) when no event arrives in time;
ProtocolError when the daemon sends something that is not an event.
"""

import collections
import json
import os
import select
import socket
import threading
import time

__all__ = [
    "Client", "Batch", "Tail", "default_socket_path",
    "ToolexecdError", "ToolexecdConnectionError", "ToolexecdTimeout", "ProtocolError",
    "TERMINAL_EVENTS",
]

TERMINAL_EVENTS = ("batch_completed", "error")

# The longest event line accepted: the daemon's content limit (16 MiB by
# default) appears in up to three places of one event, plus the JSON around.
MAX_LINE_BYTES = 64 * 1024 * 1024


def default_socket_path():
    """$TOOLEXECD_SOCKET; else, like the daemon, /run/toolexecd/toolexecd.sock
    for root and $XDG_RUNTIME_DIR/toolexecd.sock for anyone else (the system
    socket when XDG_RUNTIME_DIR is not set)."""
    path = os.environ.get("TOOLEXECD_SOCKET")
    if path:
        return path
    if os.geteuid() != 0:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        if runtime:
            return os.path.join(runtime, "toolexecd.sock")
    return "/run/toolexecd/toolexecd.sock"


# ---------------------------------------------------------------------------
# Exceptions

class ToolexecdError(Exception):
    """An "error" event from the daemon. Attributes: type ("request_error" or
    "engine_error"), reason (e.g. "unknown_tool"), message, metadata, batch
    (or None) and event (the whole event)."""

    def __init__(self, event):
        self.event = event
        self.type = event.get("type")
        self.reason = event.get("reason")
        self.message = event.get("message")
        self.metadata = event.get("metadata")
        self.batch = event.get("batch")
        text = "%s/%s: %s" % (self.type, self.reason, self.message)
        if self.batch is not None:
            text = "batch %s: %s" % (self.batch, text)
        super().__init__(text)


class ToolexecdConnectionError(ConnectionError):
    """The daemon's socket cannot be reached, or the connection was lost.
    path is the socket's path."""

    def __init__(self, path, message, errno=None):
        super().__init__("toolexecd at %s: %s" % (path, message))
        self.path = path
        self.errno = errno


class ToolexecdTimeout(TimeoutError):
    """No event within the time allowed. The connection stays usable."""


class ProtocolError(Exception):
    """The daemon sent a line that is not a JSON object with an "event"."""


# ---------------------------------------------------------------------------
# One connection: sending requests, reading event lines

def _encode(request):
    return json.dumps(request, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8") + b"\n"


def _deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout


class _Connection:
    """A socket with a line buffer. Reading is not thread-safe (Client
    serialises it); sending is, under its own lock."""

    def __init__(self, path, connect_timeout):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(connect_timeout)
            self.sock.connect(path)
            self.sock.settimeout(None)
        except socket.timeout:
            self.sock.close()
            raise ToolexecdConnectionError(path, "connect timed out after %s s" % connect_timeout)
        except OSError as exc:
            self.sock.close()
            raise ToolexecdConnectionError(
                path, "cannot connect: %s" % (exc.strerror or exc), exc.errno) from exc
        self.buf = bytearray()
        self.scanned = 0
        self.eof = False
        self.closed = False
        self.send_lock = threading.Lock()

    def send(self, request):
        self.send_bytes(_encode(request))

    def send_bytes(self, data):
        with self.send_lock:
            if self.closed:
                raise ToolexecdConnectionError(self.path, "the client is closed")
            try:
                self.sock.sendall(data)
            except OSError as exc:
                raise ToolexecdConnectionError(
                    self.path, "cannot send: %s" % (exc.strerror or exc), exc.errno) from exc

    def read_event(self, deadline):
        """The next event (a dict), or None at the end of the stream. Raises
        ToolexecdTimeout when the deadline (a time.monotonic() value, or
        None for no limit) passes first."""
        while True:
            nl = self.buf.find(b"\n", self.scanned)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[:nl + 1]
                self.scanned = 0
                if not line.strip():
                    continue
                return self._parse(line)
            self.scanned = len(self.buf)
            if self.eof:
                if self.buf.strip():
                    raise ProtocolError("toolexecd at %s closed the connection after a "
                                        "partial line: %r" % (self.path, bytes(self.buf[:200])))
                return None
            if len(self.buf) > MAX_LINE_BYTES:
                raise ProtocolError("toolexecd at %s sent a line longer than %d bytes"
                                    % (self.path, MAX_LINE_BYTES))
            self._fill(deadline)

    def _fill(self, deadline):
        if self.closed:
            raise ToolexecdConnectionError(self.path, "the client is closed")
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise ToolexecdTimeout("no event from toolexecd at %s in time" % self.path)
        try:
            chunk = self.sock.recv(1 << 20)
        except OSError as exc:
            if self.closed:
                raise ToolexecdConnectionError(self.path, "the client is closed")
            raise ToolexecdConnectionError(
                self.path, "cannot receive: %s" % (exc.strerror or exc), exc.errno) from exc
        if not chunk:
            self.eof = True
        else:
            self.buf += chunk

    def _parse(self, line):
        try:
            event = json.loads(line.decode("utf-8"))
        except ValueError as exc:
            raise ProtocolError("toolexecd at %s sent a line that is not JSON (%s): %r"
                                % (self.path, exc, line[:200]))
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise ProtocolError("toolexecd at %s sent a line without an \"event\": %r"
                                % (self.path, line[:200]))
        return event

    def shutdown_write(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        with self.send_lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading
        except OSError:
            pass
        self.sock.close()


# ---------------------------------------------------------------------------
# A batch

class Batch:
    """A running batch, as returned by Client.run(). Iterate it for its
    events, in the order the daemon sent them; the last one is the terminal
    event (batch_completed, or error when the request was refused). The
    per-event wait is the client's timeout."""

    def __init__(self, client, batch_id):
        self.client = client
        self.id = batch_id
        self.terminal = None   # the terminal event, once received
        self.results = {}      # call id -> result, from tool_execution_completed
        self._queue = collections.deque()
        self._seen = False     # whether any event of this batch has arrived
        self._done = False     # the terminal event has been queued
        self._terminal_event = None

    def __repr__(self):
        state = self.terminal["event"] if self.terminal else "running"
        return "<toolexec Batch %r %s>" % (self.id, state)

    def __iter__(self):
        return self

    def __next__(self):
        return self.next_event()

    def _note(self, event):
        if event["event"] == "tool_execution_completed" and "id" in event:
            self.results[event["id"]] = event.get("result")
        if event is self._terminal_event:
            self.terminal = event

    def next_event(self, timeout=None):
        """The next event, waiting at most timeout seconds (None: the
        client's timeout). Raises StopIteration after the terminal event."""
        if self.terminal is not None and not self._queue:
            raise StopIteration
        event = self.client._next_for(self, timeout)
        self._note(event)
        return event

    def wait(self, timeout=None):
        """Consume the remaining events and return the terminal event:
        batch_completed, whose "messages" go back to the model. An error
        event is raised as ToolexecdError. timeout bounds the whole wait
        (None: no bound beyond the client's per-event timeout)."""
        deadline = _deadline(timeout)
        while self.terminal is None:
            left = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ToolexecdTimeout("batch %s did not complete within %s s"
                                           % (self.id, timeout))
                if self.client.timeout is not None:
                    left = min(left, self.client.timeout)
            self.next_event(left)
        if self.terminal["event"] == "error":
            raise ToolexecdError(self.terminal)
        return self.terminal

    @property
    def done(self):
        return self.terminal is not None

    @property
    def messages(self):
        """batch_completed.messages (waits for the batch)."""
        return self.wait()["messages"]

    @property
    def halt(self):
        """batch_completed.halt (waits for the batch)."""
        return self.wait()["halt"]

    def cancel(self):
        """Cancel this batch (Client.cancel)."""
        self.client.cancel(self)

    def decide(self, call_id, decision):
        """Answer a tool_error_decision_requested event (Client.decide)."""
        self.client.decide(self, call_id, decision)


# ---------------------------------------------------------------------------
# The client

# Items of a model's reply that carry no call (as toolexec run skips them).
_NON_CALL_TYPES = ("text", "thinking", "redacted_thinking", "reasoning", "message")


def _calls_of(calls):
    """The calls in what run() was given: a list, or the message/response
    of an LLM API that carries them; items that are not calls left out."""
    if isinstance(calls, dict):
        for key in ("tool_calls", "content", "output"):
            if isinstance(calls.get(key), list):
                calls = calls[key]
                break
        else:
            raise TypeError("calls: a dict must be an LLM message or response carrying "
                            "tool_calls, content or output")
    if not isinstance(calls, (list, tuple)):
        raise TypeError("calls must be a list, not %s" % type(calls).__name__)
    return [c for c in calls
            if not (isinstance(c, dict) and c.get("type") in _NON_CALL_TYPES)]


def _shape_of(call):
    if not isinstance(call, dict):
        return None
    kind = call.get("type")
    if kind == "tool_use":
        return "anthropic"
    if kind == "function_call":
        return "openai_responses"
    if kind == "function" or isinstance(call.get("function"), dict):
        return "openai"
    return None


def _one_shape(calls):
    """The result_format of the calls' API when they all share one."""
    shapes = {_shape_of(c) for c in calls}
    return shapes.pop() if len(shapes) == 1 and None not in shapes else None


class Client:
    """A connection to toolexecd.

    path: the socket (default: default_socket_path()). timeout: seconds to
    wait for any one event or reply (None, the default, waits as long as it
    takes; every call is bounded by its own timeout in the daemon).
    connect_timeout: seconds to wait for the connection.
    max_request_bytes: the daemon's request limit (--max-request-bytes); a
    longer run request raises ValueError instead of being sent.

    Thread-safe: batches can be run and iterated from several threads; one
    thread at a time reads the socket and files the events it reads under
    their batches."""

    def __init__(self, path=None, timeout=None, connect_timeout=10.0,
                 max_request_bytes=16 * 1024 * 1024):
        self.path = path if path is not None else default_socket_path()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_request_bytes = max_request_bytes
        self._conn = _Connection(self.path, connect_timeout)
        self._cond = threading.Condition()
        self._request_lock = threading.Lock()
        self._reading = False      # a thread is reading the socket
        self._failure = None       # what ended the connection, re-raised to all
        self._batches = {}         # id -> Batch, until its terminal event is read
        self._replies = collections.deque()  # waiting reply slots, oldest first
        self._seq = 0
        # ids of its own, so that two clients' batches differ on the events
        # socket and in a tail's batches filter
        self._batch_prefix = "py-%s-" % os.urandom(8).hex()
        self.stray = collections.deque(maxlen=100)  # events nobody waited for

    # -- life cycle ---------------------------------------------------------
    def close(self):
        """Close the connection. Batches still running run to their end in
        the daemon; their events are dropped."""
        with self._cond:
            if self._failure is None:
                self._failure = ToolexecdConnectionError(self.path, "the client is closed")
            self._cond.notify_all()
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def closed(self):
        return self._conn.closed

    # -- requests -----------------------------------------------------------
    def send(self, request):
        """Send one raw request object (no reply is awaited)."""
        self._conn.send(request)

    def run(self, calls, batch=None, **options):
        """Start a batch and return it as a Batch, an iterator of its events.

        calls: a list of calls, in the shapes the daemon accepts (native
        {"id", "name", "arguments"}, and those of the LLM APIs); a native
        call without an "id" gets "c<index>". A model's reply can be given
        as it came: the message or response that carries the calls
        ({"role", "content": [...]}, {"role", "tool_calls": [...]},
        {"output": [...]}); items that are not calls (Anthropic "text" and
        "thinking" blocks, "reasoning", "message") are left out. When every
        call has one API's shape and no result_format is given, the batch's
        messages come back in that API's shape, as toolexec run does. batch: its id (default: one the
        client makes up). options: the other fields of the run request,
        sent as given (on_tool_error, tool_timeout, max_concurrency,
        context, session_id, request_id, engine, result_format, ...)."""
        calls = _calls_of(calls)
        if "result_format" not in options:
            shape = _one_shape(calls)
            if shape:
                options = dict(options, result_format=shape)
        prepared = []
        for i, call in enumerate(calls):
            if isinstance(call, dict) and "id" not in call and "type" not in call \
                    and "call_id" not in call and "name" in call:
                call = dict(call, id="c%d" % i)
            prepared.append(call)
        request = {"op": "run"}
        with self._cond:
            self._check_open()
            if batch is None:
                while True:
                    self._seq += 1
                    batch = "%s%d" % (self._batch_prefix, self._seq)
                    if batch not in self._batches:
                        break
            elif not isinstance(batch, str) or not batch:
                raise ValueError("batch must be a non-empty string")
            elif batch in self._batches:
                raise ValueError("batch %r is still running on this client" % batch)
            b = Batch(self, batch)
            self._batches[batch] = b
        request["batch"] = batch
        request["calls"] = prepared
        request.update(options)
        try:
            data = _encode(request)
            if self.max_request_bytes is not None and len(data) - 1 > self.max_request_bytes:
                raise ValueError("run request of %d bytes is over the daemon's request limit "
                                 "of %d bytes" % (len(data) - 1, self.max_request_bytes))
            self._conn.send_bytes(data)
        except BaseException:
            with self._cond:
                self._batches.pop(batch, None)
            raise
        return b

    def run_batch(self, calls, **options):
        """Run a batch to its end and return its batch_completed event.
        An error event (the request was refused) raises ToolexecdError."""
        return self.run(calls, **options).wait()

    def call_tool(self, name, arguments=None, **options):
        """Run one call and return its result ({"ok": v}, {"error": r},
        {"ask_user": ...}, {"halt": ...} or {"tool_error": {...}})."""
        b = self.run([{"id": "c0", "name": name, "arguments": arguments}], **options)
        b.wait()
        return b.results.get("c0")

    def tools(self, format=None):  # noqa: A002 - the protocol's name
        """The tool definitions (the "tools" event's list). format:
        "openai", "openai_responses", "anthropic" or "mcp" for definitions
        shaped for that API."""
        request = {"op": "tools"}
        if format is not None:
            request["format"] = format
        return self.request(request, "tools")["tools"]

    def stats(self):
        """The daemon's {"event": "stats", ...}: uptime, workers, clients,
        batches and per-tool counters."""
        return self.request({"op": "stats"}, "stats")

    def cancel(self, batch):
        """Cancel a batch of this client: it completes with the halt
        {"halted_reason": "cancelled"} (iterate or wait() it for that). A
        batch not running here raises ToolexecdError (unknown_batch)."""
        batch_id = batch.id if isinstance(batch, Batch) else batch
        with self._cond:
            b = self._batches.get(batch_id)
            if b is None or b._done:
                raise ToolexecdError({"event": "error", "batch": batch_id,
                                      "type": "request_error", "reason": "unknown_batch",
                                      "message": "batch: no running batch %r on this client"
                                                 % (batch_id,)})
        self._conn.send({"op": "cancel", "batch": batch_id})

    def decide(self, batch, call_id, decision):
        """Answer {"event": "tool_error_decision_requested"} (under
        "on_tool_error": "ask"): decision is "continue" (the error stands,
        the batch goes on), "halt" or {"continue_with": value}."""
        batch_id = batch.id if isinstance(batch, Batch) else batch
        self._conn.send({"op": "decide", "batch": batch_id, "id": call_id,
                         "decision": decision})

    def request(self, request, expect=None):
        """Send a request answered by one event that names no batch (tools,
        stats, ...) and return that event. An error event raises
        ToolexecdError; so does another event than expect, when given."""
        slot = []
        data = _encode(request)
        # Slots are queued in the order the daemon receives the requests.
        with self._request_lock:
            with self._cond:
                self._check_open()
                self._replies.append(slot)
            try:
                self._conn.send_bytes(data)
            except BaseException:
                with self._cond:
                    self._replies.remove(slot)
                raise
        event = self._wait(lambda: slot[0] if slot else None, None, "a reply to %s" % (
            request.get("op"),))
        if event["event"] == "error":
            raise ToolexecdError(event)
        if expect is not None and event["event"] != expect:
            raise ProtocolError("expected a %r event in reply, got %r" % (expect, event))
        return event

    def tail(self, tools=None, batches=None, timeout=None):
        """Follow every event of every batch on the daemon (optionally only
        those of the named tools or batches) on a new connection; returns a
        Tail, an iterator of events. timeout: per event (None: no limit)."""
        return Tail(self.path, tools=tools, batches=batches, timeout=timeout,
                    connect_timeout=self.connect_timeout)

    # -- reading ------------------------------------------------------------
    def _check_open(self):
        if self._failure is not None:
            raise self._failure

    def _next_for(self, batch, timeout):
        def take():
            if batch._queue:
                return batch._queue.popleft()
            return None
        return self._wait(take, timeout, "an event of batch %s" % batch.id, batch)

    def _wait(self, take, timeout, what, batch=None):
        """Read events until take() returns one; files every event read."""
        if timeout is None:
            timeout = self.timeout
        deadline = _deadline(timeout)
        while True:
            with self._cond:
                while True:
                    got = take()
                    if got is not None:
                        return got
                    if self._failure is not None:
                        if batch is not None and isinstance(self._failure, _EndOfStream):
                            raise ToolexecdConnectionError(
                                self.path, "the daemon closed the connection before batch %s "
                                           "completed" % batch.id)
                        raise self._failure
                    if not self._reading:
                        self._reading = True
                        break
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise ToolexecdTimeout("no %s from toolexecd at %s within %s s"
                                               % (what, self.path, timeout))
                    self._cond.wait(left)
            # This thread reads, without the lock.
            try:
                event = self._conn.read_event(deadline)
            except ToolexecdTimeout:
                with self._cond:
                    self._reading = False
                    self._cond.notify_all()
                raise ToolexecdTimeout("no %s from toolexecd at %s within %s s"
                                       % (what, self.path, timeout))
            except BaseException as exc:
                with self._cond:
                    self._reading = False
                    if self._failure is None and not isinstance(exc, KeyboardInterrupt):
                        self._failure = exc
                    self._cond.notify_all()
                raise
            with self._cond:
                self._reading = False
                if event is None:
                    if self._failure is None:
                        self._failure = _EndOfStream(self.path, "the daemon closed the connection")
                else:
                    self._file(event)
                self._cond.notify_all()

    def _file(self, event):
        """Put an event where its reader will look (called with the lock)."""
        batch_id = event.get("batch")
        b = self._batches.get(batch_id) if isinstance(batch_id, str) else None
        if event["event"] == "error" and event.get("reason") == "unknown_batch":
            # A cancel that crossed the batch's completion: nothing to tell.
            self.stray.append(event)
            return
        if b is not None:
            # The refusal of a run is the batch's only event; an error that
            # comes later answers a decide about the batch and ends nothing.
            terminal = event["event"] == "batch_completed" or (
                event["event"] == "error" and not b._seen)
            b._seen = True
            if terminal:
                b._done = True
                b._terminal_event = event
                del self._batches[batch_id]
            b._queue.append(event)
            return
        if batch_id is None and self._replies:
            self._replies.popleft().append(event)
            return
        self.stray.append(event)


class _EndOfStream(ToolexecdConnectionError):
    pass


# ---------------------------------------------------------------------------
# Tail

class Tail:
    """A subscription to the daemon's event stream ({"op": "tail"}) on a
    connection of its own. Iterate it for events; close it (or leave its
    with block) to unsubscribe. tailing is the daemon's acknowledgement
    ({"event": "tailing", "tools", "batches"}). A subscriber that falls
    behind receives {"event": "lagged", "dropped": N}."""

    def __init__(self, path=None, tools=None, batches=None, timeout=None,
                 connect_timeout=10.0):
        self.path = path if path is not None else default_socket_path()
        self.timeout = timeout
        request = {"op": "tail"}
        for key, names in (("tools", tools), ("batches", batches)):
            if names is not None:
                if isinstance(names, (str, bytes)):
                    raise TypeError("%s: expected a list of names, not a string" % key)
                request[key] = list(names)
        self._conn = _Connection(self.path, connect_timeout)
        try:
            self._conn.send(request)
            first = self._conn.read_event(_deadline(connect_timeout if timeout is None
                                                    else timeout))
            if first is None:
                raise ToolexecdConnectionError(self.path, "the daemon closed the connection")
            if first["event"] == "error":
                raise ToolexecdError(first)
            if first["event"] != "tailing":
                raise ProtocolError("expected a tailing event, got %r" % (first,))
        except BaseException:
            self._conn.close()
            raise
        self.tailing = first

    def __iter__(self):
        return self

    def __next__(self):
        event = self.next_event()
        if event is None:
            raise StopIteration
        return event

    def next_event(self, timeout=None):
        """The next event, or None when the daemon closed the stream."""
        if timeout is None:
            timeout = self.timeout
        try:
            return self._conn.read_event(_deadline(timeout))
        except ToolexecdTimeout:
            raise ToolexecdTimeout("no event from toolexecd at %s within %s s"
                                   % (self.path, timeout))

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
