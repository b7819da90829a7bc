"""Every row of the error taxonomy, with real hostile workers.

handler_raised, handler_exit (exit status, signals, exec failure), timeout,
invalid_return (garbage, 4 GiB prefix, truncated frame, bad JSON, bad
shapes), not_found, encoding_failed; handler errors pass through unchanged;
the stderr tail goes into cause; no process of a call outlives it.
"""

import json
import os
import stat
import time
import unittest

import harness
from harness import (DaemonTestCase, worker_tool, Daemon, new_token, wait_token_present,
                     assert_token_gone, WAIT)


class ErrorTaxonomy(DaemonTestCase):
    SLEEP_TOKEN = new_token("sleep")

    @classmethod
    def tools(cls):
        return [
            worker_tool("echo", "echo"),
            worker_tool("any"),
            worker_tool("raiser", "raise"),
            worker_tool("exit3", "exit", "3"),
            worker_tool("exit0", "exit", "0"),
            worker_tool("segv", "segv"),
            worker_tool("aborter", "abort"),
            worker_tool("garbage", "garbage"),
            worker_tool("huge", "huge-prefix", timeout_ms=20000),
            worker_tool("truncated", "truncated"),
            worker_tool("badjson", "badjson"),
            worker_tool("badshape", "badshape"),
            worker_tool("sleeper", "sleep", timeout_ms=300),
            worker_tool("sleeper_long", "sleep", timeout_ms=60000),
            worker_tool("sleeptok", "sleep", cls.SLEEP_TOKEN, timeout_ms=60000),
            worker_tool("grandchild", "grandchild", timeout_ms=400),
            worker_tool("errorer", "error"),
            worker_tool("flood", "stderr-flood"),
            worker_tool("after", "write-after-frame", timeout_ms=20000),
            worker_tool("nuller", "null"),
            {"name": "manual", "description": "a manual-mode tool", "schema": {}},
            {"name": "missing", "description": "command does not exist",
             "command": ["/nonexistent/toolexecd-test/worker"]},
        ]

    # -- handler_raised ---------------------------------------------------
    def test_raise_is_handler_raised_with_the_raised_object(self):
        res = self.c.run([{"id": "c0", "name": "raiser", "arguments": {}}])
        te = self.assertToolError(res, "c0", "handler_raised")
        cause = te["cause"]
        self.assertIsInstance(cause, dict)
        # cause carries the worker's raised object
        self.assertEqual(cause.get("type"), "ValueError")
        self.assertEqual(cause.get("message"), "bad value")
        self.assertEqual(cause.get("stacktrace"), "Traceback: testworker.c raise")
        if "stderr" in cause:
            self.assertIn("testworker: raising", cause["stderr"])
        self.assertEqual(res.last("c0")["event"], "tool_result_encoded")
        self.assertIsNone(res.halt)

    def test_sdk_handler_returning_null_is_handler_raised(self):
        res = self.c.run([{"id": "n", "name": "nuller"}])
        te = self.assertToolError(res, "n", "handler_raised")
        self.assertEqual(te["cause"].get("type"), "HandlerReturnedNull")

    # -- handler_exit -----------------------------------------------------
    def test_exit_3_is_handler_exit_with_status_and_stderr(self):
        res = self.c.run([{"id": "c0", "name": "exit3"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"], {"exit_status": 3, "stderr": "testworker: exiting with 3\n"})

    def test_exit_0_without_a_frame_is_handler_exit(self):
        res = self.c.run([{"id": "c0", "name": "exit0"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"].get("exit_status"), 0)

    def test_sigsegv_is_handler_exit_with_signal_name(self):
        res = self.c.run([{"id": "c0", "name": "segv"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"], {"signal": "SIGSEGV", "core_dumped": False,
                                       "stderr": "testworker: segfaulting\n"})

    def test_abort_is_handler_exit_sigabrt(self):
        res = self.c.run([{"id": "c0", "name": "aborter"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"].get("signal"), "SIGABRT")
        self.assertIs(te["cause"].get("core_dumped"), False)
        self.assertIn("testworker: aborting", te["cause"].get("stderr", ""))

    def test_exec_failure_missing_command(self):
        res = self.c.run([{"id": "c0", "name": "missing"}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"], {"exec_error": "No such file or directory", "stderr": ""})

    def test_stderr_tail_is_the_last_4_kib(self):
        res = self.c.run([{"id": "c0", "name": "flood", "arguments": {"kb": 64}}])
        te = self.assertToolError(res, "c0", "handler_exit")
        err = te["cause"]["stderr"]
        self.assertEqual(te["cause"]["exit_status"], 3)
        self.assertTrue(err.endswith("FINAL-MARKER\n"), err[-200:])
        self.assertLessEqual(len(err.encode()), 4096)
        self.assertGreaterEqual(len(err.encode()), 4096 - 64, "tail shorter than ~4 KiB")
        self.assertNotIn("flood line 00000000", err)

    def test_worker_stderr_lines_are_logged_with_tool_and_call(self):
        res = self.c.run([{"id": "logged-call-7", "name": "exit3"}])
        self.assertToolError(res, "logged-call-7", "handler_exit")

        def logged():
            for line in self.daemon.stderr().split("\n"):
                if ("testworker: exiting with 3" in line and "exit3" in line
                        and "logged-call-7" in line):
                    return True
            return False
        harness.deadline_wait(logged, timeout=5, what="the worker's stderr line in the log")

    # -- invalid_return ---------------------------------------------------
    def test_garbage_is_invalid_return(self):
        res = self.c.run([{"id": "c0", "name": "garbage"}])
        te = self.assertToolError(res, "c0", "invalid_return")
        self.assertIsNotNone(te["cause"])

    def test_4gib_prefix_is_invalid_return_at_once(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "c0", "name": "huge"}])
        elapsed = time.monotonic() - t0
        te = self.assertToolError(res, "c0", "invalid_return")
        # design.md: {"frame_length": N, "limit": L} (later issues may add keys)
        self.assertEqual(te["cause"].get("frame_length"), 4294967295, te["cause"])
        self.assertEqual(te["cause"].get("limit"), 16777216, te["cause"])
        # killed as soon as the prefix said so, long before its 20 s timeout
        self.assertLess(elapsed, 10)

    def test_truncated_frame_then_exit_0_is_invalid_return(self):
        res = self.c.run([{"id": "c0", "name": "truncated"}])
        te = self.assertToolError(res, "c0", "invalid_return")
        tf = te["cause"].get("truncated_frame")
        self.assertIsInstance(tf, dict, te["cause"])
        self.assertEqual(tf.get("expected"), 100)
        self.assertIn(tf.get("received"), (10, 14))

    def test_truncated_frame_then_exit_1_is_handler_exit(self):
        res = self.c.run([{"id": "c0", "name": "truncated", "arguments": {"code": 1}}])
        te = self.assertToolError(res, "c0", "handler_exit")
        self.assertEqual(te["cause"].get("exit_status"), 1)

    def test_bad_json_is_invalid_return_with_the_value(self):
        res = self.c.run([{"id": "c0", "name": "badjson"}])
        te = self.assertToolError(res, "c0", "invalid_return")
        self.assertEqual(set(te["cause"]), {"error", "value"})
        self.assertIsInstance(te["cause"]["error"], str)
        self.assertEqual(te["cause"]["value"], "{not json")

    def test_bad_json_value_in_cause_is_truncated(self):
        res = self.c.run([{"id": "c0", "name": "badjson", "arguments": {"size": 100000}}])
        te = self.assertToolError(res, "c0", "invalid_return")
        v = te["cause"]["value"]
        self.assertTrue(v.startswith("{not jsonzzz"))
        self.assertLessEqual(len(v.encode()), 1100)

    def test_bad_shapes_are_invalid_return(self):
        variants = ["extra-key", "unknown-key", "empty", "not-object", "string", "two-kinds",
                    "ask-nonstring", "ask-badopts", "halt-nonstring", "opts-on-ok"]
        calls = [{"id": v, "name": "badshape", "arguments": {"variant": v}} for v in variants]
        res = self.c.run(calls)
        for v in variants:
            with self.subTest(variant=v):
                te = self.assertToolError(res, v, "invalid_return")
                self.assertIsInstance(te["cause"], dict)
                self.assertIn("value", te["cause"])
                self.assertEqual(res.last(v)["event"], "tool_result_encoded")
        self.assertIsNone(res.halt)

    def test_output_after_the_frame_is_discarded(self):
        res = self.c.run([{"id": "c0", "name": "after"}])
        self.assertOk(res, "c0", "first", content="first")

    def test_result_known_at_first_frame_even_if_worker_keeps_running(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "c0", "name": "after", "arguments": {"then": "sleep"}}])
        self.assertOk(res, "c0", "first")
        self.assertLess(time.monotonic() - t0, 10, "waited for the worker instead of the frame")

    # -- timeout -------------------------------------------------------------
    def test_sleeping_worker_times_out_at_tool_ceiling(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "c0", "name": "sleeper"}], tool_timeout=30000)
        elapsed = time.monotonic() - t0
        te = self.assertToolError(res, "c0", "timeout")
        self.assertEqual(te["cause"], {"timeout_ms": 300, "stderr": "testworker: sleeping\n"})
        self.assertGreaterEqual(elapsed, 0.29)

    def test_batch_tool_timeout_below_tool_ceiling_wins(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "c0", "name": "sleeper_long"}], tool_timeout=250)
        elapsed = time.monotonic() - t0
        te = self.assertToolError(res, "c0", "timeout")
        self.assertEqual(te["cause"].get("timeout_ms"), 250)
        self.assertGreaterEqual(elapsed, 0.24)
        self.assertLess(elapsed, 10)

    # -- no process outlives its call ------------------------------------
    # Processes are found from outside by a token in their command line.
    def _grandchild(self, then):
        tok = new_token("gc")
        res = self.c.run([{"id": "g", "name": "grandchild",
                           "arguments": {"token": tok, "then": then}}])
        return tok, res

    def test_grandchild_is_gone_after_ok(self):
        tok, res = self._grandchild("ok")
        # the worker answers only once its grandchild runs
        self.assertEqual(self.assertOk(res, "g")["token"], tok)
        assert_token_gone(tok, what="grandchild")

    def test_grandchild_is_gone_after_worker_exit(self):
        tok, res = self._grandchild("exit")
        te = self.assertToolError(res, "g", "handler_exit")
        self.assertEqual(te["cause"].get("exit_status"), 3)
        self.assertIn("grandchild forked", te["cause"].get("stderr", ""))
        assert_token_gone(tok, what="grandchild")

    def test_grandchild_is_gone_after_timeout(self):
        tok, res = self._grandchild("sleep")
        te = self.assertToolError(res, "g", "timeout")
        self.assertIn("grandchild forked", te["cause"].get("stderr", ""))
        assert_token_gone(tok, what="grandchild")

    def test_worker_process_is_gone_after_timeout(self):
        batch = self.c.start_batch([{"id": "w", "name": "sleeptok"}], tool_timeout=1500)
        self.c.recv_for(lambda e: e.get("batch") == batch and
                        e["event"] == "tool_execution_started")
        wait_token_present(self.SLEEP_TOKEN, timeout=1.4)
        res = harness.BatchResult([{"id": "w", "name": "sleeptok"}], self.c.finish_batch(batch))
        self.assertToolError(res, "w", "timeout")
        assert_token_gone(self.SLEEP_TOKEN, what="timed-out worker")

    # -- not_found -----------------------------------------------------------
    def test_manual_tool_is_not_found(self):
        res = self.c.run([{"id": "m", "name": "manual", "arguments": {"a": 1}}])
        self.assertToolError(res, "m", "not_found")
        self.assertEqual(res.started("m")["arguments"], {"a": 1})

    # -- handler errors pass through unchanged ----------------------------
    def test_handler_error_string_passes_through(self):
        res = self.c.run([{"id": "e", "name": "errorer", "arguments": {"reason": "disk full"}}])
        self.assertEqual(res.result("e"), {"error": "disk full"})
        self.assertEqual(res.content("e"), '{"error":"disk full"}')
        self.assertEqual(res.last("e")["event"], "tool_result_encoded")
        self.assertIsNone(res.halt)

    def test_handler_error_object_passes_through(self):
        reason = {"code": 42, "why": ["a", "b"]}
        res = self.c.run([{"id": "e", "name": "errorer", "arguments": {"reason": reason}}])
        self.assertEqual(res.result("e"), {"error": reason})
        self.assertEqual(json.loads(res.content("e")),
                         {"error": json.dumps(reason, separators=(",", ":"))})
        self.assertEqual(res.content("e"), json.dumps(
            {"error": json.dumps(reason, separators=(",", ":"))}, separators=(",", ":")))

    def test_handler_error_that_looks_like_a_tool_error_is_not_converted(self):
        reason = {"reason": "timeout", "message": "fake"}
        res = self.c.run([{"id": "e", "name": "errorer", "arguments": {"reason": reason}}])
        self.assertEqual(res.result("e"), {"error": reason})

    def test_all_rows_in_one_batch(self):
        calls = [{"id": "raise", "name": "raiser"}, {"id": "exit", "name": "exit3"},
                 {"id": "segv", "name": "segv"}, {"id": "garbage", "name": "garbage"},
                 {"id": "huge", "name": "huge"}, {"id": "timeout", "name": "sleeper"},
                 {"id": "manual", "name": "manual"}, {"id": "ok", "name": "echo",
                                                      "arguments": {"k": "v"}}]
        res = self.c.run(calls, max_concurrency=8)
        expect = {"raise": "handler_raised", "exit": "handler_exit", "segv": "handler_exit",
                  "garbage": "invalid_return", "huge": "invalid_return", "timeout": "timeout",
                  "manual": "not_found"}
        for cid, reason in expect.items():
            self.assertToolError(res, cid, reason)
        self.assertOk(res, "ok", {"k": "v"}, content='{"k":"v"}')
        self.assertIsNone(res.halt)


class ExecFailure(unittest.TestCase):
    def test_non_executable_command_is_handler_exit_permission_denied(self):
        with Daemon(start=False) as d:
            script = d.path("tools", "noexec.sh")
            with open(script, "w") as f:
                f.write("#!/bin/sh\necho hi\n")
            os.chmod(script, stat.S_IRUSR | stat.S_IWUSR)
            d.add_tool({"name": "noexec", "description": "", "command": ["./noexec.sh"],
                        "protocol": "plain"})
            d.start()
            res = d.client().run([{"id": "c0", "name": "noexec"}])
            te = res.tool_error("c0")
            self.assertEqual(te["reason"], "handler_exit")
            self.assertEqual(te["cause"], {"exec_error": "Permission denied", "stderr": ""})


class Limits(DaemonTestCase):
    ARGS = ["--max-content-bytes", "1000", "--max-frame-bytes", "65536"]
    TOOLS = [worker_tool("big", "big-output"), worker_tool("halter", "halt"),
             worker_tool("errorer", "error")]

    def test_content_within_limit_is_ok(self):
        res = self.c.run([{"id": "c0", "name": "big", "arguments": {"n": 900}}])
        self.assertOk(res, "c0", "x" * 900, content="x" * 900)

    def test_content_over_limit_is_encoding_failed(self):
        res = self.c.run([{"id": "c0", "name": "big", "arguments": {"n": 5000}},
                          {"id": "c1", "name": "big", "arguments": {"n": 10}}])
        te = self.assertToolError(res, "c0", "encoding_failed")
        self.assertLessEqual(len(res.content("c0").encode()), 1000)
        self.assertOk(res, "c1", "x" * 10)

    def test_halt_result_over_limit_is_encoding_failed(self):
        res = self.c.run([{"id": "h", "name": "halter",
                           "arguments": {"result": "y" * 5000}}])
        self.assertToolError(res, "h", "encoding_failed")

    def test_frame_over_max_frame_bytes_is_invalid_return(self):
        res = self.c.run([{"id": "c0", "name": "big", "arguments": {"n": 100000}}])
        te = self.assertToolError(res, "c0", "invalid_return")
        self.assertEqual(te["cause"].get("limit"), 65536, te["cause"])
        self.assertGreater(te["cause"].get("frame_length", 0), 65536)


if __name__ == "__main__":
    harness.main()
