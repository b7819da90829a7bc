"""Both worker protocols (framed and plain), the five handler results and
content encoding, and how tool definitions name their commands."""

import json
import os
import unittest

import harness
from harness import DaemonTestCase, Daemon, worker_tool, script_tool, TESTWORKER, WORKERS_SRC


class Framed(DaemonTestCase):
    TOOLS = []

    @classmethod
    def tools(cls):
        return [
            worker_tool("echo", "echo", description="Returns its arguments",
                        schema={"type": "object", "properties": {"x": {"type": "integer"}}}),
            worker_tool("okstr", "ok-string"),
            worker_tool("okval", "ok-value"),
            worker_tool("ask", "ask"),
            worker_tool("halter", "halt"),
            worker_tool("errorer", "error"),
            worker_tool("request", "request"),
            worker_tool("explicit_framed", "echo", protocol="framed"),
        ]

    def test_echo_spec_example(self):
        calls = [{"id": "c0", "name": "echo", "arguments": {"x": 1}}]
        res = self.c.run(calls, batch="b1")
        done = res.events[1]
        # measured per call (durations, the worker's resource use): checked apart
        for k in ("duration_ms", "queued_ms", "cpu_user_ms", "cpu_sys_ms", "max_rss_kb"):
            self.assertGreaterEqual(done.pop(k), 0, k)
        # what it ran under differs from host to host: test_enforced checks it
        self.assertEqual(sorted(done.pop("enforced")),
                         ["landlock", "limits", "network", "seccomp", "uid", "view"])
        self.assertEqual(res.events, [
            {"event": "tool_execution_started", "batch": "b1", "id": "c0", "name": "echo",
             "arguments": {"x": 1}},
            {"event": "tool_execution_completed", "batch": "b1", "id": "c0", "name": "echo",
             "result": {"ok": {"x": 1}}},
            {"event": "tool_result_encoded", "batch": "b1", "id": "c0", "content": "{\"x\":1}"},
            {"event": "batch_completed", "batch": "b1",
             "messages": [{"role": "tool", "tool_call_id": "c0", "content": "{\"x\":1}"}],
             "halt": None},
        ])

    def test_requests_either_side_of_pipe_buf_arrive_whole(self):
        """A frame of at most PIPE_BUF (4096) bytes is written into stdin at
        once, a longer one through libuv: both reach the tool whole."""
        for n in (4084, 4085, 200000):  # {"s":"..."} is n + 8, the frame's header 4
            args = {"s": "x" * n}
            res = self.c.run([{"id": "c0", "name": "echo", "arguments": args}])
            self.assertEqual(self.assertOk(res, "c0"), args, n)

    def test_explicit_framed_protocol(self):
        res = self.c.run([{"id": "c0", "name": "explicit_framed", "arguments": {"y": [1, 2]}}])
        self.assertOk(res, "c0", {"y": [1, 2]}, content='{"y":[1,2]}')

    def test_arguments_absent_or_null_become_empty_object(self):
        res = self.c.run([{"id": "a", "name": "echo"},
                          {"id": "b", "name": "echo", "arguments": None}])
        for cid in ("a", "b"):
            self.assertOk(res, cid, {}, content="{}")
            self.assertEqual(res.started(cid)["arguments"], {})

    def test_request_frame_of_a_plain_tool(self):
        res = self.c.run([{"id": "c0", "name": "request", "arguments": {"x": 1}}])
        self.assertOk(res, "c0", {"tool": "request", "arguments": {"x": 1}})

    def test_string_content_is_verbatim(self):
        res = self.c.run([{"id": "a", "name": "okstr", "arguments": {"s": "plain text"}},
                          {"id": "b", "name": "okstr", "arguments": {"s": "h\u00e9llo \u2713 \"q\"\n"}},
                          {"id": "c", "name": "okstr", "arguments": {"s": ""}}])
        self.assertOk(res, "a", "plain text", content="plain text")
        self.assertOk(res, "b", "h\u00e9llo \u2713 \"q\"\n", content="h\u00e9llo \u2713 \"q\"\n")
        self.assertOk(res, "c", "", content="")

    def test_non_string_content_is_compact_json(self):
        values = {"null": None, "int": 3, "neg": -7, "float": 1.5, "true": True,
                  "list": [1, "two", None], "obj": {"a": {"b": []}}, "numstr": "42"}
        calls = [{"id": k, "name": "okval", "arguments": {"value": v}} for k, v in values.items()]
        res = self.c.run(calls)
        for k, v in values.items():
            with self.subTest(value=k):
                r = res.result(k)
                self.assertEqual(r, {"ok": v})
                if isinstance(v, str):
                    self.assertEqual(res.content(k), v)
                else:
                    self.assertEqual(res.content(k), json.dumps(v, separators=(",", ":")))
        self.assertEqual(res.content("null"), "null")
        self.assertEqual(res.content("true"), "true")

    def test_ask_user_without_opts(self):
        res = self.c.run([{"id": "c1", "name": "ask", "arguments": {"question": "which city?"}}],
                         batch="ask1")
        self.assertEqual(res.result("c1"), {"ask_user": "which city?", "opts": {}})
        self.assertEqual(res.last("c1"), {"event": "ask_user_requested", "batch": "ask1",
                                          "tool_call_id": "c1", "tool_name": "ask",
                                          "question": "which city?", "opts": {}})
        self.assertEqual(res.content("c1"), "<awaiting user response>")
        self.assertEqual(res.halt, {"halted_reason": "ask_user", "pending_question": "which city?",
                                    "pending_tool_call_id": "c1", "ask_user_opts": {}})

    def test_ask_user_with_opts(self):
        opts = {"choices": ["Paris", "Oslo"], "default": 0}
        res = self.c.run([{"id": "q", "name": "ask",
                           "arguments": {"question": "where?", "opts": opts}}])
        self.assertEqual(res.result("q"), {"ask_user": "where?", "opts": opts})
        self.assertEqual(res.last("q")["opts"], opts)
        self.assertEqual(res.halt["ask_user_opts"], opts)

    def test_handler_halt(self):
        res = self.c.run([{"id": "c2", "name": "halter",
                           "arguments": {"reason": "plan_submitted", "result": {"plan": "p"}}}],
                         batch="h1")
        self.assertEqual(res.result("c2"), {"halt": "plan_submitted", "result": {"plan": "p"}})
        self.assertEqual(res.last("c2"), {"event": "tool_halt", "batch": "h1",
                                          "tool_call_id": "c2", "reason": "plan_submitted",
                                          "result": {"plan": "p"}, "content": "{\"plan\":\"p\"}"})
        self.assertEqual(res.content("c2"), "{\"plan\":\"p\"}")
        self.assertEqual(res.halt, {"halted_reason": "plan_submitted", "halt_tool_call_id": "c2",
                                    "halt_result": {"plan": "p"}})

    def test_halt_with_string_result_is_verbatim(self):
        res = self.c.run([{"id": "h", "name": "halter",
                           "arguments": {"reason": "done_here", "result": "final answer"}}])
        self.assertEqual(res.last("h")["content"], "final answer")
        self.assertEqual(res.content("h"), "final answer")
        self.assertEqual(res.halt["halt_result"], "final answer")

    def test_error_content_encoding(self):
        res = self.c.run([{"id": "s", "name": "errorer", "arguments": {"reason": "no such file"}},
                          {"id": "o", "name": "errorer", "arguments": {"reason": {"code": 7}}},
                          {"id": "n", "name": "errorer", "arguments": {"reason": None}}])
        self.assertEqual(res.content("s"), '{"error":"no such file"}')
        self.assertEqual(res.content("o"), '{"error":"{\\"code\\":7}"}')
        self.assertEqual(res.content("n"), '{"error":"null"}')
        self.assertEqual(res.result("n"), {"error": None})


class Plain(DaemonTestCase):
    @classmethod
    def tools(cls):
        return [
            script_tool("pjson", "plain-json.sh"),
            script_tool("ptext", "plain-text.sh"),
            script_tool("pfail", "plain-fail.sh"),
            script_tool("psignal", "plain-signal.sh"),
            script_tool("pempty", "plain-empty.sh"),
            script_tool("psleep", "plain-sleep.sh", timeout_ms=300),
            {"name": "pstdin", "description": "raw stdin", "protocol": "plain",
             "command": [TESTWORKER, "plain-stdin"]},
            {"name": "pcat", "description": "bare command name from PATH", "protocol": "plain",
             "command": ["cat"]},
        ]

    def test_plain_stdout_json_is_parsed(self):
        res = self.c.run([{"id": "c0", "name": "pjson", "arguments": {"x": 1, "s": "a b"}}])
        self.assertOk(res, "c0", {"x": 1, "s": "a b"})

    def test_plain_stdin_is_one_line_of_compact_json(self):
        args = {"x": 1, "nested": {"list": [1, 2], "t": True}, "u": "\u00e9"}
        res = self.c.run([{"id": "c0", "name": "pstdin", "arguments": args}])
        raw = self.assertOk(res, "c0")["stdin"]
        self.assertTrue(raw.endswith("\n"), repr(raw))
        self.assertEqual(raw.count("\n"), 1, repr(raw))
        self.assertEqual(json.loads(raw), args)
        self.assertNotIn(": ", raw)
        self.assertNotIn(", ", raw)

    def test_plain_stdin_either_side_of_pipe_buf_arrives_whole(self):
        for n in (4087, 4088, 200000):  # {"s":"..."} and its newline are n + 9
            args = {"s": "x" * n}
            res = self.c.run([{"id": "c0", "name": "pstdin", "arguments": args}])
            raw = self.assertOk(res, "c0")["stdin"]
            self.assertEqual(len(raw), n + 9)
            self.assertEqual(json.loads(raw), args)

    def test_plain_empty_arguments(self):
        res = self.c.run([{"id": "c0", "name": "pstdin"}])
        self.assertEqual(self.assertOk(res, "c0")["stdin"], "{}\n")

    def test_plain_text_is_a_string_minus_one_newline(self):
        res = self.c.run([{"id": "c0", "name": "ptext"}])
        self.assertOk(res, "c0", "hello plain\nsecond line", content="hello plain\nsecond line")

    def test_plain_empty_stdout_is_empty_string(self):
        res = self.c.run([{"id": "c0", "name": "pempty"}])
        self.assertOk(res, "c0", "", content="")

    def test_plain_nonzero_exit_is_handler_exit(self):
        res = self.c.run([{"id": "c0", "name": "pfail"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"], {"exit_status": 2,
                                       "stderr": "plain-fail: something went wrong\n"})

    def test_plain_signal_is_handler_exit(self):
        res = self.c.run([{"id": "c0", "name": "psignal"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"].get("signal"), "SIGTERM")
        self.assertIs(te["cause"].get("core_dumped"), False)
        self.assertIn("plain-signal: terminating myself", te["cause"].get("stderr", ""))

    def test_plain_timeout(self):
        res = self.c.run([{"id": "c0", "name": "psleep"}])
        te = self.assertToolError(res, "c0", "timeout")
        self.assertEqual(te["cause"].get("timeout_ms"), 300)

    def test_bare_command_name_resolved_in_path(self):
        res = self.c.run([{"id": "c0", "name": "pcat", "arguments": {"k": [1]}}])
        self.assertOk(res, "c0", {"k": [1]}, content='{"k":[1]}')

    def test_both_protocols_in_one_batch(self):
        res = self.c.run([{"id": "p", "name": "pjson", "arguments": {"a": 1}},
                          {"id": "t", "name": "ptext"},
                          {"id": "f", "name": "pfail"}])
        self.assertOk(res, "p", {"a": 1})
        self.assertOk(res, "t", "hello plain\nsecond line")
        self.assertToolError(res, "f", "handler_exit")


class RelativeCommand(unittest.TestCase):
    def test_relative_command_resolves_against_definition_dir(self):
        with Daemon(start=False) as d:
            os.makedirs(d.path("tools", "bin"))
            script = d.path("tools", "bin", "rel.sh")
            with open(script, "w") as f:
                f.write("#!/bin/sh\ncat >/dev/null\necho '{\"relative\": true}'\n")
            os.chmod(script, 0o755)
            d.add_tool({"name": "rel", "description": "relative", "protocol": "plain",
                        "command": ["bin/rel.sh"]})
            d.add_tool({"name": "rel2", "description": "relative ./", "protocol": "plain",
                        "command": ["./bin/rel.sh"]})
            d.start()
            res = d.client().run([{"id": "a", "name": "rel"}, {"id": "b", "name": "rel2"}])
            self.assertEqual(res.result("a"), {"ok": {"relative": True}})
            self.assertEqual(res.result("b"), {"ok": {"relative": True}})

    def test_argv_from_definition_reaches_worker(self):
        # argv[1] selects the testworker's mode, argv[2] its parameter
        with Daemon([worker_tool("h", "halt", "custom_reason")]) as d:
            res = d.client().run([{"id": "c0", "name": "h"}])
            self.assertEqual(res.result("c0"), {"halt": "custom_reason", "result": {"plan": "p"}})


if __name__ == "__main__":
    harness.main()
