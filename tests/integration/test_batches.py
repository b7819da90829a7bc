"""Batch semantics: concurrency bounds, completion-order events with
input-order messages, earliest-index halt, sibling drain, the on_tool_error
policies, reserved halt reasons, unknown-tool pre-flight, empty batches."""

import json
import os

import harness
from harness import DaemonTestCase, worker_tool, RESERVED_HALTS, WAIT


def touch(path):
    with open(path, "w"):
        pass


class Batches(DaemonTestCase):
    @classmethod
    def tools(cls):
        return [
            worker_tool("echo", "echo"),
            worker_tool("conc", "concurrency"),
            worker_tool("wait", "wait-file"),
            worker_tool("touch", "touch"),
            worker_tool("halter", "halt"),
            worker_tool("ask", "ask"),
            worker_tool("errorer", "error"),
            worker_tool("exit3", "exit", "3"),
            worker_tool("any"),
        ]

    # -- concurrency ---------------------------------------------------------
    def _overlap_from_log(self, log, n):
        with open(log) as f:
            lines = f.read().split("\n")
        lines = [l for l in lines if l]
        cur = peak = 0
        starts = ends = 0
        for l in lines:
            what, _ = l.split()
            if what == "start":
                cur += 1
                starts += 1
            else:
                cur -= 1
                ends += 1
            peak = max(peak, cur)
        self.assertEqual((starts, ends), (n, n), "worker log incomplete:\n" + "\n".join(lines))
        return peak

    def _overlap_from_events(self, res):
        cur = peak = 0
        for e in res.events:
            if e["event"] == "tool_execution_started":
                cur += 1
            elif e["event"] == "tool_execution_completed":
                cur -= 1
            peak = max(peak, cur)
        return peak

    def test_20_calls_max_concurrency_2(self):
        log = self.shared_log("conc.log")
        calls = [{"id": "c%02d" % i, "name": "conc", "arguments": {"log": log, "ms": 30}}
                 for i in range(20)]
        res = self.c.run(calls, max_concurrency=2)
        ev_peak = self._overlap_from_events(res)
        self.assertLessEqual(ev_peak, 2, "more than 2 calls started-but-not-completed")
        self.assertEqual(ev_peak, 2, "the bound of 2 was never used")
        self.assertLessEqual(self._overlap_from_log(log, 20), 2,
                             "more than 2 workers ran at once")
        for c in calls:
            self.assertOk(res, c["id"])

    def test_max_concurrency_1_is_serial(self):
        log = self.shared_log("conc.log")
        calls = [{"id": "c%d" % i, "name": "conc", "arguments": {"log": log, "ms": 10}}
                 for i in range(5)]
        res = self.c.run(calls, max_concurrency=1)
        self.assertEqual(self._overlap_from_events(res), 1)
        self.assertEqual(self._overlap_from_log(log, 5), 1)

    def test_default_concurrency_is_bounded_by_cpus(self):
        ncpu = os.sysconf("SC_NPROCESSORS_ONLN")
        n = 2 * ncpu + 3
        log = self.shared_log("conc.log")
        calls = [{"id": "c%d" % i, "name": "conc", "arguments": {"log": log, "ms": 40}}
                 for i in range(n)]
        res = self.c.run(calls)
        self.assertLessEqual(self._overlap_from_events(res), max(1, min(n, 2 * ncpu)))
        self.assertLessEqual(self._overlap_from_log(log, n), max(1, min(n, 2 * ncpu)))

    # -- ordering --------------------------------------------------------------
    def test_completion_order_events_input_order_messages(self):
        f0, f2 = self.tmpfile("release0"), self.tmpfile("release2")
        calls = [{"id": "c0", "name": "wait", "arguments": {"path": f0, "tag": 0}},
                 {"id": "c1", "name": "echo", "arguments": {"tag": 1}},
                 {"id": "c2", "name": "wait", "arguments": {"path": f2, "tag": 2}}]
        batch = self.c.start_batch(calls, batch="order", max_concurrency=3)
        evs = []

        def upto(pred):
            while True:
                e = self.c.recv_for(lambda x: x.get("batch") == batch)
                evs.append(e)
                if pred(e):
                    return e

        # real-time progress: all three start while c0 and c2 are blocked
        started = set()
        upto(lambda e: e["event"] == "tool_execution_started" and
             (started.add(e["id"]) or started == {"c0", "c1", "c2"}))
        upto(lambda e: e["event"] == "tool_result_encoded" and e["id"] == "c1")
        touch(f2)
        upto(lambda e: e["event"] == "tool_result_encoded" and e["id"] == "c2")
        touch(f0)
        upto(lambda e: e["event"] in harness.TERMINAL)
        res = harness.BatchResult(calls, evs)
        self.assertEqual(res.order("tool_execution_completed"), ["c1", "c2", "c0"])
        self.assertEqual([m["tool_call_id"] for m in res.terminal["messages"]],
                         ["c0", "c1", "c2"])
        for i in range(3):
            self.assertEqual(json.loads(res.content("c%d" % i))["tag"], i)

    # -- halts -----------------------------------------------------------------
    def test_earliest_index_halt_wins(self):
        f0 = self.tmpfile("release0")
        calls = [{"id": "c0", "name": "wait",
                  "arguments": {"path": f0, "then_mode": "halt", "reason": "first_halt",
                                "result": 0}},
                 {"id": "c1", "name": "halter", "arguments": {"reason": "second_halt",
                                                              "result": 1}}]
        batch = self.c.start_batch(calls, max_concurrency=2)
        evs = []
        while True:
            e = self.c.recv_for(lambda x: x.get("batch") == batch)
            evs.append(e)
            if e["event"] == "tool_halt" and e["tool_call_id"] == "c1":
                touch(f0)
            if e["event"] in harness.TERMINAL:
                break
        res = harness.BatchResult(calls, evs)
        self.assertEqual(res.order("tool_halt"), ["c1", "c0"])
        self.assertEqual(res.halt, {"halted_reason": "first_halt", "halt_tool_call_id": "c0",
                                    "halt_result": 0})

    def test_earliest_index_among_ask_halt_and_error(self):
        calls = [{"id": "ok", "name": "echo"},
                 {"id": "ask", "name": "ask", "arguments": {"question": "q?", "delay_ms": 150}},
                 {"id": "halt", "name": "halter", "arguments": {"reason": "stop"}},
                 {"id": "err", "name": "errorer"}]
        res = self.c.run(calls, on_tool_error="halt", max_concurrency=4)
        self.assertEqual(res.halt, {"halted_reason": "ask_user", "pending_question": "q?",
                                    "pending_tool_call_id": "ask", "ask_user_opts": {}})
        self.assertEqual(res.last("ask")["event"], "ask_user_requested")
        self.assertEqual(res.last("halt")["event"], "tool_halt")
        self.assertEqual(res.last("err")["event"], "tool_halt")

    def test_error_earlier_than_halt_under_halt_policy(self):
        calls = [{"id": "h", "name": "halter", "arguments": {"reason": "later", "delay_ms": 0}},
                 {"id": "e", "name": "exit3"}]
        res = self.c.run(calls, on_tool_error="halt")
        self.assertEqual(res.halt["halted_reason"], "later")
        res = self.c.run(list(reversed(calls)), on_tool_error="halt")
        self.assertEqual(res.halt, {"halted_reason": "tool_error", "halt_tool_call_id": "e"})

    def test_siblings_drain_after_halt(self):
        f1 = self.tmpfile("release1")
        calls = [{"id": "c0", "name": "halter", "arguments": {"reason": "early"}},
                 {"id": "c1", "name": "wait", "arguments": {"path": f1, "v": 1}},
                 {"id": "c2", "name": "echo", "arguments": {"v": 2}}]
        batch = self.c.start_batch(calls, max_concurrency=2)
        evs = []
        while True:
            e = self.c.recv_for(lambda x: x.get("batch") == batch)
            evs.append(e)
            if e["event"] == "tool_halt" and e["tool_call_id"] == "c0":
                touch(f1)
            if e["event"] in harness.TERMINAL:
                break
        res = harness.BatchResult(calls, evs)
        self.assertOk(res, "c1", {"path": f1, "v": 1})
        self.assertOk(res, "c2", {"v": 2})
        self.assertEqual(res.halt["halt_tool_call_id"], "c0")
        self.assertEqual(res.order("tool_halt"), ["c0"])

    def test_queued_calls_still_start_after_halt(self):
        calls = [{"id": "h", "name": "halter"}] + \
                [{"id": "q%d" % i, "name": "echo", "arguments": {"i": i}} for i in range(3)]
        res = self.c.run(calls, max_concurrency=1)
        for i in range(3):
            self.assertOk(res, "q%d" % i, {"i": i})
        self.assertEqual(res.order("tool_execution_started"), ["h", "q0", "q1", "q2"])

    def test_error_policy_continue(self):
        for policy in ("continue", None, "absent"):
            with self.subTest(policy=policy):
                opts = {} if policy == "absent" else {"on_tool_error": policy}
                res = self.c.run([{"id": "e", "name": "errorer", "arguments": {"reason": "bad"}},
                                  {"id": "x", "name": "exit3"},
                                  {"id": "k", "name": "echo"}], **opts)
                self.assertIsNone(res.halt)
                self.assertEqual(res.last("e")["event"], "tool_result_encoded")
                self.assertEqual(res.last("x")["event"], "tool_result_encoded")
                self.assertEqual(res.content("e"), '{"error":"bad"}')

    def test_error_policy_halt_handler_error(self):
        res = self.c.run([{"id": "k", "name": "echo"},
                          {"id": "e", "name": "errorer", "arguments": {"reason": "bad"}}],
                         on_tool_error="halt", batch="pol")
        self.assertEqual(res.last("e"), {"event": "tool_halt", "batch": "pol",
                                         "tool_call_id": "e", "reason": "tool_error",
                                         "result": {"error": "bad"},
                                         "content": '{"error":"bad"}'})
        self.assertEqual(res.content("e"), '{"error":"bad"}')
        self.assertEqual(res.halt, {"halted_reason": "tool_error", "halt_tool_call_id": "e"})
        self.assertEqual(res.last("k")["event"], "tool_result_encoded")

    def test_error_policy_halt_tool_error(self):
        res = self.c.run([{"id": "x", "name": "exit3"}], on_tool_error="halt")
        te = self.assertToolError(res, "x", "handler_exit")
        last = res.last("x")
        self.assertEqual(last["event"], "tool_halt")
        self.assertEqual(last["reason"], "tool_error")
        self.assertEqual(last["result"], {"tool_error": te})
        self.assertEqual(last["content"], res.content("x"))
        self.assertEqual(res.halt, {"halted_reason": "tool_error", "halt_tool_call_id": "x"})

    def _reserved(self, policy):
        calls = [{"id": r, "name": "halter", "arguments": {"reason": r, "result": 1}}
                 for r in RESERVED_HALTS]
        calls.append({"id": "fine", "name": "echo"})
        return self.c.run(calls, on_tool_error=policy, max_concurrency=7)

    def _check_reserved_error(self, res, r):
        te = self.assertToolError(res, r, "invalid_return")
        self.assertEqual(te["metadata"], {"reserved_halt_atom": r})
        self.assertIn('halt reason "%s" is reserved' % r, te["message"])
        return te

    def test_reserved_halt_reasons_under_continue(self):
        res = self._reserved("continue")
        for r in RESERVED_HALTS:
            with self.subTest(reason=r):
                self._check_reserved_error(res, r)
                self.assertEqual(res.last(r)["event"], "tool_result_encoded")
        self.assertIsNone(res.halt)

    def test_reserved_halt_reasons_under_halt(self):
        res = self._reserved("halt")
        for r in RESERVED_HALTS:
            with self.subTest(reason=r):
                te = self._check_reserved_error(res, r)
                last = res.last(r)
                self.assertEqual(last["event"], "tool_halt")
                self.assertEqual(last["reason"], "tool_error")
                self.assertEqual(last["result"], {"tool_error": te})
        self.assertEqual(res.halt, {"halted_reason": "tool_error",
                                    "halt_tool_call_id": RESERVED_HALTS[0]})
        self.assertEqual(res.last("fine")["event"], "tool_result_encoded")

    def test_non_reserved_similar_reason_is_fine(self):
        res = self.c.run([{"id": "h", "name": "halter", "arguments": {"reason": "Completed"}}])
        self.assertEqual(res.halt["halted_reason"], "Completed")

    # -- pre-flight ----------------------------------------------------------
    def test_unknown_tool_preflight_runs_nothing(self):
        a, b = self.tmpfile("side-a"), self.tmpfile("side-b")
        calls = [{"id": "c0", "name": "touch", "arguments": {"path": a}},
                 {"id": "c1", "name": "nope_one"},
                 {"id": "c2", "name": "touch", "arguments": {"path": b}},
                 {"id": "c3", "name": "nope_two"}]
        res = self.c.run(calls, batch="pf")
        self.assertEqual(res.events, [{
            "event": "error", "batch": "pf", "type": "engine_error", "reason": "unknown_tool",
            "message": "no tool named nope_one", "metadata": {"tool_name": "nope_one"}}])
        # a sentinel batch on the same connection: whatever the rejected batch
        # might have started would have run by the time this one completes
        sentinel = self.tmpfile("sentinel")
        res2 = self.c.run([{"id": "s", "name": "touch", "arguments": {"path": sentinel}}])
        self.assertOk(res2, "s", "touched")
        self.assertTrue(os.path.exists(sentinel))
        self.assertFalse(os.path.exists(a), "a call of a rejected batch ran")
        self.assertFalse(os.path.exists(b), "a call of a rejected batch ran")
        self.assertFalse([e for e in self.c.log if e.get("batch") == "pf"
                          and e["event"] != "error"])
        self.c.assert_quiet()

    def test_unknown_tool_with_under_halt_policy_and_max_concurrency(self):
        res = self.c.run([{"id": "c0", "name": "missing_tool"}], on_tool_error="halt",
                         max_concurrency=1)
        self.assertEqual(res.terminal["type"], "engine_error")
        self.assertEqual(res.terminal["metadata"], {"tool_name": "missing_tool"})

    # -- empty batches -----------------------------------------------------
    def test_empty_batch_completes_at_once(self):
        res = self.c.run([], batch="empty")
        self.assertEqual(res.events, [{"event": "batch_completed", "batch": "empty",
                                       "messages": [], "halt": None}])
        self.c.assert_quiet()

    def test_empty_batch_with_all_options(self):
        res = self.c.run([], batch="empty2", on_tool_error="halt", tool_timeout=10,
                         max_concurrency=3, context={}, session_id=None, request_id="r",
                         engine=None)
        self.assertEqual(res.events, [{"event": "batch_completed", "batch": "empty2",
                                       "messages": [], "halt": None}])

    def test_empty_batch_still_validated(self):
        res = self.c.run([], batch="bad", on_tool_error="sometimes")
        self.assertEqual(res.terminal["type"], "request_error")
        self.assertEqual(res.terminal["reason"], "invalid_request")
        self.assertIn("on_tool_error", res.terminal["message"])

    # -- several batches on one connection -------------------------------
    def test_batches_on_one_connection_run_concurrently(self):
        f = self.tmpfile("release")
        slow = self.c.start_batch([{"id": "s", "name": "wait", "arguments": {"path": f}}],
                                  batch="slow")
        fast = self.c.run([{"id": "f", "name": "echo"}], batch="fast")
        self.assertTrue(fast.ok)
        self.assertFalse([e for e in self.c.log if e.get("batch") == "slow"
                          and e["event"] in harness.TERMINAL])
        touch(f)
        res = harness.BatchResult([{"id": "s", "name": "wait"}], self.c.recv_batch(slow))
        self.assertOk(res, "s", {"path": f})

    def test_same_call_ids_in_different_batches(self):
        b1 = self.c.start_batch([{"id": "c0", "name": "echo", "arguments": {"b": 1}}], batch="x1")
        b2 = self.c.start_batch([{"id": "c0", "name": "echo", "arguments": {"b": 2}}], batch="x2")
        r1 = harness.BatchResult([{"id": "c0", "name": "echo"}], self.c.recv_batch(b1))
        r2 = harness.BatchResult([{"id": "c0", "name": "echo"}], self.c.recv_batch(b2))
        self.assertOk(r1, "c0", {"b": 1})
        self.assertOk(r2, "c0", {"b": 2})

    def test_duplicate_running_batch_id(self):
        f = self.tmpfile("release")
        self.c.start_batch([{"id": "s", "name": "wait", "arguments": {"path": f}}], batch="dup")
        self.c.recv_for(lambda e: e.get("batch") == "dup" and
                        e["event"] == "tool_execution_started")
        self.c.send({"op": "run", "batch": "dup", "calls": [{"id": "t", "name": "echo"}]})
        err = self.c.recv_for(lambda e: e["event"] == "error")
        self.assertEqual(err["type"], "request_error")
        self.assertEqual(err["reason"], "duplicate_batch")
        touch(f)
        self.c.recv_batch("dup")
        res = harness.BatchResult([{"id": "s", "name": "wait"}],
                                  [e for e in self.c.log if e.get("batch") == "dup"
                                   and e is not err])
        self.assertOk(res, "s")
        self.assertFalse([e for e in self.c.log if e.get("id") == "t"])
        # once finished, the id may be used again
        self.assertTrue(self.c.run([{"id": "t", "name": "echo"}], batch="dup").ok)

    def test_many_calls_one_batch(self):
        calls = [{"id": "c%03d" % i, "name": "echo", "arguments": {"i": i}} for i in range(60)]
        res = self.c.run(calls, max_concurrency=8)
        for i in range(60):
            self.assertOk(res, "c%03d" % i, {"i": i}, content='{"i":%d}' % i)


if __name__ == "__main__":
    harness.main()
