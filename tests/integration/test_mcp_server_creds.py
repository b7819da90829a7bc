"""An MCP server that insists on a secret in its environment:
"mcp_server": {"env_credentials": {"API_KEY": "NAME"}} (toolexecd.tools(5)),
the value read from the daemon's credentials directory (--credentials-dir)
as each call starts, root and unprivileged daemon.

- the server (tests/mcp_servers/odd_server.py's has_env) has the variable,
  with the file's value (compared by digest: the value itself is never
  answered), in its listing call and in each call;
- the call's "enforced" names the variable, never the value;
- the value is in no event (the caller's, a tail's), no line of the daemon's
  log (at debug) and no audit record, nor in the spawner's memory once
  the call has started (/proc/PID/mem);
- a credential missing when a call starts fails that call with
  handler_exit naming the credential and the variable (read at call time:
  the file was there at load); a server whose credential is missing is not
  listed, the log naming it;
- --check --tools refuses a variable the daemon sets, one also in env, and a
  credential's name that is not a file name, and says which credential
  cannot be read now (the load logs it as a warning).
"""
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import unittest

import harness
from test_mcp_server import completed, odd, run_events, wait_listed
from test_spawner import spawner_of
from test_spawner_secrets import scan

SECRET = "mcp-s3cr3t-" + os.urandom(8).hex()


def harness_read(path):
    with open(path) as f:
        return f.read()


def with_creds(name, creds, *extra):
    d = odd(name, *extra)
    d["mcp_server"]["env_credentials"] = creds
    return d


class Cases:
    owner = 0  # of the credentials: root, or the unprivileged daemon's uid

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.dir = tempfile.mkdtemp(prefix="te-mcpcred-")
        os.chmod(cls.dir, 0o755)
        cls.creddir = os.path.join(cls.dir, "creds")
        os.mkdir(cls.creddir, 0o700)
        os.chown(cls.creddir, cls.owner, -1)
        for name in ("odd_api", "gone_api"):
            cls.put(name, SECRET)
        logs = os.path.join(cls.dir, "audit")
        os.mkdir(logs, 0o700)
        os.chown(logs, cls.owner, -1)
        cls.audit = os.path.join(logs, "audit.log")
        cls.d = cls.make_daemon(
            [with_creds("keyed", {"API_KEY": "odd_api"}),
             with_creds("gone", {"GONE_KEY": "gone_api"}),
             with_creds("never", {"API_KEY": "never_there"})],
            ["--credentials-dir", cls.creddir, "--audit-file", cls.audit,
             "--log-level", "debug",
             # spares on: a call a spare takes gets its environment through
             # the spawner too, and must leave no copy there either
             "--spares", "2"])
        cls.c = cls.d.client()
        wait_listed(cls.c, "keyed.has_env")
        wait_listed(cls.c, "gone.has_env")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def put(cls, name, value):
        path = os.path.join(cls.creddir, name)
        with open(path, "w") as f:
            f.write(value + "\n")
        os.chmod(path, 0o600)
        os.chown(path, cls.owner, -1)

    def tail(self):
        t = self.d.client()
        self.addCleanup(t.close)
        t.send({"op": "tail"})
        self.assertEqual(t.recv()["event"], "tailing")
        return t

    def test_the_server_has_it_and_nothing_else_does(self):
        t = self.tail()
        events = run_events(self.c, "keyed.has_env", {"name": "API_KEY"})
        done = completed(events)
        self.assertEqual(done["result"]["ok"]["structuredContent"],
                         {"set": True, "sha256": hashlib.sha256(SECRET.encode()).hexdigest()})
        self.assertEqual(done["enforced"]["env_credentials"], ["API_KEY"])
        # the bridge's own environment is the server's: nothing else of the
        # call's has it under another name, and the request carries none
        other = completed(run_events(self.c, "keyed.has_env", {"name": "TOOLEXEC_TOOL"}))
        self.assertTrue(other["result"]["ok"]["structuredContent"]["set"])
        tailed = t.recv_for(lambda e: e.get("event") == "tool_execution_completed" and
                            e.get("batch") == done["batch"])
        harness.deadline_wait(lambda: os.path.exists(self.audit) and
                              "env_credentials" in harness_read(self.audit),
                              what="the call's audit record, its enforced")
        for where, text in (("the caller's events", json.dumps(events)),
                            ("a tail's event", json.dumps(tailed)),
                            ("the daemon's log", self.d.stderr()),
                            ("the audit file", harness_read(self.audit))):
            self.assertNotIn(SECRET, text, where)

    def test_the_spawner_keeps_no_copy(self):
        # the value goes through the spawner (the call's environment, in its
        # request): wiped there once the call's process is started
        done = completed(run_events(self.c, "keyed.has_env", {"name": "API_KEY"}))
        self.assertTrue(done["result"]["ok"]["structuredContent"]["set"])
        sp = harness.deadline_wait(lambda: spawner_of(self.d.proc.pid), what="the spawner")
        seen, total = scan(sp, {"the value": [SECRET.encode()]})
        self.assertGreater(total, 1 << 20)
        self.assertEqual(seen, set())

    def test_missing_at_call_time(self):
        os.unlink(os.path.join(self.creddir, "gone_api"))
        try:
            err = completed(run_events(self.c, "gone.has_env",
                                       {"name": "GONE_KEY"}))["result"]["tool_error"]
        finally:
            self.put("gone_api", SECRET)
        self.assertEqual(err["reason"], "handler_exit")
        self.assertIn("GONE_KEY", err["message"])
        self.assertIn("credential gone_api", err["message"])
        self.assertEqual(err["cause"], {"error": "credential", "credential": "gone_api",
                                        "variable": "GONE_KEY"})
        # and back: read again at the next call
        ok = completed(run_events(self.c, "gone.has_env", {"name": "GONE_KEY"}))["result"]
        self.assertTrue(ok["ok"]["structuredContent"]["set"])

    def test_missing_at_listing(self):
        harness.deadline_wait(lambda: "MCP server never: its tools not listed" in self.d.stderr(),
                              what="the listing's failure logged")
        line = [l for l in self.d.stderr().splitlines()
                if "MCP server never: its tools not listed" in l][0]
        self.assertIn("never_there", line)
        self.assertFalse([t for t in self.c.tools()["tools"] if t["name"].startswith("never.")])


class RootDaemon(Cases, unittest.TestCase):
    @classmethod
    def make_daemon(cls, tools, args):
        return harness.Daemon(tools, args=args)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Cases, unittest.TestCase):
    owner = pwd.getpwnam("nobody").pw_uid

    @classmethod
    def make_daemon(cls, tools, args):
        return harness.nobody_daemon(tools, args=args)


class Check(unittest.TestCase):
    def check(self, d):
        harness.require_env()
        tmp = tempfile.mkdtemp(prefix="te-mcpcred-check-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        os.chmod(tmp, 0o755)
        os.mkdir(os.path.join(tmp, "tools"))
        path = os.path.join(tmp, "tools", "bad.json")
        with open(path, "w") as f:
            json.dump(d, f)
        os.chmod(path, 0o600)
        creds = os.path.join(tmp, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "there"), "w") as f:
            f.write("value\n")
        os.chmod(os.path.join(creds, "there"), 0o600)
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", os.path.join(tmp, "tools"),
                            "--credentials-dir", creds],
                           capture_output=True, text=True, timeout=harness.WAIT)
        return p.returncode, p.stdout + p.stderr

    def test_refused(self):
        for creds, says in (({"HTTPS_PROXY": "x"}, "the daemon sets this variable"),
                            ({"TOOLEXEC_X": "x"}, "the daemon sets this variable"),
                            ({"ODD_VAR": "x"}, "also in mcp_server.env"),
                            ({"K": "../x"}, "expected a credential's name"),
                            ({"1K": "x"}, "not a variable name"),
                            ({}, "expected an object")):
            status, out = self.check(with_creds("bad", creds))
            self.assertNotEqual(status, 0, creds)
            self.assertIn(says, out, creds)
        # the tree shown as the harness shows it to a daemon's tools (a clone
        # under /tmp or /var/tmp is hidden by the default view)
        good = with_creds("good", {"API_KEY": "there"})
        good["filesystem"] = harness.with_tree({})
        status, out = self.check(good)
        self.assertEqual(status, 0, out)

    def test_missing_said_before_any_call(self):
        status, out = self.check(with_creds("lacks", {"API_KEY": "not_there"}))
        self.assertNotEqual(status, 0, out)
        self.assertIn("mcp_server.env_credentials.API_KEY: credential not_there: "
                      "No such file or directory (its calls fail until it is)", out)


if __name__ == "__main__":
    unittest.main()
