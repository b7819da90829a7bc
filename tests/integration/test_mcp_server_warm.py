"""A Python MCP server kept warm ("mcp_server": {"python_module": M,
"start": "warm"}, toolexecd.tools(5)): each of its tools a warm tool, all
of them served by one template, the server's (toolexec.mcpwarm, which has
imported M), each call a fresh fork of it that starts the server (M's main)
and execs the bridge attached to it, calling the tool the request names.

PyPI cannot be reached here: the server is a stand-in of ours laid out as a
PyPI server is (tests/mcp_servers/pymod/mcp_server_standin: a package run
with python -m, importing pydantic, anyio, httpx, starlette...).

Against the real daemon, root and unprivileged:
- its tools listed (by a cold listing) and called warm ("start": "warm" in
  the call's event, the template the same process before and after);
- one template process for all its tools (counted in /proc), in stats under
  the server's name, each tool's call (by its name or its alias for the
  LLM APIs) answered by its own tool;
- nothing survives a call: a file one call writes in /tmp is gone for the
  next, and each call's server has answered one call (its memory fresh);
- a server that crashes mid-call is the call's handler_exit, one that hangs
  its timeout (its processes killed); the template lives on and serves the
  next call warm;
and without a daemon: the same command run cold (no template ready: the
request handed to the bridge in a memfd) answers as a warm call; the
bridge's attach mode refuses a process that is not its child and
descriptors that are not the pipes it says; --check refuses what does not
fit (python_module beside command, warm without python_module, warm with
env_credentials, a bad module name, max_forks without warm).
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_warm import python_loads_lib  # noqa: E402

PY = "/usr/bin/python3"  # a shim in a home directory would be hidden by the view
PYMOD = os.path.realpath(os.path.join(harness.HERE, "..", "mcp_servers", "pymod"))
PYSDK = os.path.realpath(os.path.join(harness.HERE, "..", "..", "contrib", "python"))
BRIDGE = os.path.join(os.path.dirname(os.path.abspath(harness.TOOLEXECD)), "toolexec-mcp-bridge")
ENV = {"PYTHONPATH": PYSDK + ":" + PYMOD, "PYTHONDONTWRITEBYTECODE": "1"}


def standin(name="py", start="warm", **fields):
    m = {"python_module": "mcp_server_standin", "python": PY, "env": dict(ENV)}
    if start:
        m["start"] = start
    m.update(fields.pop("mcp", {}))
    d = {"name": name, "mcp_server": m, "timeout_ms": 10000}
    d.update(fields)
    return d


def text_ok(t):
    return {"ok": {"content": [{"type": "text", "text": t}]}}


def completed(c, name, args, **opts):
    return completed_call(c, {"id": "c", "name": name, "arguments": args}, **opts)


def completed_call(c, call, **opts):
    b = c.start_batch([call], **opts)
    return [e for e in c.recv_batch(b) if e["event"] == "tool_execution_completed"][0]


def template_pids(d):
    """The warm templates of toolexec.mcpwarm in d's process tree, found in
    /proc: each the child of its toolexecd-init (a call's processes are
    forks of the template, its children)."""
    parent, comm, cmd = {}, {}, {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd[int(p)] = f.read().split(b"\0")
        except OSError:
            continue
        comm[int(p)] = st[st.index("(") + 1:st.rindex(")")]
        parent[int(p)] = int(st[st.rindex(")") + 2:].split()[1])

    def of_daemon(p):
        while p > 1:
            if p == d.proc.pid:
                return True
            p = parent.get(p, 0)
        return False
    return sorted(p for p, argv in cmd.items()
                  if b"toolexec.mcpwarm" in argv and comm.get(parent[p]) == "toolexecd-init"
                  and of_daemon(p))


class Warm:
    """The calls of one warm server, against the daemon cls.daemon() makes."""

    @classmethod
    def setUpClass(cls):
        if not python_loads_lib():
            raise unittest.SkipTest("python cannot load this build's libtoolexec "
                                    "(a sanitizer build)")
        cls.d = cls.daemon([standin()])
        cls.c = cls.d.client()
        harness.deadline_wait(lambda: any(t["name"] == "py.echo" for t in cls.c.tools()["tools"]),
                              what="py.echo listed")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.stop()

    def warm_call(self, name, args, **opts):
        """A call of name once its template (the server's) is ready: its
        completed event, the template's pid (the same before and after)."""
        pid = harness.wait_template(self.d, "py")["pid"]
        done = completed(self.c, name, args, **opts)
        self.assertEqual(done.get("start"), "warm", done)
        return done, pid

    def test_one_template_for_all_tools(self):
        pid = harness.wait_template(self.d, "py")["pid"]
        self.assertEqual(sorted(self.d.stats()["templates"]), ["py"])
        # the log names the template by its server, not by the tool it was
        # started from (said before stats shows it ready)
        log = self.d.stderr()
        self.assertIn("MCP server py: warm template ready", log)
        self.assertNotRegex(log, r"tool py\.\w+: warm template")
        served = self.d.stats()["templates"]["py"]["children"]
        # each call a fork of the one template, calling the tool it names
        # (by its alias for the LLM APIs too: the request names the tool)
        for call, want in (
                ({"id": "c", "name": "py.echo", "arguments": {"text": "one"}}, text_ok("one")),
                ({"id": "c", "name": "py.answered", "arguments": {}}, text_ok("1")),
                ({"id": "c", "type": "function",
                  "function": {"name": "py_echo", "arguments": "{\"text\": \"alias\"}"}},
                 text_ok("alias"))):
            done = completed_call(self.c, call)
            self.assertEqual(done.get("start"), "warm", done)
            self.assertEqual(done["result"], want, call)
        done = completed(self.c, "py.get_current_time", {"timezone": "UTC"})
        self.assertEqual(done["result"]["ok"]["structuredContent"]["timezone"], "UTC")
        t = harness.wait_template(self.d, "py")
        self.assertEqual(t["pid"], pid)
        self.assertEqual(t["children"], served + 4)
        # one process for the server's seven tools, not one per tool
        self.assertEqual(len([n for n in (x["name"] for x in self.c.tools()["tools"])
                              if n.startswith("py.")]), 7)
        self.assertEqual(template_pids(self.d), [pid])
        # capacity: each tool's template is the server's; the listing
        # tool, cold, has none
        self.c.send({"op": "capacity"})
        cap = self.c.recv_for(lambda e: e.get("event") == "capacity")["tools"]
        self.assertEqual(cap["py.echo"]["warm"], "ready")
        self.assertEqual(cap["py.answered"]["warm"], "ready")
        self.assertIsNone(cap["py"].get("warm"))

    def test_listed_and_called(self):
        names = [t["name"] for t in self.c.tools()["tools"]]
        self.assertIn("py.get_current_time", names)
        self.assertNotIn("py", names)
        done, pid = self.warm_call("py.echo", {"text": "hi"})
        self.assertEqual(done["result"], text_ok("hi"))
        done, _ = self.warm_call("py.get_current_time", {"timezone": "Europe/Paris"})
        self.assertEqual(done["result"]["ok"]["structuredContent"]["timezone"], "Europe/Paris")
        # the server's inputSchema (pydantic's), checked before any fork
        bad = completed(self.c, "py.get_current_time", {})
        self.assertIn("timezone", bad["result"]["error"])
        self.assertEqual(harness.wait_template(self.d, "py")["pid"], pid)

    def test_narrowed_call(self):
        # narrowed (a td_tool of its own): cold, as for any warm tool; the
        # timeout alone narrowed: warm, on the server's template
        pid = harness.wait_template(self.d, "py")["pid"]
        done = completed(self.c, "py.echo", {"text": "cold"},
                         policy={"limits": {"processes": 32}})
        self.assertEqual(done["result"], text_ok("cold"))
        self.assertNotEqual(done.get("start"), "warm", done)
        done, same = self.warm_call("py.answered", {}, policy={"timeout_ms": 5000})
        self.assertEqual((done["result"], same), (text_ok("1"), pid))

    def test_nothing_survives_a_call(self):
        path = "/tmp/left-by-a-call"
        done, pid = self.warm_call("py.write", {"path": path, "text": "x"})
        self.assertEqual(done["result"], text_ok("written"))
        done, _ = self.warm_call("py.read", {"path": path})
        self.assertIn("No such file", done["result"]["error"])
        # each call's server a fresh fork: none has answered a call before
        for _ in range(2):
            done, same = self.warm_call("py.answered", {})
            self.assertEqual(done["result"], text_ok("1"))
        self.assertEqual(harness.wait_template(self.d, "py")["pid"], pid)

    def test_crash_is_handler_exit(self):
        done, pid = self.warm_call("py.crash", {})
        err = done["result"]["tool_error"]
        self.assertEqual(err["reason"], "handler_exit")
        self.assertIn("exited with status 3", err["message"])
        again, same = self.warm_call("py.crash", {})
        self.assertEqual(same, pid)  # the template lived on
        done, _ = self.warm_call("py.echo", {"text": "after"})
        self.assertEqual(done["result"], text_ok("after"))

    def test_hang_is_timeout(self):
        mark = harness.new_token("pywarmhang")
        done, pid = self.warm_call("py.hang", {"mark": mark}, tool_timeout=1500)
        self.assertEqual(done["result"]["tool_error"]["reason"], "timeout")
        harness.assert_token_gone(mark)
        self.assertEqual(harness.wait_template(self.d, "py")["pid"], pid)
        done, _ = self.warm_call("py.answered", {}, tool_timeout=5000)
        self.assertEqual(done["result"], text_ok("1"))


RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Warm)


class Reload(unittest.TestCase):
    """Two warm servers: a template each; a reload keeps a server's
    template while its definition is unchanged and replaces it when it
    changes, the other server's kept."""

    def test_a_template_per_server_follows_its_definition(self):
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        with harness.Daemon([standin("py"), standin("qy")]) as d:
            c = d.client()
            self.addCleanup(c.close)
            harness.deadline_wait(lambda: {"py.echo", "qy.echo"} <= {
                t["name"] for t in c.tools()["tools"]}, what="both servers listed")
            py, qy = harness.wait_template(d, "py"), harness.wait_template(d, "qy")
            self.assertEqual(sorted(d.stats()["templates"]), ["py", "qy"])
            self.assertEqual(template_pids(d), sorted([py["pid"], qy["pid"]]))
            listed = "MCP server py: 7 tools registered"
            self.assertEqual(d.stderr().count(listed), 1)
            d.proc.send_signal(signal.SIGHUP)
            # reloaded and listed again (its tools made anew, unchanged)
            harness.deadline_wait(lambda: d.stderr().count(listed) == 2, what="py listed again")
            done = completed(c, "py.echo", {"text": "same"})
            self.assertEqual((done["result"], done.get("start")), (text_ok("same"), "warm"))
            self.assertEqual(harness.wait_template(d, "py")["pid"], py["pid"])
            changed = standin("py")
            changed["mcp_server"]["env"]["CHANGED"] = "1"
            d.add_tool(changed)
            d.proc.send_signal(signal.SIGHUP)
            py2 = harness.wait_template(d, "py", other_than=py["pid"])
            self.assertEqual(harness.wait_template(d, "qy")["pid"], qy["pid"])
            for tool, args, want in (("py.echo", {"text": "new"}, text_ok("new")),
                                     ("py.answered", {}, text_ok("1"))):
                done = completed(c, tool, args)
                self.assertEqual((done["result"], done.get("start")), (want, "warm"))
            self.assertEqual(harness.wait_template(d, "py")["pid"], py2["pid"])
            harness.deadline_wait(lambda: template_pids(d) == sorted([py2["pid"], qy["pid"]]),
                                  what="the old template gone")


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def unframe(data):
    (n,) = struct.unpack(">I", data[:4])
    return json.loads(data[4:4 + n])


class NoDaemon(unittest.TestCase):
    def test_cold_same_answer(self):
        # no template ready: the daemon runs the same command cold, the
        # request its first frame
        env = dict(ENV, PATH="/usr/bin:/bin")
        p = subprocess.run([PY, "-m", "toolexec.mcpwarm", BRIDGE, "call", "echo", "--",
                            "mcp_server_standin"], input=frame({"arguments": {"text": "cold"}}),
                           capture_output=True, env=env, timeout=harness.WAIT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(unframe(p.stdout), text_ok("cold"))

    def test_cold_tool_from_request(self):
        # the server's command (every tool's): the tool is the request's,
        # NAME.TOOL of this server
        env = dict(ENV, PATH="/usr/bin:/bin")
        argv = [PY, "-m", "toolexec.mcpwarm", BRIDGE, "server", "py", "--", "mcp_server_standin"]
        for tool, args, want in (("py.echo", {"text": "e"}, text_ok("e")),
                                 ("py.answered", {}, text_ok("1"))):
            p = subprocess.run(argv, input=frame({"tool": tool, "arguments": args}),
                               capture_output=True, env=env, timeout=harness.WAIT)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(unframe(p.stdout), want)
        for tool in ("other.echo", "py.", "py", None):
            p = subprocess.run(argv, input=frame({"tool": tool, "arguments": {}}),
                               capture_output=True, env=env, timeout=harness.WAIT)
            self.assertEqual(p.returncode, 2, (tool, p.stderr))
            self.assertIn(b"names no tool of server py", p.stderr)

    def test_server_stdio_made_anew(self):
        # the server's sys.stdout is made for its pipe, not inherited from
        # a process whose stdout was a file (a seekable one: the server's
        # TextIOWrapper(sys.stdout.buffer) would seek the pipe)
        env = dict(ENV, PATH="/usr/bin:/bin")
        with tempfile.TemporaryFile() as out:
            p = subprocess.run([PY, "-m", "toolexec.mcpwarm", BRIDGE, "call", "echo", "--",
                                "mcp_server_standin"], input=frame({"arguments": {"text": "f"}}),
                               stdout=out, stderr=subprocess.PIPE, env=env, timeout=harness.WAIT)
            self.assertEqual(p.returncode, 0, p.stderr)
            out.seek(0)
            self.assertEqual(unframe(out.read()), text_ok("f"))

    def test_attach_refusals(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        for args, says in (([str(os.getpid()), str(w), str(r)], "not a child of ours"),
                           (["1", str(w), str(r)], "PID: not a number"),
                           (["x", str(w), str(r)], "PID: not a number"),
                           (["2", str(r), str(w)], "IN: not open for writing"),
                           (["2", "1", str(r)], "IN: not a number"),
                           (["2", "999", str(r)], "IN: Bad file descriptor")):
            p = subprocess.run([BRIDGE, "attach"] + args + ["call", "t", "--"],
                               pass_fds=(r, w), capture_output=True, text=True,
                               timeout=harness.WAIT)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(says, p.stderr, args)


class Check(unittest.TestCase):
    def setUp(self):
        harness.require_env()
        self.dir = tempfile.mkdtemp(prefix="te-pywarm-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.chmod(self.dir, 0o755)

    def check(self, d):
        path = os.path.join(self.dir, d["name"] + ".json")
        with open(path, "w") as f:
            json.dump(dict(d, filesystem=harness.with_tree({})), f)
        os.chmod(path, 0o600)
        p = subprocess.run([harness.TOOLEXECD, "--check", "--tools", self.dir],
                           capture_output=True, text=True, timeout=harness.WAIT)
        os.unlink(path)
        return p.returncode, p.stdout + p.stderr

    def test_good(self):
        for good in (standin(), standin(start=None), standin(mcp={"max_forks": 5}),
                     standin(start="cold", mcp={"args": ["--local-timezone", "UTC"]})):
            status, out = self.check(good)
            self.assertEqual(status, 0, out)

    def test_refused(self):
        cmd = {"command": [PY, "-m", "mcp_server_standin"]}
        for bad, says in (
                (standin(mcp=cmd), "\"command\" or \"python_module\", not both"),
                ({"name": "c", "mcp_server": dict(cmd, start="warm")},
                 "mcp_server.start: only with mcp_server.python_module"),
                (standin(mcp={"env_credentials": {"TOKEN": "tok"}}),
                 "env_credentials: not with \"start\": \"warm\""),
                (standin(mcp={"python_module": "a..b"}), "expected a module's dotted name"),
                (standin(mcp={"python_module": "os; import x"}), "expected a module's dotted name"),
                (standin(start="cold", mcp={"max_forks": 3}), "max_forks: only for a tool"),
                (standin(mcp={"start": "hot"}), "mcp_server: start: expected"),
                (standin(mcp={"args": ["a", 1]}), "mcp_server.args[1]"),
                (dict(standin(), start="warm"), "a Python server's tools kept warm")):
            status, out = self.check(bad)
            self.assertNotEqual(status, 0, bad)
            self.assertIn(says, out, bad)


if __name__ == "__main__":
    unittest.main()
