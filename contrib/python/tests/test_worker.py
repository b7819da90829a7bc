"""Tests of toolexec.worker (unittest, standard library only).

Each worker test runs a small worker program as a subprocess, as the daemon
would: one request frame on its stdin, then it must exit 0 having written
exactly one response frame on its stdout.

    cd contrib/python/tests && python3 -m unittest -v test_worker
"""

import ast
import json
import os
import struct
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.dirname(HERE)
CONTRIB_TOOLS = os.environ.get("TE_CONTRIB_TOOLS",
                               os.path.join(SDK_DIR, "..", "tools", "python"))
if SDK_DIR not in sys.path:
    sys.path.insert(0, SDK_DIR)

from toolexec import worker  # noqa: E402
from toolexec.worker import (Context, Result, ToolError, ask_user, error, halt,  # noqa: E402
                             ok, raised)

WAIT = 30.0 * float(os.environ.get("TE_TIMEOUT_SCALE", "1"))
MIB = 1024 * 1024


def frame(value):
    body = value if isinstance(value, bytes) else json.dumps(value).encode("utf-8")
    return struct.pack(">I", len(body)) + body


def request(arguments=None, tool="t", opts=None, with_opts=False):
    r = {"tool": tool, "arguments": {} if arguments is None else arguments}
    if with_opts or opts is not None:
        r["opts"] = opts
    return r


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = SDK_DIR
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Outcome:
    def __init__(self, proc):
        self.status = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr.decode("utf-8", "replace")

    def response(self):
        """The one frame on stdout, decoded; fails on anything else."""
        data = self.stdout
        if len(data) < 4:
            raise AssertionError("no response frame (stdout %r, stderr %s)"
                                 % (data, self.stderr))
        (n,) = struct.unpack(">I", data[:4])
        if len(data) != 4 + n:
            raise AssertionError("stdout is not exactly one frame: %d bytes announced, %d "
                                 "present (stderr %s)" % (n, len(data) - 4, self.stderr))
        return json.loads(data[4:].decode("utf-8"))


def run_worker(code=None, stdin=b"", script=None, args=()):
    """Run a worker (Python source, or a script file) with stdin."""
    if script is not None:
        argv = [sys.executable, script] + list(args)
    else:
        argv = [sys.executable, "-c", textwrap.dedent(code)] + list(args)
    proc = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=child_env(), timeout=WAIT)
    return Outcome(proc)


def call(code, req):
    """Run worker source on one request; assert a clean exit; the response."""
    out = run_worker(code, frame(req))
    if out.status != 0:
        raise AssertionError("worker exited %s; stderr:\n%s" % (out.status, out.stderr))
    return out.response(), out


HANDLERS = """
import os, sys, time
from toolexec.worker import *

def plain(arguments):
    return arguments.get("value")

def explicit(arguments):
    kind = arguments["kind"]
    if kind == "ok":
        return ok(arguments.get("value"))
    if kind == "error":
        return error(arguments.get("value"))
    if kind == "ask":
        return ask_user("which city?")
    if kind == "ask_opts":
        return ask_user("which city?", {"choices": ["Paris", "Rome"]})
    if kind == "halt":
        return halt("plan_submitted", {"plan": "ship it"})
    if kind == "halt_noresult":
        return halt("done")
    if kind == "raised":
        return raised("Custom", "went wrong", "trace")
    if kind == "tool_error":
        raise ToolError({"code": 7})
    if kind == "bad_ask":
        return ask_user(42)
    if kind == "bad_halt":
        return halt(None, 1)
    raise ValueError("unknown kind %r" % kind)
"""


class Results(unittest.TestCase):
    """What a handler returns becomes the response frame."""

    def explicit(self, kind, value=None):
        code = HANDLERS + "serve(explicit)\n"
        return call(code, request({"kind": kind, "value": value}))[0]

    def test_plain_values_are_ok(self):
        code = HANDLERS + "serve(plain)\n"
        for value in (42, "Paris", None, [1, "x"], {"x": {"y": [True, False]}}, 2.5, ""):
            with self.subTest(value=value):
                resp, _ = call(code, request({"value": value}))
                self.assertEqual(resp, {"ok": value})

    def test_a_plain_dict_is_an_ok_value_even_if_it_looks_like_a_result(self):
        code = HANDLERS + "serve(plain)\n"
        resp, _ = call(code, request({"value": {"error": "x"}}))
        self.assertEqual(resp, {"ok": {"error": "x"}})

    def test_ok(self):
        self.assertEqual(self.explicit("ok", {"a": 1}), {"ok": {"a": 1}})

    def test_error_passes_any_value(self):
        self.assertEqual(self.explicit("error", "not allowed"), {"error": "not allowed"})
        self.assertEqual(self.explicit("error", {"code": 7}), {"error": {"code": 7}})

    def test_tool_error_exception_is_an_error_result(self):
        self.assertEqual(self.explicit("tool_error"), {"error": {"code": 7}})

    def test_ask_user(self):
        self.assertEqual(self.explicit("ask"), {"ask_user": "which city?"})
        self.assertEqual(self.explicit("ask_opts"),
                         {"ask_user": "which city?", "opts": {"choices": ["Paris", "Rome"]}})

    def test_halt(self):
        self.assertEqual(self.explicit("halt"),
                         {"halt": "plan_submitted", "result": {"plan": "ship it"}})
        self.assertEqual(self.explicit("halt_noresult"), {"halt": "done", "result": None})

    def test_raised_helper(self):
        self.assertEqual(self.explicit("raised"),
                         {"raised": {"type": "Custom", "message": "went wrong",
                                     "stacktrace": "trace"}})

    def test_helper_misuse_is_reported_as_raised(self):
        resp = self.explicit("bad_ask")
        self.assertEqual(resp["raised"]["type"], "TypeError")
        self.assertIn("question must be a string", resp["raised"]["message"])
        resp = self.explicit("bad_halt")
        self.assertEqual(resp["raised"]["type"], "TypeError")

    def test_unicode_round_trip(self):
        code = HANDLERS + "serve(plain)\n"
        value = "h\u00e9llo \u4e16\u754c \U0001f600 \"quoted\" \\ \n"
        resp, out = call(code, request({"value": value}))
        self.assertEqual(resp, {"ok": value})
        self.assertIn("\u4e16".encode("utf-8"), out.stdout)  # UTF-8, not \\u escapes

    def test_missing_or_null_arguments_are_an_empty_object(self):
        code = "from toolexec.worker import serve\nserve(lambda a: {'got': a})\n"
        self.assertEqual(call(code, {"tool": "t"})[0], {"ok": {"got": {}}})
        self.assertEqual(call(code, {"tool": "t", "arguments": None})[0], {"ok": {"got": {}}})


class Raised(unittest.TestCase):
    """Exceptions and results that cannot be sent become raised reports."""

    def test_exception_becomes_raised_with_type_message_and_traceback(self):
        code = """
        from toolexec.worker import serve

        def inner(x):
            return 1 // x

        def handler(arguments):
            return inner(arguments["x"])

        serve(handler)
        """
        resp, out = call(code, request({"x": 0}))
        self.assertEqual(set(resp), {"raised"})
        r = resp["raised"]
        self.assertEqual(r["type"], "ZeroDivisionError")
        self.assertIn("division", r["message"])
        self.assertIn("Traceback (most recent call last)", r["stacktrace"])
        self.assertIn("in handler", r["stacktrace"])
        self.assertIn("in inner", r["stacktrace"])
        self.assertNotIn("toolexec/worker.py", r["stacktrace"])  # the SDK's frames left out
        self.assertEqual(out.status, 0)

    def test_exception_type_of_a_library_is_qualified(self):
        code = """
        import json
        from toolexec.worker import serve
        serve(lambda a: json.loads("{"))
        """
        resp, _ = call(code, request())
        self.assertEqual(resp["raised"]["type"], "json.decoder.JSONDecodeError")

    def test_key_error(self):
        code = "from toolexec.worker import serve\nserve(lambda a: a['missing'])\n"
        resp, _ = call(code, request())
        self.assertEqual(resp["raised"]["type"], "KeyError")
        self.assertEqual(resp["raised"]["message"], "'missing'")

    def test_unencodable_results_are_raised(self):
        cases = {
            "set()": "TypeError",
            "float('nan')": "ValueError",
            "float('inf')": "ValueError",
            "object()": "TypeError",
            "'\\udcff'": "UnicodeEncodeError",
        }
        for expr, exc_type in cases.items():
            with self.subTest(expr=expr):
                code = "from toolexec.worker import serve\nserve(lambda a: %s)\n" % expr
                resp, _ = call(code, request())
                self.assertEqual(resp["raised"]["type"], exc_type, resp)

    def test_frame_over_16_mib_is_refused_before_sending(self):
        code = """
        from toolexec.worker import serve
        serve(lambda a: "x" * a["n"])
        """
        limit = 16 * MIB
        overhead = len('{"ok":""}')
        resp, out = call(code, request({"n": limit - overhead}))   # exactly at the limit
        self.assertEqual(len(resp["ok"]), limit - overhead)
        self.assertEqual(len(out.stdout), 4 + limit)
        resp, out = call(code, request({"n": limit - overhead + 1}))  # one byte over
        self.assertEqual(resp["raised"]["type"], "toolexec.worker.FrameTooLarge")
        self.assertIn("%d bytes is over the limit of %d" % (limit + 1, limit),
                      resp["raised"]["message"])
        self.assertLess(len(out.stdout), 64 * 1024)

    def test_frame_limit_can_be_chosen(self):
        code = """
        from toolexec.worker import serve
        serve(lambda a: "x" * a["n"], max_frame_bytes=100)
        """
        self.assertEqual(call(code, request({"n": 91}))[0], {"ok": "x" * 91})
        resp, _ = call(code, request({"n": 92}))
        self.assertIn("over the limit of 100 bytes", resp["raised"]["message"])

    def test_huge_exception_message_is_cut(self):
        code = """
        from toolexec.worker import serve
        def handler(a):
            raise RuntimeError("m" * (20 * 1024 * 1024))
        serve(handler)
        """
        resp, out = call(code, request())
        self.assertEqual(resp["raised"]["type"], "RuntimeError")
        self.assertIn("characters left out", resp["raised"]["message"])
        self.assertLess(len(out.stdout), 1024 * 1024)

    def test_unreadable_requests_are_reported(self):
        code = "from toolexec.worker import serve\nserve(lambda a: a)\n"
        cases = {
            "empty": b"",
            "short header": b"\x00\x00",
            "short body": struct.pack(">I", 10) + b"{}",
            "not JSON": frame(b"{nope"),
            "not an object": frame(b"[1,2]"),
            "not UTF-8": frame(b'{"tool":"\xff"}'),
        }
        for name, data in cases.items():
            with self.subTest(name):
                out = run_worker(code, data)
                self.assertEqual(out.status, 0, out.stderr)
                resp = out.response()
                self.assertEqual(resp["raised"]["type"], "BadRequest")
                self.assertIn("request", resp["raised"]["message"])

    def test_system_exit_is_not_caught(self):
        code = "import sys\nfrom toolexec.worker import serve\nserve(lambda a: sys.exit(3))\n"
        out = run_worker(code, frame(request()))
        self.assertEqual(out.status, 3)
        self.assertEqual(out.stdout, b"")


class Stdout(unittest.TestCase):
    """Stray output never reaches the response channel."""

    def test_print_goes_to_stderr(self):
        code = """
        import sys
        from toolexec.worker import serve

        def handler(arguments):
            print("chatty handler")
            sys.stdout.write("more chatter\\n")
            print("to stderr", file=sys.stderr)
            return "done"

        serve(handler)
        print("after serve")
        """
        resp, out = call(code, request())
        self.assertEqual(resp, {"ok": "done"})
        for text in ("chatty handler", "more chatter", "to stderr", "after serve"):
            self.assertIn(text, out.stderr)

    def test_child_processes_writing_to_fd_1_go_to_stderr(self):
        code = """
        import os, subprocess
        from toolexec.worker import serve

        def handler(arguments):
            os.write(1, b"raw fd 1\\n")
            subprocess.run(["sh", "-c", "echo from a child"], check=True)
            return 1

        serve(handler)
        """
        resp, out = call(code, request())
        self.assertEqual(resp, {"ok": 1})
        self.assertIn("raw fd 1", out.stderr)
        self.assertIn("from a child", out.stderr)

    def test_response_descriptor_is_not_inherited(self):
        code = """
        import os, subprocess
        from toolexec.worker import serve

        def handler(arguments):
            fds = subprocess.run(["sh", "-c", "ls /proc/self/fd"], check=True,
                                 stdout=subprocess.PIPE).stdout.split()
            return sorted(int(f) for f in fds)

        serve(handler)
        """
        resp, _ = call(code, request())
        self.assertLessEqual(set(resp["ok"]), {0, 1, 2, 3})  # 3: ls's own directory fd


class Contexts(unittest.TestCase):
    """handler(arguments) or handler(arguments, context)."""

    OPTS = {"context": {"user": "ada"}, "session_id": "s1", "request_id": "r-7",
            "tool_call": {"id": "c0", "name": "t", "arguments": {"x": 1}}, "engine": None}

    def test_two_argument_handler_gets_the_context(self):
        code = """
        from toolexec.worker import serve, Context

        def handler(arguments, context):
            assert isinstance(context, Context)
            return {"args": arguments, "opts": context, "user": context.context["user"],
                    "session": context.session_id, "request": context.request_id,
                    "call": context.call_id, "name": context.tool_name,
                    "engine": context.engine, "tool_call": context.tool_call}

        serve(handler)
        """
        resp, _ = call(code, request({"x": 1}, opts=self.OPTS))
        self.assertEqual(resp["ok"], {
            "args": {"x": 1}, "opts": self.OPTS, "user": "ada", "session": "s1",
            "request": "r-7", "call": "c0", "name": "t", "engine": None,
            "tool_call": self.OPTS["tool_call"]})

    def test_one_argument_handler_ignores_the_context(self):
        code = "from toolexec.worker import serve\nserve(lambda arguments: arguments)\n"
        resp, _ = call(code, request({"x": 1}, opts=self.OPTS))
        self.assertEqual(resp, {"ok": {"x": 1}})

    def test_two_argument_handler_without_opts_gets_none(self):
        code = ("from toolexec.worker import serve\n"
                "serve(lambda arguments, context: [arguments, context])\n")
        resp, _ = call(code, request({"x": 1}))
        self.assertEqual(resp, {"ok": [{"x": 1}, None]})

    def test_optional_context_follows_the_request(self):
        code = ("from toolexec.worker import serve\n"
                "serve(lambda arguments, context='unset': [arguments, context])\n")
        self.assertEqual(call(code, request({"x": 1}))[0], {"ok": [{"x": 1}, "unset"]})
        resp, _ = call(code, request({"x": 1}, opts=self.OPTS))
        self.assertEqual(resp, {"ok": [{"x": 1}, self.OPTS]})

    def test_bound_methods_and_callable_objects(self):
        code = """
        import functools
        from toolexec.worker import serve

        class Tool:
            def method(self, arguments, context):
                return ["method", context.request_id]
            def __call__(self, arguments):
                return ["object"]

        def both(prefix, arguments, context):
            return [prefix, context.request_id]

        import sys
        choice = sys.argv[1]
        serve({"method": Tool().method, "object": Tool(),
               "partial": functools.partial(both, "partial")}[choice])
        """
        for choice, expected in (("method", ["method", "r-7"]), ("object", ["object"]),
                                 ("partial", ["partial", "r-7"])):
            with self.subTest(choice):
                out = run_worker(code, frame(request(opts=self.OPTS)), args=[choice])
                self.assertEqual(out.response(), {"ok": expected}, out.stderr)

    def test_decorator_can_force_the_context(self):
        code = """
        from toolexec.worker import serve, tool

        @tool(context=True)
        def handler(arguments, *rest):
            return len(rest)

        serve()
        """
        self.assertEqual(call(code, request())[0], {"ok": 1})
        code = code.replace("context=True", "context=False")
        self.assertEqual(call(code, request(opts=self.OPTS))[0], {"ok": 0})


class Decorator(unittest.TestCase):
    def test_tool_and_serve_without_arguments(self):
        code = """
        from toolexec.worker import serve, tool

        @tool
        def greet(arguments):
            "Says hello."
            return "hello " + arguments["name"]

        assert greet({"name": "direct"}) == "hello direct"   # still callable
        assert greet.__doc__ == "Says hello." and greet.name == "greet"
        serve()
        """
        self.assertEqual(call(code, request({"name": "ada"}))[0], {"ok": "hello ada"})

    def test_several_tools_in_one_script_are_picked_by_name(self):
        code = """
        from toolexec.worker import serve, tool

        @tool
        def upper(arguments):
            return arguments["s"].upper()

        @tool(name="lower-case")
        def lower(arguments):
            return arguments["s"].lower()

        if __name__ == "__main__":
            serve()
        """
        self.assertEqual(call(code, request({"s": "Ab"}, tool="upper"))[0], {"ok": "AB"})
        self.assertEqual(call(code, request({"s": "Ab"}, tool="lower-case"))[0], {"ok": "ab"})
        resp, _ = call(code, request({"s": "Ab"}, tool="other"))
        self.assertEqual(resp["raised"]["type"], "LookupError")
        self.assertIn("lower-case, upper", resp["raised"]["message"])

    def test_mapping_of_handlers(self):
        code = """
        from toolexec.worker import serve
        serve({"a": lambda args: "A", "b": lambda args: "B"})
        """
        self.assertEqual(call(code, request(tool="b"))[0], {"ok": "B"})

    def test_tool_serve_method(self):
        code = """
        from toolexec.worker import tool

        @tool
        def one(arguments):
            return 1

        @tool
        def two(arguments):
            return 2

        two.serve()
        """
        self.assertEqual(call(code, request(tool="whatever"))[0], {"ok": 2})

    def test_serve_without_any_handler(self):
        code = "from toolexec.worker import serve\nserve()\n"
        resp, _ = call(code, request())
        self.assertEqual(resp["raised"]["type"], "LookupError")


class InProcess(unittest.TestCase):
    """The pieces that need no process."""

    def test_helpers_build_results(self):
        self.assertEqual(ok(1), {"ok": 1})
        self.assertIsInstance(ok(1), Result)
        self.assertEqual(ok(), {"ok": None})
        self.assertEqual(error("e"), {"error": "e"})
        self.assertEqual(ask_user("q"), {"ask_user": "q"})
        self.assertEqual(ask_user("q", {}), {"ask_user": "q", "opts": {}})
        self.assertEqual(halt("r", 1), {"halt": "r", "result": 1})
        self.assertEqual(raised("T", "m"), {"raised": {"type": "T", "message": "m",
                                                       "stacktrace": ""}})
        with self.assertRaises(TypeError):
            ask_user("q", ["not", "a", "mapping"])

    def test_handle(self):
        self.assertEqual(worker.handle(lambda a: a, {"arguments": {"x": 1}}), {"ok": {"x": 1}})
        self.assertEqual(worker.handle(lambda a: error(1), {}), {"error": 1})
        resp = worker.handle(lambda a: 1 / 0, {})
        self.assertEqual(resp["raised"]["type"], "ZeroDivisionError")
        ctx = worker.handle(lambda a, c: c, {"opts": {"request_id": "r"}})["ok"]
        self.assertIsInstance(ctx, Context)
        self.assertEqual(ctx.request_id, "r")
        self.assertIsNone(ctx.session_id)

    def test_frames(self):
        data = worker.encode_frame({"ok": "\u00e9"})
        self.assertEqual(data, struct.pack(">I", 11) + '{"ok":"\u00e9"}'.encode("utf-8"))
        self.assertEqual(worker.decode_frame(data), {"ok": "\u00e9"})
        with self.assertRaises(ValueError):
            worker.decode_frame(data + b"x")
        with self.assertRaises(worker.FrameTooLarge):
            worker.encode_frame("x" * 10, max_frame_bytes=11)
        self.assertEqual(len(worker.encode_frame("x" * 10, max_frame_bytes=12)), 16)

    def test_tool_error_str(self):
        self.assertEqual(str(ToolError("bad")), "bad")
        self.assertEqual(str(ToolError({"a": 1})), '{"a": 1}')


class ExampleTools(unittest.TestCase):
    """The example tools in contrib/tools/python, run as the daemon runs them."""

    def tool(self, name, req):
        out = run_worker(script=os.path.join(CONTRIB_TOOLS, name + ".py"), stdin=frame(req))
        self.assertEqual(out.status, 0, out.stderr)
        return out.response()

    def test_calc(self):
        self.assertEqual(self.tool("calc", request({"expression": "(1 + 2) * 3 ** 2"})),
                         {"ok": 27})
        self.assertEqual(self.tool("calc", request({"expression": "2 ** 10 / 4"})),
                         {"ok": 256.0})
        resp = self.tool("calc", request({"expression": "1 +"}))  # wording varies
        self.assertTrue(resp["error"].startswith("invalid expression: "), resp)
        self.assertEqual(self.tool("calc", request({"expression": "__import__('os')"})),
                         {"error": "invalid expression: unsupported syntax: Call"})
        resp = self.tool("calc", request({"expression": "1 / 0"}))
        self.assertEqual(resp["raised"]["type"], "ZeroDivisionError")

    def test_ask(self):
        self.assertEqual(self.tool("ask", request({"question": "which city?"})),
                         {"ask_user": "which city?"})
        self.assertEqual(self.tool("ask", request({"question": "q", "choices": ["a", "b"]})),
                         {"ask_user": "q", "opts": {"choices": ["a", "b"]}})
        self.assertEqual(self.tool("ask", request({"question": ""})),
                         {"error": "argument 'question' must be a non-empty string"})

    def test_submit_plan(self):
        self.assertEqual(self.tool("submit_plan", request({"plan": "ship it"})),
                         {"halt": "plan_submitted", "result": {"plan": "ship it"}})
        self.assertEqual(self.tool("submit_plan", request({"plan": " "})),
                         {"error": "argument 'plan' must be a non-empty string"})

    def test_call_info(self):
        opts = Contexts.OPTS
        resp = self.tool("call_info", request({"x": 1}, tool="call_info", opts=opts))
        info = resp["ok"]
        self.assertEqual(info["arguments"], {"x": 1})
        self.assertEqual(info["opts"], opts)
        self.assertIsInstance(info["pid"], int)
        self.assertIn("cwd", info)


class Sources(unittest.TestCase):
    def test_sources_parse_as_python_3_9(self):
        """No syntax newer than Python 3.9 (match statements and the like)."""
        files = []
        for d in (os.path.join(SDK_DIR, "toolexec"), HERE, CONTRIB_TOOLS):
            files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".py")]
        self.assertGreater(len(files), 6)
        for path in files:
            with self.subTest(path=os.path.relpath(path, SDK_DIR)):
                with open(path, encoding="utf-8") as f:
                    ast.parse(f.read(), path, feature_version=(3, 9))


class Progress(unittest.TestCase):
    """progress(): frames before the response, on the response channel."""

    def test_progress_frames_come_before_the_response(self):
        code = ("from toolexec.worker import serve, progress\n"
                "def h(a):\n"
                "    print('not a frame')\n"
                "    assert progress(1, 2, 'half') and progress(2.5)\n"
                "    return 'done'\n"
                "serve(h)\n")
        out = run_worker(code, frame(request()))
        self.assertEqual(out.status, 0, out.stderr)
        frames, data = [], out.stdout
        while data:
            (n,) = struct.unpack(">I", data[:4])
            frames.append(json.loads(data[4:4 + n].decode("utf-8")))
            data = data[4 + n:]
        self.assertEqual(frames, [{"progress": {"progress": 1, "total": 2, "message": "half"}},
                                  {"progress": {"progress": 2.5}}, {"ok": "done"}])

    def test_progress_outside_serve_does_nothing(self):
        self.assertFalse(worker.progress(1))
        with self.assertRaises(TypeError):
            worker.progress("half")


if __name__ == "__main__":
    unittest.main()
