"""What a call's confinement refused it reaches the model in every LLM shape:
a batch whose messages go back to a model (its request names result_format,
or its calls came in an LLM API's shape) has, after each call's content,
"[toolexec] Refused during the call:" and a sentence per denial naming what
was refused and the key that decides it (lib/why.c), the run request's
"policy" where it narrowed that key. Through the real daemon with tools that
are refused a system call (bpf), a host (evil.example) and, by a root
daemon, a file; in the OpenAI Chat Completions, OpenAI Responses and
Anthropic shapes. A native call under the default format keeps its content
as it was (a program may read it as JSON), and toolexec mcp, which reads
that content, says each reason once. Root and unprivileged daemons."""

import json
import os
import unittest
import uuid

import harness
from harness import Daemon, worker_tool
from test_confine_net import tool as net_tool
from test_fs_denials import py_tool
from test_mcp import TOOLEXEC, Session

TOKEN = uuid.uuid4().hex[:10]
HEAD = "\n\n[toolexec] Refused during the call:"
BPF = ("The system call bpf was refused (EPERM) by the tool's system-call filter; only the "
       "tool's definition (\"syscalls\", \"deny_syscalls\") can allow it.")
EVIL = ("Network access to evil.example port 80 was refused: it is not in the tool's network "
        "allow-list; only the tool's definition (\"network\": {\"allow\": "
        "[\"evil.example:80\"]}) allows it, within what a run request's \"policy\" leaves.")
# listed by the tool, left out by the run request's policy: never connected to
LISTED = "listed.invalid:80"
NARROWED = ("Network access to listed.invalid port 80 was refused: it is not in this call's "
            "network allow-list, which the run request's \"policy\" narrows; only that policy and "
            "the tool's definition together (\"network\": {\"allow\": [\"listed.invalid:80\"]} "
            "in each) allow it.")
# on the host's read-only root in the view
RO_PATH = "/usr/te-why-%s" % TOKEN
CREATE = ("Creating %s was refused: the tool's view shows it read-only; only the tool's "
          "definition (\"filesystem\": {\"write\": [\"/usr\"]}) allows it, within what a run "
          "request's \"policy\" leaves." % RO_PATH)

PROBE = {"try": ["bpf"]}
EVIL_GET = {"op": "get", "url": "http://evil.example/x"}
LISTED_GET = {"op": "get", "url": "http://%s/" % LISTED}
CREATE_TRY = {"try": [["create", RO_PATH]]}


def shaped(fmt, cid, name, args):
    """A call as the API of fmt emits it."""
    if fmt == "openai":
        return {"type": "function", "id": cid,
                "function": {"name": name, "arguments": json.dumps(args)}}
    if fmt == "openai_responses":
        return {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name,
                "arguments": json.dumps(args)}
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


def content_of(msg):
    return msg["output"] if "output" in msg else msg["content"]


class Cases:
    """The promises; run against a root daemon and an unprivileged one."""

    @classmethod
    def make_daemon(cls, tools):
        return Daemon(tools)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        tools = [worker_tool("probe", "sysprobe", timeout_ms=60000),
                 net_tool("net", {"allow": [LISTED, "allowed.invalid:80"]})]
        if cls.sees_files():
            tools.append(py_tool("fsd", filesystem=harness.with_tree({})))
        cls.d = cls.make_daemon(tools)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    @classmethod
    def sees_files(cls):
        # only a root daemon sees file-system refusals (test_fs_denials)
        return os.geteuid() == 0

    def run_batch(self, calls, **opts):
        """The batch's messages by call id, and each call's encoded content."""
        c = self.d.client()
        self.addCleanup(c.close)
        batch = c.start_batch(calls, **opts)
        evs = c.recv_batch(batch, timeout=120)
        end = evs[-1]
        self.assertEqual(end["event"], "batch_completed", end)
        ids = {"tool_call_id", "tool_use_id", "call_id"}
        msgs = {next(m[k] for k in ids if k in m): m for m in end["messages"]}
        encoded = {e.get("id") or e.get("tool_call_id"): e["content"] for e in evs
                   if e["event"] in ("tool_result_encoded", "tool_halt")}
        return msgs, encoded

    def assertReasons(self, msg, encoded, sentences):
        """msg's content is the call's content, then the reasons, among
        them each of sentences."""
        text = content_of(msg)
        self.assertTrue(text.startswith(encoded + HEAD), text)
        lines = text[len(encoded + HEAD):].split("\n")
        self.assertEqual(lines[0], "", text)
        for s in sentences:
            self.assertIn("- " + s, lines, text)
        self.assertEqual(text.count(HEAD), 1, text)

    def test_llm_shapes_carry_the_reasons(self):
        for fmt in ("openai", "openai_responses", "anthropic"):
            with self.subTest(fmt=fmt):
                calls = [shaped(fmt, "s", "probe", PROBE), shaped(fmt, "n", "net", EVIL_GET)]
                msgs, encoded = self.run_batch(calls, result_format=fmt)
                self.assertReasons(msgs["s"], encoded["s"], [BPF])
                self.assertReasons(msgs["n"], encoded["n"], [EVIL])
                if fmt == "anthropic":
                    self.assertIs(msgs["s"]["is_error"], False)

    def test_shaped_calls_without_result_format(self):
        # OpenAI-shaped calls, the default (OpenAI) messages: for a model too
        msgs, encoded = self.run_batch([shaped("openai", "s", "probe", PROBE)])
        self.assertReasons(msgs["s"], encoded["s"], [BPF])

    def test_native_calls_with_a_result_format(self):
        calls = [{"id": "s", "name": "probe", "arguments": PROBE}]
        msgs, encoded = self.run_batch(calls, result_format="anthropic")
        self.assertReasons(msgs["s"], encoded["s"], [BPF])

    def test_native_calls_keep_their_content(self):
        calls = [{"id": "s", "name": "probe", "arguments": PROBE}]
        msgs, encoded = self.run_batch(calls)
        self.assertEqual(msgs["s"]["content"], encoded["s"])
        self.assertEqual(json.loads(msgs["s"]["content"]), {"bpf": "EPERM"})

    def test_policy_narrowed_says_the_policy(self):
        for where in ("batch", "call"):
            with self.subTest(where=where):
                pol = {"network": {"allow": ["allowed.invalid:80"]}}
                call = shaped("anthropic", "n", "net", LISTED_GET)
                opts = {"result_format": "anthropic"}
                if where == "call":
                    call["policy"] = pol
                else:
                    opts["policy"] = pol
                msgs, encoded = self.run_batch([call], **opts)
                self.assertIn("\"status\":403", encoded["n"])
                self.assertReasons(msgs["n"], encoded["n"], [NARROWED])
                self.assertNotIn("within what a run request's", content_of(msgs["n"]))

    def test_file_refused(self):
        if not self.sees_files():
            self.skipTest("only a root daemon sees file-system refusals")
        for fmt in ("openai", "anthropic"):
            with self.subTest(fmt=fmt):
                msgs, encoded = self.run_batch([shaped(fmt, "f", "fsd", CREATE_TRY)],
                                               result_format=fmt)
                self.assertIn("EROFS", encoded["f"])
                self.assertReasons(msgs["f"], encoded["f"], [CREATE])

    def test_mcp_says_each_reason_once(self):
        if not TOOLEXEC:
            self.skipTest("environment lacks TOOLEXEC (run through meson test)")
        s = Session(self, self.d.sock)
        s.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_why_shapes", "version": "1"}})
        self.assertIn("result", s.recv())
        s.notify("notifications/initialized")
        s.request(2, "tools/call", {"name": "net", "arguments": LISTED_GET, "_meta": {
            "toolexecd/policy": {"network": {"allow": ["allowed.invalid:80"]}}}})
        r = s.response(2)["result"]
        text = r["content"][0]["text"]
        self.assertEqual(text.count("[toolexec] Refused during the call:"), 1, text)
        self.assertEqual(text.count(NARROWED), 1, text)
        self.assertEqual(r["_meta"]["toolexecd/denied"],
                         [{"kind": "network", "host": "listed.invalid", "port": 80, "why": NARROWED}])


# A plain tool refused bpf (the raw system call), then a text of more than
# 1 MiB: a result held once (daemon/run/bigres.c), whose content is a marker
# until it is written.
BIG_N = 2 * (1 << 20) + 7
BIG_TOOL = r"""
import ctypes, os, sys
sys.stdin.buffer.read()
nr = {"x86_64": 321, "aarch64": 280}[os.uname().machine]
ctypes.CDLL(None, use_errno=True).syscall(nr, 0, 0, 0)
sys.stdout.write("x" * %d)
""" % BIG_N


class BigContent(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if os.uname().machine not in ("x86_64", "aarch64"):
            raise unittest.SkipTest("bpf's system call number is known for x86_64 and aarch64")
        mib = str(64 << 20)
        cls.d = Daemon([{"name": "bigdeny", "description": "refused bpf, then 2 MiB",
                         "schema": {"type": "object"}, "protocol": "plain",
                         "filesystem": harness.with_tree({}),
                         "command": ["/usr/bin/python3", "-c", BIG_TOOL]}],
                       ["--max-frame-bytes", mib, "--max-content-bytes", mib])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_big_content_then_the_reasons(self):
        c = self.d.client()
        self.addCleanup(c.close)
        batch = c.start_batch([shaped("anthropic", "b", "bigdeny", {})],
                              result_format="anthropic", max_content_bytes=4 << 20)
        evs = c.recv_batch(batch, timeout=120)
        self.assertEqual(evs[-1]["event"], "batch_completed", evs[-1])
        self.assertEqual(evs[-2]["content"], "x" * BIG_N)  # tool_result_encoded: the text
        self.assertEqual(evs[-1]["messages"][0]["content"], "x" * BIG_N + HEAD + "\n- " + BPF)


class RootDaemon(Cases, unittest.TestCase):
    pass


class UnprivilegedDaemon(Cases, unittest.TestCase):

    @classmethod
    def sees_files(cls):
        return False

    @classmethod
    def make_daemon(cls, tools):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to drop the daemon to nobody)")
        return harness.nobody_daemon(tools)


if __name__ == "__main__":
    harness.main()
