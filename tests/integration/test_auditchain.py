"""The tamper-evident audit file (issue 23, part 5): --audit-file FILE.

Each record is one JSON line whose "prev_sha256" is the SHA-256 (hex) of
the previous line's exact bytes, without its newline; the first record of
a fresh log carries 64 zeros. A rotation (the file renamed, then SIGHUP)
and a restart carry the chain on; `toolexec audit verify FILE...` checks
it, files in rotation order, and names the line where it breaks: here
after a record is edited, deleted, two are reordered, the head is cut.
"""

import hashlib
import json
import os
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
