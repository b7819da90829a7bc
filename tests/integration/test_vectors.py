"""Replay every conformance vector in proto/vectors/*.json against the real
daemon. The format is described in proto/vectors/README.md."""

import glob
import json
import os
import unittest

import harness
from harness import Daemon, TESTWORKER, WORKERS_SRC, PROTO_DIR


class Mismatch(Exception):
    pass


def substitute(v):
    if isinstance(v, str):
        if v == "@TESTWORKER":
            return TESTWORKER
        if v.startswith("@WORKERS/"):
            return os.path.join(WORKERS_SRC, v[len("@WORKERS/"):])
        return v
    if isinstance(v, list):
        return [substitute(x) for x in v]
    if isinstance(v, dict):
        return {k: substitute(x) for k, x in v.items()}
    return v


TYPES = {"string": str, "object": dict, "array": list}


def type_ok(name, v):
    if name == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if name == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if name == "boolean":
        return isinstance(v, bool)
    if name == "null":
        return v is None
    if name in TYPES:
        return isinstance(v, TYPES[name])
    raise ValueError("unknown $type %r" % name)


def match(pattern, value, path="$"):
    """Raise Mismatch when value does not match pattern."""
    if pattern == "$any":
        return
    if isinstance(pattern, dict) and len(pattern) == 1 and next(iter(pattern)).startswith("$"):
        op, arg = next(iter(pattern.items()))
        if op == "$type":
            if not type_ok(arg, value):
                raise Mismatch("%s: expected a %s, got %r" % (path, arg, value))
        elif op == "$startswith":
            if not (isinstance(value, str) and value.startswith(arg)):
                raise Mismatch("%s: expected a string starting %r, got %r" % (path, arg, value))
        elif op == "$contains":
            if not (isinstance(value, str) and arg in value):
                raise Mismatch("%s: expected a string containing %r, got %r" % (path, arg, value))
        elif op == "$json":
            if not isinstance(value, str):
                raise Mismatch("%s: expected a string of JSON, got %r" % (path, value))
            try:
                inner = json.loads(value)
            except ValueError:
                raise Mismatch("%s: not JSON text: %r" % (path, value))
            match(arg, inner, path + "<json>")
        elif op == "$subset":
            if not isinstance(value, dict):
                raise Mismatch("%s: expected an object, got %r" % (path, value))
            for k in arg:
                if k not in value:
                    raise Mismatch("%s: key %r missing in %r" % (path, k, value))
                match(arg[k], value[k], "%s.%s" % (path, k))
        elif op == "$unordered":
            if not isinstance(value, list) or len(value) != len(arg):
                raise Mismatch("%s: expected an array of %d elements, got %r"
                               % (path, len(arg), value))
            left = list(value)
            for i, p in enumerate(arg):
                for j, v in enumerate(left):
                    try:
                        match(p, v, "%s[?%d]" % (path, i))
                    except Mismatch:
                        continue
                    del left[j]
                    break
                else:
                    raise Mismatch("%s: no element matches %r in %r" % (path, p, value))
        else:
            raise ValueError("unknown pattern operator %r" % op)
        return
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            raise Mismatch("%s: expected an object, got %r" % (path, value))
        if set(pattern) != set(value):
            raise Mismatch("%s: keys %s, expected %s" % (path, sorted(value), sorted(pattern)))
        for k in pattern:
            match(pattern[k], value[k], "%s.%s" % (path, k))
        return
    if isinstance(pattern, list):
        if not isinstance(value, list) or len(value) != len(pattern):
            raise Mismatch("%s: expected %r, got %r" % (path, pattern, value))
        for i, (p, v) in enumerate(zip(pattern, value)):
            match(p, v, "%s[%d]" % (path, i))
        return
    # scalars: also tell true from 1 and 1 from 1.0
    if type(pattern) is not type(value) or pattern != value:
        raise Mismatch("%s: expected %r, got %r" % (path, pattern, value))


def key_of(ev):
    return harness.call_id_of(ev) if isinstance(ev, dict) and "event" in ev else None


# Measured on every tool_execution_completed (issue: duration, queueing and
# the worker's resource use); a vector need not spell them out: unless its
# pattern names one, it is checked for type and set aside before matching.
MEASURED = {"duration_ms": "number", "queued_ms": "number", "cpu_user_ms": "integer",
            "cpu_sys_ms": "integer", "max_rss_kb": "integer"}


def set_measured_aside(pattern, value):
    if not (isinstance(value, dict) and value.get("event") == "tool_execution_completed"):
        return value
    value = dict(value)
    for k, t in MEASURED.items():
        if k in value and not (isinstance(pattern, dict) and k in pattern):
            if not type_ok(t, value[k]) or value[k] < 0:
                raise Mismatch("%s: expected a non-negative %s, got %r" % (k, t, value[k]))
            del value[k]
    # "enforced": what the call ran under depends on the host (Landlock ABI,
    # cgroup or rlimit, the uid): checked for its members and set aside
    if "enforced" in value and not (isinstance(pattern, dict) and "enforced" in pattern):
        e = value.pop("enforced")
        if not isinstance(e, dict) or sorted(e) != ["landlock", "limits", "network", "seccomp",
                                                     "uid", "view"]:
            raise Mismatch("enforced: expected its six members, got %r" % (e,))
    for k in ("duration_ms", "queued_ms"):
        if isinstance(pattern, dict) and pattern.get("event") == "tool_execution_completed" \
                and k not in pattern and k in value:
            raise Mismatch("%s left over" % k)
    return value


def match_events(expected, actual, order):
    if len(actual) != len(expected):
        raise Mismatch("expected %d events, got %d" % (len(expected), len(actual)))
    if order == "exact":
        for i, (p, v) in enumerate(zip(expected, actual)):
            match(p, set_measured_aside(p, v), "event[%d]" % i)
        return
    if order != "per_call":
        raise ValueError("unknown order %r" % order)
    groups_e, groups_a = {}, {}
    for p in expected:
        groups_e.setdefault(key_of(p), []).append(p)
    for v in actual:
        groups_a.setdefault(key_of(v), []).append(v)
    if set(groups_e) != set(groups_a):
        raise Mismatch("events for calls %s, expected %s"
                       % (sorted(map(str, groups_a)), sorted(map(str, groups_e))))
    for k in groups_e:
        if len(groups_e[k]) != len(groups_a[k]):
            raise Mismatch("call %s: %d events, expected %d"
                           % (k, len(groups_a[k]), len(groups_e[k])))
        for i, (p, v) in enumerate(zip(groups_e[k], groups_a[k])):
            match(p, set_measured_aside(p, v), "call %s event[%d]" % (k, i))
    if key_of(expected[-1]) is None and key_of(actual[-1]) is not None:
        raise Mismatch("the last event is not the batch-level event %r" % expected[-1])


def load_vectors():
    files = sorted(glob.glob(os.path.join(PROTO_DIR, "vectors", "*.json")))
    out = []
    for f in files:
        with open(f) as fh:
            out.append((os.path.splitext(os.path.basename(f))[0], json.load(fh)))
    return out


class TestMatcher(unittest.TestCase):
    """The matcher itself must be able to say no."""

    def test_matcher(self):
        match({"a": "$any", "b": [1, {"$type": "string"}]}, {"a": None, "b": [1, "x"]})
        for p, v in [({"a": 1}, {"a": 1, "b": 2}), ({"a": 1}, {"a": True}), ([1], [1, 2]),
                     ({"$startswith": "ab"}, "b"), ({"$json": {"a": 1}}, '{"a":2}'),
                     ({"$unordered": [1, 2]}, [1, 1]), (1, 1.0), ({"$type": "integer"}, True),
                     ({"$subset": {"a": 1}}, {"b": 1}), ({"$subset": {"a": 1}}, {"a": 2})]:
            with self.assertRaises(Mismatch, msg=(p, v)):
                match(p, v)
        match({"$unordered": [1, 2]}, [2, 1])
        match({"$subset": {"a": 1}}, {"a": 1, "b": 2})
        with self.assertRaises(Mismatch):
            match_events([{"event": "a", "id": "x"}, {"event": "batch_completed"}],
                         [{"event": "batch_completed"}, {"event": "a", "id": "x"}], "per_call")

    def test_vectors_exist(self):
        names = [n for n, _ in load_vectors()]
        for required in ("run-echo", "tools-op", "ask-user", "handler-halt", "batch-mixed",
                         "request-error", "unknown-tool", "empty-batch"):
            self.assertIn(required, names)


class Vectors(unittest.TestCase):
    def replay(self, vector):
        tools = substitute(vector.get("tools", []))
        with Daemon(tools, vector.get("daemon_args", [])) as d:
            c = d.client()
            for n, ex in enumerate(vector["exchanges"]):
                if "send" in ex:
                    c.send(ex["send"])
                else:
                    raw = ex["send_raw"]
                    for part in (raw if isinstance(raw, list) else [raw]):
                        c.send_raw(part)
                got = [c.recv() for _ in ex["expect"]]
                try:
                    match_events(ex["expect"], got, ex.get("order", "exact"))
                except Mismatch as e:
                    self.fail("exchange %d: %s\nreceived:\n%s" % (
                        n, e, "\n".join(json.dumps(g) for g in got)))
            c.assert_quiet()


def _make(vector):
    def t(self):
        self.replay(vector)
    t.__doc__ = vector.get("description")
    return t


for _name, _vector in load_vectors():
    setattr(Vectors, "test_" + _name.replace("-", "_"), _make(_vector))


if __name__ == "__main__":
    harness.main()
