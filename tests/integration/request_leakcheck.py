"""request_leakcheck - the leak check of the daemon over the request-error
corpus in CI: a daemon built with AddressSanitizer (whose LeakSanitizer
reports at exit) is fed every line of the request-error corpus
(tests/fuzz/corpus/request_errors.jsonl, written by make_corpus.py: each
line gets exactly one request_error), over-long lines, and every seed of the
fuzz_request corpus (batches among them, run to completion), then stopped;
any LeakSanitizer (or other sanitizer) report in its stderr, or an exit
status other than 0, fails it.

It checks nothing in a build without the sanitizers, so there it exits 77,
which meson counts as SKIP (never as passed). CI's second pass (.ci/run step
2, the ASan build) runs it."""

import json
import os
import sys

import harness
from harness import Daemon, worker_tool, TERMINAL

CORPUS = os.path.join(harness.HERE, "..", "fuzz", "corpus")
MAX_REQUEST = 4096


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def expect_request_error(c, line, reason=None):
    ev = c.recv()
    if (ev.get("event"), ev.get("type")) != ("error", "request_error") or \
            (reason and ev.get("reason") != reason):
        raise AssertionError("line %r: expected one request_error%s, got %s"
                             % (line[:200], " " + reason if reason else "", ev))


def drain(c):
    """Every event the lines sent so far cause: a stats probe answers after
    each of their direct answers; batches they started run to their end."""
    c.send({"op": "stats"})
    open_batches = set()
    while True:
        ev = c.recv()
        b = ev.get("batch")
        if b is not None:
            if ev["event"] in TERMINAL:
                open_batches.discard(b)
            else:
                open_batches.add(b)
        if ev["event"] == "stats":
            break
    while open_batches:
        ev = c.recv()
        if ev.get("batch") in open_batches and ev["event"] in TERMINAL:
            open_batches.discard(ev["batch"])


def main():
    harness.require_env()
    if not harness.SANITIZED:
        skip("%s is not built with the sanitizers (meson setup -Db_sanitize=address,undefined): "
             "no LeakSanitizer to ask" % harness.TOOLEXECD)
    asan = os.environ.get("ASAN_OPTIONS", "")
    with open(os.path.join(CORPUS, "request_errors.jsonl"), "rb") as f:
        errors = [l for l in f.read().split(b"\n") if l.strip()]
    seeds_dir = os.path.join(CORPUS, "fuzz_request")
    seeds = []
    for name in sorted(os.listdir(seeds_dir)):
        with open(os.path.join(seeds_dir, name), "rb") as f:
            seeds.append(f.read().replace(b"\n", b" "))
    tools = [worker_tool(n, "echo") for n in ("echo", "ctx", "t.x-1")] + \
        [worker_tool("fail", "error")]
    d = Daemon(tools=tools, args=["--max-request-bytes", str(MAX_REQUEST)],
               env={"ASAN_OPTIONS": (asan + ":" if asan else "") + "detect_leaks=1"})
    try:
        c = d.client()
        for line in errors:
            c.send_raw(line + b"\n")
            expect_request_error(c, line)
        # over-long: in one line, and before its newline has come
        c.send_raw(b'{"op":"tools","pad":"' + b"x" * MAX_REQUEST + b'"}\n')
        expect_request_error(c, b"over-long", "request_too_long")
        c.send_raw(b"y" * (2 * MAX_REQUEST))
        expect_request_error(c, b"over-long, no newline", "request_too_long")
        c.send_raw(b"y\n")
        for line in seeds:
            c.send_raw(line + b"\n")
            drain(c)
        # the same again, pipelined in one write, on a second client
        c2 = d.client()
        c2.send_raw(b"\n".join(errors) + b"\n")
        for line in errors:
            expect_request_error(c2, line)
        # a client that leaves with requests unread
        c3 = d.client()
        c3.send_raw(b"\n".join(errors * 4) + b"\n")
        c3.close()
        drain(c)
    except BaseException:
        d.kill()
        d.stop(check=False)
        raise
    # DaemonFailed, with the daemon's stderr, on a sanitizer report
    d.stop()
    print("fed %d request-error lines (x2, x4 unread), 2 over-long lines and %d fuzz_request "
          "seeds to the sanitized daemon: exit 0, no LeakSanitizer report"
          % (len(errors), len(seeds)))


if __name__ == "__main__":
    main()
