"""Tests of toolexec.client against the real daemon (unittest, standard
library only).

Each test class starts toolexecd ($TOOLEXECD) on a socket in a temporary
directory, with tools written with toolexec.worker, and stops it with
SIGTERM at the end, expecting exit status 0. Workers may run as another
user (nobody, under a root daemon): the temporary directory is made 0755 and
the SDK is reached through the tool definitions' PYTHONPATH.

    TOOLEXECD=build/daemon/toolexecd python3 -m unittest -v test_client
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.dirname(HERE)
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)

from toolexec import client as client_module  # noqa: E402
from toolexec.client import (Client, ProtocolError, Tail, ToolexecdConnectionError,  # noqa: E402
                             ToolexecdError, ToolexecdTimeout)

TOOLEXECD = os.environ.get("TOOLEXECD", "")
CONTRIB_TOOLS_D = os.environ.get("TE_CONTRIB_TOOLS_D", "")
SCALE = float(os.environ.get("TE_TIMEOUT_SCALE", "1"))
WAIT = 30.0 * SCALE
# The interpreter the workers run: the one the daemon's PATH finds, which an
# unprivileged worker user can execute (not a virtualenv under /root, say).
WORKER_PYTHON = (os.environ.get("TE_WORKER_PYTHON")
                 or shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
                 or sys.executable)
MIB = 1024 * 1024
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error", "ThreadSanitizer")

# One script, several tools: serve() picks the handler by the request's tool.
WORKER_SCRIPT = r'''
import os, sys, time
from toolexec.worker import ToolError, ask_user, error, halt, serve, tool

@tool
def py_echo(arguments):
    return arguments

@tool
def py_ctx(arguments, context):
    env = {k: os.environ.get(k) for k in ("TOOLEXEC_TOOL", "TOOLEXEC_CALL_ID", "TOOLEXEC_BATCH")}
    return {"arguments": arguments, "opts": context, "request_id": context.request_id,
            "call_id": context.call_id, "env": env}

@tool
def py_kinds(arguments):
    kind = arguments.get("kind")
    if kind == "ok":
        return {"value": arguments.get("value")}
    if kind == "error":
        return error("not allowed")
    if kind == "tool_error":
        raise ToolError({"code": 7})
    if kind == "ask":
        return ask_user("which city?", {"choices": ["Paris", "Rome"]})
    if kind == "halt":
        return halt("plan_submitted", {"plan": "ship it"})
    if kind == "raise":
        raise ValueError("bad value %r" % arguments.get("value"))
    if kind == "chatty":
        print("chatty output on stdout")
        os.system("echo from a child process")
        return "still a clean frame"
    if kind == "big":
        return "x" * arguments["n"]
    raise LookupError("unknown kind %r" % kind)

@tool
def py_block(arguments):
    print("blocking", flush=True)
    time.sleep(3600)

if __name__ == "__main__":
    serve()
'''


# Where the daemon's default view leaves nothing of the host (hidden, or the
# call's own /tmp): a checkout there (a home directory, /tmp) is shown to
# the tools read-only, for the SDK they import and the build's libtoolexec.
VIEW_LEFT_OUT = ("/tmp", "/home", "/root", "/run", "/var/tmp", "/var/lib", "/dev/shm")


def view_reads(*paths):
    trees = {os.path.realpath(os.path.join(SDK_DIR, "..", ".."))}
    if os.environ.get("TOOLEXECD"):
        trees.add(os.path.realpath(os.path.join(os.path.dirname(os.environ["TOOLEXECD"]), "..")))
    out = [os.path.realpath(p) for p in paths]
    return out + sorted(t for t in trees if t not in out and any(
        t == p or t.startswith(p + "/") for p in VIEW_LEFT_OUT))


def tool_def(name, script, **fields):
    d = {"name": name, "description": "Python SDK test tool " + name,
         "schema": {"type": "object"},
         "command": [WORKER_PYTHON, script],
         "protocol": "framed",
         "timeout_ms": 20000,
         "env": {"PYTHONPATH": SDK_DIR, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
         # the script is in the test's directory, in /tmp: a call has a /tmp
         # of its own, so the definition names it
         "filesystem": {"read": view_reads(os.path.dirname(os.path.realpath(script)))}}
    d.update(fields)
    return d


class Daemon:
    """toolexecd in a temporary directory, started the way
    tests/integration/harness.py starts it."""

    def __init__(self, tools_dir=None, definitions=lambda script: ()):
        if not TOOLEXECD:
            raise unittest.SkipTest("TOOLEXECD is not set (run through meson test)")
        base = "/tmp" if len(tempfile.gettempdir()) > 60 else None  # sun_path is short
        self.tmp = tempfile.mkdtemp(prefix="te-py-", dir=base)
        os.chmod(self.tmp, 0o755)  # workers may run as nobody
        self.sock = os.path.join(self.tmp, "s.sock")
        self.work_dir = os.path.join(self.tmp, "work")
        os.mkdir(self.work_dir)
        self.script = os.path.join(self.tmp, "sdk_tools.py")
        with open(self.script, "w") as f:
            f.write(WORKER_SCRIPT)
        os.chmod(self.script, 0o644)
        if tools_dir is None:
            tools_dir = os.path.join(self.tmp, "tools")
            os.mkdir(tools_dir)
            for d in definitions(self.script):
                with open(os.path.join(tools_dir, d["name"] + ".json"), "w") as f:
                    json.dump(d, f, indent=1)
        self.tools_dir = tools_dir
        self.stderr_path = os.path.join(self.tmp, "daemon.stderr")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [TOOLEXECD, "--socket", self.sock, "--tools", self.tools_dir,
             "--work-dir", self.work_dir],
            stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
            start_new_session=True)
        try:
            self.wait_ready()
        except BaseException:
            self.kill()
            raise

    def wait_ready(self):
        deadline = time.monotonic() + WAIT
        delay = 0.002
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("toolexecd exited with %s during start-up:\n%s"
                                     % (self.proc.returncode, self.stderr()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.sock)
                return
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            finally:
                s.close()
            if time.monotonic() > deadline:
                raise AssertionError("toolexecd did not accept connections within %.0f s:\n%s"
                                     % (WAIT, self.stderr()))
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def client(self, **kwargs):
        return Client(self.sock, **kwargs)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self):
        """SIGTERM; returns the exit status (0 expected)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("toolexecd did not exit within %.0f s of SIGTERM" % WAIT)
        text = self.stderr()
        self._stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if rc != 0:
            raise AssertionError("toolexecd exited with %s after SIGTERM:\n%s" % (rc, text))
        # The daemon's own lines, without the worker stderr it relays.
        own = "\n".join(l for l in text.split("\n") if ": stderr: " not in l)
        for marker in SANITIZER_MARKERS:
            if marker in own:
                raise AssertionError("toolexecd stderr mentions %r:\n%s" % (marker, text))
        return rc


class DaemonTestCase(unittest.TestCase):
    """One daemon per test class, stopped (and checked) at its end."""

    tools_dir = None

    @classmethod
    def definitions(cls, script):
        """The tool definitions; script is the path of WORKER_SCRIPT."""
        return ()

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(tools_dir=cls.tools_dir, definitions=cls.definitions)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def setUp(self):
        self.client = self.daemon.client()
        self.addCleanup(self.client.close)


class SdkTools(DaemonTestCase):
    @classmethod
    def definitions(cls, script):
        return [tool_def("py_echo", script),
                tool_def("py_ctx", script, context=True),
                tool_def("py_kinds", script),
                tool_def("py_block", script, timeout_ms=60000)]

    # -- listing ------------------------------------------------------------
    def test_tools(self):
        tools = {t["name"]: t for t in self.client.tools()}
        self.assertEqual(set(tools), {"py_echo", "py_ctx", "py_kinds", "py_block"})
        self.assertEqual(tools["py_echo"]["schema"], {"type": "object"})
        self.assertFalse(tools["py_echo"]["manual"])

    def test_tools_formats(self):
        try:
            tools = self.client.tools(format="anthropic")
        except ToolexecdError as exc:  # a daemon without tool formats
            self.skipTest("tools formats not supported: %s" % exc)
        self.assertIn("py_echo", json.dumps(tools))

    def test_llm_call_shapes(self):
        calls = [{"type": "tool_use", "id": "toolu_1", "name": "py_echo", "input": {"a": 1}},
                 {"id": "call_2", "type": "function",
                  "function": {"name": "py_echo", "arguments": "{\"b\": 2}"}}]
        try:
            batch = self.client.run(calls, result_format="anthropic")
            done = batch.wait()
        except ToolexecdError as exc:  # a daemon without LLM call shapes
            self.skipTest("LLM call shapes not supported: %s" % exc)
        self.assertEqual(batch.results, {"toolu_1": {"ok": {"a": 1}}, "call_2": {"ok": {"b": 2}}})
        self.assertEqual([m["tool_use_id"] for m in done["messages"]], ["toolu_1", "call_2"])

    # -- running ------------------------------------------------------------
    def test_run_yields_events_ending_with_the_terminal_one(self):
        batch = self.client.run([{"id": "c0", "name": "py_echo", "arguments": {"x": 1}}])
        events = list(batch)
        self.assertEqual([e["event"] for e in events],
                         ["tool_execution_started", "tool_execution_completed",
                          "tool_result_encoded", "batch_completed"])
        self.assertTrue(all(e["batch"] == batch.id for e in events))
        self.assertEqual(events[1]["result"], {"ok": {"x": 1}})
        self.assertEqual(events[2]["content"], '{"x":1}')
        self.assertIs(batch.terminal, events[-1])
        self.assertTrue(batch.done)
        self.assertEqual(batch.results, {"c0": {"ok": {"x": 1}}})
        self.assertEqual(list(batch), [])  # exhausted
        self.assertIs(batch.wait(), events[-1])

    def test_run_batch_returns_batch_completed(self):
        calls = [{"id": "a", "name": "py_echo", "arguments": {"n": i}} for i in range(6)]
        for i, c in enumerate(calls):
            c["id"] = "call-%d" % i
        done = self.client.run_batch(calls, max_concurrency=3)
        self.assertEqual(done["event"], "batch_completed")
        self.assertEqual([m["tool_call_id"] for m in done["messages"]],
                         ["call-%d" % i for i in range(6)])  # input order
        self.assertEqual([m["content"] for m in done["messages"]],
                         ['{"n":%d}' % i for i in range(6)])
        self.assertIsNone(done["halt"])

    def test_calls_without_ids_get_them(self):
        batch = self.client.run([{"name": "py_echo"}, {"name": "py_echo", "arguments": {}}])
        self.assertEqual([m["tool_call_id"] for m in batch.messages], ["c0", "c1"])

    def test_every_kind_of_result(self):
        kinds = ["ok", "error", "tool_error", "ask", "halt", "raise", "chatty"]
        batch = self.client.run(
            [{"id": k, "name": "py_kinds", "arguments": {"kind": k, "value": 5}} for k in kinds])
        done = batch.wait()
        r = batch.results
        self.assertEqual(r["ok"], {"ok": {"value": 5}})
        self.assertEqual(r["error"], {"error": "not allowed"})
        self.assertEqual(r["tool_error"], {"error": {"code": 7}})
        self.assertEqual(r["ask"], {"ask_user": "which city?",
                                    "opts": {"choices": ["Paris", "Rome"]}})
        self.assertEqual(r["halt"], {"halt": "plan_submitted", "result": {"plan": "ship it"}})
        self.assertEqual(r["chatty"], {"ok": "still a clean frame"})
        te = r["raise"]["tool_error"]
        self.assertEqual(te["reason"], "handler_raised")
        self.assertEqual(te["cause"]["type"], "ValueError")
        self.assertEqual(te["cause"]["message"], "bad value 5")
        self.assertIn("in py_kinds", te["cause"]["stacktrace"])
        contents = {m["tool_call_id"]: m["content"] for m in done["messages"]}
        self.assertEqual(contents["error"], '{"error":"not allowed"}')
        self.assertEqual(contents["ask"], "<awaiting user response>")
        self.assertEqual(contents["halt"], '{"plan":"ship it"}')
        self.assertEqual(contents["chatty"], "still a clean frame")
        # The earliest halting call in input order: ask (index 3) before halt.
        self.assertEqual(done["halt"]["halted_reason"], "ask_user")
        self.assertEqual(done["halt"]["pending_tool_call_id"], "ask")

    def test_halt_policy_and_errors(self):
        done = self.client.run_batch(
            [{"id": "e", "name": "py_kinds", "arguments": {"kind": "error"}}],
            on_tool_error="halt")
        self.assertEqual(done["halt"], {"halted_reason": "tool_error", "halt_tool_call_id": "e"})

    def test_oversized_result_is_reported_by_the_worker(self):
        result = self.client.call_tool("py_kinds", {"kind": "big", "n": 16 * MIB})
        cause = result["tool_error"]["cause"]
        self.assertEqual(result["tool_error"]["reason"], "handler_raised")
        self.assertEqual(cause["type"], "toolexec.worker.FrameTooLarge")
        self.assertIn("over the limit of %d bytes" % (16 * MIB), cause["message"])

    def test_large_result_arrives_whole(self):
        result = self.client.call_tool("py_kinds", {"kind": "big", "n": 4 * MIB})
        self.assertEqual(len(result["ok"]), 4 * MIB)

    def test_context_tool(self):
        batch_id = "ctx-" + uuid.uuid4().hex[:8]
        batch = self.client.run([{"id": "c7", "name": "py_ctx", "arguments": {"q": 1}}],
                                batch=batch_id, context={"user": "ada"}, session_id="s-1",
                                request_id="r-9", engine={"model": "m"})
        self.assertEqual(batch.id, batch_id)
        batch.wait()
        v = batch.results["c7"]["ok"]
        self.assertEqual(v["arguments"], {"q": 1})
        self.assertEqual(v["opts"], {"context": {"user": "ada"}, "session_id": "s-1",
                                     "request_id": "r-9", "engine": {"model": "m"},
                                     "tool_call": {"id": "c7", "name": "py_ctx",
                                                   "arguments": {"q": 1}}})
        self.assertEqual(v["request_id"], "r-9")
        self.assertEqual(v["call_id"], "c7")
        self.assertEqual(v["env"], {"TOOLEXEC_TOOL": "py_ctx", "TOOLEXEC_CALL_ID": "c7",
                                    "TOOLEXEC_BATCH": batch_id})

    def test_call_tool(self):
        self.assertEqual(self.client.call_tool("py_echo", {"a": [1, 2]}), {"ok": {"a": [1, 2]}})
        self.assertEqual(self.client.call_tool("py_kinds", {"kind": "error"}),
                         {"error": "not allowed"})

    # -- refusals -----------------------------------------------------------
    def test_unknown_tool(self):
        batch = self.client.run([{"id": "c0", "name": "nope"}])
        events = list(batch)
        self.assertEqual(len(events), 1)
        self.assertEqual(events[0]["event"], "error")
        with self.assertRaises(ToolexecdError) as cm:
            batch.wait()
        e = cm.exception
        self.assertEqual((e.type, e.reason, e.batch), ("engine_error", "unknown_tool", batch.id))
        self.assertEqual(e.metadata, {"tool_name": "nope"})
        self.assertIn("nope", str(e))
        with self.assertRaises(ToolexecdError):
            self.client.run_batch([{"id": "c0", "name": "nope"}])

    def test_invalid_request(self):
        with self.assertRaises(ToolexecdError) as cm:
            self.client.run_batch([{"id": "c0", "name": "py_echo"}], tool_timeout=0)
        self.assertEqual(cm.exception.reason, "invalid_request")
        self.assertIn("tool_timeout", cm.exception.message)
        with self.assertRaises(ToolexecdError) as cm:
            self.client.run_batch([{"id": "c0", "name": "py_echo"}], no_such_option=1)
        self.assertEqual(cm.exception.reason, "invalid_request")
        # The connection is still fine.
        self.assertEqual(self.client.call_tool("py_echo", {}), {"ok": {}})

    def test_batch_ids_in_use_are_refused_locally(self):
        batch = self.client.run([{"id": "c0", "name": "py_echo"}], batch="mine")
        with self.assertRaises(ValueError):
            self.client.run([{"id": "c0", "name": "py_echo"}], batch="mine")
        batch.wait()
        self.client.run_batch([{"id": "c0", "name": "py_echo"}], batch="mine")  # free again

    def test_request_over_the_limit_is_not_sent(self):
        small = self.daemon.client(max_request_bytes=1000)
        self.addCleanup(small.close)
        with self.assertRaises(ValueError):
            small.run([{"id": "c0", "name": "py_echo", "arguments": {"s": "x" * 1000}}])
        self.assertEqual(small.call_tool("py_echo", {"s": "ok"}), {"ok": {"s": "ok"}})

    # -- several batches, several threads ----------------------------------
    def test_batches_interleave_on_one_connection(self):
        slow = self.client.run([{"id": "b", "name": "py_block"}])
        fast = [self.client.run([{"id": "c0", "name": "py_echo", "arguments": {"i": i}}])
                for i in range(5)]
        for i, b in enumerate(reversed(fast)):
            self.assertEqual(b.wait()["messages"][0]["content"], '{"i":%d}' % (4 - i))
        self.assertFalse(slow.done)
        slow.cancel()
        self.assertEqual(slow.halt["halted_reason"], "cancelled")

    def test_threads_share_a_client(self):
        errors, results = [], {}

        def work(n):
            try:
                for j in range(3):
                    done = self.client.run_batch(
                        [{"id": "c0", "name": "py_echo", "arguments": {"n": n, "j": j}}])
                    results[(n, j)] = done["messages"][0]["content"]
                results[n] = [t["name"] for t in self.client.tools()]
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        self.assertEqual(errors, [])
        for n in range(6):
            for j in range(3):
                self.assertEqual(json.loads(results[(n, j)]), {"n": n, "j": j})
            self.assertIn("py_echo", results[n])

    # -- cancel, timeouts, closing -----------------------------------------
    def started(self, batch):
        ev = batch.next_event(timeout=WAIT)
        self.assertEqual(ev["event"], "tool_execution_started")
        return ev

    def test_cancel(self):
        batch = self.client.run([{"id": "c0", "name": "py_block"},
                                 {"id": "c1", "name": "py_echo"}], max_concurrency=1)
        self.started(batch)
        batch.cancel()
        done = batch.wait(timeout=WAIT)
        self.assertEqual(done["halt"], {"halted_reason": "cancelled"})
        with self.assertRaises(ToolexecdError) as cm:
            self.client.cancel(batch)
        self.assertEqual(cm.exception.reason, "unknown_batch")
        with self.assertRaises(ToolexecdError):
            self.client.cancel("never-ran")

    def test_timeout_leaves_the_connection_usable(self):
        batch = self.client.run([{"id": "c0", "name": "py_block"}])
        self.started(batch)
        t0 = time.monotonic()
        with self.assertRaises(ToolexecdTimeout) as cm:
            batch.next_event(timeout=0.2)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        with self.assertRaises(ToolexecdTimeout):
            batch.wait(timeout=0.1)
        self.assertEqual(self.client.call_tool("py_echo", {"after": 1}), {"ok": {"after": 1}})
        self.client.cancel(batch)
        self.assertEqual(batch.wait(timeout=WAIT)["halt"]["halted_reason"], "cancelled")

    def test_client_timeout(self):
        c = self.daemon.client(timeout=0.2)
        self.addCleanup(c.close)
        batch = c.run([{"id": "c0", "name": "py_block"}])
        self.started(batch)
        with self.assertRaises(ToolexecdTimeout):
            next(batch)
        batch.cancel()
        self.assertEqual(batch.wait(timeout=WAIT)["halt"]["halted_reason"], "cancelled")

    def test_close_from_another_thread_ends_a_wait(self):
        c = self.daemon.client()
        batch = c.run([{"id": "c0", "name": "py_block"}])
        self.started(batch)
        caught = []

        def wait():
            try:
                batch.wait()
            except BaseException as exc:
                caught.append(exc)

        t = threading.Thread(target=wait)
        t.start()
        c.close()
        t.join(WAIT)
        self.assertFalse(t.is_alive())
        self.assertEqual(len(caught), 1)
        self.assertIsInstance(caught[0], ToolexecdConnectionError)
        self.assertIn(self.daemon.sock, str(caught[0]))
        with self.assertRaises(ConnectionError):
            c.tools()

    def test_context_manager(self):
        with self.daemon.client() as c:
            self.assertEqual(c.call_tool("py_echo", {}), {"ok": {}})
        self.assertTrue(c.closed)
        with self.assertRaises(ToolexecdConnectionError):
            c.run([{"id": "c0", "name": "py_echo"}])

    # -- stats and tail -----------------------------------------------------
    def test_stats(self):
        self.client.run_batch([{"id": "c0", "name": "py_echo"},
                               {"id": "c1", "name": "py_kinds", "arguments": {"kind": "raise"}}])
        stats = self.client.stats()
        self.assertEqual(stats["event"], "stats")
        for key in ("uptime_ms", "version", "workers", "clients", "batches", "calls", "tools"):
            self.assertIn(key, stats)
        echo = stats["tools"]["py_echo"]
        self.assertGreaterEqual(echo["calls"], 1)
        self.assertGreaterEqual(echo["ok"], 1)
        self.assertIsNotNone(echo["latency_ms"])
        self.assertGreaterEqual(stats["tools"]["py_kinds"]["tool_errors"]["handler_raised"], 1)

    def test_tail(self):
        batch_id = "tailed-" + uuid.uuid4().hex[:8]
        with self.client.tail(batches=[batch_id], timeout=WAIT) as tail:
            self.assertIsInstance(tail, Tail)
            self.assertEqual(tail.tailing, {"event": "tailing", "tools": None,
                                            "batches": [batch_id]})
            other = self.daemon.client()
            self.addCleanup(other.close)
            other.run_batch([{"id": "c0", "name": "py_echo", "arguments": {"t": 1}}],
                            batch=batch_id)
            seen = []
            for ev in tail:
                seen.append(ev)
                if ev["event"] == "batch_completed":
                    break
        kinds = [e["event"] for e in seen]
        self.assertEqual(kinds, ["batch_started", "tool_execution_started",
                                 "tool_execution_completed", "tool_result_encoded",
                                 "batch_completed"])
        self.assertTrue(all(e["batch"] == batch_id for e in seen))
        self.assertEqual(seen[0]["client"]["pid"], os.getpid())
        self.assertEqual(seen[0]["calls"], [{"id": "c0", "name": "py_echo"}])

    def test_tail_by_tool_and_timeout(self):
        with self.client.tail(tools=["py_ctx"]) as tail:
            self.client.run_batch([{"id": "c0", "name": "py_echo"}])
            self.client.run_batch([{"id": "c0", "name": "py_ctx"}], batch="ctx-tail")
            ev = tail.next_event(timeout=WAIT)
            self.assertEqual((ev["event"], ev["batch"]), ("batch_started", "ctx-tail"))
            while ev["event"] != "batch_completed":
                ev = tail.next_event(timeout=WAIT)
                self.assertEqual(ev["batch"], "ctx-tail")
            with self.assertRaises(ToolexecdTimeout):
                tail.next_event(timeout=0.1)

    def test_tail_refusal(self):
        with self.assertRaises(TypeError):
            self.client.tail(tools="py_echo")
        with self.assertRaises(ToolexecdError) as cm:
            self.client.request({"op": "tail", "tools": [1]})
        self.assertEqual(cm.exception.reason, "invalid_request")


class Connecting(unittest.TestCase):
    def test_missing_socket_names_the_path(self):
        path = os.path.join(tempfile.gettempdir(), "te-py-no-such-%s.sock" % uuid.uuid4().hex)
        with self.assertRaises(ConnectionError) as cm:
            Client(path)
        self.assertIsInstance(cm.exception, ToolexecdConnectionError)
        self.assertIn(path, str(cm.exception))
        self.assertEqual(cm.exception.path, path)
        self.assertIsNotNone(cm.exception.errno)

    def test_default_socket_path(self):
        f = client_module.default_socket_path
        with mock.patch.dict(os.environ, {"TOOLEXECD_SOCKET": "/x/y.sock",
                                          "XDG_RUNTIME_DIR": "/run/user/7"}):
            self.assertEqual(f(), "/x/y.sock")
        env = dict(os.environ)
        env.pop("TOOLEXECD_SOCKET", None)
        env["XDG_RUNTIME_DIR"] = "/run/user/7"
        with mock.patch.dict(os.environ, env, clear=True):
            with mock.patch("os.geteuid", return_value=1000):
                self.assertEqual(f(), "/run/user/7/toolexecd.sock")
            with mock.patch("os.geteuid", return_value=0):
                self.assertEqual(f(), "/run/toolexecd/toolexecd.sock")
            del os.environ["XDG_RUNTIME_DIR"]
            with mock.patch("os.geteuid", return_value=1000):
                self.assertEqual(f(), "/run/toolexecd/toolexecd.sock")

    def test_garbage_from_the_server_is_a_protocol_error(self):
        base = "/tmp" if len(tempfile.gettempdir()) > 60 else None
        tmp = tempfile.mkdtemp(prefix="te-py-", dir=base)
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "fake.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(server.close)
        server.bind(path)
        server.listen(1)

        def serve():
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b'{"event":"tools","tools":[]}\nnot json\n')
                conn.recv(65536)  # until the client closes

        t = threading.Thread(target=serve)
        t.start()
        with Client(path, timeout=WAIT) as c:
            self.assertEqual(c.tools(), [])
            with self.assertRaises(ProtocolError):
                c.stats()
            with self.assertRaises(ProtocolError):  # the connection is done for
                c.tools()
        t.join(WAIT)


class ExampleTools(DaemonTestCase):
    """The daemon serving the generated contrib/tools.d, whose Python tools
    are written with the SDK."""

    @classmethod
    def setUpClass(cls):
        if not CONTRIB_TOOLS_D:
            raise unittest.SkipTest("TE_CONTRIB_TOOLS_D is not set (run through meson test)")
        cls.tools_dir = CONTRIB_TOOLS_D
        super().setUpClass()

    def test_examples(self):
        calls = [
            {"id": "calc", "name": "calc", "arguments": {"expression": "(1 + 2) * 3 ** 2"}},
            {"id": "bad", "name": "calc", "arguments": {"expression": "1 +"}},
            {"id": "zero", "name": "calc", "arguments": {"expression": "1 / 0"}},
            {"id": "info", "name": "call_info", "arguments": {"k": "v"}},
            {"id": "ask", "name": "ask", "arguments": {"question": "which city?",
                                                      "choices": ["Paris"]}},
            {"id": "plan", "name": "submit_plan", "arguments": {"plan": "ship it"}},
            {"id": "echo", "name": "echo", "arguments": {"x": 1}},
        ]
        batch = self.client.run(calls, request_id="r-1")
        done = batch.wait()
        r = batch.results
        self.assertEqual(r["calc"], {"ok": 27})
        self.assertTrue(r["bad"]["error"].startswith("invalid expression: "))
        self.assertEqual(r["zero"]["tool_error"]["cause"]["type"], "ZeroDivisionError")
        info = r["info"]["ok"]
        self.assertEqual(info["tool"], "call_info")
        self.assertEqual(info["opts"]["request_id"], "r-1")
        self.assertEqual(info["opts"]["tool_call"], {"id": "info", "name": "call_info",
                                                     "arguments": {"k": "v"}})
        self.assertEqual(r["ask"], {"ask_user": "which city?", "opts": {"choices": ["Paris"]}})
        self.assertEqual(r["plan"], {"halt": "plan_submitted", "result": {"plan": "ship it"}})
        self.assertEqual(r["echo"], {"ok": {"x": 1}})
        self.assertEqual(done["halt"]["halted_reason"], "ask_user")


if __name__ == "__main__":
    unittest.main()
