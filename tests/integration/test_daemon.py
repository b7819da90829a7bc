"""The daemon's life: start-up log, tool-definition errors, live and stale
sockets, SIGTERM with work in flight, working-directory clean-up."""

import json
import os
import signal
import socket
import subprocess
import unittest

import harness
from harness import Daemon, worker_tool, deadline_wait, WAIT


def wait_exit(proc, timeout=WAIT):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("toolexecd kept running")


class StartUp(unittest.TestCase):
    def test_logs_socket_and_tool_count(self):
        with Daemon([worker_tool("a", "echo"), worker_tool("b", "echo"),
                     {"name": "m", "description": "manual"}]) as d:
            deadline_wait(lambda: "listening on" in d.stderr(), what="start-up log line")
            self.assertIn("listening on %s with 3 tools" % d.sock, d.stderr())
        with Daemon([worker_tool("a", "echo")]) as d:
            deadline_wait(lambda: "listening on" in d.stderr(), what="start-up log line")
            self.assertIn("listening on %s with 1 tool (" % d.sock, d.stderr())

    def test_empty_tools_dir(self):
        with Daemon([]) as d:
            self.assertEqual(d.client().tools()["tools"], [])

    def test_socket_mode_and_removal_on_sigterm(self):
        d = Daemon([worker_tool("a", "echo")])
        try:
            mode = os.stat(d.sock).st_mode & 0o777
            self.assertEqual(mode, 0o660)
        finally:
            d.stop()
        self.assertFalse(os.path.exists(d.sock), "socket file left behind")

    def test_non_json_files_are_ignored(self):
        with Daemon([worker_tool("a", "echo")], start=False) as d:
            with open(d.path("tools", "README"), "w") as f:
                f.write("not a tool definition\n")
            d.start()
            self.assertEqual([t["name"] for t in d.client().tools()["tools"]], ["a"])

    def test_live_socket_is_an_error(self):
        with Daemon([worker_tool("a", "echo")]) as d:
            second = subprocess.run(d.command(), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    timeout=WAIT)
            self.assertEqual(second.returncode, 1)
            self.assertIn("another toolexecd is listening on %s" % d.sock,
                          second.stdout.decode())
            # the first one is unharmed
            self.assertTrue(d.client().run([{"id": "c", "name": "a"}]).ok)

    def test_stale_socket_is_replaced(self):
        with Daemon([worker_tool("a", "echo")], start=False) as d:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(d.sock)
            s.close()
            self.assertTrue(os.path.exists(d.sock))
            d.start()
            self.assertTrue(d.client().run([{"id": "c", "name": "a"}]).ok)


class CommandLine(unittest.TestCase):
    def setUp(self):
        harness.require_env()

    def run_daemon(self, *args):
        return subprocess.run([harness.TOOLEXECD] + list(args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)

    def test_help(self):
        p = self.run_daemon("--help")
        self.assertEqual(p.returncode, 0)
        out = (p.stdout + p.stderr).decode()
        for opt in ("--socket", "--tools", "--work-dir", "--max-frame-bytes",
                    "--max-content-bytes", "--max-request-bytes", "--log-level"):
            self.assertIn(opt, out)

    def test_version(self):
        p = self.run_daemon("--version")
        self.assertEqual(p.returncode, 0)
        self.assertRegex((p.stdout + p.stderr).decode(), r"\d+\.\d+")

    def test_unknown_option_fails(self):
        p = self.run_daemon("--no-such-option")
        self.assertNotEqual(p.returncode, 0)
        self.assertTrue(p.stderr)

    def test_bad_option_values_fail(self):
        for args in (["--max-frame-bytes", "lots"], ["--max-request-bytes", "-1"],
                     ["--log-level", "chatty"]):
            with self.subTest(args=args):
                p = self.run_daemon(*args)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(args[0].lstrip("-"), p.stderr.decode())

    def test_max_frame_bytes_is_bounded(self):
        # a frame is held whole, its length + 1 bytes: 4 GiB - 1 wrapped a
        # 32-bit size_t; 1 GiB is the most a decoder takes
        p = self.run_daemon("--max-frame-bytes", "4294967295")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--max-frame-bytes: expected a size in bytes (1 to 1073741824)",
                      p.stderr.decode())
        p = self.run_daemon("--max-frame-bytes", "1073741824", "--version")
        self.assertEqual(p.returncode, 0, p.stderr)

    @unittest.skipIf(os.geteuid() == 0, "root's default socket is /run/toolexecd/")
    def test_default_socket_in_runtime_dir(self):
        d = Daemon([worker_tool("a", "echo")], start=False)
        try:
            d.env = {"XDG_RUNTIME_DIR": d.tmp}
            d.command = lambda: [harness.TOOLEXECD, "--tools", d.tools_dir,
                                 "--work-dir", d.work_dir]
            d.sock = d.path("toolexecd.sock")
            d.start()
            self.assertTrue(d.client().run([{"id": "c", "name": "a"}]).ok)
        finally:
            d.stop()


BAD_DEFINITIONS = [
    ("timeout_ms string", {"timeout_ms": "x"}, "timeout_ms"),
    ("timeout_ms zero", {"timeout_ms": 0}, "timeout_ms"),
    ("unknown key", {"colour": "blue"}, "colour"),
    ("bad name", {"name": "has space"}, "name"),
    ("long name", {"name": "n" * 65}, "name"),
    ("missing name", {"name": None}, "name"),
    ("protocol", {"protocol": "weird"}, "protocol"),
    ("context not bool", {"context": "yes"}, "context"),
    ("env value not string", {"env": {"A": 1}}, "env"),
    ("env not object", {"env": ["A=1"]}, "env"),
    ("command empty", {"command": []}, "command"),
    ("command not strings", {"command": [1, 2]}, "command"),
    ("command string", {"command": "/bin/true"}, "command"),
    ("schema not object", {"schema": "object"}, "schema"),
    ("description not string", {"description": 5}, "description"),
]


class ToolDefinitions(unittest.TestCase):
    def start_failing(self, d):
        proc = d.spawn()
        rc = wait_exit(proc)
        d._stderr_f.close()
        self.assertNotEqual(rc, 0, "toolexecd started despite a bad definition")
        d.proc = None
        return d.stderr()

    def test_invalid_definitions_stop_the_start(self):
        for label, change, field in BAD_DEFINITIONS:
            with self.subTest(label):
                d = Daemon(start=False)
                try:
                    definition = worker_tool("good", "echo")
                    for k, v in change.items():
                        if v is None:
                            definition.pop(k)
                        else:
                            definition[k] = v
                    path = d.add_tool(definition, "broken.json")
                    err = self.start_failing(d)
                    self.assertIn("broken.json", err)
                    self.assertIn(field, err)
                    self.assertFalse(os.path.exists(d.sock))
                finally:
                    d.stop(check=False)

    def test_not_json_definition(self):
        d = Daemon(start=False)
        try:
            d.add_tool("{ this is not json", "broken.json")
            self.assertIn("broken.json", self.start_failing(d))
        finally:
            d.stop(check=False)

    def test_duplicate_names(self):
        d = Daemon(start=False)
        try:
            d.add_tool(worker_tool("same", "echo"), "one.json")
            d.add_tool(worker_tool("same", "echo"), "two.json")
            err = self.start_failing(d)
            self.assertIn("same", err)
        finally:
            d.stop(check=False)

    def test_duplicate_env_names(self):
        d = Daemon(start=False)
        try:
            text = ('{"name": "dupenv", "command": ["%s", "echo"], '
                    '"env": {"A": "1", "A": "2"}}' % harness.TESTWORKER)
            d.add_tool(text, "dupenv.json")
            err = self.start_failing(d)
            self.assertIn("dupenv.json", err)
            self.assertIn("env", err)
        finally:
            d.stop(check=False)

    def test_full_definition_from_the_spec(self):
        definition = {
            "name": "echo", "description": "Returns its arguments",
            "schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "command": [harness.TESTWORKER, "echo"], "protocol": "framed", "context": False,
            "timeout_ms": 30000, "env": {"LANG": "C.UTF-8"}}
        with Daemon([definition]) as d:
            res = d.client().run([{"id": "c0", "name": "echo", "arguments": {"x": 1}}])
            self.assertEqual(res.result("c0"), {"ok": {"x": 1}})


class Shutdown(unittest.TestCase):
    def test_sigterm_with_work_in_flight(self):
        tok = harness.new_token("sleep")
        with Daemon([worker_tool("sleeper", "sleep", tok, timeout_ms=60000),
                     worker_tool("gc", "grandchild", timeout_ms=60000)]) as d:
            gtok = harness.new_token("gc")
            c = d.client()
            c.start_batch([{"id": "s", "name": "sleeper"},
                           {"id": "g", "name": "gc", "arguments": {"token": gtok,
                                                                   "then": "sleep"}}],
                          batch="inflight")
            harness.wait_token_present(tok)
            harness.wait_token_present(gtok)
            d.proc.send_signal(signal.SIGTERM)
            rc = wait_exit(d.proc)
            self.assertEqual(rc, 0, d.stderr())
            harness.assert_token_gone(tok, what="worker of a terminated daemon")
            harness.assert_token_gone(gtok, what="grandchild of a terminated daemon")
            # whatever was delivered before the close is well-formed
            while c.recv_or_eof() is not None:
                pass
            self.assertFalse(os.path.exists(d.sock))

    def test_workers_die_with_a_killed_daemon(self):
        # PR_SET_PDEATHSIG(SIGKILL): a worker never outlives the daemon
        for mode in ([], ["--containment", "pgroup"]):
            if mode and "--containment" not in subprocess.run(
                    [harness.TOOLEXECD, "--help"], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT).stdout.decode():
                continue
            with self.subTest(args=mode):
                tok = harness.new_token("sleep")
                d = Daemon([worker_tool("sleeper", "sleep", tok, timeout_ms=60000)], mode)
                try:
                    d.client().start_batch([{"id": "s", "name": "sleeper"}])
                    harness.wait_token_present(tok)
                    os.kill(d.proc.pid, signal.SIGKILL)
                    d.proc.wait()
                    harness.assert_token_gone(tok, what="worker of a SIGKILLed daemon")
                finally:
                    d.stop(check=False)

    def test_sigint_exits_0(self):
        d = Daemon([worker_tool("a", "echo")])
        try:
            d.proc.send_signal(signal.SIGINT)
            self.assertEqual(wait_exit(d.proc), 0, d.stderr())
        finally:
            d.stop()

    def test_working_directories_are_cleaned_up(self):
        with Daemon([worker_tool("env", "env"), worker_tool("x", "exit", "3"),
                     worker_tool("s", "sleep", timeout_ms=200)]) as d:
            c = d.client()
            res = c.run([{"id": "a", "name": "env"}, {"id": "b", "name": "x"},
                         {"id": "c", "name": "s"}])
            self.assertTrue(res.ok)
            # what is left are the empty directories of spares (spares.c),
            # made for calls to come
            deadline_wait(lambda: set(os.listdir(d.work_dir)) <= harness.spare_dirs(d.proc.pid),
                          timeout=5, what="work dir to hold only spares', has %s (spares: %s)"
                          % (os.listdir(d.work_dir), harness.spare_dirs(d.proc.pid)))
            for name in os.listdir(d.work_dir):
                self.assertEqual(os.listdir(os.path.join(d.work_dir, name)), [], name)


if __name__ == "__main__":
    harness.main()
