#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py - (re)write the seed corpora in tests/fuzz/corpus/.

The seeds are committed; run this only to regenerate them after changing the
list below. Each seed is small and shows one meaningful case.
"""
import hashlib
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def frame(body):
    if isinstance(body, str):
        body = body.encode()
    return struct.pack(">I", len(body)) + body


def frame_seed(sel=6, cap=0, splits=(), feed_again=False, stream=b""):
    """fuzz_frame input: [sel][cap hi][cap lo][flags][splits...][stream].
    sel 0-6: caps 0 1 4 16 255 4096 65536; 7: cap given; 6 with cap 0xffff:
    TE_FRAME_MAX_DEFAULT (16 MiB)."""
    assert len(splits) < 16
    flags = len(splits) | (16 if feed_again else 0)
    return bytes([sel, cap >> 8 & 255, cap & 255, flags]) + bytes(splits) + stream


FRAME = {
    "one-ok": frame_seed(cap=0xffff, stream=frame('{"ok":"hello"}')),
    "two-frames-split": frame_seed(splits=(1, 3, 7), stream=frame('{"ok":1}') + frame('{"error":"x"}')),
    "byte-at-a-time": frame_seed(splits=(1,), stream=frame('{"ask_user":"q?"}')),
    "empty-body": frame_seed(stream=frame(b"") + frame(b"") + frame("{}")),
    "cap0-empty-frames": frame_seed(sel=0, stream=frame(b"") * 3),
    "cap0-refuses-one": frame_seed(sel=0, stream=frame(b"x")),
    "over-64k": frame_seed(stream=struct.pack(">I", 65537) + b"x"),
    "over-cap-custom": frame_seed(sel=7, cap=16, stream=frame(b"a" * 17)),
    "at-cap-custom": frame_seed(sel=7, cap=16, splits=(2, 0, 5), stream=frame(b"a" * 16)),
    "huge-announced": frame_seed(cap=0xffff, stream=b"\xff\xff\xff\xff" + b"junk"),
    "default-cap-plus-one": frame_seed(cap=0xffff, stream=struct.pack(">I", 16 * 1024 * 1024 + 1)),
    "truncated-body": frame_seed(splits=(4, 2), stream=frame('{"ok":"trunc"}')[:9]),
    "truncated-header": frame_seed(stream=b"\x00\x00"),
    "trailing-bytes": frame_seed(sel=5, splits=(200,), stream=frame('{"ok":null}') + b"after the frame"),
    "feed-again": frame_seed(splits=(3, 20), feed_again=True,
                             stream=frame('{"halt":"done","result":1}') + frame('{"raised":{}}')),
    "zero-splits": frame_seed(sel=3, splits=(0, 0, 6), stream=frame("0123456789abcdef")),
}

REQUEST = {
    "minimal": {"op": "run", "calls": [{"id": "c0", "name": "echo"}]},
    "full": {"op": "run", "batch": "b1", "calls": [{"id": "c0", "name": "echo", "arguments": {"x": 1}}],
             "on_tool_error": "continue", "tool_timeout": 30000, "max_concurrency": 4,
             "context": {}, "session_id": None, "request_id": "r-1", "engine": {"name": "e"}},
    "halt-policy": {"op": "run", "batch": "h", "on_tool_error": "halt",
                    "calls": [{"id": "c0", "name": "echo", "arguments": {"x": 1}},
                              {"id": "c1", "name": "fail", "arguments": {"reason": "boom"}}]},
    "empty-calls": {"op": "run", "batch": "e", "calls": []},
    "arguments-null": {"op": "run", "calls": [{"id": "a", "name": "t.x-1", "arguments": None}]},
    "context": {"op": "run", "batch": "c", "request_id": "r-7", "context": {"user": "u"},
                "calls": [{"id": "c0", "name": "ctx", "arguments": {"x": 1}}]},
    "nulls": {"op": "run", "batch": None, "on_tool_error": None, "tool_timeout": None,
              "max_concurrency": None, "calls": [{"id": "", "name": ""}]},
    "unicode-ids": {"op": "run", "calls": [{"id": "\u00e9t\u00e9", "name": "echo"},
                                           {"id": "\u65e5\u672c", "name": "echo"}]},
    "bad-duplicate-id": {"op": "run", "batch": "b8", "calls": [{"id": "a", "name": "echo"}, {"id": "a", "name": "echo"}]},
    "bad-missing-id": {"op": "run", "calls": [{"id": "a", "name": "echo"}, {"name": "echo"}]},
    "bad-policy": {"op": "run", "calls": [], "on_tool_error": "sometimes"},
    "bad-concurrency": {"op": "run", "calls": [{"id": "a", "name": "echo"}], "max_concurrency": 0},
    "bad-timeout": {"op": "run", "calls": [], "tool_timeout": -5},
    "bad-timeout-real": {"op": "run", "calls": [], "tool_timeout": 1.5},
    "bad-arguments": {"op": "run", "calls": [{"id": "a", "name": "echo", "arguments": [1]}]},
    "bad-calls": {"op": "run", "calls": "nope"},
    "bad-no-calls": {"op": "run"},
    "bad-call-key": {"op": "run", "calls": [{"id": "a", "name": "echo", "args": {}}]},
    "bad-unknown-key": {"op": "run", "calls": [], "pad": "x"},
    "bad-batch-empty": {"op": "run", "batch": "", "calls": []},
    "tools-op": {"op": "tools"},
}
REQUEST_RAW = {
    "not-json": b"this is not json",
    "array": b"[1, 2, 3]",
    "duplicate-keys": b'{"op":"run","op":"run","calls":[]}',
    "big-int": b'{"op":"run","calls":[],"tool_timeout":9223372036854775807}',
}

# Request lines the daemon answers with exactly one request_error, one per
# line of corpus/request_errors.jsonl: a shape for each error of each op.
# tests/integration/request_leakcheck.py feeds them (and the fuzz_request
# seeds) to a daemon built with LeakSanitizer (one of them leaked).
GOOD = {"id": "c0", "name": "echo"}
REQUEST_ERRORS = [
    b"this is not json", b'{"op": "tools"', b"\xff\xfe", b'{"op":"tools"} trailing', b"{]",
    b"\x00\x01\x02", b'{"op":"run","op":"run","calls":[]}', b'{"op":"x","pad":"\ud800"',
    b"[1, 2]", b'"run"', b"42", b"null", b"true",
    {"op": "dance"}, {}, {"op": 5}, {"op": None}, {"calls": []}, {"op": "RUN", "calls": []},
    {"op": ["run"]}, b'{"op":5e1021}',
    {"op": "run"}, {"op": "run", "calls": "c0"}, {"op": "run", "calls": None},
    {"op": "run", "calls": ["c0"]}, {"op": "run", "calls": [{"name": "echo"}]},
    {"op": "run", "calls": [{"id": 5, "name": "echo"}]}, {"op": "run", "calls": [{"id": "a"}]},
    {"op": "run", "calls": [{"id": "a", "name": "echo", "arguments": [1]}]},
    {"op": "run", "calls": [GOOD, {"id": "c1", "name": "echo"}, GOOD]},
    {"op": "run", "calls": [GOOD], "on_tool_error": "explode"},
    {"op": "run", "calls": [GOOD], "on_tool_error": {"echo": "nope"}},
    {"op": "run", "calls": [GOOD], "max_concurrency": 0},
    {"op": "run", "calls": [GOOD], "max_concurrency": 1.5},
    {"op": "run", "calls": [GOOD], "tool_timeout": "fast"},
    {"op": "run", "calls": [GOOD], "tool_timeout": -5},
    {"op": "run", "calls": [GOOD], "bogus_key": {"deep": [1, {"x": "y"}]}},
    {"op": "run", "batch": 5, "calls": [GOOD]}, {"op": "run", "batch": "", "calls": []},
    b'{"op":"run","batch":5e1021,"calls":[{"id":"c0","name":"echo"}]}',
    b'{"op":"run","calls":[{"id":6e1021,"name":"echo"}]}',
    {"op": "cancel"}, {"op": "cancel", "batch": 5}, {"op": "cancel", "batch": "no-such"},
    b'{"op":"cancel","batch":5e1021}',
    {"op": "decide"}, {"op": "decide", "batch": "x", "id": "y"},
    {"op": "decide", "batch": "no-such", "id": "a", "decision": "continue"},
    {"op": "tools", "watch": 1}, {"op": "tools", "watch": "yes"}, {"op": "tools", "watch": None},
    {"op": "tools", "watch": [True]}, {"op": "tools", "watch": {"a": 1}},
    {"op": "tools", "format": "nope"}, {"op": "tools", "format": 5},
    {"op": "tools", "format": {"a": [1]}}, b'{"op":"tools","format":1e999}',
    {"op": "tools", "watch": 0, "format": "nope"},
    {"op": "tail", "tools": "x"}, {"op": "tail", "tools": [1]}, {"op": "tail", "batches": 5},
    b'{"op":"tail","tools":[1e999]}',
]

RESPONSE = {
    "ok-string": b'{"ok":"hello"}',
    "ok-value": b'{"ok":[1,null,true,{"a":1.5}]}',
    "ok-null": b'{"ok":null}',
    "error-string": b'{"error":"boom"}',
    "error-object": b'{"error":{"code":42,"why":"no"}}',
    "ask-user": b'{"ask_user":"which city?"}',
    "ask-user-opts": b'{"ask_user":"where?","opts":{"choices":["Paris","Oslo"]}}',
    "halt": b'{"halt":"plan_submitted","result":{"plan":"p"}}',
    "halt-string-result": b'{"halt":"done","result":"text"}',
    "halt-reserved": b'{"halt":"completed","result":null}',
    "raised": b'{"raised":{"type":"ValueError","message":"bad value","stacktrace":"line 1"}}',
    "raised-empty": b'{"raised":{}}',
    "unicode": '{"ok":"\u00e9t\u00e9 \u65e5\u672c \U0001f600"}'.encode(),
    "bad-unknown-key": b'{"result":1}',
    "bad-extra-key": b'{"ok":1,"x":2}',
    "bad-empty-object": b"{}",
    "bad-not-object": b"[1]",
    "bad-scalar": b"42",
    "bad-json": b'{"ok":',
    "bad-duplicate": b'{"ok":1,"ok":2}',
    "bad-halt-no-result": b'{"halt":"x"}',
    "bad-halt-reason": b'{"halt":1,"result":2}',
    "bad-ask-opts": b'{"ask_user":"q","opts":[]}',
    "bad-raised": b'{"raised":"boom"}',
    "bad-tool-error": b'{"tool_error":{"reason":"timeout","message":"m"}}',
    "bad-tool-error-nonstring": b'{"tool_error":{"message":{"m":1}}}',
    "bad-tool-error-scalar": b'{"tool_error":7}',
    "halt-reason-name": b'{"halt":"timeout","result":[1,2]}',
    "bad-utf8": b'{"ok":"\xff\xfe"}',
    "bad-nul": b'{"ok":"a\\u0000b"}',
}


def lines_seed(sel=5, cap=0, splits=(), ask=False, drop_some=False, keep0=False, stream=b""):
    """fuzz_lines input: [sel][cap hi][cap lo][flags][splits...][stream].
    sel 0-6: caps 0 1 4 16 255 4096 65536; 7: cap given. flags: split count,
    16 ask mode (growth on request), 32 drop every other growth, 64 keep 0."""
    assert len(splits) < 16
    flags = len(splits) | (16 if ask else 0) | (32 if drop_some else 0) | (64 if keep0 else 0)
    return bytes([sel, cap >> 8 & 255, cap & 255, flags]) + bytes(splits) + stream


LINES = {
    "two-requests": lines_seed(stream=b'{"op":"run","calls":[]}\n{"op":"stats"}\n'),
    "byte-at-a-time": lines_seed(splits=(1,), stream=b'{"op":"tools"}\n\n{"a":1}\n'),
    "blank-lines": lines_seed(sel=2, stream=b"\n\n \t\r\n\n"),
    "last-without-newline": lines_seed(splits=(3, 5), stream=b'{"op":"run"}\n{"op":"cancel"}'),
    "at-cap": lines_seed(sel=7, cap=8, stream=b"12345678\nok\n"),
    "over-cap-then-ok": lines_seed(sel=7, cap=8, splits=(4, 1, 9), stream=b"123456789abcdef\nok\n"),
    "over-cap-last": lines_seed(sel=3, stream=b"x" * 40),
    "cap0": lines_seed(sel=0, stream=b"\n\nx\n\n"),
    "ask-grow": lines_seed(sel=6, ask=True, splits=(200, 0, 255), stream=(b"y" * 9000) + b"\nz\n"),
    "ask-drop": lines_seed(sel=6, ask=True, drop_some=True, splits=(100,),
                           stream=(b"a" * 5000) + b"\n" + (b"b" * 10000) + b"\nc\n"),
    "keep0": lines_seed(sel=5, keep0=True, ask=True, stream=b"first\nsecond\n" + b"t" * 300),
    "crlf-utf8": lines_seed(sel=4, splits=(2,), stream='{"k":"\u00e9\u4e2d"}\r\n'.encode()),
}

# fuzz_auth: [mode][bytes]. Mode 1's tokens are signed by the keys of the
# JWKS in fuzz_auth.c (made once with cjose, daemon/unit/jwt_forge.h).
AUTH_JWKS = '{"keys":[{"kty":"RSA","kid":"r1","e":"AQAB","n":"r2pWf4W8RkAKm0Djm5HLwdWNiPBBtnjvF-P9-k3SFTDyBH4hFwVpLOV6GEz-82TzPWpDNapEI8vnaKKYfh0rfnQwpQUxh1XvlBq1HQMcPRiumGSKvPLJVa6r6wT_Pg2edpy85x_28Ts4fWgnGqLWVpxWka0s6TzqykKF2guftlRf1bQlqZbALCPnyTeKInRhaZnrkC5lUr9jFesx2hKQM5ZVmH4-bpbJQafpuOp4_dL9zlrXOT1YOM2YW6_uLUK5swCBCb-YyL3JCjIwKM_-Ps97F4_rdfCXaXsR1izln2KHZYBplXz_6-W1QwDU2Flb_lLCXzwRHAIh4Wok58Ni5w"},{"kty":"EC","kid":"e1","crv":"P-256","x":"SPSUoxLaLHBqZd03gPV76104F-RjiEfwS4f3Tf3-yOQ","y":"QkoOP14yUOtEF7x0qHyiIaP8CtI5OwK3ScwXF_XMW8U"}]}'
AUTH_TOKENS = {
    'rs256': 'eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJhdWQiOiJodHRwczovL21jcC5leGFtcGxlLmNvbS9tY3AiLCJzdWIiOiJhbGljZSIsIm5iZiI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3MDAwMDAwMDAsInNjb3BlIjoiZmlsZXM6cmVhZCB0b29sczpjYWxsIn0.gglYm7gzCXEm_dZRXvHEhkOj9CwxRlJCsMUDcgbdHctdrWZXQ_M6t7eeD6nVrdJctxlgu4zvqgKOE_Tiq6HDLk3E1cKpHH0nb0LIG9D9cRDtnTenUKMoKGRjTlD7RXFyrJ2EiILUkv8qKfbdX1pJWMBqWO6kUx1zlZv2-LcQuK4gvBawbg2PXv0w_Ni_tsgF7VzYlhwpFghyyO31DcIc29th634FMvh1FuC3PXVPBqn_dutHeXMRZmjUqV9E3_JWU8ftC28VtkZqqUZTpunY6qpPBWpb6EAjtUvpP-NpIIzf1bQsfr4_cqiQVRqQAVXSu1iFg9GEBeqH_FEyB2vJEg',
    'ps256': 'eyJhbGciOiJQUzI1NiIsImtpZCI6InIxIn0.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJhdWQiOiJodHRwczovL21jcC5leGFtcGxlLmNvbS9tY3AiLCJzdWIiOiJhbGljZSIsIm5iZiI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3MDAwMDAwMDAsInNjb3BlIjoiZmlsZXM6cmVhZCB0b29sczpjYWxsIn0.IoYfkYbavtYyX0SxPMExSSHJSHzRIxuTXz_Fk27orEQsMMNsg_e4PB35JQnnUIxk40Q6fYTKX_xf3p3K2Gp3gMtIcJ5wXjzAE8glTvvLBlcm4WE-5AJpsGOm0taZ5p4F9fsOsxj2ZGoK4QtcojTHzlYbLjfzjxCz3fPPR2ba4Dkq9iZynDK55QoJ4OCaSVxLWgLMu8BTJvONMgMag-rQ3rN8N1ldB5ZoHIJ-V6hxtYmCoRxRPkov2cP9KZRDWjCJ_w1CCB2zzm1H2cYxwaxogDs30UnsU1I410LduN5JzXk4wGkaTaG0-ev0YKpIZN3m11ceiFH2CbmS3WN-fwcxNg',
    'es256': 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImUxIn0.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJhdWQiOiJodHRwczovL21jcC5leGFtcGxlLmNvbS9tY3AiLCJzdWIiOiJhbGljZSIsIm5iZiI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJpYXQiOjE3MDAwMDAwMDAsInNjb3BlIjoiZmlsZXM6cmVhZCB0b29sczpjYWxsIn0.a2Q4oPF_0-iBwNC1DUrLqZ_BVFK93lMqJn0OfDu1WdFpzLL8XNN4cLil3EAQzmdjevsU12JHW2MXcy7aiYTRlQ',
    'es256-no-kid-scp': 'eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJhdWQiOlsiaHR0cHM6Ly9tY3AuZXhhbXBsZS5jb20vbWNwIl0sInN1YiI6IngiLCJleHAiOjQxMDI0NDQ4MDAsInNjcCI6WyJhIiwiYiJdfQ._wQ1XeTgPdnQLg0C4bLnqvHZFRlYCHoItMj13xLOfeAdyzL0CUeyO-Nphlc_QTLXyYp710-lenbSGkBJ0Coerg',
    'rs256-expired': 'eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.eyJpc3MiOiJodHRwczovL2F1dGguZXhhbXBsZS5jb20iLCJhdWQiOiJodHRwczovL21jcC5leGFtcGxlLmNvbS9tY3AiLCJzdWIiOiJ4IiwiZXhwIjoxMDAwfQ.Vszf7nEeofC5FAiuyhY2VDyq9Vs5XxwlHJIhSD0Jtoem6-m9Jqnapqk_pe_1foZrtIVRZhO71tWfc1q1KbR_O54tLd9L61N31F3OGVGQFMq9pOBG6CefYf476Gb-L-2URaB0GDU5lK16itLKvNxdRx1bHreRH0aiPa3GEb4Qo9sYDrL2_Eb3bFrVqbPFWpW7INsxRJWwJnaK3NkX0hkqhs_pTWXWxraKYcKSs0J0VNh7IfDvh-WS2GFlYpVWNFyr15DRGUhw-oVrD9zZynObBffAgCslAI-uSMkt5qvoZF53THAy5s7f2ktmz7B-9EYTbCcEgEi6G1VzqU65hsCzvw',
}
AUTH = {
    **{"token-" + k: b"\x01" + v.encode() for k, v in AUTH_TOKENS.items()},
    "token-none": b"\x01eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
    "token-hs256": b"\x01eyJhbGciOiJIUzI1NiIsImtpZCI6InIxIn0.eyJzdWIiOiJ4In0.AAAA",
    "jwks": b"\x00" + AUTH_JWKS.encode(),
    "jwks-oct-enc": b'\x00{"keys":[{"kty":"oct","k":"c2VjcmV0"},'
                    b'{"kty":"EC","use":"enc","crv":"P-256","x":"a","y":"b"}]}',
    "header-bearer": b"\x02Bearer abc.DEF-_~+/==",
    "header-quotes": b"\x02https://h/p \"x\\\r\n",
    "cache-token": b"\x03" + AUTH_TOKENS["rs256"].encode(),
}


# fuzz_spawnmsg: the spawner's wire (daemon/run/spawnmsg.h), in the machine's
# order. A request: [even byte][td_spawn_req][description]; a reply: [odd
# byte: bits 1-7 the descriptors that came][td_spawn_reply].
SPAWN_MAGIC, SPAWN_NONE = 0x50535454, 0xFFFFFFFF


def sp_str(s):
    if s is None:
        return struct.pack("=I", SPAWN_NONE)
    b = s.encode()
    return struct.pack("=I", len(b)) + b + b"\0"


def sp_strv(v):
    if v is None:
        return struct.pack("=I", SPAWN_NONE)
    return struct.pack("=I", len(v)) + b"".join(sp_str(s) for s in v)


def sp_desc(argv=("/bin/true",), envp=("PATH=/usr/bin",), cwd="/tmp/w", ints=(0,) * 9,
            work_dir=None, maps=(None, None), hide=None, ll_write=None, rlimits=(),
            filter_len=None, ops=None):
    b = struct.pack("=I9i", SPAWN_MAGIC, *ints)
    b += sp_str(cwd) + sp_str(work_dir) + sp_str(maps[0]) + sp_str(maps[1])
    b += sp_strv(argv) + sp_strv(envp) + sp_strv(hide) + sp_strv(ll_write)
    b += struct.pack("=I", len(rlimits)) + b"".join(struct.pack("=iQQ", *r) for r in rlimits)
    if filter_len is None:
        b += struct.pack("=I", SPAWN_NONE)
    else:  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
        b += struct.pack("=I", filter_len) + struct.pack("=HBBI", 6, 0, 0, 0x7FFF0000) * filter_len
    if ops is None:
        b += struct.pack("=I", SPAWN_NONE)
    else:
        b += struct.pack("=I", len(ops))
        for kind, optional, slot, mode, path, arg, arg2 in ops:
            b += struct.pack("=BBhI", kind, optional, slot, mode)
            b += sp_str(path) + sp_str(arg) + sp_str(arg2)
    return b


def sp_req(kind, desc=b"", flags=0, spare=(SPAWN_NONE, 0)):
    return b"\0" + struct.pack("=6I", kind, 7, 1, flags, *spare) + desc


def sp_reply(kind, nfds=0, err=0, handed=0, pid=1234, status=0, us=(1500000, 20, 4096),
             what=b""):
    return bytes([1 | nfds << 1]) + struct.pack("=3I3i2I3q32s", kind, 7, 1, pid, err, status,
                                               handed, 0, *us, what)


CALL = sp_desc(argv=("/usr/lib/toolexecd-init", "/usr/bin/python3", "-c", "pass"),
               envp=("PATH=/usr/bin:/bin", "TOOLEXEC_TOOL=who", "TOOLEXEC_CALL_ID=c1"),
               ints=(1, 0x20020000, 100000, 100000, 1, 1, 3, 0, 0), work_dir="/run/toolexecd",
               maps=("0 100000 1", "0 100000 1"), hide=("/etc/shadow",),
               ll_write=("/tmp",), rlimits=((4, 0, 0), (7, 1024, 1024)), filter_len=1,
               ops=((1, 0, 3, 0o755, "/usr", None, None), (2, 1, 4, 0, None, "/tmp", "x")))
SPAWNMSG = {
    "start-minimal": sp_req(1, sp_desc()),
    "start-call": sp_req(1, CALL, flags=3),
    "start-with-spare": sp_req(1, CALL, spare=(3, 2)),
    "prepare": sp_req(2, sp_desc(envp=()), flags=1),
    "drop": sp_req(3),
    "start-truncated": sp_req(1, CALL[:-3]),
    "start-no-argv": sp_req(1, sp_desc(argv=None)),
    "started": sp_reply(1, nfds=3, handed=3),
    "started-failed": sp_reply(1, err=24, what=b"pipe"),
    "started-no-pidfd": sp_reply(1),
    "exited": sp_reply(2, status=9),
    "exited-negative-times": sp_reply(2, us=(-1, -1000001, -5)),
    "prepared-failed": sp_reply(3, err=12, what=b"x" * 32),
    "spare-gone": sp_reply(4, nfds=1),
    "reply-short": sp_reply(2)[:40],
}


def audit_chain(records, genesis="0" * 64):
    """An audit file: each record a compact JSON line whose prev_sha256 is
    the SHA-256 of the line before (as toolexecd writes it); the lines."""
    out, prev = [], genesis
    for r in records:
        line = json.dumps(dict(r, prev_sha256=prev), separators=(",", ":")).encode()
        prev = hashlib.sha256(line).hexdigest()
        out.append(line)
    return out


def audit_seed(lines, which=1, at=7, ended=True):
    """fuzz_audit input: [which line to tamper][which byte][the file]."""
    return bytes([which, at]) + b"\n".join(lines) + (b"\n" if ended else b"")


CALLS = [{"ts": 1.5 + i, "batch": "b", "call": "c%d" % i, "record": "call", "tool": "echo",
          "outcome": "ok", "arguments_sha256": "ab" * 32} for i in range(4)]
_chain = audit_chain(CALLS)
_break = json.dumps({"ts": 9.0, "record": "chain_break", "expected_prev": "cd" * 32,
                     "found_prev": hashlib.sha256(_chain[1]).hexdigest(),
                     "prev_sha256": "cd" * 32}, separators=(",", ":")).encode()
AUDIT = {
    "intact": audit_seed(_chain),
    "one-record": audit_seed(_chain[:1], which=0),
    "tail-cut-mid-line": audit_seed(_chain[:-1] + [_chain[-1][:20]], ended=False),
    "edited": audit_seed(_chain[:1] + [_chain[1].replace(b'"ok"', b'"error"')] + _chain[2:]),
    "reordered": audit_seed([_chain[1], _chain[0]] + _chain[2:]),
    "chain-break": audit_seed(_chain[:2] + [_break]),
    "not-json": audit_seed(_chain[:1] + [b"not json", b"{\"prev_sha256\":3}", b"[]"]),
    "empty-lines": audit_seed([b"", b"", _chain[0]]),
    "nul-bytes": audit_seed([_chain[0][:5] + b"\0" + _chain[0][5:]]),
}


# fuzz_narrow: a run request's "policy", tried against its four tools
# (view: writes /srv/data and /w, reads /w/ro and /opt, hides /w/secret and
# /srv/data/keys; minimal: writes /w, reads /opt/a and /w/ro; host; plain)
NARROW = {
    "null": None,
    "empty": {},
    "timeout": {"timeout_ms": 1000},
    "timeout-above": {"timeout_ms": 60001},
    "limits": {"memory_mb": 128, "processes": 4, "limits": {"open_files": 16, "cpu_ms": 100}},
    "limit-above": {"limits": {"memory_mb": 4096}},
    "network-off": {"network": False},
    "network-on": {"network": True},
    "allow-subset": {"network": {"allow": ["a.example.org:443", "x.b.example.org"]}},
    "allow-wider": {"network": {"allow": ["evil.example:443"]}},
    "write": {"filesystem": {"write": ["/w/sub", "/srv/data/x"]}},
    "write-dots": {"filesystem": {"write": ["//w/./a/../b/", "/w/../etc"]}},
    "write-hidden": {"filesystem": {"write": ["/w/secret/x", "/w/ro", "/root/secret"]}},
    "write-tools": {"filesystem": {"write": ["/etc/toolexecd/tools.d/t.json"]}},
    "read": {"filesystem": {"read": ["/opt/a/b", "/w/ro/c"]}},
    "hide": {"filesystem": {"hide": ["/w/sub", "/usr/share", "/", "/w/secret/x"]}},
    "bad-keys": {"filesystem": {"root": "host"}, "user": "root"},
    "bad-shapes": {"filesystem": {"write": "/w", "read": [1]}},
    "utf8": {"filesystem": {"write": ["/w/\u00e9t\u00e9/\u65e5\u672c" * 20]}},
    "all": {"timeout_ms": 10, "memory_mb": 64, "network": {"allow": []},
            "filesystem": {"write": [], "hide": ["/w/x"]}},
}

# fuzz_learn: a learning call's records, one a line (see fuzz_learn.c)
LEARN = {
    "reads": b"p1 /etc/hostname\np1 /etc/passwd\np1 /usr/lib/os-release\np1 /etc/hosts\n"
             b"p1 /etc/group\np1 /etc/nsswitch.conf\n",
    "writes": b"p2 /etc/hostname\np4 /srv/new-file\np8 /var/tmp/made\np4 /var/tmp/made/f\n",
    "own": b"p3 /dev/null\np1 /proc/self/status\np2 /var/lib/toolexecd/work/c1/out\np6 /tmp/x\n",
    "hosts": b"h example.org:443\nh ::1:8080\nh 10.0.0.1\nh example.org:443\n",
    "syscalls": b"s ptrace\ns bpf\ns sched_yield\n",
    "merged": b"p1 /etc/hostname\nh a.example:80\nm\np1 /etc/passwd\ns mount\nm\nm\n",
    "relative": b"p1 etc/passwd\np1 /etc/../etc/./passwd\np1 //etc//hosts\np2 /\n",
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in seeds.items():
        if not isinstance(data, bytes):
            data = json_line(data)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def json_line(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def write_lines(name, lines):
    with open(os.path.join(HERE, "corpus", name), "wb") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else json_line(line)) + b"\n")


MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
          "io.modelcontextprotocol/logLevel": "debug", "progressToken": "p"}


TASKS = dict(MODERN, **{"io.modelcontextprotocol/clientCapabilities": {
    "elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}})


def mcp_seed(*cmds):
    """fuzz_mcp input: one command a line, C<stream><json> a client message,
    D<json> a daemon event ("batch": "@" the latest run), G<stream>, E, H, L."""
    out = []
    for c in cmds:
        if isinstance(c, tuple):
            kind, obj = c
            out.append(kind.encode() + json_line(obj))
        else:
            out.append(c.encode())
    return b"\n".join(out) + b"\n"


def rpc(rid, method, params=None):
    m = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        m["params"] = params
    return m


CALL_EVENTS = [
    ("D", {"event": "tool_execution_started", "batch": "@", "id": "c0", "name": "echo"}),
    ("D", {"event": "tool_execution_progress", "batch": "@", "id": "c0",
           "progress": {"progress": 1, "total": 2, "message": "half"}}),
    ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0",
           "result": {"ok": {"n": 1}}}),
    ("D", {"event": "batch_completed", "batch": "@",
           "messages": [{"role": "tool", "content": "{\"n\":1}"}]}),
]
ASK_EVENTS = [
    ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0",
           "result": {"ask_user": "which city?"}}),
    ("D", {"event": "batch_completed", "batch": "@", "messages": []}),
]
# a call refused one of each kind, under a policy (lib/why.c's sentences)
DENIED = [
    {"kind": "syscall", "name": "bpf"},
    {"kind": "network", "host": "evil.example", "port": 80},
    {"kind": "network", "host": "db.example", "port": 5432, "reason": "private_address"},
    {"kind": "network", "reason": "max_connections"},
    {"kind": "egress_failure", "host": "api.example", "port": 443, "cause": "timed out"},
    {"kind": "filesystem", "path": "/srv/out/new", "access": "create",
     "rule": "read-only in the view"},
    {"kind": "filesystem", "path": "/etc/shadow", "access": "read", "rule": "hide"},
    {"kind": "quantum"},
]
MCP = {
    "legacy-denied": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25"})),
        ("C0", rpc(1, "tools/call", {"name": "echo", "arguments": {}, "_meta": {
            "toolexecd/policy": {"network": {"allow": []}, "filesystem": {"hide": ["/x"]}}}})),
        ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0",
               "result": {"ok": {"n": 1}}, "denied": DENIED}),
        ("D", {"event": "batch_completed", "batch": "@",
               "messages": [{"role": "tool", "content": "{\"n\":1}"}]}), "E"),
    "legacy-call": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25",
                                     "capabilities": {"elicitation": {}}})),
        ("C0", rpc(1, "tools/call", {"name": "echo", "arguments": {},
                                     "_meta": {"progressToken": 1}})),
        *CALL_EVENTS, "H", "E"),
    "legacy-elicit": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25",
                                     "capabilities": {"elicitation": {}}})),
        ("C0", rpc(1, "tools/call", {"name": "ask", "arguments": {"question": "q"}})),
        *ASK_EVENTS,
        ("C0", {"jsonrpc": "2.0", "id": "toolexec-elicit-1",
                "result": {"action": "accept", "content": {"answer": "Paris"}}})),
    "batch-2025-03-26": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-03-26"})),
        ("C0", [rpc(1, "ping"), rpc(2, "tools/list"), {"jsonrpc": "2.0", "method": "x"}, 5]),
        ("D", {"event": "tools", "tools": [{"name": "echo"}]})),
    "modern-call": mcp_seed(
        ("C1", rpc("d", "server/discover")),
        ("C1", rpc(1, "tools/call", {"name": "echo", "arguments": {"a": 1}, "_meta": MODERN})),
        *CALL_EVENTS,
        ("C2", rpc(2, "tools/list", {"_meta": MODERN})),
        ("D", {"event": "tools", "tools": []}), "G1"),
    "modern-ask": mcp_seed(
        ("C1", rpc(1, "tools/call", {"name": "ask", "arguments": {"question": "q"},
                                     "_meta": MODERN})),
        *ASK_EVENTS,
        ("C1", rpc(2, "tools/call", {"name": "ask", "arguments": {"question": "q"},
                                     "_meta": MODERN, "requestState": "e30.AAAA",
                                     "inputResponses": {"ask_user": {"action": "accept"}}}))),
    "modern-listen": mcp_seed(
        ("C3", rpc("L", "subscriptions/listen",
                   {"_meta": MODERN, "notifications": {"toolsListChanged": True}})),
        ("D", {"event": "tools", "tools": []}),
        ("D", {"event": "tools_changed", "count": 2}),
        ("C3", {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "L"}}),
        ("C3", rpc("M", "subscriptions/listen",
                   {"_meta": MODERN, "notifications": {"toolsListChanged": True}})),
        "L"),
    "modern-tasks": mcp_seed(
        ("C1", rpc(1, "tools/call", {"name": "echo", "arguments": {}, "_meta": TASKS})),
        ("C1", rpc(2, "tasks/get", {"taskId": "@", "_meta": TASKS})),
        *CALL_EVENTS,
        ("C1", rpc(3, "tasks/get", {"taskId": "@", "_meta": TASKS})),
        ("C2", rpc(4, "tools/call", {"name": "ask", "arguments": {"question": "q"},
                                     "_meta": TASKS})),
        *ASK_EVENTS,
        ("C2", rpc(5, "tasks/get", {"taskId": "@", "_meta": TASKS})),
        ("C2", rpc(6, "tasks/update", {"taskId": "@", "_meta": TASKS, "inputResponses": {
            "ask_user-1": {"action": "accept", "content": {"answer": "Paris"}}}})),
        ("C3", rpc(7, "tools/call", {"name": "slow", "arguments": {}, "_meta": TASKS})),
        ("C3", rpc(8, "tasks/cancel", {"taskId": "@", "_meta": TASKS})),
        ("D", {"event": "error", "batch": "@", "message": "cancelled"}),
        ("C3", rpc(9, "tasks/get", {"taskId": "r.x", "_meta": TASKS})),
        ("C0", rpc(10, "tasks/get", {"taskId": "@", "_meta": MODERN})), "H", "L"),
    "legacy-blocks": mcp_seed(
        ("C0", rpc(0, "initialize", {"protocolVersion": "2025-11-25"})),
        ("C0", rpc(1, "logging/setLevel", {"level": "debug"})),
        ("C0", rpc(2, "tools/call", {"name": "img", "arguments": {}})),
        ("D", {"event": "tools", "tools": [{"name": "img", "_meta": {
            "toolexecd/content": "blocks"}}]}),
        ("D", {"event": "tool_execution_progress", "batch": "@", "id": "c0", "name": "img",
               "progress": {"progress": 1, "message": "drawing"}}),
        ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0", "name": "img",
               "result": {"ok": {"content": [
                   {"type": "text", "text": "t", "annotations": {"audience": ["user"],
                                                                 "priority": 1}},
                   {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                   {"type": "resource_link", "uri": "a:b", "name": "n", "size": 1},
                   {"type": "resource", "resource": {"uri": "a:b", "mimeType": "a/b",
                                                     "blob": "QQ=="}}],
                   "structuredContent": {}}},
               "denied": [{"kind": "syscall", "name": "bpf"}]}),
        ("D", {"event": "batch_completed", "batch": "@", "messages": [{"content": "x"}]}),
        ("C0", rpc(3, "tools/call", {"name": "img", "arguments": {}})),
        ("D", {"event": "tool_execution_completed", "batch": "@", "id": "c0", "name": "img",
               "result": {"ok": {"content": [{"type": "audio", "data": "A===",
                                              "mimeType": "audio/wav"}]}}}),
        ("D", {"event": "batch_completed", "batch": "@", "messages": [{"content": "x"}]}),
        ("D", {"event": "tools_changed", "count": 1}), "E"),
    "modern-errors": mcp_seed(
        ("C0", rpc(1, "tools/call", {"name": "e", "_meta": dict(
            MODERN, **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})})),
        ("C0", rpc(2, "tools/list", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}})),
        ("C0", rpc(3, "ping", {"_meta": MODERN})),
        ("C0", rpc(4, "tools/call", {"name": "echo", "_meta": MODERN})),
        ("D", {"event": "error", "batch": "@", "type": "request_error",
               "reason": "unknown_tool", "metadata": {"tool_name": "echo"}})),
}


if __name__ == "__main__":
    write("fuzz_frame", FRAME)
    write("fuzz_lines", LINES)
    write("fuzz_request", {**REQUEST, **REQUEST_RAW})
    write("fuzz_response", RESPONSE)
    write("fuzz_spawnmsg", SPAWNMSG)
    write("fuzz_audit", AUDIT)
    write("fuzz_mcp", MCP)
    write("fuzz_auth", AUTH)
    write("fuzz_narrow", NARROW)
    write("fuzz_learn", LEARN)
    write_lines("request_errors.jsonl", REQUEST_ERRORS)
