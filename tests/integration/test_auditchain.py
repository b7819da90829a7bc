"""The tamper-evident audit file: --audit-file FILE.

Each record is one JSON line whose "prev_sha256" is the SHA-256 (hex) of
the previous line's exact bytes, without its newline; the first record of
a fresh log carries 64 zeros. A rotation (the file renamed, then SIGHUP)
and a restart carry the chain on; `toolexec audit verify FILE...` checks
it, files in rotation order, and names the line where it breaks: here
after a record is edited, deleted, two are reordered, the head is cut.
The daemon trusts its memory over the file on SIGHUP: records cut off the
tail before it are marked by a "chain_break" record that verify reports; a
file rotated away (a new empty one, or copytruncate) goes on cleanly.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pwd  # noqa: E402

from harness import (Daemon, deadline_wait, nobody_daemon, require_env,  # noqa: E402
                     worker_tool)

TOOLEXEC = os.environ.get("TOOLEXEC", "")
TOOLS = [worker_tool("echo", "echo"), worker_tool("fail", "error")]
ZEROS = "0" * 64


def sha(line):
    return hashlib.sha256(line).hexdigest()


def lines_of(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n")


def verify(*paths):
    p = subprocess.run([TOOLEXEC, "audit", "verify"] + list(paths), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


class AuditChainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        # one real trail for every case: three calls, a rotation, two
        # calls, a restart, two calls; one at a time, in a known order
        cls.dir = tempfile.mkdtemp(prefix="te-auditchain-")
        cls.log = os.path.join(cls.dir, "audit.log")
        cls.old = os.path.join(cls.dir, "audit.log.1")
        args = ["--audit-file", cls.log]
        with Daemon(TOOLS, args) as d:
            c = d.client()
            c.run([{"id": "a1", "name": "echo", "arguments": {"n": 1}},
                   {"id": "a2", "name": "fail", "arguments": {}},
                   {"id": "a3", "name": "echo", "arguments": {"n": 3}}],
                  batch="b1", max_concurrency=1)
            deadline_wait(lambda: len(lines_of(cls.log)) == 3, what="3 records")
            os.rename(cls.log, cls.old)
            reloads = d.stderr().count("reloaded")
            d.proc.send_signal(signal.SIGHUP)
            deadline_wait(lambda: d.stderr().count("reloaded") > reloads, what="the reload")
            c.run([{"id": "b1", "name": "echo", "arguments": {}},
                   {"id": "b2", "name": "echo", "arguments": {}}],
                  batch="b2", max_concurrency=1)
            deadline_wait(lambda: len(lines_of(cls.log)) == 2, what="2 records after rotation")
        with Daemon(TOOLS, args) as d:
            d.client().run([{"id": "c1", "name": "echo", "arguments": {}},
                            {"id": "c2", "name": "fail", "arguments": {}}],
                           batch="b3", max_concurrency=1)
            deadline_wait(lambda: len(lines_of(cls.log)) == 4, what="2 records after restart")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tampered(self, lines, name="t.log"):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(b"".join(line + b"\n" for line in lines))
        return path

    def test_chain_written(self):
        old, new = lines_of(self.old), lines_of(self.log)
        self.assertEqual(len(old), 3)
        self.assertEqual(len(new), 4)
        recs = [json.loads(x) for x in old + new]
        self.assertEqual([r["call"] for r in recs], ["a1", "a2", "a3", "b1", "b2", "c1", "c2"])
        for r in recs:
            self.assertEqual(r["record"], "call")
            self.assertIn(r["outcome"], ("ok", "error"))
            self.assertEqual(len(r["arguments_sha256"]), 64)
        self.assertEqual(recs[0]["prev_sha256"], ZEROS)
        everything = old + new
        for i in range(1, len(everything)):
            # across the rotation (i == 3) and the restart (i == 5) too
            self.assertEqual(recs[i]["prev_sha256"], sha(everything[i - 1]), i)
        self.assertEqual(os.stat(self.log).st_mode & 0o777, 0o600)

    def test_verify_intact(self):
        rc, out = verify(self.old, self.log)
        self.assertEqual(rc, 0, out)
        self.assertIn("chain intact: 7 records", out)
        rc, out = verify(self.old)
        self.assertEqual(rc, 0, out)

    def test_edited_record(self):
        lines = lines_of(self.old)
        lines[1] = lines[1].replace(b'"outcome":"error"', b'"outcome":"ok"')
        self.assertNotEqual(lines, lines_of(self.old))
        rc, out = verify(self.tampered(lines), self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("t.log:3: chain broken", out)
        self.assertIn("(the sha256 of %s:2)" % os.path.join(self.dir, "t.log"), out)

    def test_deleted_record(self):
        lines = lines_of(self.log)
        del lines[2]  # the first record after the restart
        rc, out = verify(self.old, self.tampered(lines))
        self.assertEqual(rc, 1, out)
        self.assertIn("t.log:3: chain broken", out)
        self.assertEqual(out.count("chain broken"), 1, out)

    def test_reordered_records(self):
        lines = lines_of(self.log)
        lines[0], lines[1] = lines[1], lines[0]
        rc, out = verify(self.old, self.tampered(lines))
        self.assertEqual(rc, 1, out)
        self.assertIn("t.log:1: chain broken", out)
        self.assertIn("t.log:2: chain broken", out)

    def test_head_cut(self):
        rc, out = verify(self.tampered(lines_of(self.old)[1:]), self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("t.log:1: chain cut at its head", out)
        # a rotated file alone: its head is the older file's tail
        rc, out = verify(self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("audit.log:1: chain cut at its head", out)

    def test_files_out_of_order(self):
        rc, out = verify(self.log, self.old)
        self.assertEqual(rc, 1, out)
        self.assertIn("audit.log.1:1: chain restarts from 64 zeros", out)

    def test_tail_cut_mid_line(self):
        data = b"".join(x + b"\n" for x in lines_of(self.old))
        path = os.path.join(self.dir, "cut.log")
        with open(path, "wb") as f:
            f.write(data[:-10])
        rc, out = verify(path)
        self.assertEqual(rc, 1, out)
        self.assertIn("cut.log:3: cut: the last line has no newline", out)

    def test_unreadable_file(self):
        rc, out = verify(os.path.join(self.dir, "missing"))
        self.assertEqual(rc, 2, out)


def reopen(d):
    """SIGHUP, and wait until the daemon has reopened the file."""
    n = d.stderr().count(": reopened")
    d.proc.send_signal(signal.SIGHUP)
    deadline_wait(lambda: d.stderr().count(": reopened") > n, what="the reopen")


def one_call(d, call_id, n_lines, log):
    d.client().run([{"id": call_id, "name": "echo", "arguments": {}}], batch=call_id)
    deadline_wait(lambda: len(lines_of(log)) == n_lines, what="%d records" % n_lines)


def stopped_log(d):
    """SIGTERM; the daemon's log once it has exited."""
    d.proc.send_signal(signal.SIGTERM)
    d.proc.wait(timeout=60)
    return d.stderr()


class AuditChainReopenTest(unittest.TestCase):
    """SIGHUP reopens the file; the chain goes on from the last record the
    daemon wrote, whatever the file holds now."""

    def setUp(self):
        require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        self.dir = tempfile.mkdtemp(prefix="te-auditreopen-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.log = os.path.join(self.dir, "audit.log")

    def test_tail_cut_before_sighup_is_reported(self):
        with Daemon(TOOLS, ["--audit-file", self.log]) as d:
            for i in range(3):
                one_call(d, "t%d" % i, i + 1, self.log)
            written = lines_of(self.log)
            head = sha(written[-1])
            # the last record cut off, at a line boundary: the file is a
            # well-formed chain of two records now
            with open(self.log, "r+b") as f:
                f.truncate(len(written[0]) + len(written[1]) + 2)
            reopen(d)
            one_call(d, "t3", 4, self.log)
            err = stopped_log(d)
        lines = lines_of(self.log)
        mark = json.loads(lines[2])
        self.assertEqual(mark["record"], "chain_break")
        self.assertEqual(mark["expected_prev"], head)
        self.assertEqual(mark["found_prev"], sha(written[1]))
        self.assertEqual(mark["prev_sha256"], head)  # the chain goes on from the daemon's head
        self.assertEqual(json.loads(lines[3])["prev_sha256"], sha(lines[2]))
        rc, out = verify(self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("audit.log:3: chain_break", out)
        self.assertIn(head, out)
        self.assertEqual(out.count("audit.log:"), 1, out)  # one problem, the cut
        # the head in the daemon's log: at the reopen (with the cut) and at the end
        self.assertIn("its last line hashes to %s, not to the last record written, %s" %
                      (sha(written[1]), head), err)
        self.assertIn("closed, chain head %s" % sha(lines[3]), err)

    def test_rotations_go_on_cleanly(self):
        old, copy = self.log + ".1", self.log + ".2"
        with Daemon(TOOLS, ["--audit-file", self.log]) as d:
            one_call(d, "r1", 1, self.log)
            one_call(d, "r2", 2, self.log)
            os.rename(self.log, old)  # logrotate's create: a new file
            reopen(d)
            one_call(d, "r3", 1, self.log)
            shutil.copy(self.log, copy)  # copytruncate: the same file emptied
            os.truncate(self.log, 0)
            reopen(d)
            one_call(d, "r4", 1, self.log)
            reopen(d)  # a reload without a rotation
            one_call(d, "r5", 2, self.log)
            err = stopped_log(d)
        rc, out = verify(old, copy, self.log)
        self.assertEqual(rc, 0, out)
        self.assertIn("chain intact: 5 records", out)
        with open(self.log) as f:
            self.assertNotIn("chain_break", f.read())
        self.assertEqual(err.count("reopened (empty: rotated), chain head"), 2, err)
        self.assertEqual(err.count("reopened (as it was), chain head"), 1, err)
        self.assertIn("closed, chain head %s" % sha(lines_of(self.log)[-1]), err)

    def test_tail_cut_while_stopped_against_the_logged_head(self):
        with Daemon(TOOLS, ["--audit-file", self.log]) as d:
            one_call(d, "h1", 1, self.log)
            one_call(d, "h2", 2, self.log)
            err = stopped_log(d)
        head = re.findall(r"closed, chain head ([0-9a-f]{64})", err)
        self.assertEqual(head, [sha(lines_of(self.log)[-1])], err)
        rc, out = verify("--head", head[0], self.log)
        self.assertEqual(rc, 0, out)
        first = lines_of(self.log)[0]
        with open(self.log, "r+b") as f:
            f.truncate(len(first) + 1)
        rc, out = verify(self.log)  # the chain alone cannot tell
        self.assertEqual(rc, 0, out)
        rc, out = verify("--head", head[0], self.log)
        self.assertEqual(rc, 1, out)
        self.assertIn("no line hashes to the head given (--head %s)" % head[0], out)
        rc, out = verify("--head", "xyz", self.log)
        self.assertEqual(rc, 2, out)
        self.assertIn("--head: expected a SHA-256", out)


class AuditChainUnprivilegedTest(unittest.TestCase):
    """The same chain written by the unprivileged daemon (nobody), in a
    directory of its own."""

    def setUp(self):
        require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")
        if os.getuid() != 0:
            raise unittest.SkipTest("needs root to start a daemon as nobody")

    def test_nobody_daemon_chains(self):
        base = tempfile.mkdtemp(prefix="te-auditchain-nobody-")
        self.addCleanup(shutil.rmtree, base, True)
        os.chmod(base, 0o755)
        nobody = pwd.getpwnam("nobody")
        own = os.path.join(base, "audit")
        os.mkdir(own, 0o700)
        os.chown(own, nobody.pw_uid, nobody.pw_gid)
        log = os.path.join(own, "audit.log")
        d = nobody_daemon(TOOLS, ["--audit-file", log])
        with d:
            d.client().run([{"id": "n1", "name": "echo", "arguments": {}},
                            {"id": "n2", "name": "fail", "arguments": {}}],
                           batch="n", max_concurrency=1)
            deadline_wait(lambda: len(lines_of(log)) == 2, what="2 records")
        st = os.stat(log)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (nobody.pw_uid, 0o600))
        self.assertEqual(json.loads(lines_of(log)[0])["prev_sha256"], ZEROS)
        rc, out = verify(log)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
