"""A warm call gets the same confinement as a cold one, here the file-system
view (proto/PROTOCOL.md, "Warm start").

A warm tool under the daemon's default view and under a view of its own
("write" paths, "root": "minimal"), against a root daemon and an
unprivileged one (setpriv --reuid=nobody): hostile probes (testworker
fs-probe) try what test_confine_fs tries of a cold call (read secrets, the
tools and work directories, another running call's directory of the same
template; write to the host's root, outside the call's directory, into /tmp
and /dev for a later call), and each probe's answer is also compared with a
cold twin's, so a warm call sees what a cold one sees. Every call must have
run warm ("start": "warm" in its completed event). The bundled Python calc
runs warm under the default view too."""

import os
import shutil
import signal
import tempfile
import unittest

import harness
from harness import Daemon, new_token, worker_tool
from test_warm import PYTHON, needs_python_lib, wait_ready

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


SECRET = "te-wv-victim-secret-5d2a"


def default_view(d):
    """The daemon's default view: no "filesystem" key, but where this
    checkout is left out by the view (under /tmp, a home directory) its
    trees read-only, or the testworker could not run."""
    if harness.tree_reads():
        d["filesystem"] = harness.with_tree({})
    else:
        d["filesystem"] = {}
    return d


def build_root():
    """What test_confine_fs's minimal tool reads: the tree holding the
    testworker and the build's libtoolexec."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(harness.TESTWORKER))))


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to make a shared directory and drop to nobody)")
        harness.require_env()
        from test_confine_fs import require_view
        require_view()
        cls.shared = tempfile.mkdtemp(prefix="te-wv-", dir="/var/cache")
        os.chmod(cls.shared, 0o777)
        cls.outbox = os.path.join(cls.shared, "outbox")
        os.mkdir(cls.outbox)
        os.chmod(cls.outbox, 0o777)
        minimal = harness.with_tree({"root": "minimal", "write": [cls.outbox],
                                     "read": [build_root()]})
        tools = []
        for start in ("warm", "cold"):
            sfx = "" if start == "warm" else "_cold"
            tools += [
                default_view(worker_tool("dflt" + sfx, None, start=start, timeout_ms=30000,
                                         env={"VICTIM_SECRET": SECRET})),
                worker_tool("mini" + sfx, None, start=start, timeout_ms=30000,
                            env={"VICTIM_SECRET": SECRET}, filesystem=minimal),
                worker_tool("host" + sfx, None, start=start, timeout_ms=30000, filesystem="host"),
            ]
        tools.append(default_view({
            "name": "calc", "description": "contrib/tools/python/calc.py", "start": "warm",
            "schema": {"type": "object"},
            "command": [PYTHON, os.path.join(SRC, "contrib", "tools", "python", "calc.py")],
            "env": {"PYTHONPATH": os.path.join(SRC, "contrib", "python"),
                    "PYTHONDONTWRITEBYTECODE": "1"}}))
        d = cls.DAEMON(tools, start=False)
        harness.give_work_dir(d)
        try:
            d.start()
        except BaseException:
            d.stop(check=False)
            shutil.rmtree(cls.shared, ignore_errors=True)
            raise
        cls.d = d

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        shutil.rmtree(cls.shared, ignore_errors=True)

    def call(self, tool, args, client=None, start="warm"):
        """One call; asserts it ran warm (or cold for a *_cold tool)."""
        if start == "warm":
            wait_ready(self.d, tool)
        res = (client or self.d.client()).run([{"id": "c", "name": tool, "arguments": args}])
        self.assertEqual(res.completed("c").get("start"), start if start == "warm" else None,
                         res.completed("c"))
        return res.result("c")

    def probe(self, tool, client=None, **args):
        r = self.call(tool, dict(args, mode="fs-probe"), client)
        self.assertEqual(set(r), {"ok"}, r)
        return r["ok"]

    def probe_both(self, tool, **args):
        """The probe warm and through the cold twin: the same answers (but
        for the call's own directory)."""
        warm = self.probe(tool, **args)
        cold = self.call(tool + "_cold", dict(args, mode="fs-probe"), start="cold")["ok"]
        warm.pop("cwd"), cold.pop("cwd")
        self.assertEqual(warm, cold)
        return warm

    # -- what is hidden ----------------------------------------------------------

    def hidden(self, tool, absent):
        """absent: a minimal root has no /root, /home, /run, /var at all."""
        dirs = [p for p in ["/root", "/home", "/etc/ssh", "/var/lib", "/run"]
                if os.path.isdir(p) and not harness.leads_to_tree(p)]
        r = self.probe_both(tool, list=dirs + [self.d.tools_dir],
                            read=["/etc/shadow", "/etc/gshadow",
                                  os.path.join(self.d.tools_dir, tool + ".json")])
        for path, got in zip(dirs, r["list"]):
            want = "ENOENT" if absent and path != "/etc/ssh" else "EACCES"
            self.assertEqual(got, want, path)
        self.assertIn(r["list"][-1], ("ENOENT", "EACCES"))
        self.assertEqual(r["read"][:2], ["EACCES"] * 2)
        self.assertIn(r["read"][2], ("ENOENT", "EACCES"))

    def test_default_view_hides(self):
        self.hidden("dflt", absent=False)

    def test_minimal_root_hides(self):
        self.hidden("mini", absent=True)
        # /var and the build tree's top directory (/work, /srv, /home...):
        # the way to its "write" and "read" paths; every other one absent
        shown = {p.split("/")[1] for p in [self.outbox, build_root()] + harness.tree_reads()}
        gone = sorted({"opt", "mnt", "home", "root", "srv"} - shown)
        r = self.probe_both("mini", list=["/"], stat=["/" + g for g in gone] + ["/usr/bin/env"],
                            read=["/etc/hostname"])
        names = set(r["list"][0][3:].split())
        self.assertTrue({"usr", "etc", "dev", "proc", "tmp"} | shown <= names, names)
        self.assertFalse(set(gone) & names, names)
        self.assertEqual(r["stat"][:-1], ["ENOENT"] * len(gone))
        self.assertTrue(r["stat"][-1].startswith("ok:"), r)
        self.assertTrue(r["read"][0].startswith("ok:"), r)

    def test_work_directory_shows_only_the_call(self):
        for tool in ("dflt", "mini"):
            r = self.probe(tool, list=[self.d.work_dir])
            got = r["list"][0]
            # the way down to the call's own directory, nothing else
            if got.startswith("ok:"):
                below = os.path.relpath(r["cwd"], self.d.work_dir).split("/")[0]
                self.assertEqual(got.split(), ["ok:" + below], r)
            else:
                self.assertIn(got, ("EACCES", "ENOENT"), r)
            # the template's directory, where every call of it has its own:
            # this call's alone
            r2 = self.probe(tool, list=[os.path.dirname(r["cwd"])])
            self.assertEqual(r2["list"][0].split(), ["ok:" + os.path.basename(r2["cwd"])], r2)

    # -- writes ------------------------------------------------------------------

    def test_host_root_is_not_writable(self):
        for tool in ("dflt", "mini"):
            token = new_token("w")
            targets = ["/etc/" + token, "/usr/" + token, "/var/tmp/" + token,
                       os.path.join(self.shared, token), "/proc/self/comm"]
            r = self.probe_both(tool, write=targets + ["./mine"])
            for path, got in zip(targets, r["write"]):
                self.assertIn(got, ("EROFS", "EACCES", "ENOENT"), (tool, path))
            for path in targets[:-1]:
                self.assertFalse(os.path.exists(path), path)
            self.assertEqual(r["write"][-1], "ok:written")
            # beside the call's directory: the template's, every call's
            r = self.probe(tool, write=["../" + token], list=[".."])
            self.assertIn(r["write"][0], ("EROFS", "EACCES"), r)
            self.assertEqual(r["list"][0].split(), ["ok:" + os.path.basename(r["cwd"])], r)

    def test_tmp_and_dev_are_private_to_each_call(self):
        for tool in ("dflt", "mini"):
            name = new_token("tmp")
            paths = ["/tmp/" + name, "/dev/shm/" + name, "/dev/" + name]
            first = self.probe(tool, list=["/tmp", "/dev/shm", "/dev"], write=paths + ["/dev/null"],
                               stat=paths, read=["/dev/zero"])
            self.assertEqual(first["write"], ["ok:written"] * 4)  # and the devices work
            self.assertTrue(first["read"][0].startswith("ok:"), first)
            self.assertEqual(first["stat"], ["ok:644 8"] * 3)
            # not on the host, not for the next call (of another client),
            # which finds /tmp and /dev as the first one did
            for p in paths:
                self.assertFalse(os.path.exists(p), p)
            again = self.probe(tool, client=self.d.client(), list=["/tmp", "/dev/shm", "/dev"],
                               read=paths)
            self.assertEqual(again["read"], ["ENOENT"] * 3)
            self.assertEqual(again["list"], first["list"])
            self.assertEqual(again["list"][1], "ok:")  # /dev/shm: empty
            # and as a cold call finds them
            cold = self.call(tool + "_cold", {"mode": "fs-probe",
                                              "list": ["/tmp", "/dev/shm", "/dev"]}, start="cold")
            self.assertEqual(cold["ok"]["list"], first["list"])

    def test_write_paths_are_writable_and_persist(self):
        path = os.path.join(self.outbox, new_token("kept"))
        r = self.probe("mini", write=[path, os.path.join(self.shared, "beside")])
        self.assertEqual(r["write"][0], "ok:written")
        self.assertIn(r["write"][1], ("EROFS", "EACCES", "ENOENT"))
        with open(path) as f:
            self.assertEqual(f.read(), "written\n")
        self.assertFalse(os.path.exists(os.path.join(self.shared, "beside")))

    def test_nothing_written_in_the_call_directory_outlives_it(self):
        for tool in ("dflt", "mini"):
            first = self.probe(tool, write=["./left-" + tool])
            self.assertEqual(first["write"], ["ok:written"])
            again = self.probe(tool, read=["./left-" + tool,
                                           os.path.join(first["cwd"], "left-" + tool)])
            self.assertNotEqual(again["cwd"], first["cwd"])
            self.assertEqual(again["read"], ["ENOENT", "ENOENT"])

    # -- other calls ---------------------------------------------------------------

    def test_another_running_call_of_the_template_is_not_there(self):
        # a live victim of the same warm tool (so of the same template, whose
        # directory holds both calls' directories) writes a secret into its
        # directory and tells the test where that is
        for tool in ("mini",):  # (the victim needs a "write" path to answer)
            token = new_token("victim")
            ready = os.path.join(self.outbox, "ready-" + token)
            release = os.path.join(self.outbox, "release-" + token)
            wait_ready(self.d, tool)
            c = self.d.client()
            c.start_batch([{"id": "v", "name": tool,
                            "arguments": {"mode": "victim", "ready": ready, "release": release,
                                          "answer": "genuine"}}], batch="vict")
            try:
                harness.deadline_wait(lambda: os.path.exists(ready),
                                      what="the victim to be ready")
                with open(ready) as f:
                    calldir = f.read()
                r = self.probe(tool, list=[calldir, os.path.dirname(calldir)],
                               read=[os.path.join(calldir, "secret.txt")],
                               write=[os.path.join(calldir, "planted")])
                self.assertIn(r["list"][0], ("ENOENT", "EACCES"))
                if r["list"][1].startswith("ok:"):  # its own directory only
                    self.assertEqual(r["list"][1].split(), ["ok:" + os.path.basename(r["cwd"])])
                self.assertEqual(r["read"], ["ENOENT"])
                self.assertIn(r["write"][0], ("ENOENT", "EROFS", "EACCES"))
                # (the call's directory has the same path on the host)
                self.assertTrue(os.path.exists(os.path.join(calldir, "secret.txt")), calldir)
                self.assertFalse(os.path.exists(os.path.join(calldir, "planted")))
            finally:
                open(release, "w").close()
            evs = c.finish_batch("vict")
            done = [e for e in evs if e.get("event") == "tool_execution_completed"]
            self.assertEqual(done[0].get("start"), "warm", done)
            self.assertTrue(done[0]["result"]["ok"]["secret_file"].startswith(SECRET), done)

    # -- the explicit opt-out ------------------------------------------------------

    def test_filesystem_host_is_the_hosts_for_warm_calls_too(self):
        # no view: no fresh /tmp, no Landlock; its calls (several, on one
        # template) see and write the host as a cold call does
        r = self.probe_both("host", list=[self.shared], stat=[os.path.realpath(self.d.tmp)])
        self.assertTrue(r["list"][0].startswith("ok:"), r)
        self.assertTrue(r["stat"][0].startswith("ok:"), r)
        for i in range(3):
            path = os.path.join(self.shared, new_token("host"))
            r = self.probe("host", write=[path])
            self.assertEqual(r["write"], ["ok:written"])
            self.assertTrue(os.path.exists(path))
            os.unlink(path)

    # -- a Python tool -------------------------------------------------------------

    @needs_python_lib
    def test_python_calc_runs_warm_in_the_view(self):
        for expr, want in (("6*7", "42"), ("2**64", "18446744073709551616")):
            r = self.call("calc", {"expression": expr})
            self.assertIn("ok", r, r)
            self.assertEqual(str(r["ok"]).strip(), want, r)


@unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")
class RootDaemon(Checks, unittest.TestCase):
    pass


class Reload(unittest.TestCase):

    def test_a_changed_view_replaces_the_template(self):
        # only "filesystem" changes: the template (started in the old view)
        # is replaced, and the calls see the new one
        harness.require_env()
        from test_confine_fs import require_view
        require_view()
        outbox = tempfile.mkdtemp(prefix="te-wv-")
        os.chmod(outbox, 0o777)
        try:
            def tool(fs):
                return worker_tool("w", "fs-probe", start="warm", filesystem=harness.with_tree(fs))
            with Daemon(tools=[tool({})]) as d:
                path = os.path.join(outbox, new_token("w"))
                t = wait_ready(d, "w")
                res = d.client().run([{"id": "x", "name": "w", "arguments": {"write": [path]}}])
                self.assertEqual(res.completed("x").get("start"), "warm")
                self.assertEqual(res.result("x")["ok"]["write"], ["ENOENT"])  # under /tmp
                d.add_tool(tool({"write": [outbox]}), "w.json")
                d.proc.send_signal(signal.SIGHUP)
                wait_ready(d, "w", other_than=t["pid"])
                res = d.client().run([{"id": "x", "name": "w", "arguments": {"write": [path]}}])
                self.assertEqual(res.completed("x").get("start"), "warm")
                self.assertEqual(res.result("x")["ok"]["write"], ["ok:written"])
                self.assertTrue(os.path.exists(path))
        finally:
            shutil.rmtree(outbox, ignore_errors=True)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    DAEMON = harness.NobodyDaemon


if __name__ == "__main__":
    import unittest as _u
    _u.main(verbosity=2)
