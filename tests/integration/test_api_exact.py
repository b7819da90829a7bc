"""The daemon's tool listings and calls as the LLM APIs and MCP take them:
schemas normalised so every client accepts the listing, names mapped to what
OpenAI and Anthropic allow (and back), "strict" in the Responses format,
MCP's title/annotations/outputSchema, output_schema checked on each ok
result, and an OpenAI custom tool call as that call's error. Against the
real daemon and real workers.

Environment (set by tests/integration/meson.build): what harness.py needs."""

import json
import os
import re
import unittest

import harness
from harness import Daemon, worker_tool

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

TOOLS = [
    worker_tool("echo", "echo"),
    # valid draft-07 that the MCP SDKs and Anthropic's Tool type refuse as is
    worker_tool("untyped", "echo", schema={"properties": {"a": {"type": "integer"}}}),
    worker_tool("typelist", "echo", schema={"type": ["object"], "properties": {"b": True}}),
    worker_tool("boolprops", "echo", schema={"type": "object",
                                             "properties": {"yes": True, "no": False}}),
    worker_tool("fs.read", "echo", description="dotted name"),
    worker_tool("strictone", "echo", strict=True),
    worker_tool("progress", "progress"),
    worker_tool("described", "ok-value", title="A described tool",
                annotations={"readOnlyHint": True, "idempotentHint": True},
                output_schema={"type": "object", "required": ["n"],
                               "properties": {"n": {"type": "integer"}}}),
]


class ApiExact(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.d = Daemon(TOOLS)
        cls.c = cls.d.client()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_batch(self, calls, **opts):
        """Results by call id, and the batch's terminal event."""
        self.c.send(dict({"op": "run", "calls": calls}, **opts))
        results = {}
        while True:
            ev = self.c.recv()
            if ev["event"] == "tool_execution_completed":
                results[ev["id"]] = ev["result"]
            if ev["event"] in ("batch_completed", "error"):
                return results, ev

    def listing(self, fmt):
        self.c.send({"op": "tools", "format": fmt})
        ev = self.c.recv()
        self.assertEqual(ev["event"], "tools", ev)
        return ev["tools"]

    # -- every listed schema has "type": "object" and object properties
    def test_schemas_normalised_in_every_format(self):
        where = {"openai": lambda t: t["function"]["parameters"],
                 "openai_responses": lambda t: t["parameters"],
                 "anthropic": lambda t: t["input_schema"],
                 "mcp": lambda t: t["inputSchema"]}
        for fmt, get in where.items():
            for t in self.listing(fmt):
                s = get(t)
                self.assertEqual(s.get("type"), "object", (fmt, t))
                for name, p in s.get("properties", {}).items():
                    self.assertIsInstance(p, dict, (fmt, t, name))
        mcp = {t["name"]: t["inputSchema"] for t in self.listing("mcp")}
        self.assertEqual(mcp["untyped"], {"type": "object",
                                          "properties": {"a": {"type": "integer"}}})
        self.assertEqual(mcp["boolprops"]["properties"], {"yes": {}, "no": {"not": {}}})
        self.assertEqual(mcp["typelist"]["properties"], {"b": {}})
        # the native listing still shows the definition as written
        native = {t["name"]: t["schema"] for t in self.c.tools()["tools"]}
        self.assertEqual(native["boolprops"]["properties"], {"yes": True, "no": False})
        # and the schema means what it did: "no" (false) refuses any value
        res, _ = self.run_batch([{"id": "c0", "name": "boolprops", "arguments": {"no": 1}},
                           {"id": "c1", "name": "untyped", "arguments": {"a": 2}}])
        self.assertIn("error", res["c0"])
        self.assertEqual(res["c1"], {"ok": {"a": 2}})

    def test_schema_that_no_object_passes_is_refused(self):
        d = Daemon([worker_tool("arr", "echo", schema={"type": "array"})], start=False)
        try:
            d.spawn()
            rc = d.proc.wait(timeout=harness.WAIT)
            self.assertNotEqual(rc, 0)
            self.assertIn("arr.json: schema/type: must allow \"object\"", d.stderr())
        finally:
            d.stop(check=False)

    # -- names OpenAI and Anthropic accept, mapped back on the way in
    def test_names_mapped_for_openai_and_anthropic(self):
        for fmt in ("openai", "openai_responses", "anthropic"):
            names = [t["function"]["name"] if fmt == "openai" else t["name"]
                     for t in self.listing(fmt)]
            for n in names:
                self.assertRegex(n, API_NAME, fmt)
            self.assertIn("fs_read", names)
        self.assertIn("fs.read", [t["name"] for t in self.listing("mcp")])
        calls = [{"id": "call_1", "type": "function",
                  "function": {"name": "fs_read", "arguments": "{\"p\": 1}"}},
                 {"type": "tool_use", "id": "toolu_2", "name": "fs_read", "input": {"p": 2}},
                 {"id": "c3", "name": "fs.read", "arguments": {"p": 3}}]
        res, end = self.run_batch(calls)
        self.assertEqual(end["event"], "batch_completed", end)
        self.assertEqual(res["call_1"], {"ok": {"p": 1}})
        self.assertEqual(res["toolu_2"], {"ok": {"p": 2}})
        self.assertEqual(res["c3"], {"ok": {"p": 3}})

    def test_mapped_name_collision_refused_at_load(self):
        d = Daemon([worker_tool("a.b", "echo"), worker_tool("a_b", "echo")], start=False)
        try:
            d.spawn()
            rc = d.proc.wait(timeout=harness.WAIT)
            self.assertNotEqual(rc, 0)
            self.assertIn("declared to OpenAI and Anthropic as \"a_b\"", d.stderr())
        finally:
            d.stop(check=False)

    # -- strict in the Responses format
    def test_responses_format_has_strict(self):
        tools = {t["name"]: t for t in self.listing("openai_responses")}
        for t in tools.values():
            self.assertIn("strict", t)
            self.assertIsInstance(t["strict"], bool)
        self.assertIs(tools["echo"]["strict"], False)
        self.assertIs(tools["strictone"]["strict"], True)
        chat = {t["function"]["name"]: t["function"] for t in self.listing("openai")}
        self.assertIs(chat["strictone"]["strict"], True)
        self.assertNotIn("strict", chat["echo"])

    # -- title, annotations, outputSchema; results checked against it
    def test_mcp_listing_carries_metadata(self):
        t = {t["name"]: t for t in self.listing("mcp")}
        self.assertEqual(t["described"]["title"], "A described tool")
        self.assertEqual(t["described"]["annotations"],
                         {"readOnlyHint": True, "idempotentHint": True})
        self.assertEqual(t["described"]["outputSchema"]["required"], ["n"])
        self.assertNotIn("title", t["echo"])
        self.assertNotIn("outputSchema", t["echo"])
        self.assertNotIn("annotations", t["echo"])

    def test_output_schema_checked(self):
        res, _ = self.run_batch([{"id": "good", "name": "described", "arguments": {"value": {"n": 1}}},
                           {"id": "bad", "name": "described", "arguments": {"value": {"n": "x"}}},
                           {"id": "scalar", "name": "described", "arguments": {"value": 3}}])
        self.assertEqual(res["good"], {"ok": {"n": 1}})
        for cid, pointer in (("bad", "/n"), ("scalar", "/")):
            te = res[cid]["tool_error"]
            self.assertEqual(te["reason"], "invalid_return", te)
            self.assertIn("output_schema", te["message"])
            self.assertIn(pointer + ":", te["message"])

    def test_bad_metadata_refused_at_load(self):
        for bad, why in (({"annotations": {"readOnly": True}}, "annotations.readOnly: unknown key"),
                         ({"annotations": {"readOnlyHint": 1}}, "expected true or false"),
                         ({"title": 3}, "title: expected a non-empty string"),
                         ({"output_schema": {"type": "string"}}, "output_schema/type"),
                         ({"strict": "yes"}, "strict: expected true or false")):
            d = Daemon([worker_tool("t", "echo", **bad)], start=False)
            try:
                d.spawn()
                self.assertNotEqual(d.proc.wait(timeout=harness.WAIT), 0)
                self.assertIn(why, d.stderr())
            finally:
                d.stop(check=False)

    # -- a custom tool call is that call's error, the others run
    def test_custom_tool_call_is_one_calls_error(self):
        calls = [{"id": "call_1", "type": "custom", "custom": {"name": "grammar", "input": "x"}},
                 {"id": "call_2", "type": "function",
                  "function": {"name": "echo", "arguments": "{\"k\": 1}"}},
                 {"type": "custom_tool_call", "id": "ctc_3", "call_id": "call_3",
                  "name": "echo", "input": "free text"}]
        res, end = self.run_batch(calls, result_format="openai")
        self.assertEqual(end["event"], "batch_completed", end)
        self.assertEqual(res["call_2"], {"ok": {"k": 1}})
        for cid in ("call_1", "call_3"):
            self.assertIn("custom tool calls are not supported", res[cid]["error"])
        msgs = {m["tool_call_id"]: m for m in end["messages"]}
        self.assertIn("custom tool calls", msgs["call_1"]["content"])


    # -- progress frames before the response -------------------------
    def test_progress_events(self):
        self.c.send({"op": "run", "batch": "p", "calls": [
            {"id": "c0", "name": "progress", "arguments": {"steps": 3}},
            {"id": "c1", "name": "progress", "arguments": {"bad": True}}]})
        seen, results = [], {}
        while True:
            ev = self.c.recv()
            if ev["event"] == "tool_execution_progress":
                self.assertNotIn(ev["id"], results, "progress after the result")
                seen.append(ev)
            if ev["event"] == "tool_execution_completed":
                results[ev["id"]] = ev["result"]
            if ev["event"] == "batch_completed":
                break
        self.assertEqual([e["progress"] for e in seen],
                         [{"progress": i, "total": 3, "message": "step %d" % i}
                          for i in (1.0, 2.0, 3.0)])
        self.assertEqual({e["id"] for e in seen}, {"c0"})
        self.assertEqual(seen[0]["batch"], "p")
        self.assertEqual(seen[0]["name"], "progress")
        self.assertEqual(results["c0"], {"ok": {"steps": 3}})
        # a malformed progress frame is the response, an invalid one
        self.assertEqual(results["c1"]["tool_error"]["reason"], "invalid_return")


if __name__ == "__main__":
    unittest.main()
