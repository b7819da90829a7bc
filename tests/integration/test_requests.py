"""The client protocol: request validation, bad input (not JSON, not an
object, unknown op, over-long lines), the tools op, pipelining, half-close,
several clients at once, clients that vanish."""

import json
import os
import socket

import harness
from harness import DaemonTestCase, Daemon, worker_tool, WAIT


def touch(path):
    with open(path, "w"):
        pass


GOOD_CALL = {"id": "c0", "name": "echo"}

# (label, request, field the message must name)
INVALID = [
    ("on_tool_error unknown", {"calls": [GOOD_CALL], "on_tool_error": "explode"},
     "on_tool_error"),
    ("on_tool_error number", {"calls": [GOOD_CALL], "on_tool_error": 5}, "on_tool_error"),
    ("max_concurrency 0", {"calls": [GOOD_CALL], "max_concurrency": 0}, "max_concurrency"),
    ("max_concurrency negative", {"calls": [GOOD_CALL], "max_concurrency": -1},
     "max_concurrency"),
    ("max_concurrency float", {"calls": [GOOD_CALL], "max_concurrency": 1.5},
     "max_concurrency"),
    ("max_concurrency string", {"calls": [GOOD_CALL], "max_concurrency": "2"},
     "max_concurrency"),
    ("max_concurrency bool", {"calls": [GOOD_CALL], "max_concurrency": True},
     "max_concurrency"),
    ("max_concurrency null", {"calls": [GOOD_CALL], "max_concurrency": None}, None),
    ("calls missing", {}, "calls"),
    ("calls string", {"calls": "c0"}, "calls"),
    ("calls object", {"calls": {"id": "c0", "name": "echo"}}, "calls"),
    ("calls null", {"calls": None}, "calls"),
    ("call not an object", {"calls": ["c0"]}, "calls[0]"),
    ("call without id", {"calls": [{"name": "echo"}]}, "calls[0].id"),
    ("call id number", {"calls": [{"id": 5, "name": "echo"}]}, "calls[0].id"),
    ("call without name", {"calls": [{"id": "a"}]}, "calls[0].name"),
    ("second call name number", {"calls": [GOOD_CALL, {"id": "b", "name": 7}]},
     "calls[1].name"),
    ("second call without id", {"calls": [GOOD_CALL, {"name": "echo"}]}, "calls[1].id"),
    ("arguments list", {"calls": [{"id": "a", "name": "echo", "arguments": [1]}]},
     "calls[0].arguments"),
    ("arguments string", {"calls": [{"id": "a", "name": "echo", "arguments": "x=1"}]},
     "calls[0].arguments"),
    ("arguments number", {"calls": [{"id": "a", "name": "echo", "arguments": 3}]},
     "calls[0].arguments"),
    ("duplicate call ids", {"calls": [GOOD_CALL, {"id": "c1", "name": "echo"}, GOOD_CALL]},
     "calls[2].id"),
    ("tool_timeout string", {"calls": [GOOD_CALL], "tool_timeout": "fast"}, "tool_timeout"),
    ("tool_timeout negative", {"calls": [GOOD_CALL], "tool_timeout": -5}, "tool_timeout"),
    ("unknown top-level key", {"calls": [GOOD_CALL], "bogus_key": 1}, "bogus_key"),
    ("validation before pre-flight", {"calls": [{"id": "a", "name": "no_such_tool"}],
                                      "max_concurrency": 0}, "max_concurrency"),
    ("empty batch is validated", {"calls": [], "on_tool_error": "nope"}, "on_tool_error"),
]


class Requests(DaemonTestCase):
    ARGS = ["--max-request-bytes", "4096"]
    SLEEP_TOKEN = harness.new_token("sleep")

    @classmethod
    def tools(cls):
        return [
            worker_tool("echo", "echo", description="Returns its arguments",
                        schema={"type": "object", "properties": {"x": {"type": "integer"}}}),
            worker_tool("wait", "wait-file"),
            worker_tool("sleeper", "sleep", timeout_ms=60000),
            worker_tool("sleeptok", "sleep", cls.SLEEP_TOKEN, timeout_ms=60000),
            worker_tool("any"),
            {"name": "manual_tool", "description": "answered by the client",
             "schema": {"type": "object", "properties": {}}},
        ]

    def assertRequestError(self, ev, reason, batch=None, field=None):
        self.assertEqual(ev["event"], "error", ev)
        self.assertEqual(ev.get("type"), "request_error", ev)
        self.assertEqual(ev.get("reason"), reason, ev)
        self.assertIsInstance(ev.get("message"), str)
        self.assertTrue(ev["message"])
        if batch is not None:
            self.assertEqual(ev.get("batch"), batch)
        if field is not None:
            self.assertIn(field, ev["message"])

    def assertUsable(self, c=None):
        c = c or self.c
        res = c.run([{"id": "u", "name": "echo", "arguments": {"alive": True}}])
        self.assertOk(res, "u", {"alive": True})

    # -- validation ------------------------------------------------------------
    def test_invalid_run_requests(self):
        for i, (label, body, field) in enumerate(INVALID):
            with self.subTest(label):
                req = {"op": "run", "batch": "v%d" % i}
                req.update(body)
                self.c.send(req)
                ev = self.c.recv()
                if field is None:
                    # max_concurrency null: either the default or an error
                    if ev["event"] == "error":
                        self.assertRequestError(ev, "invalid_request", "v%d" % i,
                                                "max_concurrency")
                    else:
                        res = harness.BatchResult(body["calls"],
                                                  [ev] + self.c.recv_batch("v%d" % i))
                        self.assertTrue(res.ok)
                    continue
                self.assertRequestError(ev, "invalid_request", "v%d" % i, field)
                self.assertFalse(self.c.pending, "events after a request_error")
                self.c.assert_quiet()
        self.assertUsable()

    def test_validation_error_shape(self):
        self.c.send({"op": "run", "batch": "shape",
                     "calls": [{"id": "a", "name": "echo"}, {"name": "echo"}]})
        ev = self.c.recv()
        self.assertEqual(set(ev), {"event", "batch", "type", "reason", "message"})
        self.assertEqual(ev["batch"], "shape")
        self.assertTrue(ev["message"].startswith("calls[1].id"), ev["message"])

    def test_batch_must_be_a_string(self):
        self.c.send({"op": "run", "batch": 5, "calls": [GOOD_CALL]})
        self.assertRequestError(self.c.recv(), "invalid_request", field="batch")
        self.assertUsable()

    def test_a_number_past_a_double_is_no_string(self):
        """Numbers too large for a double are kept as written, held
        inside as marked strings: where a string is wanted they are refused
        like any number, and answered (a batch id like this one used to get
        no answer at all)."""
        for line, reason, field in (
                ('{"op":"run","batch":5e1021,"calls":[%s]}' % json.dumps(GOOD_CALL),
                 "invalid_request", "batch"),
                ('{"op":"run","calls":[{"id":6e1021,"name":"echo"}]}', "invalid_request",
                 "calls[0].id"),
                ('{"op":"run","calls":[{"id":"a","name":1e999}]}', "invalid_request",
                 "calls[0].name"),
                ('{"op":5e1021}', "unknown_op", "op"),
                ('{"op":"cancel","batch":5e1021}', "invalid_request", "batch"),
                ('{"op":"tools","format":1e999}', "invalid_request", "format"),
                ('{"op":"tail","tools":[1e999]}', "invalid_request", "tools")):
            with self.subTest(line=line):
                self.c.send_raw(line + "\n")
                ev = self.c.recv()
                self.assertRequestError(ev, reason, field=field)
                self.assertNotIn("batch", ev)
                self.c.assert_quiet()
        self.assertUsable()

    # -- malformed lines -----------------------------------------------------
    def test_not_json(self):
        for line in (b"this is not json\n", b"{\"op\": \"tools\"\n", b"\xff\xfe\n",
                     b"{\"op\":\"tools\"} trailing\n"):
            with self.subTest(line=line):
                self.c.send_raw(line)
                ev = self.c.recv()
                self.assertRequestError(ev, "invalid_json")
                self.assertNotIn("batch", ev)
                self.c.assert_quiet()

    def test_not_an_object(self):
        for line in (b"[1, 2]\n", b"\"run\"\n", b"42\n", b"null\n"):
            with self.subTest(line=line):
                self.c.send_raw(line)
                self.assertRequestError(self.c.recv(), "not_an_object")
                self.c.assert_quiet()

    def test_unknown_or_missing_op(self):
        for req in ({"op": "dance"}, {}, {"op": 5}, {"op": None}, {"calls": []},
                    {"op": "RUN", "calls": []}):
            with self.subTest(req=req):
                self.c.send(req)
                self.assertRequestError(self.c.recv(), "unknown_op")
                self.c.assert_quiet()

    def test_over_long_line(self):
        big = {"op": "run", "batch": "big", "calls": [
            {"id": "c0", "name": "echo", "arguments": {"pad": "p" * 10000}}]}
        self.c.send(big)
        ev = self.c.recv()
        self.assertRequestError(ev, "request_too_long")
        self.c.assert_quiet()
        self.assertUsable()
        self.assertFalse([e for e in self.c.log if e.get("batch") == "big" and e is not ev])

    def test_over_long_line_without_newline_yet(self):
        # the limit applies before the newline arrives; the rest is discarded
        self.c.send_raw(b"x" * 20000)
        ev = self.c.recv()
        self.assertRequestError(ev, "request_too_long")
        self.c.send_raw(b"y" * 5000 + b"\n")
        self.c.assert_quiet()
        self.assertUsable()

    def test_line_just_under_the_limit(self):
        pad = "p" * 3900
        self.c.send({"op": "run", "batch": "edge", "calls": [
            {"id": "c0", "name": "echo", "arguments": {"pad": pad}}]})
        res = harness.BatchResult([{"id": "c0", "name": "echo"}], self.c.recv_batch("edge"))
        self.assertOk(res, "c0", {"pad": pad})

    def test_bad_input_does_not_disturb_other_clients(self):
        f = self.tmpfile("release")
        other = self.daemon.client()
        other.start_batch([{"id": "w", "name": "wait", "arguments": {"path": f}}], batch="ow")
        other.recv_for(lambda e: e["event"] == "tool_execution_started")
        for junk in (b"\x00\x01\x02\n", b"{]\n", b"[]\n", b"z" * 9000 + b"\n"):
            self.c.send_raw(junk)
            self.assertEqual(self.c.recv()["event"], "error")
        touch(f)
        res = harness.BatchResult([{"id": "w", "name": "wait"}], other.finish_batch("ow"))
        self.assertOk(res, "w")

    # -- tools op --------------------------------------------------------------
    def test_tools_op(self):
        ev = self.c.tools()
        self.assertEqual(set(ev), {"event", "tools"})
        by_name = {t["name"]: t for t in ev["tools"]}
        self.assertEqual(set(by_name), {"echo", "wait", "sleeper", "sleeptok", "any",
                                        "manual_tool"})
        self.assertEqual(len(ev["tools"]), 6)
        for t in ev["tools"]:
            self.assertEqual(set(t), {"name", "description", "schema", "manual"}, t)
        self.assertEqual(by_name["echo"], {
            "name": "echo", "description": "Returns its arguments",
            "schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "manual": False})
        self.assertEqual(by_name["manual_tool"], {
            "name": "manual_tool", "description": "answered by the client",
            "schema": {"type": "object", "properties": {}}, "manual": True})

    def test_manual_tool_call_is_not_found(self):
        res = self.c.run([{"id": "m", "name": "manual_tool"}])
        self.assertToolError(res, "m", "not_found")

    # -- framing of requests -------------------------------------------------
    def test_pipelined_requests_in_one_write(self):
        lines = [{"op": "tools"},
                 {"op": "run", "batch": "p1", "calls": [{"id": "a", "name": "echo"}]},
                 {"op": "run", "batch": "p2", "calls": [{"id": "a", "name": "echo"}]}]
        self.c.send_raw("".join(json.dumps(l) + "\n" for l in lines))
        self.c.recv_for(lambda e: e["event"] == "tools")
        for b in ("p1", "p2"):
            self.assertTrue(harness.BatchResult([{"id": "a", "name": "echo"}],
                                                self.c.recv_batch(b)).ok)

    def test_request_split_across_writes(self):
        data = (json.dumps({"op": "run", "batch": "split",
                            "calls": [{"id": "a", "name": "echo", "arguments": {"s": 1}}]})
                + "\n").encode()
        for i in range(0, len(data), 7):
            self.c.send_raw(data[i:i + 7])
        res = harness.BatchResult([{"id": "a", "name": "echo"}], self.c.recv_batch("split"))
        self.assertOk(res, "a", {"s": 1})

    # -- half-close --------------------------------------------------------------
    def test_half_close_delivers_every_event(self):
        c = self.daemon.client()
        calls = [{"id": "c%d" % i, "name": "echo", "arguments": {"i": i, "delay_ms": 50 * i}}
                 for i in range(4)]
        c.send_raw(json.dumps({"op": "tools"}) + "\n" +
                   json.dumps({"op": "run", "batch": "hc", "calls": calls}) + "\n" +
                   json.dumps({"op": "run", "batch": "hc2",
                               "calls": [{"id": "x", "name": "echo"}]}) + "\n")
        c.shutdown_write()
        evs = []
        while True:
            ev = c.recv_or_eof()
            if ev is None:
                break
            evs.append(ev)
        self.assertEqual(sum(1 for e in evs if e["event"] == "tools"), 1)
        res = harness.BatchResult(calls, [e for e in evs if e.get("batch") == "hc"])
        for i in range(4):
            self.assertOk(res, "c%d" % i)
        self.assertTrue(harness.BatchResult([{"id": "x", "name": "echo"}],
                                            [e for e in evs if e.get("batch") == "hc2"]).ok)

    def test_half_close_with_nothing_pending_closes(self):
        c = self.daemon.client()
        c.shutdown_write()
        self.assertIsNone(c.recv_or_eof())

    def test_half_close_after_bad_request(self):
        c = self.daemon.client()
        c.send_raw(b"not json\n")
        c.shutdown_write()
        ev = c.recv_or_eof()
        self.assertRequestError(ev, "invalid_json")
        self.assertIsNone(c.recv_or_eof())

    def test_half_close_with_partial_last_line(self):
        # a final request without its newline, then EOF: answered or an error,
        # but the connection must end cleanly and the daemon survive
        c = self.daemon.client()
        c.send_raw(json.dumps({"op": "tools"}))
        c.shutdown_write()
        while c.recv_or_eof() is not None:
            pass
        self.assertUsable()

    # -- several clients ---------------------------------------------------------
    def test_two_concurrent_clients(self):
        f = self.tmpfile("release")
        a, b = self.daemon.client(), self.daemon.client()
        a.start_batch([{"id": "w", "name": "wait", "arguments": {"path": f, "who": "a"}}],
                      batch="same")
        a.recv_for(lambda e: e["event"] == "tool_execution_started")
        # b uses the same batch id on its own connection; it is independent
        res_b = b.run([{"id": "w", "name": "echo", "arguments": {"who": "b"}}], batch="same")
        self.assertOk(res_b, "w", {"who": "b"})
        self.assertFalse([e for e in a.log if e["event"] != "tool_execution_started"])
        touch(f)
        res_a = harness.BatchResult([{"id": "w", "name": "wait"}], a.finish_batch("same"))
        self.assertOk(res_a, "w", {"path": f, "who": "a"})
        for e in b.log:
            self.assertNotIn('"who": "a"', json.dumps(e), "a's event reached b")

    def test_many_clients_at_once(self):
        clients = [self.daemon.client() for _ in range(8)]
        for i, c in enumerate(clients):
            c.start_batch([{"id": "c", "name": "echo", "arguments": {"client": i}}], batch="m")
        for i, c in enumerate(clients):
            res = harness.BatchResult([{"id": "c", "name": "echo"}], c.recv_batch("m"))
            self.assertOk(res, "c", {"client": i})

    def test_client_that_disconnects_mid_batch(self):
        c = self.daemon.client()
        c.start_batch([{"id": "s", "name": "sleeptok"}, {"id": "t", "name": "echo"}],
                      batch="gone", tool_timeout=2000)
        c.recv_for(lambda e: e["event"] == "tool_execution_started" and e["id"] == "s")
        harness.wait_token_present(self.SLEEP_TOKEN, timeout=1.9)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        # the daemon carries on for everyone else ...
        self.assertUsable()
        # ... and the abandoned call's worker still does not outlive the call
        harness.assert_token_gone(self.SLEEP_TOKEN, timeout=WAIT, what="abandoned worker")


if __name__ == "__main__":
    harness.main()
