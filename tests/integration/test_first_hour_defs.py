"""A new user's first hour: definitions a new user can check, and errors
that name the real mistake.

- `toolexecd --check --tools DIR` lists every problem of every definition
  (several in one file, a JSON error, a missing command, a missing script,
  a duplicate name), exits 1, and 0 for a clean directory.
- A shell tool left on the default framed protocol: "the worker wrote text
  where a frame was expected; is this a plain tool?", not "frame of
  1214606444 bytes exceeds the limit" with an output_limit cause.
- what --check reports of a definition that loads (a command that is not
  executable, "env" in a file every user may read), the daemon logs at
  start and at each reload.
- "unknown_tool": "error": each unknown call gets its own tool error and
  the rest run; the default still refuses the batch.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import unittest

import harness
from harness import Daemon, deadline_wait, worker_tool, WAIT


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


class Check(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        self.dir = tempfile.mkdtemp(prefix="te-defs-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.chmod(self.dir, 0o755)

    def check(self):
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", self.dir],
                           capture_output=True, text=True, timeout=WAIT)
        return p.returncode, p.stdout.splitlines()

    def test_every_problem_in_every_file(self):
        d = self.dir
        write(d, "good.json", '{"name": "good", "description": "fine", "command": ["/bin/cat"],'
                              ' "protocol": "plain"}')
        write(d, "many.json", '{"name": "many", "description": "three problems",'
                              ' "command": ["/nonexistent/tool"], "colour": "red",'
                              ' "timeout_ms": "soon"}')
        write(d, "broken.json", '{"name": "broken", "description": "x"')
        write(d, "script.json", '{"name": "script", "description": "x",'
                                ' "command": ["python3", "/nonexistent/script.py"]}')
        write(d, "bare.json", '{"name": "bare", "description": "x", "command": ["no-such-cmd-14"]}')
        write(d, "twice.json", '{"name": "good", "description": "again", "command": ["/bin/cat"]}')
        status, lines = self.check()
        self.assertEqual(status, 1, lines)
        text = "\n".join(lines)
        many = [l for l in lines if "/many.json: " in l]
        self.assertEqual(len(many), 3, text)
        for what in ("colour: unknown key", "timeout_ms:", "/nonexistent/tool: No such file"):
            self.assertTrue(any(what in l for l in many), (what, text))
        self.assertTrue(any("/broken.json: line " in l for l in lines), text)
        self.assertTrue(any("/script.json: command[1]: /nonexistent/script.py" in l
                            for l in lines), text)
        self.assertTrue(any("/bare.json: command: no-such-cmd-14: not found" in l
                            for l in lines), text)
        self.assertTrue(any("/twice.json: name: \"good\" is already defined" in l
                            for l in lines), text)
        self.assertFalse(any("/good.json" in l.split(":")[0] for l in lines), text)
        self.assertRegex(lines[-1], r"7 problems in 5 of 6 definitions")

    def test_a_number_past_a_double_is_no_string(self):
        # te_json_loadb() keeps 1e999 as a marked string (for schemas that
        # compare beyond a double); where a definition wants text it is a
        # number like any other, not text with the mark's bytes in it
        base = ('"description": "d", "schema": {"type": "object"}, "command": ["/bin/cat"],'
                ' "protocol": "plain"')
        cases = {
            "name": ('"name": 1e999, ' + base, "name: required"),
            "description": ('"name": "n1", ' + base.replace('"d"', "1e999"),
                            "description: expected a string"),
            "command": ('"name": "n2", ' + base.replace('["/bin/cat"]', '["/bin/cat", 1e999]'),
                        "command[1]: expected"),
            "env": ('"name": "n3", "env": {"X": 1e999}, ' + base, "env.X: expected a string"),
            "user": ('"name": "n4", "user": 1e999, ' + base, "user: expected"),
            "start": ('"name": "n5", "start": 1e999, ' + base, "start: expected"),
            "syscalls": ('"name": "n6", "deny_syscalls": [1e999], ' + base,
                         "deny_syscalls[0]: expected a system call name"),
            "filesystem": ('"name": "n7", "filesystem": {"read": [1e999]}, ' + base,
                           "filesystem.read[0]: expected a path"),
            "title": ('"name": "n8", "title": 1e999, ' + base, "title: expected"),
            "network": ('"name": "n9", "network": {"allow": [1e999]}, ' + base,
                        "allow[0]: expected a host name"),
            "required": ('"name": "n10", ' + base.replace('{"type": "object"}',
                                                          '{"type": "object", "required": [1e999]}'),
                         "schema/required: expected an array of strings"),
            "type": ('"name": "n11", ' + base.replace('{"type": "object"}', '{"type": 1e999}'),
                     "schema/type: expected a string"),
        }
        for key, (text, _) in cases.items():
            write(self.dir, key + ".json", "{" + text + "}")
        status, lines = self.check()
        self.assertEqual(status, 1, lines)
        for key, (_, what) in cases.items():
            mine = [l for l in lines if "/%s.json: " % key in l]
            self.assertEqual(len(mine), 1, (key, lines))
            self.assertIn(what, mine[0], key)
        self.assertRegex(lines[-1], r"12 problems in 12 of 12 definitions")

    def test_clean_directory(self):
        write(self.dir, "good.json", '{"name": "good", "description": "fine",'
                                     ' "command": ["/bin/cat"], "protocol": "plain"}')
        status, lines = self.check()
        self.assertEqual((status, lines[-1].endswith("1 definition in %s, no problems"
                                                     % os.path.realpath(self.dir))), (0, True),
                         lines)


class CheckAndLoadAgree(unittest.TestCase):
    """What --check reports of a definition that loads, the daemon logs at
    start and at each reload: the same lines, from the same list."""

    def agree(self, d, line, absent=None):
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", d.tools_dir],
                           capture_output=True, text=True, timeout=WAIT)
        self.assertIn(line, p.stdout)
        self.assertEqual(p.returncode, 1, p.stdout)
        with d:
            d.start()
            self.assertEqual(d.stderr().count(line), 1, d.stderr())
            d.proc.send_signal(signal.SIGHUP)
            deadline_wait(lambda: "reloaded " in d.stderr(), what="the reload")
            self.assertEqual(d.stderr().count(line), 2, d.stderr())
            if absent:
                self.assertNotIn(absent, p.stdout)
                self.assertNotIn(absent, d.stderr())

    def test_a_command_that_is_not_executable(self):
        d = Daemon([worker_tool("echo", "echo")], start=False)
        script = write(d.tmp, "tool.sh", "#!/bin/sh\necho hi\n")  # mode 0644
        d.add_tool({"name": "noexec", "description": "x", "schema": {"type": "object"},
                    "command": [script], "protocol": "plain", "filesystem": "host"})
        self.agree(d, "noexec.json: command: %s: not executable (a file, mode 0644)"
                   % os.path.realpath(script))

    def test_env_in_a_file_every_user_may_read(self):
        # LANG and PYTHONPATH are no secret: the shipped examples have them
        d = Daemon([worker_tool("open", "echo", env={"API_KEY": "k1"}),
                    worker_tool("public", "echo", env={"LANG": "C.UTF-8", "PYTHONPATH": "/x"})],
                   start=False)
        os.chmod(os.path.join(d.tools_dir, "open.json"), 0o644)
        os.chmod(os.path.join(d.tools_dir, "public.json"), 0o644)
        self.agree(d, "open.json: has \"env\" and every user may read it (mode 0644): chmod o-r",
                   absent="public.json: has")


class Runs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.d = Daemon([
            worker_tool("echo", "echo"),
            {"name": "hello", "description": "a plain tool left on framed",
             "schema": {"type": "object"}, "command": ["/bin/sh", "-c", "echo Hello world"]},
            {"name": "hi", "description": "short text on framed",
             "schema": {"type": "object"}, "command": ["/bin/sh", "-c", "echo Hi"]},
        ])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def setUp(self):
        self.c = self.d.client()

    def test_text_where_a_frame_was_expected(self):
        res = self.c.run([{"id": "a", "name": "hello"}, {"id": "b", "name": "hi"}])
        for cid, text in (("a", "Hello world\n"), ("b", "Hi\n")):
            te = res.result(cid)["tool_error"]
            self.assertEqual(te["reason"], "invalid_return", te)
            self.assertIn("the worker wrote text where a frame was expected; is this a plain "
                          "tool?", te["message"])
            self.assertNotIn("output_limit", te["cause"])
            self.assertEqual(te["cause"]["not_a_frame"], text)

    def test_unknown_tool_error(self):
        calls = [{"id": "a", "name": "echo", "arguments": {"x": 1}},
                 {"id": "b", "name": "nosuch"},
                 {"id": "c", "name": "alsonot"}]
        res = self.c.run(calls, batch="u1", unknown_tool="error")
        self.assertEqual(res.result("a"), {"ok": {"x": 1}})
        for cid, name in (("b", "nosuch"), ("c", "alsonot")):
            te = res.result(cid)["tool_error"]
            self.assertEqual((te["reason"], te["tool_name"], te["metadata"]),
                             ("not_found", name, {"unknown_tool": True}), te)
        msgs = res.terminal["messages"]
        self.assertEqual([m["tool_call_id"] for m in msgs], ["a", "b", "c"])
        self.assertIsNone(res.terminal["halt"])

    def test_unknown_tool_default_refuses(self):
        for opts in ({}, {"unknown_tool": "refuse"}):
            self.c.send(dict({"op": "run", "batch": "u2", "calls": [
                {"id": "a", "name": "echo"}, {"id": "b", "name": "nosuch"}]}, **opts))
            ev = self.c.recv_for(lambda e: e.get("batch") == "u2")
            self.assertEqual((ev["event"], ev["reason"]), ("error", "unknown_tool"), ev)

    def test_unknown_tool_bad_value(self):
        self.c.send({"op": "run", "batch": "u3", "unknown_tool": "skip",
                     "calls": [{"id": "a", "name": "echo"}]})
        ev = self.c.recv_for(lambda e: e.get("batch") == "u3")
        self.assertEqual(ev["reason"], "invalid_request")
        self.assertIn("unknown_tool", ev["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
