"""Numbers pass through as the tool wrote them, through
the real daemon, real workers and the real CLI: arguments, results, content
and events keep a real's shortest round-trip form (19.99, never
19.989999999999998), integers beyond 64 bits and reals beyond a double pass
unchanged, and the schema validator compares them exactly.

The checks read raw bytes: Python's json would read 19.989999999999998 back
as 19.99 and hide the bug.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import json
import os
import subprocess
import unittest

import harness
from harness import Daemon, WAIT

TOOLEXEC = os.environ.get("TOOLEXEC", "")
CONTRIB = os.path.join(harness.HERE, "..", "..", "contrib")
EDGES = ('{"big":18446744073709551616,"neg":-340282366920938463463374607431768211457,'
         '"huge":1e400,"tiny":-1e-400,"max":1.7976931348623157e308,"min":5e-324,'
         '"third":0.3333333333333333,"sum":0.30000000000000004}')

TOOLS = [
    {"name": "stdin", "description": "cat: the arguments, as they came",
     "schema": {"type": "object"}, "command": ["/bin/cat"], "protocol": "plain"},
    {"name": "edges", "description": "numbers at and past the edges",
     "schema": {"type": "object"}, "protocol": "plain",
     "command": ["/bin/sh", "-c", "printf '%s' '" + EDGES + "'"]},
    {"name": "bounded", "description": "an exact bound beyond 64 bits",
     "schema": {"type": "object", "properties": {"n": {
         "type": "integer", "minimum": 18446744073709551616, "multipleOf": 4}}},
     "command": ["/bin/cat"], "protocol": "plain"},
    {"name": "calc", "description": "contrib/tools/python/calc.py",
     "schema": {"type": "object"}, "protocol": "framed", "timeout_ms": 20000,
     "command": ["python3", os.path.join(CONTRIB, "tools", "python", "calc.py")],
     "env": {"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
             "PYTHONPATH": os.path.join(CONTRIB, "python")}},
]


class Numbers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        # The definitions themselves carry a bound beyond 64 bits: the
        # registry must read them too.
        cls.d = Daemon(TOOLS)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def cli(self, *args, stdin=None):
        env = dict(os.environ)
        env.pop("TOOLEXECD_SOCKET", None)
        return subprocess.run([TOOLEXEC, "--socket", self.d.sock] + list(args), input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, env=env, timeout=WAIT)

    def call(self, tool, args):
        p = self.cli("call", tool, args)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_cat_echoes_the_arguments_as_written(self):
        # the reproduction, and the same through standard input
        self.assertEqual(self.call("stdin", '{"price":19.99,"qty":0.1}'),
                         '{"price":19.99,"qty":0.1}\n')
        p = self.cli("call", "stdin", "-", stdin='{"price": 19.99, "n": 18446744073709551616}')
        self.assertEqual((p.returncode, p.stdout), (0, '{"price":19.99,"n":18446744073709551616}\n'))

    def test_calc(self):
        self.assertEqual(self.call("calc", '{"expression":"19.99*3"}'), "59.97\n")
        self.assertEqual(self.call("calc", '{"expression":"2**64"}'), "18446744073709551616\n")
        self.assertEqual(self.call("calc", '{"expression":"-(2**100)"}'),
                         "-1267650600228229401496703205376\n")
        self.assertEqual(self.call("calc", '{"expression":"0.1+0.2"}'), "0.30000000000000004\n")

    def test_edges_pass_unchanged(self):
        self.assertEqual(self.call("edges", "{}"), EDGES + "\n")
        # as a JSON value, not as the text of a string that failed to parse
        p = self.cli("run", stdin='{"calls":[{"id":"e","name":"edges","arguments":{}}]}')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn('"result":{"ok":' + EDGES + '}', p.stdout)
        # and as 64-bit integers pass, too
        self.assertEqual(self.call("stdin", '{"a":9223372036854775807,"b":-9223372036854775808}'),
                         '{"a":9223372036854775807,"b":-9223372036854775808}\n')

    def test_events_on_the_wire(self):
        # the daemon's own JSON lines (toolexec run prints them as they come)
        req = ('{"calls":[{"id":"c1","name":"stdin","arguments":{"price":19.99,"qty":0.1,'
               '"big":18446744073709551616}},{"id":"c2","name":"edges","arguments":{}}]}')
        p = self.cli("run", stdin=req)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("19.98999", p.stdout)
        self.assertNotIn("0.10000000000000001", p.stdout)
        self.assertNotIn("too big", p.stdout)
        lines = p.stdout.splitlines()
        started = [l for l in lines if '"tool_execution_started"' in l and '"c1"' in l]
        self.assertTrue(started and '"price":19.99,"qty":0.1,"big":18446744073709551616' in
                        started[0], lines)
        done = [l for l in lines if '"tool_execution_completed"' in l and '"c2"' in l]
        self.assertTrue(done and EDGES in done[0], lines)
        for line in lines:
            json.loads(line)  # every line stays valid JSON

    def test_schema_compares_beyond_64_bits(self):
        self.assertEqual(self.call("bounded", '{"n":18446744073709551616}'),
                         '{"n":18446744073709551616}\n')
        for bad, why in (("18446744073709551615", "must be >= 18446744073709551616"),
                         ("18446744073709551618", "multiple of 4")):
            p = self.cli("call", "bounded", '{"n":%s}' % bad)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("invalid arguments: /n:", p.stdout)
            self.assertIn(why, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
