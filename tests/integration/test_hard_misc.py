"""Hardening against the real daemon: spill files hold exactly the tool's
content, are private and age out; the log escapes every control character a
client or a tool put in a field; tool definitions others may change, that
are not regular files or that are too large are refused, and a file that
fails to parse is not quoted."""

import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import unittest

import harness
from harness import Daemon, deadline_wait, script_tool, worker_tool

NUL_AND_BULK = b"a\x00b" + b"x" * 20000


def exit_status(d):
    """Start d's daemon, which must exit during start-up: its status."""
    p = d.spawn()
    try:
        return p.wait(timeout=harness.WAIT)
    finally:
        d._stderr_f.close()
        d.proc = None


def plain_sh(name, script, **fields):
    """A plain-protocol tool running `sh -c SCRIPT`."""
    d = {"name": name, "description": "sh " + name, "schema": {"type": "object"},
         "command": ["/bin/sh", "-c", script], "protocol": "plain"}
    d.update(fields)
    return d


# stdout: "a", NUL, "b", then 20000 x's (no trailing newline)
NUL_SCRIPT = "printf 'a\\000b'; head -c 20000 /dev/zero | tr '\\000' x"
# stderr: screen clear, window title, bell, a C1 CSI, a carriage return,
# a byte that is not UTF-8
ESC_SCRIPT = ("printf 'e1\\033[2J\\033]0;pwned\\007 c1\\302\\233\\061m cr\\rX bad\\377end\\n' >&2; "
              "printf 'forged: error: second line\\n' >&2; echo done")


class Spill(unittest.TestCase):

    def test_spill_file_holds_exactly_the_content_with_nul_bytes(self):
        """strndup stopped at the NUL while the whole length was written:
        the file held other heap memory (under ASan a heap-buffer-overflow)."""
        with Daemon([plain_sh("nul", NUL_SCRIPT, max_content_bytes=100, spill=True),
                     worker_tool("echo", "ok-string")]) as d:
            c = d.client()
            # an earlier result in the heap, which the old code copied out
            c.run([{"id": "e", "name": "echo", "arguments": {"s": "EARLIER-RESULT " * 500}}])
            res = c.run([{"id": "n", "name": "nul"}])
            self.assertEqual(res.result("n")["ok"], NUL_AND_BULK.decode())
            path = res.completed("n")["truncated"]["spill_path"]
            with open(path, "rb") as f:
                self.assertEqual(f.read(), NUL_AND_BULK)

    def test_spill_file_is_private_in_a_directory_only_the_daemon_writes(self):
        with Daemon([plain_sh("nul", NUL_SCRIPT, max_content_bytes=100, spill=True)]) as d:
            res = d.client().run([{"id": "n", "name": "nul"}])
            path = res.completed("n")["truncated"]["spill_path"]
            st = os.lstat(path)
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.getuid(), 0o600))
            dst = os.lstat(os.path.dirname(path))
            self.assertEqual((dst.st_uid, stat.S_IMODE(dst.st_mode)), (os.geteuid(), 0o711))

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                         "needs root (to be another client) and setpriv")
    def test_spill_file_belongs_to_its_client_alone(self):
        """A client of uid nobody gets a file it owns, mode 0600, that
        another unprivileged uid cannot read."""
        client = (
            "import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "s.sendall(json.dumps({'op': 'run', 'batch': 'nb', 'calls': "
            "[{'id': 'n', 'name': 'nul'}]}).encode() + b'\\n')\n"
            "f = s.makefile('rb')\n"
            "for line in f:\n"
            "    ev = json.loads(line)\n"
            "    if ev['event'] == 'tool_execution_completed':\n"
            "        print(ev['truncated']['spill_path'], flush=True)\n"
            "    if ev['event'] in ('batch_completed', 'error'):\n"
            "        break\n"
            "sys.stdin.read()  # connected (its spill file kept) until told\n")
        nb = pwd.getpwnam("nobody")
        other = pwd.getpwnam("daemon").pw_uid
        with Daemon([plain_sh("nul", NUL_SCRIPT, max_content_bytes=100, spill=True)],
                    args=["--socket-mode", "0666"]) as d:
            p = subprocess.Popen(["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                                  "--clear-groups", sys.executable, "-c", client, d.sock],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.addCleanup(p.wait)
            self.addCleanup(p.stdin.close)
            path = p.stdout.readline().decode().strip()
            st = os.lstat(path)
            self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (nb.pw_uid, 0o600))
            cat = subprocess.run(["setpriv", "--reuid=%d" % other, "--regid=%d" % other,
                                  "--clear-groups", "cat", path],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertNotEqual(cat.returncode, 0)
            self.assertEqual(cat.stdout, b"")
            mine = subprocess.run(["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                                   "--clear-groups", "cat", path], stdout=subprocess.PIPE)
            self.assertEqual(mine.stdout, NUL_AND_BULK)

    def test_a_results_dir_others_may_write_is_refused(self):
        """Someone who may write in it could plant or swap names; the spill
        is refused (and said so) rather than written there."""
        d = Daemon([plain_sh("nul", NUL_SCRIPT, max_content_bytes=100, spill=True)], start=False)
        results = os.path.join(d.work_dir, "results")
        with d:
            d.start()
            # after the start, which clears what an earlier daemon left: the
            # socket listens first, an answered request says start-up is over
            d.client().tools()
            os.mkdir(results)
            os.chmod(results, 0o777)
            res = d.client().run([{"id": "n", "name": "nul"}])
            self.assertNotIn("spill_path", res.completed("n")["truncated"])
            self.assertIn("cannot spill to %s/" % results, d.stderr())
            self.assertEqual(os.listdir(results), [])

    def test_spill_files_are_removed_after_max_age(self):
        with Daemon([plain_sh("nul", NUL_SCRIPT, max_content_bytes=100, spill=True)],
                    args=["--spill-max-age", "1", "--log-level", "debug"]) as d:
            res = d.client().run([{"id": "n", "name": "nul"}])
            path = res.completed("n")["truncated"]["spill_path"]  # written, or absent
            deadline_wait(lambda: "removed spill file %s (older than 1 s)" % path in d.stderr(),
                          what="the spill file's removal")
            self.assertFalse(os.path.lexists(path))

    def test_spill_max_age_is_checked(self):
        for bad in ("-1", "x", "31536001"):
            d = Daemon([], args=["--spill-max-age", bad], start=False)
            with d:
                self.assertEqual(exit_status(d), 2)
                self.assertIn("--spill-max-age: expected seconds", d.stderr())


CONTROL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
HOSTILE_BATCH = "b\nforged: error: batch line\x1b[2J\x07\u009b1m\\x0a"


class LogInjection(unittest.TestCase):

    def raw_log(self, d):
        with open(d.stderr_path, "rb") as f:
            return f.read()

    def check_lines(self, d, expect_prefix):
        raw = self.raw_log(d)
        self.assertIsNone(CONTROL.search(raw), "a raw control character in the log: %r"
                          % (CONTROL.search(raw) and raw[max(0, CONTROL.search(raw).start() - 60):
                                                         CONTROL.search(raw).end() + 20]))
        lines = raw.decode("utf-8").split("\n")
        self.assertEqual(lines[-1], "")
        for line in lines[:-1]:
            self.assertTrue(expect_prefix(line), "a line that is not a record: %r" % line)
        return lines[:-1]

    def run_hostile(self, d):
        c = d.client()
        res = c.run([{"id": "c\x1b]0;t\x07", "name": "esc"}], batch=HOSTILE_BATCH)
        self.assertTrue(res.ok)
        deadline_wait(lambda: b"second line" in self.raw_log(d), what="the stderr lines logged")

    def test_text_log_has_one_line_per_record_and_no_control_characters(self):
        with Daemon([plain_sh("esc", ESC_SCRIPT)]) as d:
            self.run_hostile(d)
            lines = self.check_lines(d, lambda l: l.startswith("toolexecd: "))
            stderr_lines = [l for l in lines if "tool esc: stderr: " in l]
            self.assertEqual(len(stderr_lines), 2, lines)
            self.assertIn("batch b\\nforged: error: batch line\\x1b[2J\\x07\\u009b1m\\\\x0a call "
                          "c\\x1b]0;t\\x07: tool esc: stderr: e1\\x1b[2J\\x1b]0;pwned\\x07 "
                          "c1\\u009b1m cr\\rX bad?end", stderr_lines[0])

    def test_json_log_has_one_object_per_line_and_no_control_characters(self):
        with Daemon([plain_sh("esc", ESC_SCRIPT)], args=["--log-format", "json"]) as d:
            self.run_hostile(d)
            lines = self.check_lines(d, lambda l: l.startswith("{") and l.endswith("}"))
            recs = [json.loads(l) for l in lines]
            stderr_recs = [r for r in recs if "tool esc: stderr: " in r["msg"]]
            self.assertEqual(len(stderr_recs), 2, recs)
            # the values survive: escaping is only in the encoding
            self.assertEqual(stderr_recs[0]["batch"], HOSTILE_BATCH)
            self.assertEqual(stderr_recs[0]["call"], "c\x1b]0;t\x07")
            self.assertEqual(stderr_recs[0]["msg"],
                             "tool esc: stderr: e1\x1b[2J\x1b]0;pwned\x07 c1\u009b1m cr\rX bad?end")


def nobody():
    return pwd.getpwnam("nobody").pw_uid


class Definitions(unittest.TestCase):

    def assert_refused_at_start(self, d, *needles):
        self.assertEqual(exit_status(d), 1, d.stderr())
        for n in needles:
            self.assertIn(n, d.stderr())

    def test_world_writable_tools_dir_is_refused(self):
        d = Daemon([worker_tool("root_tool", "echo", user="root")], start=False)
        os.chmod(d.tools_dir, 0o777)
        with d:
            self.assert_refused_at_start(
                d, "%s: writable by others (mode 0777); chmod go-w: refusing every definition"
                % d.tools_dir)

    def test_group_writable_tools_dir_is_refused(self):
        d = Daemon([worker_tool("e", "echo")], start=False)
        os.chmod(d.tools_dir, 0o775)
        with d:
            self.assert_refused_at_start(d, "%s: writable by its group (mode 0775)" % d.tools_dir)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give a directory away")
    def test_tools_dir_of_another_user_is_refused(self):
        d = Daemon([worker_tool("e", "echo")], start=False)
        os.chown(d.tools_dir, nobody(), -1)
        with d:
            self.assert_refused_at_start(
                d, "%s: owned by uid %d, not root or the daemon's uid" % (d.tools_dir, nobody()))

    def test_unsafe_files_are_left_out_and_the_rest_loads(self):
        d = Daemon([worker_tool("good", "echo")], start=False)
        gw = d.add_tool(worker_tool("groupw", "echo"))
        os.chmod(gw, 0o664)
        ww = d.add_tool(worker_tool("worldw", "echo", user="root"))
        os.chmod(ww, 0o646)
        big = d.add_tool(worker_tool("big", "echo", description="x" * (1024 * 1024)))
        sub = os.path.join(d.tools_dir, "dir.json")
        os.mkdir(sub)
        if os.geteuid() == 0:
            other = d.add_tool(worker_tool("other", "echo"))
            os.chown(other, nobody(), -1)
        with d:
            d.start()
            names = sorted(t["name"] for t in d.client().tools()["tools"])
            self.assertEqual(names, ["good"])
            err = d.stderr()
            self.assertIn("%s: refused: writable by its group (mode 0664)" % gw, err)
            self.assertIn("%s: refused: writable by others (mode 0646)" % ww, err)
            self.assertRegex(err, re.escape(big) + r": refused: \d+ bytes, more than the "
                             r"1048576 a definition may have")
            self.assertIn("%s: refused: not a regular file" % sub, err)
            if os.geteuid() == 0:
                self.assertIn("%s: refused: owned by uid %d" % (other, nobody()), err)
            res = d.client().run([{"id": "g", "name": "good", "arguments": {"a": 1}}])
            self.assertEqual(res.result("g"), {"ok": {"a": 1}})

    def test_fifo_does_not_block_reload(self):
        """Opening a FIFO for reading waits for a writer: a reload blocked the
        loop for good. It is refused without being opened."""
        with Daemon([worker_tool("e", "echo")]) as d:
            fifo = os.path.join(d.tools_dir, "fifo.json")
            os.mkfifo(fifo, 0o644)
            link = os.path.join(d.tools_dir, "tofifo.json")
            os.symlink(fifo, link)
            d.add_tool(worker_tool("e2", "echo"))
            d.proc.send_signal(signal.SIGHUP)
            deadline_wait(lambda: "reloaded 2 tools" in d.stderr(), what="the reload")
            self.assertIn("%s: refused: not a regular file" % fifo, d.stderr())
            self.assertIn("%s: refused: not a regular file" % link, d.stderr())
            res = d.client().run([{"id": "x", "name": "e2", "arguments": {"v": 2}}])
            self.assertEqual(res.result("x"), {"ok": {"v": 2}})

    def test_a_link_to_a_secret_is_not_quoted(self):
        d = Daemon([worker_tool("e", "echo")], start=False)
        secret = d.path("shadow")
        with open(secret, "w") as f:
            f.write("SECRETHASH$y$j9T$abc:19000:0:99999:7:::\n")
        os.chmod(secret, 0o600)
        os.symlink(secret, os.path.join(d.tools_dir, "shadow.json"))
        with d:
            self.assert_refused_at_start(d, "shadow.json: line 1 column")
            self.assertNotIn("SECRETHASH", d.stderr())

    def test_a_world_readable_file_is_still_quoted(self):
        """Quoting what everyone may read anyway leaks nothing, and helps."""
        d = Daemon([worker_tool("e", "echo")], start=False)
        d.add_tool("{\"name\": nope}", filename="bad.json")
        os.chmod(os.path.join(d.tools_dir, "bad.json"), 0o644)
        with d:
            self.assert_refused_at_start(d, "bad.json: line 1 column", "near 'nope'")

    def test_env_in_a_world_readable_definition_is_warned_about(self):
        d = Daemon([worker_tool("open", "echo", env={"API_KEY": "k1"}),
                    worker_tool("closed", "echo", env={"API_KEY": "k2"})], start=False)
        os.chmod(os.path.join(d.tools_dir, "open.json"), 0o644)
        os.chmod(os.path.join(d.tools_dir, "closed.json"), 0o600)
        with d:
            d.start()
            err = d.stderr()
            self.assertIn("open.json: has \"env\" and every user may read it (mode 0644)", err)
            self.assertNotIn("closed.json: has \"env\"", err)
            self.assertEqual(len(d.client().tools()["tools"]), 2)


NobodyDaemon = harness.NobodyDaemon


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDefinitions(unittest.TestCase):
    """An unprivileged daemon trusts root and itself, nobody else."""

    def test_files_of_root_and_of_the_daemon_load_those_of_others_do_not(self):
        d = NobodyDaemon([worker_tool("of_root", "echo")], start=False)
        own = d.add_tool(worker_tool("of_daemon", "echo"))
        os.chown(own, nobody(), -1)
        other_uid = pwd.getpwnam("daemon").pw_uid
        other = d.add_tool(worker_tool("of_other", "echo"))
        os.chown(other, other_uid, -1)
        harness.give_work_dir(d)
        with d:
            d.start()
            names = sorted(t["name"] for t in d.client().tools()["tools"])
            self.assertEqual(names, ["of_daemon", "of_root"])
            self.assertIn("%s: refused: owned by uid %d, not root or the daemon's uid %d"
                          % (other, other_uid, nobody()), d.stderr())

    def test_a_tools_dir_of_another_user_is_refused(self):
        d = NobodyDaemon([worker_tool("e", "echo")], start=False)
        other_uid = pwd.getpwnam("daemon").pw_uid
        os.chown(d.tools_dir, other_uid, -1)
        harness.give_work_dir(d)
        with d:
            self.assertEqual(exit_status(d), 1, d.stderr())
            self.assertIn("%s: owned by uid %d, not root or the daemon's uid %d"
                          % (d.tools_dir, other_uid, nobody()), d.stderr())


if __name__ == "__main__":
    unittest.main()
