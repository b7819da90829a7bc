"""What was enforced, failing closed.

Each tool_execution_completed event, and the call's audit record, carries
"enforced": the view, Landlock, seccomp, network, uid and limits the call
ran under, for a cold and a warm call, a narrowed one, a host view with no
filter; root and unprivileged daemons. A definition that asks for a layer
the host cannot give (Landlock or seccomp turned off by --disable-layer, no
mount namespace under --containment pgroup) is refused at load and by
--check --tools, unless its "best_effort" names the layer, which every
call's record then says."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import unittest

import harness
from harness import Daemon, DaemonFailed, deadline_wait, worker_tool


UID_TOOL = 'import json, os, sys; sys.stdin.readline(); print(json.dumps({"uid": os.getuid()}))'


def ok_value(ev):
    v = ev["result"]["ok"]
    return json.loads(v) if isinstance(v, str) else v


def check_output(as_nobody=False):
    cmd = [harness.TOOLEXECD, "--check"]
    if as_nobody:
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + cmd
    return subprocess.run(cmd, stdout=subprocess.PIPE, timeout=harness.WAIT).stdout.decode()


def host_layers(as_nobody=False):
    """What this host gives calls, as toolexecd --check says."""
    out = check_output(as_nobody)
    m = re.search(r"landlock: +yes \(ABI (\d+)\)", out)
    return {"landlock": int(m.group(1)) if m else 0,
            # the daemon's calls get a mount namespace with their PID namespace
            "mountns": "pid namespaces:      yes" in out
            and "toolexecd-init:      not found" not in out,
            "seccomp": "  seccomp:           yes" in out,
            "memory": "cgroup" if "memory_mb:           memory.max" in out else "rlimit",
            "processes": "cgroup" if "processes:           pids.max" in out else "rlimit"}


def view_digest(v):
    lists = {k: v[k] for k in ("hide", "read", "root", "write")}
    return hashlib.sha256(json.dumps(lists, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def completed(res, cid="c"):
    return res.completed(cid)


def audit_records(d):
    out = {}
    for line in d.stderr().splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            if o.get("record") == "call":
                out[o["call"]] = o
    return out


class RecordCases:
    """The record's contents; the daemon class is the subclass's."""
    NOBODY = False

    @classmethod
    def make(cls, tools, plain_tools=(), args=()):
        d = Daemon(args=list(args), start=False) if not cls.NOBODY \
            else harness.NobodyDaemon(args=list(args), start=False)
        for t in tools:
            d.add_tool(t)
        d.WRITE_TMP = False  # these as written: no "filesystem" of the harness's
        for t in plain_tools:
            d.add_tool(t)
        if cls.NOBODY:
            harness.give_work_dir(d)
        return harness.started(d)

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.host = host_layers(cls.NOBODY)
        if not cls.host["mountns"]:
            raise unittest.SkipTest("no mount namespace per call here")
        d = Daemon(start=False)  # for its directories only
        cls.scratch = d
        cls.wdir = os.path.realpath(d.shared_dir("w"))
        tools = [
            # python3, not the testworker: an ASan build's cannot start
            # under memory_mb's RLIMIT_AS
            dict(worker_tool("net", None, network={"allow": ["127.0.0.1:9", "Example.ORG"]},
                        filesystem=harness.with_tree({"write": [cls.wdir], "hide": ["/srv"]}),
                        limits={"memory_mb": 512, "processes": 64, "cpu_ms": 60000}),
                 command=["/usr/bin/python3", "-I", "-c", UID_TOOL], protocol="plain"),
            worker_tool("hostfs", "identity", filesystem="host", syscalls="off", network=True),
            worker_tool("warm", "identity", start="warm"),
            worker_tool("custom", "identity", deny_syscalls=["ptrace"]),
            worker_tool("needx", "identity", schema={"type": "object", "required": ["x"]}),
        ]
        # "dflt": a definition with no "filesystem", the daemon's default view
        dflt = worker_tool("dflt", "identity")
        if harness.tree_reads():
            # a build tree the default view hides (a package build under
            # /tmp): the testworker could not load its libtoolexec there
            dflt = dict(worker_tool("dflt", None), command=["/usr/bin/python3", "-I", "-c", UID_TOOL],
                        protocol="plain")
            dflt.pop("filesystem", None)
        cls.d = cls.make(tools, [dflt], ["--log-format", "json"])

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.scratch.stop(check=False)

    def run1(self, name, policy=None, **opts):
        call = {"id": "c", "name": name, "arguments": {}}
        if policy is not None:
            call["policy"] = policy
        res = self.d.client().run([call], **opts)
        ev = completed(res)
        self.assertIn("ok", ev["result"], ev)
        self.assertIn("enforced", ev, ev)
        return ev

    def check_common(self, ev):
        e = ev["enforced"]
        self.assertEqual(sorted(e), ["landlock", "limits", "network", "seccomp", "uid", "view"])
        # the uid the kernel ran the call as: the one the tool saw
        self.assertEqual(e["uid"], ok_value(ev)["uid"], e)
        if self.NOBODY:
            self.assertEqual(e["uid"], __import__("pwd").getpwnam("nobody").pw_uid)
        for k, v in e["limits"].items():
            self.assertIsInstance(v["value"], int, k)
            self.assertIn(v["via"], ("cgroup", "rlimit", "daemon"), k)
        for part in ("view", "landlock", "seccomp"):
            self.assertNotIn("best_effort", e[part], e)
        return e

    def test_default_tool(self):
        ev = self.run1("dflt")
        e = self.check_common(ev)
        v = e["view"]
        self.assertEqual((v["root"], v["read"], v["write"], v["hide"]), ("default", [], [], []))
        self.assertEqual(v["sha256"], view_digest(v))
        self.assertEqual(e["landlock"], {"abi": self.host["landlock"]})
        self.assertEqual(e["seccomp"]["filter"], "default")
        self.assertIs(e["seccomp"]["applied"], True)
        self.assertEqual(e["network"], {"mode": "host"})  # the daemon's default

    def test_allow_list_and_view(self):
        ev = self.run1("net")
        e = self.check_common(ev)
        self.assertEqual(e["network"], {"mode": "proxy", "allow": ["127.0.0.1:9", "example.org"]})
        v = e["view"]
        self.assertEqual(v["root"], "default")
        self.assertEqual(v["write"], [self.wdir])
        self.assertEqual(v["hide"], ["/srv"])
        self.assertEqual(v["sha256"], view_digest(v))
        self.assertEqual(e["limits"]["memory_mb"], {"value": 512, "via": self.host["memory"]})
        self.assertEqual(e["limits"]["processes"], {"value": 64, "via": self.host["processes"]})
        self.assertEqual(e["limits"]["cpu_ms"], {"value": 60000, "via": "rlimit"})
        # the audit record carries the same
        rec = deadline_wait(lambda: audit_records(self.d).get("c") if
                            audit_records(self.d).get("c", {}).get("batch") == ev["batch"]
                            else None, what="the audit record")
        self.assertEqual(rec["enforced"], e)

    def test_narrowed_call(self):
        ev = self.run1("net", policy={"network": {"allow": ["example.org"]},
                                      "filesystem": {"write": []}, "memory_mb": 256})
        e = self.check_common(ev)
        self.assertEqual(e["network"], {"mode": "proxy", "allow": ["example.org"]})
        self.assertEqual(e["view"]["write"], [])
        self.assertEqual(e["view"]["sha256"], view_digest(e["view"]))
        self.assertEqual(e["limits"]["memory_mb"]["value"], 256)
        ev = self.run1("net", policy={"network": False})
        self.assertEqual(ev["enforced"]["network"], {"mode": "off"})
        # and the tool itself is as it was
        self.assertEqual(self.run1("net")["enforced"]["network"]["allow"],
                         ["127.0.0.1:9", "example.org"])

    def warm_ready(self):
        def ready():
            t = (self.d.stats().get("templates") or {}).get("warm")
            return t if t and t["state"] == "ready" else None
        return deadline_wait(ready, what="the warm template")

    def test_warm_tool(self):
        self.warm_ready()
        ev = self.run1("warm")
        self.assertEqual(ev.get("start"), "warm", ev)
        e = self.check_common(ev)  # its uid too: a root daemon's, lent to its PID 1
        self.assertEqual(e["view"]["root"], "default")
        self.assertEqual(e["landlock"], {"abi": self.host["landlock"]})
        self.assertEqual(e["seccomp"]["filter"], "default")
        self.assertEqual(e["network"], {"mode": "host"})

    def test_warm_uid_when_forked_comes_late(self):
        """The template's "forked" read after its call has ended: the call's
        PID 1, whose lent uid the record names, is gone by then. strace holds
        each of the template's sends back (its hand-over to PID 1 and its
        "forked" frame) by 0.4 s, well past the call's end and within the 1 s
        a result waits for its "forked"."""
        if not shutil.which("strace"):
            self.skipTest("strace is not installed (contrib/deps.sh installs it)")
        tpid = self.warm_ready()["pid"]
        self.run1("warm")  # the template has forked once (its next PID 1 made ahead)
        tracer = subprocess.Popen(["strace", "-qq", "-o", "/dev/null", "-p", str(tpid),
                                   "-e", "trace=sendmsg", "-e", "inject=sendmsg:delay_enter=400000"])
        try:
            def traced():
                with open(f"/proc/{tpid}/status") as f:
                    return f"TracerPid:\t{tracer.pid}\n" in f.read()
            deadline_wait(traced, what="strace attached to the template")
            ev = self.run1("warm")
        finally:
            tracer.terminate()
            tracer.wait()
        self.assertEqual(ev.get("start"), "warm", ev)
        self.check_common(ev)  # its uid: the one it ran as

    def test_host_view_and_no_filter(self):
        e = self.check_common(self.run1("hostfs"))
        self.assertEqual(e["view"], {"root": "host"})
        self.assertEqual(e["landlock"], {"abi": 0})
        self.assertEqual(e["seccomp"], {"filter": "off", "applied": False,
                                        "denials_reported": False})
        self.assertEqual(e["network"], {"mode": "host"})

    def test_custom_filter(self):
        e = self.check_common(self.run1("custom"))
        self.assertEqual(e["seccomp"]["filter"], "custom")
        self.assertIs(e["seccomp"]["applied"], True)

    def test_call_that_never_ran_has_none(self):
        # arguments its schema refuses: no worker runs
        res = self.d.client().run([{"id": "c", "name": "needx", "arguments": {}}])
        ev = completed(res)
        self.assertNotIn("ok", ev["result"])
        self.assertNotIn("enforced", ev)


class RootRecord(RecordCases, unittest.TestCase):
    pass


class NobodyRecord(RecordCases, unittest.TestCase):
    NOBODY = True


def fs_tool(name, **fields):
    return worker_tool(name, "identity", filesystem=harness.with_tree({}), **fields)


class FailClosed(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        self.host = host_layers()

    def refused(self, tools, args, *why):
        d = Daemon(tools, args=args, start=False)
        try:
            with self.assertRaises(DaemonFailed) as cm:
                d.start()
            for w in why:
                self.assertIn(w, str(cm.exception))
            # --check --tools says the same, and fails
            out = subprocess.run([harness.TOOLEXECD, "--check", "--tools", d.tools_dir] + args,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=harness.WAIT)
            self.assertEqual(out.returncode, 1, out.stdout)
            for w in why:
                self.assertIn(w, out.stdout.decode())
        finally:
            d.stop(check=False)

    def best_effort(self, tool, args):
        d = Daemon([tool], args=args)
        try:
            out = subprocess.run([harness.TOOLEXECD, "--check", "--tools", d.tools_dir] + args,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=harness.WAIT)
            self.assertEqual(out.returncode, 0, out.stdout)
            res = d.client().run([{"id": "c", "name": tool["name"], "arguments": {}}])
            ev = completed(res)
            self.assertIn("ok", ev["result"], ev)
            return ev["enforced"]
        finally:
            d.stop()

    def test_landlock_missing(self):
        if not self.host["landlock"]:
            self.skipTest("no Landlock here to turn off")
        self.refused([fs_tool("v")], ["--disable-layer", "landlock"],
                     "v.json: filesystem: this kernel offers no Landlock", '"landlock"')
        e = self.best_effort(fs_tool("v", best_effort=["landlock"]),
                             ["--disable-layer", "landlock"])
        self.assertEqual(e["landlock"], {"abi": 0, "best_effort": True})
        # a tool that asks for no view of its own is the operator's to judge
        d = Daemon([worker_tool("h", "identity", filesystem="host")],
                   args=["--disable-layer", "landlock"])
        d.stop()

    def test_seccomp_missing(self):
        if not self.host["seccomp"]:
            self.skipTest("no seccomp here to turn off")
        self.refused([worker_tool("s", "identity", deny_syscalls=["ptrace"])],
                     ["--disable-layer", "seccomp"], "s.json: syscalls: calls get no seccomp")
        e = self.best_effort(worker_tool("s", "identity", syscalls="default",
                                         best_effort=["seccomp"]),
                             ["--disable-layer", "seccomp"])
        self.assertEqual(e["seccomp"], {"filter": "default", "applied": False,
                                        "denials_reported": False, "best_effort": True})
        self.assertIn("turned off by --disable-layer seccomp", subprocess.run(
            [harness.TOOLEXECD, "--check", "--disable-layer", "seccomp"],
            stdout=subprocess.PIPE, timeout=harness.WAIT).stdout.decode())

    def test_view_missing(self):
        # --containment pgroup: no mount namespace, so no view
        self.refused([fs_tool("v")], ["--containment", "pgroup"],
                     "v.json: filesystem: calls get no mount namespace", '"view"')
        e = self.best_effort(fs_tool("v", best_effort=["view"]), ["--containment", "pgroup"])
        self.assertEqual(e["view"], {"root": "host", "best_effort": True})

    def test_bad_best_effort(self):
        for bad in (["cgroups"], "landlock", [1]):
            d = Daemon([fs_tool("b", best_effort=bad)], start=False)
            try:
                with self.assertRaises(DaemonFailed) as cm:
                    d.start()
                self.assertIn("b.json: best_effort", str(cm.exception))
            finally:
                d.stop(check=False)

    def test_disable_layer_refuses_unknown(self):
        out = subprocess.run([harness.TOOLEXECD, "--disable-layer", "view", "--check"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=harness.WAIT)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--disable-layer: expected landlock or seccomp", out.stdout.decode())


if __name__ == "__main__":
    harness.main()
