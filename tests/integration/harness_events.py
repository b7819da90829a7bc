"""The events of one batch, checked against the spec's grammar (BatchResult),
with the accessors the tests read them by."""

import json

TERMINAL = ("batch_completed", "error")
PER_CALL_LAST = ("tool_result_encoded", "ask_user_requested", "tool_halt")
RESERVED_HALTS = ("ask_user", "max_turns", "halt_when", "tool_error", "cancelled", "completed")


def call_id_of(ev):
    if "id" in ev and ev["event"] in ("tool_execution_started", "tool_execution_completed",
                                      "tool_result_encoded"):
        return ev["id"]
    if ev["event"] in ("ask_user_requested", "tool_halt"):
        return ev.get("tool_call_id")
    return None


class GrammarError(AssertionError):
    pass


class BatchResult:
    """The events of one batch, checked against the spec's grammar:
    per call started, completed, then exactly one of encoded /
    ask_user_requested / tool_halt; exactly one terminal event, last."""

    def __init__(self, calls, events):
        self.calls = calls
        self.events = events
        self.terminal = events[-1]
        self.per_call = {}
        self.check()

    def fail(self, msg):
        raise GrammarError(msg + "\nevents:\n" + "\n".join(json.dumps(e) for e in self.events))

    def check(self):
        evs = self.events
        batch = evs[-1].get("batch")
        if sum(1 for e in evs if e["event"] in TERMINAL) != 1:
            self.fail("expected exactly one terminal event")
        if evs[-1]["event"] not in TERMINAL:
            self.fail("the terminal event is not last")
        for e in evs:
            if e.get("batch") != batch:
                self.fail("event with a different batch id")
        if self.terminal["event"] == "error":
            if len(evs) != 1:
                self.fail("an error terminal event after call events")
            return
        ids = [c.get("id") for c in self.calls]
        for e in evs[:-1]:
            cid = call_id_of(e)
            if cid is None:
                self.fail("event without a call id: %r" % e)
            if cid not in ids:
                self.fail("event for an unknown call id %r" % cid)
            self.per_call.setdefault(cid, []).append(e)
        for c in self.calls:
            seq = self.per_call.get(c["id"], [])
            kinds = [e["event"] for e in seq]
            if (len(kinds) != 3 or kinds[0] != "tool_execution_started"
                    or kinds[1] != "tool_execution_completed" or kinds[2] not in PER_CALL_LAST):
                self.fail("call %s: events %s, expected started, completed, then one of %s"
                          % (c["id"], kinds, PER_CALL_LAST))
            st = seq[0]
            if st.get("name") != c["name"]:
                self.fail("call %s: started event names %r" % (c["id"], st.get("name")))
            if seq[1].get("name") != c["name"]:
                self.fail("call %s: completed event names %r" % (c["id"], seq[1].get("name")))
        msgs = self.terminal.get("messages")
        if not isinstance(msgs, list) or [m.get("tool_call_id") for m in msgs] != ids:
            self.fail("messages are not one per call in input order")
        for m in msgs:
            if set(m) != {"role", "tool_call_id", "content"} or m["role"] != "tool":
                self.fail("malformed message %r" % m)
            if not isinstance(m["content"], str):
                self.fail("message content is not a string: %r" % m)
        if "halt" not in self.terminal:
            self.fail("batch_completed without a halt key")

    # -- accessors ---------------------------------------------------------
    @property
    def ok(self):
        return self.terminal["event"] == "batch_completed"

    def started(self, cid):
        return self.per_call[cid][0]

    def completed(self, cid):
        return self.per_call[cid][1]

    def result(self, cid):
        return self.per_call[cid][1]["result"]

    def last(self, cid):
        return self.per_call[cid][2]

    def content(self, cid):
        for m in self.terminal["messages"]:
            if m["tool_call_id"] == cid:
                return m["content"]
        raise KeyError(cid)

    def tool_error(self, cid):
        r = self.result(cid)
        if not (isinstance(r, dict) and set(r) == {"tool_error"}):
            raise AssertionError("call %s: expected a tool_error result, got %r" % (cid, r))
        return r["tool_error"]

    @property
    def halt(self):
        return self.terminal["halt"]

    def order(self, kind):
        """Call ids in the order their events of this kind arrived."""
        return [call_id_of(e) for e in self.events if e["event"] == kind]
