"""Failures a model can act on, through the real daemon with hostile tools:
each limit a call meets named in its cause as "resource_limit" (the key of
"limits", its value, what showed it) and in the message (CPU time, file
size, output, and with a cgroup per call memory.max's OOM kill and
pids.max's refused forks); a plain tool's last words on stderr in the
message the model reads (through `toolexec mcp` too), not with
"stderr_to_model": false; and a denial's sentence in the MCP result.

Root and unprivileged daemons for what needs no cgroup; the cgroup classes
skip, saying why, where the controllers are not available."""

import json
import os
import shutil
import unittest

import harness
from harness import DaemonTestCase, worker_tool
from test_cgroup import CgroupCase, controllers
from test_mcp import TOOLEXEC, Session

MIB = 1 << 20
SAY_WHY = ["/bin/sh", "-c", "echo 'warming up' >&2; "
           "echo 'cannot open notes.txt: No such file or directory' >&2; exit 3"]

TOOLS = [
    worker_tool("fsize", "write-file", limits={"file_size_mb": 1}),
    worker_tool("cpu", "spin", limits={"cpu_ms": 1000}, timeout_ms=30000),
    worker_tool("bigout", "big-output", limits={"output_mb": 1}),
    {"name": "plainbig", "description": "2 MiB of plain stdout", "schema": {"type": "object"},
     "command": ["/bin/sh", "-c", "head -c 2097152 /dev/zero | tr '\\0' x"],
     "protocol": "plain", "limits": {"output_mb": 1}},
    {"name": "saywhy", "description": "fails saying why", "schema": {"type": "object"},
     "command": SAY_WHY, "protocol": "plain"},
    {"name": "saywhy_quiet", "description": "fails saying why", "schema": {"type": "object"},
     "command": SAY_WHY, "protocol": "plain", "stderr_to_model": False},
    worker_tool("probe", "sysprobe", timeout_ms=60000),
    # within its last KiB: a character the cut splits, a NUL, bytes that
    # are not UTF-8, then the reason
    {"name": "sayjunk", "description": "fails saying why, amid junk",
     "schema": {"type": "object"}, "protocol": "plain",
     "command": ["/usr/bin/python3", "-c",
                 "import sys; w = sys.stderr.buffer.write; w(b'x' * 1000);"
                 "w('\\u00e9'.encode() * 900 + b'\\0\\xff\\xfe\\nthe reason\\n');"
                 "sys.exit(1)"]},
]


def limit_of(te):
    return te["cause"].get("resource_limit")


class Causes:
    """The promises; run against a root daemon and an unprivileged one."""

    def test_file_size(self):
        res = self.c.run([{"id": "w", "name": "fsize", "arguments": {"mb": 2}}])
        te = self.assertToolError(res, "w", "handler_exit")
        self.assertEqual(te["cause"]["signal"], "SIGXFSZ", te)
        self.assertEqual(limit_of(te), {"name": "file_size_mb", "value": 1,
                                        "reached": "SIGXFSZ"}, te)
        self.assertIn("(limits.file_size_mb)", te["message"])

    def test_cpu(self):
        res = self.c.run([{"id": "s", "name": "cpu"}], timeout=40)
        te = self.assertToolError(res, "s", "handler_exit")
        self.assertIn("cpu_limit", te["cause"], te)  # kept beside it
        lim = limit_of(te)
        self.assertEqual((lim["name"], lim["value"]), ("cpu_ms", 1000), te)
        self.assertIn(lim["reached"], ("SIGXCPU", "SIGKILL"), te)
        self.assertIn("CPU time at its limit of 1000 ms (limits.cpu_ms)", te["message"])

    def test_output_framed_and_plain(self):
        for name, reached in (("bigout", "frame_length"), ("plainbig", "stdout")):
            res = self.c.run([{"id": "o", "name": name, "arguments": {"n": 2 * MIB}}])
            te = self.assertToolError(res, "o", "invalid_return")
            self.assertEqual(te["cause"]["output_limit"], {"limit": MIB}, te)
            self.assertEqual(limit_of(te), {"name": "output_mb", "value": 1, "reached": reached,
                                            "bytes": MIB}, te)
            self.assertIn("exceeds the limit of %d bytes (limits.output_mb)" % MIB, te["message"])

    def test_plain_failure_says_why_to_the_model(self):
        res = self.c.run([{"id": "p", "name": "saywhy"}])
        te = self.assertToolError(res, "p", "handler_exit")
        self.assertEqual(te["cause"]["exit_status"], 3, te)
        self.assertNotIn("resource_limit", te["cause"], te)
        self.assertEqual(te["message"], "tool error (saywhy): handler_exit: exited with status 3; "
                         "its stderr ends: warming up\ncannot open notes.txt: No such file or "
                         "directory")
        self.assertIn("cannot open notes.txt", json.loads(res.content("p"))["error"])

    def test_stderr_quote_is_bounded_and_utf8(self):
        res = self.c.run([{"id": "p", "name": "sayjunk"}])
        te = self.assertToolError(res, "p", "handler_exit")
        head = "tool error (sayjunk): handler_exit: exited with status 1; its stderr ends: "
        self.assertTrue(te["message"].startswith(head), te["message"])
        quoted = te["message"][len(head):]
        # the last 1 KiB, from a character's start, its final newline
        # dropped, a NUL a space and the bytes that are not UTF-8 "?"
        self.assertEqual(quoted, "\u00e9" * 504 + " ??\nthe reason")
        self.assertLessEqual(len(quoted.encode()), 1024)

    def test_stderr_to_model_false(self):
        res = self.c.run([{"id": "p", "name": "saywhy_quiet"}])
        te = self.assertToolError(res, "p", "handler_exit")
        self.assertEqual(te["message"], "tool error (saywhy_quiet): handler_exit: exited with "
                         "status 3")
        self.assertIn("cannot open notes.txt", te["cause"]["stderr"])  # the client's still

    def test_limit_not_met_is_not_named(self):
        res = self.c.run([{"id": "w", "name": "fsize", "arguments": {"mb": 1}}])
        self.assertOk(res, "w", {"written": MIB})


class RootDaemon(Causes, DaemonTestCase):
    TOOLS = TOOLS


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Causes, DaemonTestCase):
    TOOLS = TOOLS

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.daemon = harness.nobody_daemon(cls.TOOLS)


# -- through toolexec mcp ---------------------------------------------------------

class McpText(DaemonTestCase):
    TOOLS = TOOLS

    @classmethod
    def setUpClass(cls):
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        super().setUpClass()

    def call(self, name, arguments=None):
        s = Session(self, self.daemon.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_limit_causes", "version": "1"}})
        self.assertIn("result", s.recv())
        s.notify("notifications/initialized")
        s.request(2, "tools/call", {"name": name, "arguments": arguments or {}})
        r = s.response(2)["result"]
        self.assertEqual(len(r["content"]), 1, r)
        return r

    def test_stderr_reason_reaches_the_model(self):
        r = self.call("saywhy")
        self.assertIs(r["isError"], True, r)
        self.assertIn("exited with status 3; its stderr ends: warming up\\ncannot open "
                      "notes.txt", r["content"][0]["text"])
        r = self.call("saywhy_quiet")
        self.assertNotIn("notes.txt", r["content"][0]["text"])
        self.assertIn("exited with status 3", r["content"][0]["text"])

    def test_denial_sentence(self):
        r = self.call("probe", {"try": ["bpf"]})
        self.assertIs(r["isError"], False, r)
        text = r["content"][0]["text"]
        sentence = ("The system call bpf was refused (EPERM) by the tool's system-call filter; "
                    "only the tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.")
        self.assertIn("[toolexec] Refused during the call:\n- " + sentence, text)
        denied = r["_meta"]["toolexecd/denied"]
        self.assertIn({"kind": "syscall", "name": "bpf", "why": sentence}, denied)
        # the tool's own structured result stays its own
        self.assertNotIn("denied", r.get("structuredContent", {}))

    def test_nothing_refused_nothing_added(self):
        r = self.call("probe", {"try": []})
        self.assertNotIn("Refused", r["content"][0]["text"])
        self.assertNotIn("toolexecd/denied", r.get("_meta", {}))


# -- with a cgroup per call: memory.max and pids.max -------------------------------

CG_TOOLS = [
    {"name": "alloc64", "description": "allocates and touches memory", "protocol": "plain",
     "schema": {"type": "object"}, "command": [os.environ.get("TE_MEMHOG", "")],
     "limits": {"memory_mb": 64}, "timeout_ms": 30000},
    {"name": "forks8", "description": "forks past its limit, then fails", "protocol": "plain",
     "schema": {"type": "object"}, "limits": {"processes": 8}, "timeout_ms": 30000,
     "command": ["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; "
                 "do sleep 30 & done; wait"]},
]


class CgroupCauses(CgroupCase):
    TOOLS = CG_TOOLS
    CONTAINMENT = "auto"

    def need(self, ctl):
        if ctl not in controllers(self.cg):
            self.skipTest("the %s controller is not available to %s" % (ctl, self.cg))

    def test_oom(self):
        self.need("memory")
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 256}}])
        te = self.assertToolError(res, "m", "handler_exit")
        self.assertEqual(te["cause"]["oom_kill"]["limit_mb"], 64, te)
        self.assertEqual(limit_of(te), {"name": "memory_mb", "value": 64,
                                        "reached": "oom_kill"}, te)
        self.assertIn("out of memory at its limit of 64 MiB (limits.memory_mb)", te["message"])

    def test_processes(self):
        self.need("pids")
        res = self.c.run([{"id": "f", "name": "forks8"}])
        te = self.assertToolError(res, "f", "handler_exit")
        self.assertEqual(limit_of(te), {"name": "processes", "value": 8,
                                        "reached": "pids.max"}, te)
        self.assertIn("new processes refused at its limit of 8 (limits.processes)",
                      te["message"])
        # a reused cgroup starts its count afresh: the next call within its
        # limit names none
        res = self.c.run([{"id": "m", "name": "alloc64", "arguments": {"mb": 8}}])
        self.assertOk(res, "m", {"allocated_mb": 8})


if __name__ == "__main__":
    harness.main()
