"""A tool's schema is validated in the draft its "$schema" names, through
the real daemon and real workers: 2020-12's prefixItems and
unevaluatedProperties apply, draft-07 stays the default, and a definition
naming an unsupported $schema, or using $dynamicRef, stops the start with
the file and the pointer."""

import unittest

import harness
from harness import DaemonTestCase, Daemon, DaemonFailed, worker_tool

D2020 = "https://json-schema.org/draft/2020-12/schema"

POINT = {"$schema": D2020, "type": "object",
         "properties": {"at": {"prefixItems": [{"type": "number"}, {"type": "number"}],
                               "items": False}},
         "unevaluatedProperties": False}


class Drafts(DaemonTestCase):
    TOOLS = [worker_tool("point", "echo", schema=POINT),
             worker_tool("old", "echo", schema={"type": "object", "properties": {
                 "at": {"prefixItems": [{"type": "number"}]}}})]

    def test_2020_12_keywords_apply(self):
        calls = [{"id": "ok", "name": "point", "arguments": {"at": [1, 2.5]}},
                 {"id": "types", "name": "point", "arguments": {"at": ["x", 2]}},
                 {"id": "long", "name": "point", "arguments": {"at": [1, 2, 3]}},
                 {"id": "extra", "name": "point", "arguments": {"at": [1, 2], "z": 0}}]
        res = self.c.run(calls)
        self.assertEqual(res.result("ok"), {"ok": {"at": [1, 2.5]}})
        self.assertIn("/at/0: expected number, got string", res.result("types")["error"])
        self.assertIn("/at: must have at most 2 items, got 3", res.result("long")["error"])
        self.assertIn("property \"z\" is not allowed (unevaluated)", res.result("extra")["error"])

    def test_draft_07_stays_the_default(self):
        # no $schema: prefixItems is not a draft-07 keyword, so it is ignored
        res = self.c.run([{"id": "a", "name": "old", "arguments": {"at": ["x"]}}])
        self.assertEqual(res.result("a"), {"ok": {"at": ["x"]}})


class Refused(unittest.TestCase):
    def start(self, schema):
        harness.require_env()
        with self.assertRaises(DaemonFailed) as cm:
            Daemon(tools=[worker_tool("t", "echo", schema=schema)])
        return str(cm.exception)

    def test_unsupported_schema(self):
        err = self.start({"$schema": "http://json-schema.org/draft-04/schema#",
                          "type": "object"})
        self.assertIn('t.json: schema/$schema: unsupported $schema '
                      '"http://json-schema.org/draft-04/schema#"', err)

    def test_unsupported_keyword(self):
        err = self.start({"$schema": D2020, "type": "object",
                          "properties": {"n": {"$dynamicRef": "#node"}}})
        self.assertIn("t.json: schema/properties/n/$dynamicRef: not supported", err)


if __name__ == "__main__":
    unittest.main()
