"""The audit trail and call outcomes in the log.

One record per finished call: with --log-format json a JSON line whose
fields toolexecd(8) documents (AUDIT TRAIL); the arguments only as a
SHA-256 digest unless --audit-arguments; in text, failed calls at info and
successful ones at debug.
"""

import hashlib
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Daemon, require_env, worker_tool  # noqa: E402

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("fail", "error"),
    worker_tool("crash", "segv"),
]

SECRET = "s3cret-d0-not-log"
FIELDS = ("ts", "level", "msg", "batch", "call", "record", "tool", "outcome", "client_pid",
          "client_uid", "client_gid", "arguments_sha256", "duration_ms", "queued_ms")


def sha(args):
    return hashlib.sha256(json.dumps(args, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def records(d):
    out = []
    for line in d.stderr().splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            if o.get("record") == "call":
                out.append(o)
    return out


class AuditJsonTest(unittest.TestCase):
    def setUp(self):
        require_env()

    def test_one_record_per_call_without_arguments(self):
        args = {"z": [1, 2], "a": SECRET, "uni": "\u00e9\u4e2d"}
        with Daemon(TOOLS, ["--log-format", "json"]) as d:
            c = d.client()
            c.run([{"id": "ok1", "name": "echo", "arguments": args},
                   {"id": "er1", "name": "fail", "arguments": {}},
                   {"id": "cr1", "name": "crash", "arguments": {"n": 1}}], batch="aud-1")
            recs = {r["call"]: r for r in records(d)}
            self.assertEqual(sorted(recs), ["cr1", "er1", "ok1"], d.stderr())
            self.assertNotIn(SECRET, d.stderr())
            for r in recs.values():
                for f in FIELDS:
                    self.assertIn(f, r)
                self.assertEqual(r["level"], "info")
                self.assertEqual(r["batch"], "aud-1")
                self.assertEqual(r["client_pid"], os.getpid())
                self.assertEqual(r["client_uid"], os.getuid())
                self.assertEqual(r["client_gid"], os.getgid())
                self.assertNotIn("arguments", r)
                for k in ("cpu_user_ms", "cpu_sys_ms", "max_rss_kb"):
                    self.assertIsInstance(r[k], int, k)
            ok = recs["ok1"]
            self.assertEqual((ok["tool"], ok["outcome"]), ("echo", "ok"))
            self.assertNotIn("reason", ok)
            self.assertEqual(ok["arguments_sha256"], sha(args))
            self.assertEqual(recs["er1"]["outcome"], "error")
            self.assertEqual(recs["er1"]["arguments_sha256"], sha({}))
            self.assertEqual((recs["cr1"]["outcome"], recs["cr1"]["reason"]),
                             ("tool_error", "handler_exit"))
            self.assertEqual(recs["cr1"]["arguments_sha256"], sha({"n": 1}))

    def test_audit_arguments(self):
        args = {"a": SECRET, "n": 3}
        with Daemon(TOOLS, ["--log-format", "json", "--audit-arguments"]) as d:
            d.client().run([{"id": "ok1", "name": "echo", "arguments": args}])
            (r,) = records(d)
            self.assertEqual(r["arguments"], args)
            self.assertEqual(r["arguments_sha256"], sha(args))

    def test_digest_of_numbers_and_nested_keys(self):
        # the digest a client recomputes: numbers as it sent them (shortest
        # reals, integers past 64 bits), every object's keys sorted
        args = {"z": 19.99, "a": [0.1, {"y": 1, "b": 2}], "big": 2 ** 64, "e": "é"}
        with Daemon(TOOLS, ["--log-format", "json"]) as d:
            d.client().run([{"id": "n1", "name": "echo", "arguments": args}])
            (r,) = records(d)
            self.assertEqual(r["arguments_sha256"], sha(args))


class CallLogTextTest(unittest.TestCase):
    """One line per finished call, at info for errors."""

    def setUp(self):
        require_env()

    def lines(self, d, call):
        return [l for l in d.stderr().splitlines() if "call %s: call finished" % call in l]

    def test_errors_at_info_ok_at_debug(self):
        with Daemon(TOOLS) as d:
            d.client().run([{"id": "ok1", "name": "echo", "arguments": {}},
                            {"id": "cr1", "name": "crash", "arguments": {}}], batch="t-1")
            self.assertEqual(self.lines(d, "ok1"), [])
            (line,) = self.lines(d, "cr1")
            self.assertTrue(line.startswith("toolexecd: info: batch t-1 call cr1: "), line)
            for kv in ("tool=crash", "outcome=tool_error", "reason=handler_exit",
                       "duration_ms="):
                self.assertIn(kv, line)

    def test_debug_logs_every_call(self):
        with Daemon(TOOLS, ["--log-level", "debug"]) as d:
            d.client().run([{"id": "ok1", "name": "echo", "arguments": {}}])
            (line,) = self.lines(d, "ok1")
            self.assertIn("toolexecd: debug: ", line)
            self.assertIn("tool=echo outcome=ok", line)


if __name__ == "__main__":
    unittest.main()
