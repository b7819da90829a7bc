"""toolexec mcp's tasks extension (io.modelcontextprotocol/tasks, MCP
2026-07-28) against the real daemon over stdio: server/discover advertises
it; a call from a client that declared it, running past --task-after,
comes back as a task handle; tasks/get polls it from working to completed;
tasks/cancel kills its worker; a tool's question surfaces as input_required
and tasks/update answers it; a task is gone after --task-ttl; --max-tasks
bounds the table (the oldest finished task goes; with none finished a call
stays synchronous); handles name their replica (--replica-id); the methods
need the extension declared.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import os
import re
import time
import unittest

from harness import WAIT, assert_token_gone, new_token, wait_token_present, worker_tool
from test_mcp import McpCase

V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
SLOW_TOKEN = new_token("mcp-task-slow")
HANDLE = re.compile(r"^[0-9a-f]{32}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("ask", "ask"),
    worker_tool("fail", "error"),
    worker_tool("wait", "wait-file"),  # answers once arguments.path exists
    worker_tool("slow", "sleep", SLOW_TOKEN, timeout_ms=60000),
]


def meta(tasks=True, **caps):
    if tasks:
        caps["extensions"] = {EXT: {}}
    return {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "test_mcp_tasks", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": caps}


class McpTasks(McpCase):
    TOOLS = TOOLS
    TOKENS = (SLOW_TOKEN,)

    def path(self, name):
        return os.path.join(self.files, "%s-%s" % (self.id().rsplit(".", 1)[-1], name))

    def rid(self):
        self.n = getattr(self, "n", 0) + 1
        return "r%d" % self.n

    def ask(self, s, method, params, tasks=True, **caps):
        rid = self.rid()
        p = dict(params)
        p["_meta"] = meta(tasks, **caps)
        s.request(rid, method, p)
        return s.response(rid)

    def result(self, r, kind="complete"):
        self.assertIn("result", r, r)
        self.assertEqual(r["result"]["resultType"], kind, r)
        return r["result"]

    def error(self, r, code):
        self.assertIn("error", r, r)
        self.assertEqual(r["error"]["code"], code, r)
        return r["error"]

    def call(self, s, name, args, tasks=True, **caps):
        return self.ask(s, "tools/call", {"name": name, "arguments": args}, tasks, **caps)

    def task(self, s, name, args, **caps):
        """A call that must come back as a task: its CreateTaskResult."""
        t = self.result(self.call(s, name, args, **caps), "task")
        for k in ("result", "error", "inputRequests", "task", "requestState", "ttl",
                  "pollInterval"):
            self.assertNotIn(k, t)
        self.assertEqual(t["status"], "working", t)
        self.assertRegex(t["createdAt"], ISO)
        self.assertRegex(t["lastUpdatedAt"], ISO)
        self.assertIsInstance(t["ttlMs"], int)
        self.assertIsInstance(t["pollIntervalMs"], int)
        return t

    def get(self, s, tid):
        return self.ask(s, "tasks/get", {"taskId": tid})

    def wait_status(self, s, tid, want, timeout=WAIT):
        """Poll tasks/get until the task is in status want (a deadline, not a
        sleep standing in for the event)."""
        end = time.monotonic() + timeout
        while True:
            g = self.result(self.get(s, tid))
            self.assertEqual(g["taskId"], tid, g)
            if g["status"] == want:
                return g
            self.assertIn(g["status"], ("working", "input_required"), g)
            if time.monotonic() > end:
                raise AssertionError("task %s still %s after %.1fs" % (tid, g["status"], timeout))
            time.sleep(0.05)

    # -------------------------------------------------------------------------

    def test_discover_advertises_the_extension(self):
        s = self.session()
        caps = self.result(self.ask(s, "server/discover", {}))["capabilities"]
        self.assertEqual(caps["extensions"], {EXT: {}})
        self.assertNotIn("tasks", caps)

    def test_slow_call_becomes_a_task_polled_to_its_result(self):
        s = self.session("--task-after", "100")
        done = self.path("done")
        t = self.task(s, "wait", {"path": done})
        self.assertRegex(t["taskId"], HANDLE)
        g = self.result(self.get(s, t["taskId"]))
        self.assertEqual(g["status"], "working", g)
        self.assertNotIn("result", g)
        open(done, "w").close()
        g = self.wait_status(s, t["taskId"], "completed")
        self.assertFalse(g["result"]["isError"], g)
        self.assertIn("content", g["result"])
        self.assertNotIn("error", g)
        # a tool's error is a completed task whose result says so
        t = self.result(self.call(s, "fail", {"delay_ms": 400}), "task")
        g = self.wait_status(s, t["taskId"], "completed")
        self.assertTrue(g["result"]["isError"], g)
        self.assertEqual(s.finish()[0], 0)

    def test_no_task_unless_the_request_declares_the_extension(self):
        s = self.session("--task-after", "0")
        for caps in ({}, {"extensions": {}}, {"extensions": {"io.example/other": {}}}):
            rid = self.rid()
            p = {"name": "echo", "arguments": {"n": 1}, "_meta": meta(tasks=False)}
            p["_meta"]["io.modelcontextprotocol/clientCapabilities"] = caps
            s.request(rid, "tools/call", p)
            r = self.result(s.response(rid))
            self.assertNotIn("taskId", r)
            self.assertIn("content", r)
        self.assertEqual(s.finish()[0], 0)
        # the server alone decides: a 2025-11-25 client's "task" parameter
        # asks for nothing
        s = self.session("--task-after", "600000")
        r = self.result(self.ask(s, "tools/call", {"name": "echo", "arguments": {},
                                                   "task": {"ttl": 1000}}))
        self.assertNotIn("taskId", r)
        self.assertEqual(s.finish()[0], 0)

    def test_cancel_kills_the_worker(self):
        s = self.session("--task-after", "0")
        t = self.task(s, "slow", {})
        wait_token_present(SLOW_TOKEN)
        ack = self.result(self.ask(s, "tasks/cancel", {"taskId": t["taskId"]}))
        for k in ("taskId", "status", "result", "error", "inputRequests"):
            self.assertNotIn(k, ack)
        assert_token_gone(SLOW_TOKEN, what="the cancelled task's worker")
        g = self.result(self.get(s, t["taskId"]))
        self.assertEqual(g["status"], "cancelled", g)
        # again, on a finished task: the same empty acknowledgement
        self.result(self.ask(s, "tasks/cancel", {"taskId": t["taskId"]}))
        self.assertEqual(s.finish()[0], 0)

    def test_question_answered_by_tasks_update(self):
        # the question comes before --task-after: the call becomes a task
        # then, rather than an InputRequiredResult
        s = self.session()
        t = self.task(s, "ask", {"question": "which city?"}, elicitation={})
        g = self.wait_status(s, t["taskId"], "input_required")
        (key, req), = g["inputRequests"].items()
        self.assertEqual(req["method"], "elicitation/create", req)
        self.assertEqual(req["params"]["message"], "which city?")
        # an unknown key is ignored
        self.result(self.ask(s, "tasks/update", {"taskId": t["taskId"],
                                                "inputResponses": {"nope": {"action": "accept"}}}))
        self.assertEqual(self.result(self.get(s, t["taskId"]))["status"], "input_required")
        ack = self.result(self.ask(s, "tasks/update", {
            "taskId": t["taskId"],
            "inputResponses": {key: {"action": "accept", "content": {"answer": "Lyon"}}}}))
        self.assertNotIn("status", ack)
        g = self.wait_status(s, t["taskId"], "completed")
        self.assertIn("Lyon", g["result"]["content"][0]["text"])
        self.assertNotIn("inputRequests", g)

    def test_task_expires_after_its_ttl(self):
        s = self.session("--task-after", "0", "--task-ttl", "800")
        t = self.task(s, "echo", {})
        self.assertEqual(t["ttlMs"], 800)
        end = time.monotonic() + WAIT
        while True:
            r = self.get(s, t["taskId"])
            if "error" in r:
                break
            self.assertIn(self.result(r)["status"], ("working", "completed"))
            self.assertLess(time.monotonic(), end, "the task outlived its TTL")
            time.sleep(0.05)
        self.error(r, -32602)
        self.assertEqual(s.finish()[0], 0)

    def test_bounds_too_many_tasks(self):
        s = self.session("--task-after", "0", "--max-tasks", "1")
        a_done = self.path("a")
        a = self.task(s, "wait", {"path": a_done})
        # the table is full of running tasks: the next call stays synchronous
        b_done = self.path("b")
        rid = self.rid()
        s.request(rid, "tools/call", {"name": "wait", "arguments": {"path": b_done},
                                      "_meta": meta()})
        open(b_done, "w").close()
        r = self.result(s.response(rid))
        self.assertNotIn("taskId", r)
        open(a_done, "w").close()
        self.wait_status(s, a["taskId"], "completed")
        # a finished task makes room: the oldest goes
        c = self.task(s, "echo", {})
        self.error(self.get(s, a["taskId"]), -32602)
        self.wait_status(s, c["taskId"], "completed")
        self.assertEqual(s.finish()[0], 0)

    def test_result_too_large_fails_the_task(self):
        s = self.session("--task-after", "0", "--task-max-result", "100")
        t = self.task(s, "echo", {"big": "x" * 200})
        g = self.wait_status(s, t["taskId"], "failed")
        self.assertIn("--task-max-result", g["error"]["message"])
        self.assertIsInstance(g["error"]["code"], int)
        self.assertNotIn("result", g)

    def test_handle_names_its_replica(self):
        s = self.session("--task-after", "0", "--replica-id", "eu-1")
        t = self.task(s, "echo", {})
        self.assertTrue(t["taskId"].startswith("eu-1."), t)
        self.assertRegex(t["taskId"][5:], HANDLE)
        other = "eu-2." + t["taskId"][5:]
        e = self.error(self.get(s, other), -32602)
        self.assertEqual(e["data"], {"replica": "eu-2"})
        self.assertIn("eu-2", e["message"])
        # no prefix at all: not this replica's either
        self.error(self.get(s, t["taskId"][5:]), -32602)
        self.wait_status(s, t["taskId"], "completed")

    def test_unknown_or_guessed_handles_are_not_found(self):
        s = self.session("--task-after", "0")
        t = self.task(s, "echo", {})
        guess = t["taskId"][:-1] + ("0" if t["taskId"][-1] != "0" else "1")
        for tid in (guess, "", "x" * 5000):
            self.error(self.get(s, tid), -32602)
        self.error(self.ask(s, "tasks/get", {}), -32602)
        # another process (another local subject) has no such task
        s2 = self.session()
        self.error(self.get(s2, t["taskId"]), -32602)
        self.assertEqual(s2.finish()[0], 0)

    def test_methods_need_the_extension(self):
        s = self.session()
        for method, p in (("tasks/get", {"taskId": "x"}),
                          ("tasks/update", {"taskId": "x", "inputResponses": {}}),
                          ("tasks/cancel", {"taskId": "x"})):
            e = self.error(self.ask(s, method, p, tasks=False), -32021)
            self.assertEqual(e["data"], {"requiredCapabilities": {"extensions": {EXT: {}}}})
        # the removed methods of the 2025-11-25 tasks
        for method in ("tasks/result", "tasks/list"):
            self.error(self.ask(s, method, {"taskId": "x"}), -32601)
        # a 2025 session has no tasks/get
        s.request("i", "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}})
        s.response("i")
        s.request("g", "tasks/get", {"taskId": "x"})
        self.error(s.response("g"), -32601)
        self.assertEqual(s.finish()[0], 0)

    def test_bad_options(self):
        for args in (["--replica-id", "a.b"], ["--replica-id", ""], ["--task-ttl", "0"],
                     ["--max-tasks", "-1"], ["--task-after", "x"]):
            s = self.session(*args)
            status, rest = s.finish()
            self.assertEqual((status, rest), (2, []), args)
            self.assertIn("Try 'toolexec mcp --help'", s.stderr())


if __name__ == "__main__":
    unittest.main()
