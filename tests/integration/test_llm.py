"""Speaking the agents' language: tool calls exactly as LLM APIs emit them
(mixed in one batch), arguments text that does not parse, result_format,
the tools op in each API's format, content cut to max_content_bytes, binary
plain output as base64, and the measured fields of every completed call."""

import base64
import json
import os
import unittest

from harness import BatchResult, DaemonTestCase, worker_tool, script_tool


def native(call):
    """What a call of any API shape is to the daemon: its id and tool name."""
    if call.get("type") == "function":
        return {"id": call["id"], "name": call["function"]["name"]}
    if call.get("type") == "function_call":
        return {"id": call["call_id"], "name": call["name"]}
    return {"id": call["id"], "name": call["name"]}


class Shapes(DaemonTestCase):

    def run_shaped(self, calls, batch, **opts):
        self.c.start_batch(calls, batch=batch, **opts)
        return BatchResult([native(c) for c in calls], self.c.recv_batch(batch))

    TOOLS = [worker_tool("echo", "echo"), worker_tool("touch", "touch"),
             worker_tool("big", "ok-string"),
             worker_tool("capped", "ok-string", max_content_bytes=64),
             script_tool("binary", "plain-binary.sh"),
             worker_tool("spilling", "ok-string", max_content_bytes=100, spill=True)]

    def test_mixed_shapes_in_one_batch(self):
        calls = [
            {"id": "n1", "name": "echo", "arguments": {"a": 1}},
            {"id": "call_1", "type": "function",
             "function": {"name": "echo", "arguments": "{\"b\": 2}"}},
            {"type": "function_call", "id": "fc_9", "call_id": "call_2", "name": "echo",
             "arguments": "{\"c\": 3}", "status": "completed"},
            {"type": "tool_use", "id": "toolu_3", "name": "echo", "input": {"d": 4}},
        ]
        res = self.run_shaped(calls, "mixed")
        self.assertEqual(res.result("n1"), {"ok": {"a": 1}})
        self.assertEqual(res.result("call_1"), {"ok": {"b": 2}})
        self.assertEqual(res.result("call_2"), {"ok": {"c": 3}})
        self.assertEqual(res.result("toolu_3"), {"ok": {"d": 4}})

    def test_unparsable_arguments_are_a_handler_error_and_run_nothing(self):
        path = os.path.join(self.daemon.shared_dir("side"), "never")
        bad = '{"path": "%s", ' % path  # cut short, as models sometimes do
        calls = [{"id": "x", "type": "function", "function": {"name": "touch", "arguments": bad}},
                 {"id": "y", "type": "function", "function": {"name": "echo",
                                                               "arguments": "[1, 2]"}},
                 {"id": "z", "name": "echo", "arguments": {"ok": True}}]
        res = self.run_shaped(calls, "bad")
        err = res.result("x")["error"]
        self.assertTrue(err.startswith("invalid arguments: "), err)
        self.assertIn("line 1", err)
        self.assertIn("expected a JSON object, got an array", res.result("y")["error"])
        self.assertEqual(res.result("z"), {"ok": {"ok": True}})
        self.assertFalse(os.path.exists(path))
        # routed by on_tool_error like any handler error
        res = self.run_shaped(calls[:1], "bad-halt", on_tool_error="halt")
        self.assertEqual(res.terminal["halt"]["halted_reason"], "tool_error")

    def test_result_formats(self):
        calls = [{"id": "ok", "name": "echo", "arguments": {"v": 1}},
                 {"id": "bad", "type": "tool_use", "name": "echo", "input": "not an object"}]
        # an input that is not an object is a request error (a call shape error)
        self.c.send({"op": "run", "batch": "rf0", "calls": calls})
        ev = self.c.recv_for(lambda e: e.get("batch") == "rf0")
        self.assertEqual(ev["reason"], "invalid_request")
        calls[1] = {"id": "bad", "type": "function",
                    "function": {"name": "echo", "arguments": "nope"}}
        want = {
            "openai": [{"role": "tool", "tool_call_id": "ok", "content": "{\"v\":1}"}],
            "openai_responses": [{"type": "function_call_output", "call_id": "ok",
                                  "output": "{\"v\":1}"}],
            "anthropic": [{"type": "tool_result", "tool_use_id": "ok", "content": "{\"v\":1}",
                           "is_error": False}],
        }
        for fmt, first in want.items():
            # (the harness checks the grammar against the default message shape)
            self.c.start_batch(calls, batch="rf-" + fmt, result_format=fmt)
            msgs = self.c.recv_batch("rf-" + fmt)[-1]["messages"]
            self.assertEqual(len(msgs), 2)
            self.assertEqual(msgs[0], first[0], fmt)
            if fmt == "anthropic":
                self.assertTrue(msgs[1]["is_error"])
        self.c.send({"op": "run", "batch": "rf-x", "calls": [], "result_format": "gemini"})
        ev = self.c.recv_for(lambda e: e.get("batch") == "rf-x")
        self.assertIn("result_format", ev["message"])

    def test_tools_in_each_api_format(self):
        for fmt, check in [
                ("openai", lambda t: t["type"] == "function" and "parameters" in t["function"]),
                ("openai_responses", lambda t: t["type"] == "function" and "parameters" in t),
                ("anthropic", lambda t: "input_schema" in t),
                ("mcp", lambda t: "inputSchema" in t)]:
            self.c.send({"op": "tools", "format": fmt})
            tools = self.c.recv_for(lambda e: e["event"] in ("tools", "error"))["tools"]
            self.assertEqual(len(tools), len(self.TOOLS))
            self.assertTrue(all(check(t) for t in tools), fmt)
        self.c.send({"op": "tools", "format": "xml"})
        self.assertEqual(self.c.recv_for(lambda e: e["event"] == "error")["reason"],
                         "invalid_request")

    def test_content_is_cut_keeping_head_and_tail(self):
        text = "\u00e9" * 3000 + "MIDDLE" + "\u00fc" * 3000  # 2-byte characters
        res = self.c.run([{"id": "t", "name": "big", "arguments": {"s": text}}],
                         batch="cut", max_content_bytes=1000)
        content = res.content("t")
        self.assertLessEqual(len(content.encode()), 1000)
        self.assertTrue(content.startswith("\u00e9"))
        self.assertTrue(content.endswith("\u00fc"))
        self.assertIn("omitted", content)
        self.assertNotIn("MIDDLE", content)
        done = res.completed("t")
        self.assertEqual(done["truncated"]["original_bytes"], len(text.encode()))
        self.assertLess(done["truncated"]["kept_bytes"], 1000)
        self.assertEqual(res.terminal["messages"][0]["content"], content)
        # the tool's own limit applies too, and the default keeps short content whole
        res = self.c.run([{"id": "c", "name": "capped", "arguments": {"s": "x" * 200}},
                          {"id": "s", "name": "big", "arguments": {"s": "short"}}])
        self.assertLessEqual(len(res.content("c")), 64)
        self.assertEqual(res.content("s"), "short")
        self.assertNotIn("truncated", res.completed("s"))

    def test_spill_keeps_the_full_content_for_the_client(self):
        full = "".join("line %d\n" % i for i in range(200))
        res = self.c.run([{"id": "s", "name": "spilling", "arguments": {"s": full}}])
        info = res.completed("s")["truncated"]
        self.assertLessEqual(len(res.content("s")), 100)
        with open(info["spill_path"]) as f:
            self.assertEqual(f.read(), full)
        st = os.stat(info["spill_path"])
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (os.getuid(), 0o600))

    def test_binary_plain_output_is_base64(self):
        res = self.c.run([{"id": "b", "name": "binary"}])
        v = res.result("b")["ok"]
        self.assertEqual(v["encoding"], "base64")
        self.assertEqual(base64.b64decode(v["data"]), b"\xff\xfeab\x00c")
        self.assertEqual(v["size_bytes"], 6)

    def test_measured_fields(self):
        res = self.c.run([{"id": "a", "name": "echo"}, {"id": "b", "name": "echo"}],
                         batch="m", max_concurrency=1)
        a, b = res.completed("a"), res.completed("b")
        for done in (a, b):
            for k in ("duration_ms", "queued_ms", "cpu_user_ms", "cpu_sys_ms"):
                self.assertGreaterEqual(done[k], 0, k)
            self.assertGreater(done["max_rss_kb"], 0)
            self.assertGreater(done["duration_ms"], 0)
        # with one call at a time, the second waited for the first
        self.assertGreater(b["queued_ms"], a["queued_ms"])


SCHEMA = {"type": "object", "required": ["count"], "additionalProperties": False,
          "properties": {"count": {"type": "integer", "minimum": 1},
                         "mode": {"enum": ["a", "b"]},
                         "flag": {"type": "boolean"}}}


class Schema(DaemonTestCase):
    TOOLS = [worker_tool("strict", "touch", schema=SCHEMA),
             worker_tool("lenient", "echo", schema=SCHEMA, coerce=True)]

    def test_violations_listed_and_no_worker(self):
        path = os.path.join(self.daemon.shared_dir("side"), "never")
        res = self.c.run([{"id": "v", "name": "strict",
                           "arguments": {"count": "3", "mode": "c", "path": path}}])
        err = res.result("v")["error"]
        self.assertTrue(err.startswith("invalid arguments: "), err)
        self.assertIn("/count: expected integer, got string", err)
        self.assertIn("/mode: must be one of", err)
        self.assertIn("property \"path\" is not allowed", err)  # additionalProperties
        self.assertFalse(os.path.exists(path))

    def test_coercion_only_when_the_whole_string_parses(self):
        res = self.c.run([{"id": "ok", "name": "lenient",
                           "arguments": {"count": "42", "flag": "true"}},
                          {"id": "no", "name": "lenient", "arguments": {"count": "42abc"}}])
        self.assertEqual(res.result("ok"), {"ok": {"count": 42, "flag": True}})
        self.assertIn("/count: expected integer, got string", res.result("no")["error"])

    def test_invalid_schema_stops_the_start(self):
        from harness import Daemon, DaemonFailed
        bad = worker_tool("broken", "echo",
                          schema={"type": "object", "properties": {"n": {"type": 7}}})
        with self.assertRaises(DaemonFailed) as cm:
            Daemon(tools=[bad])
        self.assertIn("broken.json: schema/properties/n/type", str(cm.exception))


class Decisions(DaemonTestCase):
    TOOLS = [worker_tool("echo", "echo"), worker_tool("boom", "exit", "3"),
             worker_tool("err", "error"), worker_tool("slow", "sleep", timeout_ms=300)]

    def events(self, batch):
        return self.c.recv_batch(batch)

    def test_map_of_reasons(self):
        policy = {"handler_exit": {"continue_with": {"fallback": True}},
                  "handler_error": "halt", "default": "continue"}
        self.c.start_batch([{"id": "a", "name": "boom"}, {"id": "b", "name": "err"},
                            {"id": "c", "name": "slow"}, {"id": "d", "name": "echo"}],
                           batch="map", on_tool_error=policy)
        evs = self.events("map")
        done = {e["id"]: e for e in evs if e["event"] == "tool_execution_completed"}
        self.assertEqual(done["a"]["result"], {"ok": {"fallback": True}})
        self.assertEqual(done["b"]["result"], {"error": "boom"})
        self.assertEqual(done["c"]["result"]["tool_error"]["reason"], "timeout")
        final = evs[-1]
        self.assertEqual(final["messages"][0]["content"], '{"fallback":true}')
        self.assertEqual(final["halt"], {"halted_reason": "tool_error", "halt_tool_call_id": "b"})
        halts = [e for e in evs if e["event"] == "tool_halt"]
        self.assertEqual([h["tool_call_id"] for h in halts], ["b"])

    def test_map_is_validated(self):
        self.c.send({"op": "run", "batch": "bad", "calls": [],
                     "on_tool_error": {"crashed": "halt"}})
        ev = self.c.recv_for(lambda e: e.get("batch") == "bad")
        self.assertEqual(ev["reason"], "invalid_request")
        self.assertIn("on_tool_error.crashed", ev["message"])

    def test_ask_continue_with(self):
        self.c.start_batch([{"id": "a", "name": "boom"}, {"id": "ok", "name": "echo"}],
                           batch="ask1", on_tool_error="ask")
        req = self.c.recv_for(lambda e: e["event"] == "tool_error_decision_requested")
        self.assertEqual((req["batch"], req["id"]), ("ask1", "a"))
        self.assertEqual(req["error"]["tool_error"]["reason"], "handler_exit")
        self.c.send({"op": "decide", "batch": "ask1", "id": "a",
                     "decision": {"continue_with": "used a default"}})
        evs = self.events("ask1")
        done = [e for e in evs if e["event"] == "tool_execution_completed" and e["id"] == "a"]
        self.assertEqual(done[0]["result"], {"ok": "used a default"})
        self.assertIsNone(evs[-1]["halt"])
        # asked once: a second decision for the same call is refused
        self.c.send({"op": "decide", "batch": "ask1", "id": "a", "decision": "halt"})
        self.assertEqual(self.c.recv_for(lambda e: e["event"] == "error")["reason"],
                         "unknown_batch")

    def test_ask_halt_and_invalid_decision(self):
        self.c.start_batch([{"id": "a", "name": "err"}], batch="ask2", on_tool_error="ask")
        self.c.recv_for(lambda e: e["event"] == "tool_error_decision_requested")
        self.c.send({"op": "decide", "batch": "ask2", "id": "a", "decision": "halt"})
        self.assertEqual(self.events("ask2")[-1]["halt"]["halted_reason"], "tool_error")

        self.c.start_batch([{"id": "a", "name": "err"}], batch="ask3", on_tool_error="ask")
        self.c.recv_for(lambda e: e["event"] == "tool_error_decision_requested")
        self.c.send({"op": "decide", "batch": "ask3", "id": "a", "decision": "maybe"})
        evs = self.events("ask3")
        te = [e for e in evs if e["event"] == "tool_execution_completed"][0]["result"]
        self.assertEqual(te["tool_error"]["reason"], "invalid_return")
        self.assertTrue(te["tool_error"]["metadata"]["on_tool_error_invalid"])
        self.assertEqual(evs[-1]["halt"]["halted_reason"], "tool_error")

    def test_ask_without_an_answer_times_out(self):
        self.c.start_batch([{"id": "a", "name": "err"}], batch="ask4", on_tool_error="ask",
                           tool_timeout=300)
        evs = self.events("ask4")
        kinds = [e["event"] for e in evs]
        self.assertEqual(kinds[:2], ["tool_execution_started", "tool_error_decision_requested"])
        te = [e for e in evs if e["event"] == "tool_execution_completed"][0]["result"]
        self.assertTrue(te["tool_error"]["metadata"]["on_tool_error_invalid"])
        self.assertEqual(evs[-1]["halt"]["halted_reason"], "tool_error")


if __name__ == "__main__":
    unittest.main()
