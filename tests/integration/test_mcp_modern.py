"""toolexec mcp speaking MCP 2026-07-28, the stateless revision, beside the
2025 ones, against the real daemon: server/discover, a tools/call whose
_meta names the revision (resultType and serverInfo on the result, progress
and logs bound to it), an unknown version (-32022 and the supported list),
tools/list in a stable order with ttlMs and cacheScope, subscriptions/listen
told of a reload, ask_user as an InputRequiredResult answered on the retry
(inputResponses, requestState), and a client that sent initialize still
getting the 2025 shapes from the same process.

Environment (set by tests/integration/meson.build): TOOLEXEC, the client,
besides what harness.py needs."""

import base64
import json
import os
import signal
import unittest

from harness import worker_tool
from test_mcp import McpCase, Session

V = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUB_ID = "io.modelcontextprotocol/subscriptionId"

TOOLS = [
    worker_tool("echo", "echo"),
    worker_tool("ask", "ask"),
    worker_tool("progress", "progress"),
    worker_tool("fail", "error"),
]


def meta(caps=None, **extra):
    m = {"io.modelcontextprotocol/protocolVersion": V,
         "io.modelcontextprotocol/clientInfo": {"name": "test_mcp_modern", "version": "1"},
         "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {}}
    m.update(extra)
    return m


class McpModern(McpCase):
    TOOLS = TOOLS

    def session(self):
        return Session(self, self.d.sock)

    def complete(self, r):
        """A modern result: resultType "complete", the server named."""
        self.assertIn("result", r, r)
        res = r["result"]
        self.assertEqual(res["resultType"], "complete", res)
        self.assertEqual(res["_meta"][SERVER_INFO]["name"], "toolexec", res)
        self.assertIsInstance(res["_meta"][SERVER_INFO]["version"], str)
        return res

    def call(self, s, rid, name, args, caps=None, **params):
        p = {"name": name, "arguments": args, "_meta": meta(caps)}
        p.update(params)
        s.request(rid, "tools/call", p)
        return s.response(rid)

    def test_discover(self):
        s = self.session()
        s.request("d1", "server/discover", {"_meta": meta()})
        res = self.complete(s.response("d1"))
        self.assertEqual(res["supportedVersions"][0], V)
        self.assertIn("2025-11-25", res["supportedVersions"])
        self.assertEqual(res["capabilities"]["tools"], {"listChanged": True})
        self.assertEqual(res["capabilities"]["extensions"], {"io.modelcontextprotocol/tasks": {}})
        self.assertIsInstance(res["ttlMs"], int)
        self.assertIn(res["cacheScope"], ("public", "private"))
        # the stdio probe: no _meta at all is answered the same way
        s.request("d2", "server/discover")
        self.assertEqual(self.complete(s.response("d2"))["supportedVersions"],
                         res["supportedVersions"])
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))

    def test_call(self):
        s = self.session()
        res = self.complete(self.call(s, 1, "echo", {"x": 1}))
        self.assertIs(res["isError"], False)
        self.assertEqual(json.loads(res["content"][0]["text"]), {"x": 1})
        # a tool error is still a result
        res = self.complete(self.call(s, 2, "fail", {}))
        self.assertIs(res["isError"], True)
        # an unknown tool: invalid params, as in 2025
        r = self.call(s, 3, "nosuch", {})
        self.assertEqual(r["error"]["code"], -32602, r)
        # ping is gone from this revision
        s.request(4, "ping", {"_meta": meta()})
        self.assertEqual(s.response(4)["error"]["code"], -32601)
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))

    def test_progress_and_logs_are_the_requests(self):
        s = self.session()
        s.request(1, "tools/call", {"name": "progress", "arguments": {"steps": 2},
                                    "_meta": meta(progressToken="p1",
                                                  **{"io.modelcontextprotocol/logLevel": "info"})})
        self.complete(s.response(1))
        before = s.log[:-1]
        progress = [m["params"] for m in before if m.get("method") == "notifications/progress"]
        self.assertEqual([(p["progressToken"], p["progress"]) for p in progress],
                         [("p1", 1), ("p1", 2)])
        logs = [m["params"] for m in before if m.get("method") == "notifications/message"]
        self.assertTrue(logs, before)
        self.assertTrue(all(p["level"] == "info" for p in logs), logs)
        # no logLevel: no notifications/message; at "error", only errors
        self.complete(self.call(s, 2, "echo", {}))
        self.complete(self.call(s, 3, "echo", {}, **{"_meta": meta(
            **{"io.modelcontextprotocol/logLevel": "error"})}))
        self.assertEqual([m for m in s.log[len(before) + 1:] if "method" in m], [])
        s.request(4, "tools/list", {"_meta": meta(**{"io.modelcontextprotocol/logLevel": "loud"})})
        self.assertEqual(s.response(4)["error"]["code"], -32602)

    def test_unsupported_version(self):
        s = self.session()
        m = meta()
        m["io.modelcontextprotocol/protocolVersion"] = "1900-01-01"
        s.request(1, "tools/call", {"name": "echo", "arguments": {}, "_meta": m})
        err = s.response(1)["error"]
        self.assertEqual(err["code"], -32022, err)
        self.assertEqual(err["data"]["requested"], "1900-01-01")
        self.assertIn(V, err["data"]["supported"])
        self.assertIn("2025-11-25", err["data"]["supported"])
        s.request(2, "server/discover", {"_meta": m})
        self.assertEqual(s.response(2)["error"]["code"], -32022)
        # the version without the client's capabilities is malformed
        m = meta()
        del m["io.modelcontextprotocol/clientCapabilities"]
        s.request(3, "tools/list", {"_meta": m})
        self.assertEqual(s.response(3)["error"]["code"], -32602)
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))

    def test_tools_list_order_and_cache_hints(self):
        s = self.session()
        s.request(1, "tools/list", {"_meta": meta()})
        res = self.complete(s.response(1))
        names = [t["name"] for t in res["tools"]]
        self.assertEqual(names, sorted(names))
        self.assertLessEqual({"ask", "echo", "fail", "progress"}, set(names))
        self.assertIsInstance(res["ttlMs"], int)
        self.assertGreaterEqual(res["ttlMs"], 0)
        self.assertIn(res["cacheScope"], ("public", "private"))
        s.request(2, "tools/list", {"_meta": meta()})
        self.assertEqual(self.complete(s.response(2))["tools"], res["tools"])

    def test_listen_sees_a_reload(self):
        s = self.session()
        s.request("L1", "subscriptions/listen",
                  {"_meta": meta(), "notifications": {"toolsListChanged": True,
                                                      "promptsListChanged": True}})
        ack = s.recv()
        self.assertEqual(ack, {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                               "params": {"_meta": {SUB_ID: "L1"},
                                          "notifications": {"toolsListChanged": True}}})
        s.request("L2", "subscriptions/listen",
                  {"_meta": meta(), "notifications": {"toolsListChanged": True}})
        self.assertEqual(s.recv()["params"]["_meta"], {SUB_ID: "L2"})
        path = self.d.add_tool(worker_tool("added", "echo"))
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        os.kill(self.d.proc.pid, signal.SIGHUP)
        notes = [s.recv(), s.recv()]
        for n in notes:
            self.assertEqual(n["method"], "notifications/tools/list_changed", n)
        self.assertEqual(sorted(n["params"]["_meta"][SUB_ID] for n in notes), ["L1", "L2"])
        s.request(1, "tools/list", {"_meta": meta()})
        self.assertIn("added", [t["name"] for t in self.complete(s.response(1))["tools"]])
        # cancelled: L1 hears of the next reload no more, L2 does
        s.notify("notifications/cancelled", {"requestId": "L1"})
        # input is read in order: once this is answered, the cancel is done
        s.request(3, "tools/list", {"_meta": meta()})
        self.complete(s.response(3))
        os.unlink(path)
        os.kill(self.d.proc.pid, signal.SIGHUP)
        n = s.recv()
        self.assertEqual(n["params"]["_meta"], {SUB_ID: "L2"})
        s.request(2, "tools/list", {"_meta": meta()})
        self.assertNotIn("added", [t["name"] for t in self.complete(s.response(2))["tools"]])
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))
        # no response to a cancelled listen, no untagged (2025) notification
        for m in s.log:
            self.assertNotEqual(m.get("id"), "L1", m)
            if m.get("method") == "notifications/tools/list_changed":
                self.assertIn(SUB_ID, m["params"]["_meta"], m)

    def test_ask_user_is_input_required_then_retry(self):
        s = self.session()
        caps = {"elicitation": {}}
        r = self.call(s, 1, "ask", {"question": "which city?"}, caps)
        res = r["result"]
        self.assertEqual(res["resultType"], "input_required", res)
        self.assertIn(SERVER_INFO, res["_meta"])
        req = res["inputRequests"]["ask_user"]
        self.assertEqual(req["method"], "elicitation/create")
        self.assertEqual(req["params"]["mode"], "form")
        self.assertEqual(req["params"]["message"], "which city?")
        self.assertEqual(req["params"]["requestedSchema"]["type"], "object")
        state = res["requestState"]
        self.assertIsInstance(state, str)
        # the retry: a new id, the answer, the state echoed
        answer = {"ask_user": {"action": "accept", "content": {"answer": "Paris"}}}
        res = self.complete(self.call(s, 2, "ask", {"question": "which city?"}, caps,
                                      inputResponses=answer, requestState=state))
        self.assertIs(res["isError"], False)
        self.assertIn("which city?", res["content"][0]["text"])
        self.assertIn("The user answered: Paris", res["content"][0]["text"])
        # declined
        res = self.complete(self.call(s, 3, "ask", {"question": "which city?"}, caps,
                                      inputResponses={"ask_user": {"action": "decline"}},
                                      requestState=state))
        self.assertIn("did not answer (decline)", res["content"][0]["text"])
        # no answer yet: asked again
        r = self.call(s, 4, "ask", {"question": "which city?"}, caps, requestState=state)
        self.assertEqual(r["result"]["resultType"], "input_required")
        # the state of another call, or altered: refused
        r = self.call(s, 5, "ask", {"question": "which town?"}, caps,
                      inputResponses=answer, requestState=state)
        self.assertEqual(r["error"]["code"], -32602, r)
        sig = state.split(".")[1]
        forged = json.dumps({"b": "0" * 64, "q": "forged", "e": 2 ** 40}).encode()
        r = self.call(s, 6, "ask", {"question": "which city?"}, caps, inputResponses=answer,
                      requestState=base64.urlsafe_b64encode(forged).decode() + "." + sig)
        self.assertEqual(r["error"]["code"], -32602, r)
        for i, bad in enumerate(["", "no-dot", ".", state + "x", "%%%." + sig, 7, None], 100):
            r = self.call(s, i, "ask", {"question": "which city?"}, caps, inputResponses=answer,
                          requestState=bad)
            self.assertEqual(r["error"]["code"], -32602, (bad, r))
        # a client that cannot elicit: the question as text for the model
        res = self.complete(self.call(s, 7, "ask", {"question": "which city?"}))
        self.assertTrue(res["content"][0]["text"].startswith("[ask_user] "), res)
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))
        # never a request from the server under this revision
        self.assertEqual([m for m in s.log if "method" in m and "id" in m], [])

    def test_an_initialize_client_keeps_2025(self):
        s = self.session()
        s.request(0, "initialize", {"protocolVersion": "2025-11-25",
                                    "capabilities": {"elicitation": {}},
                                    "clientInfo": {"name": "old", "version": "1"}})
        init = s.response(0)["result"]
        self.assertEqual(init["protocolVersion"], "2025-11-25")
        self.assertNotIn("resultType", init)
        s.notify("notifications/initialized")
        s.request(1, "tools/list")
        res = s.response(1)["result"]
        self.assertEqual(set(res), {"tools"})
        s.request(2, "tools/call", {"name": "echo", "arguments": {"a": 1}})
        res = s.response(2)["result"]
        self.assertEqual(set(res) - {"content", "isError", "structuredContent"}, set())
        # elicitation as a request from the server, as before
        s.request(3, "tools/call", {"name": "ask", "arguments": {"question": "age?"}})
        req = s.recv()
        self.assertEqual(req["method"], "elicitation/create", req)
        self.assertNotIn("mode", req["params"])
        s.send({"jsonrpc": "2.0", "id": req["id"],
                "result": {"action": "accept", "content": {"answer": "7"}}})
        res = s.response(3)["result"]
        self.assertNotIn("resultType", res)
        self.assertIn("The user answered: 7", res["content"][0]["text"])
        s.request(4, "ping")
        self.assertEqual(s.response(4)["result"], {})
        # a modern request on the same process is answered in its own shape
        self.complete(self.call(s, 5, "echo", {}))
        # the 2025 session hears of a reload untagged
        path = self.d.add_tool(worker_tool("added2", "echo"))
        self.addCleanup(os.unlink, path)
        os.kill(self.d.proc.pid, signal.SIGHUP)
        self.assertEqual(s.recv(), {"jsonrpc": "2.0",
                                    "method": "notifications/tools/list_changed"})
        status, rest = s.finish()
        self.assertEqual((status, rest), (0, []))


if __name__ == "__main__":
    unittest.main()
