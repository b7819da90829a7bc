"""The first tool a user writes runs the first time.

- The man page's own first tool (toolexecd.tools(5), EXAMPLES: a Python
  script in a home directory) is written into a home directory and into
  /srv as a new user would; `toolexecd --check` names what the view hides
  and the key that shows it; with that key added, the tool is called
  successfully the first time through socat, `toolexec call` and
  `toolexec mcp`, against the root daemon and the unprivileged one.
- Without the key the daemon warns once at load and each failed call's
  handler_exit names the path and the key (it said "exited with status 2").
- `--check` names the path and the key for each bad path: a command behind
  a symbolic link into a hidden directory, a hidden script argument, a
  relative command, a warm tool's libtoolexec and PYTHONPATH.
- A relative command ("../bin/x") runs (it ran through the hidden
  definitions directory: Permission denied).
"""

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
import unittest

import harness
from harness import Daemon, WAIT, nobody_daemon

HERE = os.path.dirname(os.path.abspath(__file__))
MAN = os.path.join(HERE, "..", "..", "man", "toolexecd.tools.5")
TOOLEXEC = os.environ.get("TOOLEXEC", "")
MAN_TOOLS = "/home/alice/tools"


def unroff(text):
    return text.replace("\\-", "-").replace("\\(dq", '"').replace("\\&", "").replace("\\e", "\\")


def man_example():
    """The first tool of toolexecd.tools(5): its definition and its script."""
    with open(MAN) as f:
        text = f.read()
    text = text[text.index("A first tool of your own"):]
    blocks = re.findall(r"^\.EX\n(.*?)^\.EE\n", text, re.S | re.M)
    return json.loads(unroff(blocks[0])), unroff(blocks[1])


def mkdir(path, mode=0o755):
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)
    return path


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def temp_dir(testcase, parent):
    mkdir(parent)  # /srv may be missing in a container
    d = tempfile.mkdtemp(prefix="te-first-", dir=parent)
    os.chmod(d, 0o755)  # an unprivileged daemon's workers read the tool
    testcase.addCleanup(shutil.rmtree, d, ignore_errors=True)
    return d


def check(defs, toolexecd=None):
    env = dict(os.environ)
    if toolexecd:  # the copy's own library, by its RUNPATH
        env.pop("LD_LIBRARY_PATH", None)
    p = subprocess.run([toolexecd or harness.TOOLEXECD, "--check", "--tools", defs],
                       capture_output=True, text=True, timeout=WAIT, env=env)
    return p.returncode, p.stdout.splitlines()


def place(testcase, parent):
    """The example as a new user writes it in parent: the script in
    DIR/tools, the definition (as yet without "filesystem") in DIR/defs.
    Returns (definition, tools directory, definitions directory)."""
    definition, script = man_example()
    base = temp_dir(testcase, parent)
    tools = mkdir(os.path.join(base, "tools"))
    write(os.path.join(tools, "greet.py"), script)
    definition = json.loads(json.dumps(definition).replace(MAN_TOOLS, tools))
    definition.pop("filesystem")
    defs = mkdir(os.path.join(base, "defs"))
    write(os.path.join(defs, "greet.json"), json.dumps(definition))
    return definition, tools, defs


def suggested(line):
    """The key a --check problem says to add: {"read": [...]}."""
    m = re.search(r'show it with "filesystem": (\{.*\})$', line)
    return json.loads(m.group(1)) if m else None


class FirstTool(unittest.TestCase):
    NOBODY = False

    def setUp(self):
        harness.require_env()
        if not TOOLEXEC:
            raise unittest.SkipTest("environment lacks TOOLEXEC (run through meson test)")

    def daemon(self, definition):
        if self.NOBODY:
            d = nobody_daemon([definition])
        else:
            d = Daemon([definition])
        self.addCleanup(d.stop)
        return d

    def checked(self, parent):
        """The example placed in parent and made to pass --check the way
        --check says."""
        definition, tools, defs = place(self, parent)
        status, lines = check(defs)
        script = os.path.join(tools, "greet.py")
        if parent == "/srv":
            self.assertEqual(status, 0, lines)
            return definition
        self.assertEqual(status, 1, lines)
        mine = [l for l in lines if "command[1]: the script %s:" % script in l]
        self.assertEqual(len(mine), 1, lines)
        self.assertIn("(/home is hidden)", mine[0])
        fs = suggested(mine[0])
        self.assertEqual(fs, {"read": [tools]}, mine[0])
        definition["filesystem"] = fs
        write(os.path.join(defs, "greet.json"), json.dumps(definition))
        status, lines = check(defs)
        self.assertEqual(status, 0, lines)
        return definition

    def calls_succeed(self, d):
        # socat, as contrib/socat/batch.sh does
        req = json.dumps({"op": "run", "batch": "b", "calls": [
            {"id": "c0", "name": "greet", "arguments": {"who": "socat"}}]})
        p = subprocess.run(["socat", "-t", "30", "-", "UNIX-CONNECT:" + d.sock], input=req + "\n",
                           capture_output=True, text=True, timeout=WAIT)
        events = [json.loads(l) for l in p.stdout.splitlines()]
        self.assertEqual(events[-1]["event"], "batch_completed", p.stdout)
        self.assertEqual(events[-1]["messages"][0]["content"].strip(), "Hello, socat!",
                         events)
        # the CLI
        p = subprocess.run([TOOLEXEC, "--socket", d.sock, "call", "greet", '{"who": "cli"}'],
                           capture_output=True, text=True, timeout=WAIT,
                           stdin=subprocess.DEVNULL)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "Hello, cli!"), p.stderr)
        # MCP mode
        self.assertEqual(mcp_call(d.sock, "greet", {"who": "mcp"}), "Hello, mcp!")

    def test_home(self):
        self.calls_succeed(self.daemon(self.checked("/home")))

    def test_srv(self):
        self.calls_succeed(self.daemon(self.checked("/srv")))

    def test_hidden_script_named_in_each_failed_call(self):
        definition, tools, _ = place(self, "/home")
        # the harness would show its own directory only
        definition["filesystem"] = harness.with_tree({})
        d = self.daemon(definition)
        c = d.client()
        script = os.path.join(tools, "greet.py")
        for i in range(2):
            res = c.run([{"id": "c%d" % i, "name": "greet", "arguments": {"who": "x"}}])
            te = res.result("c%d" % i)["tool_error"]
            self.assertEqual(te["reason"], "handler_exit", te)
            for text in (te["message"], te["cause"].get("view", "")):
                self.assertIn(script, text)
                self.assertIn('"filesystem": {"read": ["%s"]}' % tools, text)
        warned = [l for l in d.stderr().splitlines()
                  if "command[1]: the script %s" % script in l and ": stderr: " not in l]
        self.assertEqual(len(warned), 1, d.stderr())  # at load, not at each call


class FirstToolNobody(FirstTool):
    NOBODY = True


def mcp_call(sock, name, arguments):
    """One tools/call through `toolexec mcp`; the text of its result."""
    proc = subprocess.Popen([TOOLEXEC, "--socket", sock, "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": name, "arguments": arguments}}]
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
        proc.stdin.flush()
        buf, end = b"", time.monotonic() + WAIT
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == 2:
                    assert "result" in msg, msg
                    assert not msg["result"].get("isError"), msg
                    return msg["result"]["content"][0]["text"].strip()
            left = end - time.monotonic()
            r, _, _ = select.select([proc.stdout], [], [], max(left, 0))
            assert r, "no answer from toolexec mcp: %r" % buf
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, "toolexec mcp ended: %r" % proc.stderr.read()
            buf += chunk
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()


class CheckBadPaths(unittest.TestCase):
    """Each path the view hides is named with the key that shows it."""

    def setUp(self):
        harness.require_env()
        self.home = temp_dir(self, "/home")
        self.tools = mkdir(os.path.join(self.home, "tools"))
        self.defs = mkdir(os.path.join(self.home, "defs"))
        write(os.path.join(self.tools, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)

    def one_problem(self, definition, key, path, toolexecd=None, shown=None):
        write(os.path.join(self.defs, "t.json"), json.dumps(definition))
        status, lines = check(self.defs, toolexecd)
        self.assertEqual(status, 1, lines)
        mine = [l for l in lines if "/t.json: %s: " % key in l]
        self.assertEqual(len(mine), 1, lines)
        self.assertIn(path, mine[0])
        self.assertEqual(suggested(mine[0]), {"read": [shown or os.path.dirname(path)]}, mine[0])
        self.assertRegex(lines[-1], r"1 problem in 1 of 1 definition")

    def test_command_behind_a_link(self):
        # the view shows a command where no link is on its way
        os.symlink(self.tools, os.path.join(self.home, "link"))
        self.one_problem({"name": "t", "command": [os.path.join(self.home, "link", "run.sh")],
                          "protocol": "plain"}, "command", os.path.join(self.tools, "run.sh"))

    def test_script_argument(self):
        write(os.path.join(self.tools, "t.py"), "print(1)\n")
        self.one_problem({"name": "t", "command": ["python3", os.path.join(self.tools, "t.py")],
                          "protocol": "plain"}, "command[1]", os.path.join(self.tools, "t.py"))

    def test_relative_command(self):
        mkdir(os.path.join(self.home, "bin"))
        os.symlink(os.path.join(self.tools, "run.sh"), os.path.join(self.home, "bin", "run"))
        self.one_problem({"name": "t", "command": ["../bin/run"], "protocol": "plain"},
                         "command", os.path.join(self.tools, "run.sh"))

    def test_pythonpath(self):
        srv = temp_dir(self, "/srv")
        write(os.path.join(srv, "t.py"), "print(1)\n")
        self.one_problem({"name": "t", "command": ["python3", os.path.join(srv, "t.py")],
                          "protocol": "plain", "env": {"PYTHONPATH": self.tools}},
                         "env.PYTHONPATH", self.tools, shown=self.tools)

    def test_library_of_a_daemon_in_a_build_tree(self):
        # the daemon run from a build tree under /tmp: its libtoolexec, which
        # a warm template loads, is not in the view
        exe, lib = build_copy(self)
        srv = temp_dir(self, "/srv")
        write(os.path.join(srv, "w.py"), "print(1)\n")
        self.one_problem({"name": "t", "command": ["python3", os.path.join(srv, "w.py")],
                          "start": "warm"}, "start",
                         os.path.realpath(os.path.join(lib, "libtoolexec.so.0")), toolexecd=exe)


def build_copy(testcase):
    """The daemon, its init and its libtoolexec copied into a build tree
    under /tmp, which the default view leaves out; (toolexecd, lib dir)."""
    src = os.path.dirname(os.path.realpath(harness.TOOLEXECD))
    lib = os.path.join(os.path.dirname(src), "lib")
    real = [f for f in os.listdir(lib) if re.fullmatch(r"libtoolexec\.so\.\d+\.\d+\.\d+", f)] \
        if os.path.isdir(lib) else []
    if not real or not os.path.exists(os.path.join(src, "toolexecd-init")):
        raise unittest.SkipTest("the daemon is not run from a build tree")
    build = tempfile.mkdtemp(prefix="te-build-", dir="/tmp")
    os.chmod(build, 0o755)
    testcase.addCleanup(shutil.rmtree, build, ignore_errors=True)
    mkdir(os.path.join(build, "daemon"))
    mkdir(os.path.join(build, "lib"))
    for exe in ("toolexecd", "toolexecd-init"):
        shutil.copy2(os.path.join(src, exe), os.path.join(build, "daemon"))
    shutil.copy2(os.path.join(lib, real[0]), os.path.join(build, "lib"))
    os.symlink(real[0], os.path.join(build, "lib", "libtoolexec.so.0"))
    return os.path.join(build, "daemon", "toolexecd"), os.path.join(build, "lib")


class WarmFromABuildTree(unittest.TestCase):
    """A warm Python tool of a daemon run from a build tree under /tmp
    (its libtoolexec hidden) is warned of once at load; its template, which
    cannot load the library, is told of once, not at every restart; with
    the key the warning names, the template starts."""

    def daemon(self, fs):
        exe, lib = build_copy(self)
        from test_warm import PYTHON, python_loads_lib
        if not python_loads_lib():
            self.skipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        src = os.path.realpath(os.path.join(HERE, "..", ".."))
        tool = {"name": "calc", "description": "x", "start": "warm",
                "schema": {"type": "object"},
                "command": [PYTHON, os.path.join(src, "contrib", "tools", "python", "calc.py")],
                "env": {"PYTHONPATH": os.path.join(src, "contrib", "python"),
                        "PYTHONDONTWRITEBYTECODE": "1"},
                "filesystem": harness.with_tree(fs(lib))}

        class Copy(Daemon):
            def command(self):
                return [exe] + super().command()[1:]
        d = Copy([tool], args=["--log-format", "json", "--log-level", "debug"],
                 env={"LD_LIBRARY_PATH": lib})
        self.addCleanup(d.stop)
        return d, lib

    def logged(self, d, text):
        out = []
        for line in d.stderr().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if text in rec.get("msg", ""):
                out.append(rec["level"])
        return out

    def test_hidden_library_said_once(self):
        d, lib = self.daemon(lambda lib: {})
        harness.deadline_wait(lambda: len(self.logged(d, "restarting it")) >= 4,
                              what="the template to be restarted four times")
        self.assertEqual(len(self.logged(d, "start: the SDK's library %s/" % lib)), 1)
        for text in ("libtoolexec (not found)", "restarting it"):
            said = [lv for lv in self.logged(d, text) if lv != "debug"]
            self.assertEqual(len(said), 1, (text, d.stderr()))

    def test_shown_library_starts(self):
        from test_warm import wait_ready
        d, lib = self.daemon(lambda lib: {"read": [lib]})
        wait_ready(d, "calc")
        self.assertEqual(self.logged(d, "the SDK's library"), [])


class RelativeCommand(unittest.TestCase):
    """"../bin/x" beside the definitions runs (the man page's "./bin/tool")."""
    NOBODY = False

    def test_runs(self):
        harness.require_env()
        d = (harness.NobodyDaemon if self.NOBODY else Daemon)(start=False)
        if self.NOBODY:
            harness.give_work_dir(d)
        bindir = mkdir(d.path("bin"))
        write(os.path.join(bindir, "hello.sh"), "#!/bin/sh\necho relative\n", 0o755)
        d.add_tool({"name": "rel", "command": ["../bin/hello.sh"], "protocol": "plain"})
        harness.started(d)
        self.addCleanup(d.stop)
        status, lines = check(d.tools_dir)
        self.assertEqual(status, 0, lines)
        res = d.client().run([{"id": "a", "name": "rel"}])
        self.assertEqual(res.content("a").strip(), "relative", res.result("a"))


class RelativeCommandNobody(RelativeCommand):
    NOBODY = True


if __name__ == "__main__":
    unittest.main()
