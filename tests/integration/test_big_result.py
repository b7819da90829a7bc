"""Big results held once (daemon/run/bigres.c).

A result {"ok": S} with S of 1 MiB or more keeps S's text in the buffer it
arrived in and writes the events around it. These tests pin that the client
gets exactly the bytes the ordinary path wrote (the result, the cut or whole
content, the messages; escapes written by the tool in other forms; plain
text; a frame that is not JSON still refused), and, without timing
anything, that the daemon's peak memory for a 32 MiB result stays under 2x
the payload (it grew by 3.0-3.2x before: frame, jansson's token buffer, the
string, the event line)."""

import json
import os
import socket
import sys
import unittest

from harness import SANITIZED, WAIT, Daemon, with_tree

BIGTOOL = os.path.join(os.path.dirname(os.environ.get("TE_TESTWORKER", "")), "bigtool")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MIB = 1 << 20
LINE = "line of \"text\"\twith a \\ and \u00e9 to escape; 0123456789\n"

# Writes {"ok": S} as Python's json writes it (\u00e9, surrogate pairs for
# U+1F600, \u001f), with "/" as "\/" and lowercase hex: none of it the
# daemon's own form. "bad": a raw control byte inside S (not JSON).
PYFRAME = r"""
import json, struct, sys
n = int(sys.argv[1]); how = sys.argv[2]
req = sys.stdin.buffer.read()
s = ("a/\u00e9\U0001F600\x1f\"\\ " * (n // 12 + 1))[:n]
body = json.dumps({"ok": s}).replace("/", "\\/")
if how == "bad":
    body = body[:100] + "\x01" + body[100:]
b = body.encode()
sys.stdout.buffer.write(struct.pack(">I", len(b)) + b)
"""


def text_payload(n, kind):
    if kind == "x":
        return "x" * n
    b = (LINE.encode() * (n // len(LINE.encode()) + 1))[:n]
    if b[-1] & 0xC0 == 0xC0:
        b = b[:-1] + b"."
    return b.decode()


def jansson(s):
    """A string as te_json_dumps() writes it."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif o < 0x20:
            out.append("\\u%04X" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out).encode()


def cut(b, limit):
    """daemon/run/cut.c on bytes b."""
    orig = len(b)
    mlen = len("\n\n[... toolexecd omitted %d of %d bytes here; ask for a narrower result ...]\n\n"
               % (orig, orig))
    if mlen + 16 > limit:
        mlen = 0
    budget = limit - mlen
    head = budget // 2
    tail = budget - head
    while head > 0 and b[head] & 0xC0 == 0x80:
        head -= 1
    tail_from = orig - tail
    while tail_from < orig and b[tail_from] & 0xC0 == 0x80:
        tail_from += 1
    marker = ("\n\n[... toolexecd omitted %d of %d bytes here; ask for a narrower result ...]\n\n"
              % (tail_from - head, orig)).encode() if mlen else b""
    return b[:head] + marker + b[tail_from:]


def run_raw(d, name, args, hold=None, **opts):
    """Every event line (bytes) of one one-call batch, and the daemon's
    VmHWM in KiB after it. Chunks are joined once per line: the harness's
    client would copy a 32 MiB line once per chunk. hold: a list to keep
    the connection in (a spill file goes with its connection)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(WAIT * 4)
    s.connect(d.sock)
    req = dict({"op": "run", "batch": "b", "calls": [{"id": "c", "name": name,
                                                      "arguments": args}]}, **opts)
    s.sendall(json.dumps(req).encode() + b"\n")
    lines, parts = [], []
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise AssertionError("the daemon closed the connection")
        while b"\n" in chunk:
            head, _, chunk = chunk.partition(b"\n")
            parts.append(head)
            lines.append(b"".join(parts))
            parts = []
            if lines[-1].startswith(b'{"event":"batch_completed"'):
                hold.append(s) if hold is not None else s.close()
                return lines
        parts.append(chunk)


def hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def tools():
    fs = with_tree({})
    return [dict(t, description="a big result", schema={"type": "object"}) for t in [
        {"name": "big", "command": [BIGTOOL], "filesystem": fs},
        {"name": "big_plain", "command": [BIGTOOL, "plain"], "protocol": "plain",
         "filesystem": fs},
        {"name": "big_spill", "command": [BIGTOOL], "filesystem": fs, "spill": True},
        {"name": "pyframe", "command": [PYTHON, "-c", PYFRAME, str(3 * MIB), "ascii"],
         "filesystem": fs},
        {"name": "pyframe_bad", "command": [PYTHON, "-c", PYFRAME, str(2 * MIB), "bad"],
         "filesystem": fs},
    ]]


ARGS = ["--max-frame-bytes", str(256 * MIB), "--max-content-bytes", str(256 * MIB)]


class BigResult(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(BIGTOOL):
            raise unittest.SkipTest("no bigtool beside the testworker")
        cls.d = Daemon(tools(), ARGS)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def check(self, lines, payload, limit=None):
        evs = [json.loads(x) for x in lines]
        self.assertEqual([e["event"] for e in evs],
                         ["tool_execution_started", "tool_execution_completed",
                          "tool_result_encoded", "batch_completed"])
        done, enc, bc = evs[1], evs[2], evs[3]
        self.assertEqual(done["result"], {"ok": payload})
        self.assertIn(b'"result":{"ok":' + jansson(payload) + b'},"duration_ms":', lines[1])
        b = payload.encode()
        content = b if limit is None or len(b) <= limit else cut(b, limit)
        self.assertEqual(enc["content"].encode(), content)
        self.assertEqual(lines[2], b'{"event":"tool_result_encoded","batch":"b","id":"c",'
                         b'"content":' + jansson(content.decode()) + b'}')
        self.assertEqual(bc["messages"], [{"role": "tool", "tool_call_id": "c",
                                           "content": content.decode()}])
        if limit is not None and len(b) > limit:
            self.assertEqual(done["truncated"]["original_bytes"], len(b))
        else:
            self.assertNotIn("truncated", done)
        return done

    def test_framed_cut_and_whole(self):
        for kind in ("x", "text"):
            p = text_payload(3 * MIB + 7, kind)
            self.check(run_raw(self.d, "big", {"bytes": len(p.encode()), "kind": kind}), p, 100000)
            self.check(run_raw(self.d, "big", {"bytes": len(p.encode()), "kind": kind},
                               max_content_bytes=len(p.encode()) + 1), p)
            # the cut's ends on both sides of a character (the e-acute)
            for limit in (MIB + 1, MIB + 2, MIB + 3):
                self.check(run_raw(self.d, "big", {"bytes": len(p.encode()), "kind": kind},
                                   max_content_bytes=limit), p, limit)

    def test_plain(self):
        for kind in ("x", "text"):
            p = text_payload(2 * MIB + 3, kind)
            want = p[:-1] if p.endswith("\n") else p
            self.check(run_raw(self.d, "big_plain", {"bytes": len(p.encode()), "kind": kind},
                               max_content_bytes=len(p.encode()) + 1), want)

    def test_other_escapes_are_rewritten(self):
        s = ("a/\u00e9\U0001F600\x1f\"\\ " * (3 * MIB // 12 + 1))[:3 * MIB]
        self.check(run_raw(self.d, "pyframe", {}), s, 100000)

    def test_not_json_is_still_refused(self):
        evs = [json.loads(x) for x in run_raw(self.d, "pyframe_bad", {})]
        self.assertEqual(evs[1]["result"]["tool_error"]["reason"], "invalid_return")

    def test_spill_holds_the_whole_content(self):
        p = text_payload(2 * MIB, "text")
        conn = []
        done = self.check(run_raw(self.d, "big_spill", {"bytes": len(p.encode()), "kind": "text"},
                                  hold=conn), p, 100000)
        with open(done["truncated"]["spill_path"], "rb") as f:
            self.assertEqual(f.read(), p.encode())
        conn[0].close()

    def test_over_max_content_bytes(self):
        with Daemon(tools(), ["--max-frame-bytes", str(8 * MIB), "--max-content-bytes",
                              str(2 * MIB)]) as d:
            evs = [json.loads(x) for x in run_raw(d, "big", {"bytes": 3 * MIB})]
            self.assertEqual(evs[1]["result"]["tool_error"]["reason"], "encoding_failed")


@unittest.skipIf(SANITIZED, "ASan's shadow and quarantine are most of a sanitized daemon's RSS")
class BigResultMemory(unittest.TestCase):
    def test_peak_under_twice_the_payload(self):
        n = 32 * MIB
        for kind, tool in (("text", "big"), ("text", "big_plain")):
            with Daemon(tools(), ARGS) as d:
                run_raw(d, tool, {"bytes": 1024, "kind": kind})
                base = hwm_kb(d.proc.pid)
                lines = run_raw(d, tool, {"bytes": n, "kind": kind})
                grew = (hwm_kb(d.proc.pid) - base) * 1024 / n
                self.assertGreater(len(lines[1]), n)
                self.assertLess(grew, 2.0, "%s: the daemon's peak grew by %.2fx a %d-byte result"
                                % (tool, grew, n))


if __name__ == "__main__":
    unittest.main()
