"""A plain tool's big text result, escaped as it arrives
(daemon/run/plainesc.c).

A real plain tool writes a text of more than 1 MiB holding every byte class
(quotes, backslash, each short escape, other control bytes, NUL, DEL, 2-,
3- and 4-byte characters) in writes of odd sizes, so the daemon's reads end
inside escapes and characters at and around every 64 KiB boundary. The
client checks, byte for byte, the result line (the string as te_json_dumps()
writes it), the cut content and the messages; and that what is not UTF-8
(a bad byte after escaping began, a character cut by the end) is still the
base64 of exactly what the tool wrote, as before."""

import base64
import json
import os
import sys
import unittest

from harness import Daemon, with_tree
from test_big_result import cut, jansson, run_raw

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MIB = 1 << 20

# 61 bytes (odd: a boundary falls on each of its bytes in turn), starting
# with a byte that says "not JSON".
UNIT = (b'ab"c\\d\x08\x0c\n\r\t\x00\x01\x1f\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'
        b" xyz/<>&'\xc3\xa9\xc3\xa9\xe2\x82\xac 0123456789ABCDEFGHI")
assert len(UNIT) == 61, len(UNIT)

# argv: size, how ("ok": ends with a newline; "bad": a stray 0x80 at
# 1.5 MiB; "cutchar": ends inside a 4-byte character)
# The payload, written once: the tool builds it from this text and the
# test the same, to check what the client gets byte for byte.
PAYLOAD = r"""
def payload(unit, n, how):
    b = bytearray((unit * (n // len(unit) + 1))[:n])
    if how == "bad":
        b[3 * (1 << 19) + 5] = 0x80
    if how == "cutchar":
        b[-3:] = b"\xf0\x9f\x98"
    else:
        b[-1:] = b"\n"
    return bytes(b)
"""
exec(PAYLOAD)

TOOL = PAYLOAD + r"""
import os, sys
n = int(sys.argv[1]); how = sys.argv[2]
sys.stdin.buffer.read()
b = payload(bytes.fromhex(sys.argv[3]), n, how)
sizes = [65537, 4093, 1, 3, 65535, 7, 131071, 2]
off = i = 0
while off < n:
    k = min(sizes[i % len(sizes)], n - off)
    off += os.write(1, b[off:off + k])
    i += 1
"""


N = 2 * MIB + 12345


def tools():
    fs = with_tree({})
    return [dict(description="a big plain text", schema={"type": "object"}, protocol="plain",
                 filesystem=fs, name="plain_" + how,
                 command=[PYTHON, "-c", TOOL, str(N), how, UNIT.hex()])
            for how in ("ok", "bad", "cutchar")]


class BigPlainText(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(tools(), ["--max-frame-bytes", str(64 * MIB), "--max-content-bytes",
                                 str(64 * MIB)])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_text_byte_for_byte(self):
        text = payload(UNIT, N, "ok")[:-1]  # one trailing newline dropped
        s = text.decode()
        for limit in (len(text) + 1, 100000, MIB + 1, MIB + 2):  # whole, then cut
            lines = run_raw(self.d, "plain_ok", {}, max_content_bytes=limit)
            evs = [json.loads(x) for x in lines]
            self.assertEqual([e["event"] for e in evs],
                             ["tool_execution_started", "tool_execution_completed",
                              "tool_result_encoded", "batch_completed"])
            self.assertIn(b'"result":{"ok":' + jansson(s) + b'},"duration_ms":', lines[1])
            self.assertEqual(evs[1]["result"], {"ok": s})
            content = text if limit > len(text) else cut(text, limit)
            self.assertEqual(lines[2], b'{"event":"tool_result_encoded","batch":"b","id":"c",'
                             b'"content":' + jansson(content.decode()) + b'}')
            self.assertEqual(evs[3]["messages"], [{"role": "tool", "tool_call_id": "c",
                                                   "content": content.decode()}])
            if limit <= len(text):
                self.assertEqual(evs[1]["truncated"]["original_bytes"], len(text))

    def test_not_utf8_is_base64_of_what_it_wrote(self):
        for how in ("bad", "cutchar"):
            raw = payload(UNIT, N, how)
            evs = [json.loads(x) for x in run_raw(self.d, "plain_" + how, {})]
            self.assertEqual(evs[1]["result"], {"ok": {
                "encoding": "base64", "data": base64.b64encode(raw).decode(),
                "size_bytes": len(raw)}}, how)


if __name__ == "__main__":
    unittest.main()
