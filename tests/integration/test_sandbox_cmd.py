"""toolexec sandbox -- COMMAND: one command run with a tool
call's confinement, no daemon. Real processes: the CLI runs the engine
(the daemon's --sandbox-run without it) in its own process from its
module toolexec-sandbox.so, else execs toolexecd-sandbox; either builds
the sandbox with the daemon's own code. Each test runs as the user
running the suite (root in CI) and again as nobody (an unprivileged user:
user namespaces, no cgroup)."""

import http.server
import json
import os
import pty
import pwd
import shutil
import subprocess
import tempfile
import threading
import unittest

import harness

TOOLEXEC = os.environ.get("TOOLEXEC", "")
# the system one: a pyenv shim under /root is hidden, as every home is
PY = "/usr/bin/python3"
# a place the default view shows (read-only) and does not hide, unlike /tmp


def _visible():
    """The build directory, unless the view leaves it out (a package build
    under /tmp): then a directory of ours under /var/cache, which it shows."""
    d = os.path.dirname(os.path.abspath(harness.TOOLEXECD or TOOLEXEC))
    if not any(d == p or d.startswith(p + "/") for p in harness.VIEW_LEFT_OUT):
        return d
    return "/var/cache/toolexecd-tests"  # made by each class, removed by the last


VISIBLE = _visible()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def http_server():
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


class Runner:
    """Runs toolexec sandbox; prefix() and env() say as whom."""

    as_nobody = False

    @classmethod
    def setUpClass(cls):
        os.makedirs(VISIBLE, 0o755, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="sbx-", dir=VISIBLE)
        os.chmod(cls.tmp, 0o755)
        cls.runtime = tempfile.mkdtemp(prefix="sbx-rt-")
        cls.http = http_server()
        cls.port = cls.http.server_address[1]
        # a second port with nothing allowed on it (and nothing listening)
        other = http_server()
        cls.other_port = other.server_address[1]
        cls.other = other
        if cls.as_nobody:
            nb = pwd.getpwnam("nobody")
            os.chown(cls.runtime, nb.pw_uid, nb.pw_gid)
        os.chmod(cls.runtime, 0o700)

    @classmethod
    def tearDownClass(cls):
        cls.http.shutdown()
        cls.other.shutdown()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if VISIBLE == "/var/cache/toolexecd-tests":
            try:
                os.rmdir(VISIBLE)  # the last class out
            except OSError:
                pass
        shutil.rmtree(cls.runtime, ignore_errors=True)

    def owned_dir(self, name):
        """A directory the command's user may write to (root runs it as
        toolexec or nobody), outside /tmp (private in the sandbox)."""
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        os.chmod(d, 0o777)
        return d

    def prefix(self):
        if not self.as_nobody:
            return []
        nb = pwd.getpwnam("nobody")
        return ["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid, "--clear-groups"]

    def sandbox(self, *args, stdin=b"", **kw):
        env = harness.sandbox_env(XDG_RUNTIME_DIR=self.runtime)
        p = subprocess.run(self.prefix() + [TOOLEXEC, "sandbox"] + list(args), input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=60 * harness.SCALE, **kw)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def json_summary(self, err):
        lines = [l for l in err.splitlines() if l.startswith("{")]
        self.assertTrue(lines, err)
        return json.loads(lines[-1])


class Base(Runner):
    """The tests."""

    # ---- exit status, signals, stdio ----

    def test_exit_status_is_the_commands(self):
        for code in (0, 1, 7, 42):
            rc, _, err = self.sandbox("--", "/bin/sh", "-c", "exit %d" % code)
            self.assertEqual(rc, code, err)

    def test_signal_death_is_128_plus_n(self):
        rc, _, err = self.sandbox("--", "/bin/sh", "-c", "kill -TERM $$")
        self.assertEqual(rc, 128 + 15, err)
        rc, _, err = self.sandbox("--json", "--", "/bin/sh", "-c", "kill -SEGV $$")
        self.assertEqual(rc, 128 + 11, err)
        self.assertEqual(self.json_summary(err)["signal"], 11)

    def test_stdin_is_passed_through(self):
        data = b"line one\nline two\n" + bytes(range(256)) * 64
        p = subprocess.run(self.prefix() + [TOOLEXEC, "sandbox", "--", "/bin/cat"], input=data,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=dict(os.environ, XDG_RUNTIME_DIR=self.runtime),
                           timeout=60 * harness.SCALE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, data)

    def test_stdout_and_stderr_are_passed_through(self):
        rc, out, err = self.sandbox("--", "/bin/sh", "-c", "echo to-out; echo to-err >&2")
        self.assertEqual((rc, out), (0, "to-out\n"), err)
        self.assertIn("to-err\n", err)
        self.assertNotIn("to-err", out)

    def test_a_terminal_is_the_commands(self):
        master, slave = pty.openpty()
        try:
            p = subprocess.run(self.prefix() + [TOOLEXEC, "sandbox", "--", "/bin/sh", "-c",
                                                "test -t 0 && test -t 1 && echo tty"],
                               stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                               env=dict(os.environ, XDG_RUNTIME_DIR=self.runtime),
                               timeout=60 * harness.SCALE)
            os.close(slave)
            slave = -1
            out = b""
            try:
                while True:
                    chunk = os.read(master, 4096)
                    if not chunk:
                        break
                    out += chunk
            except OSError:  # EIO: the other side closed
                pass
        finally:
            if slave >= 0:
                os.close(slave)
            os.close(master)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"tty", out)

    # ---- the file system ----

    def test_write_outside_write_paths_is_denied(self):
        w = self.owned_dir("w-" + self.id().rsplit(".", 1)[-1])
        o = self.owned_dir("o-" + self.id().rsplit(".", 1)[-1])
        rc, out, err = self.sandbox("--write", w, "--", "/bin/sh", "-c",
                                    "echo a > %s/ok && echo wrote-ok; echo b > %s/no && "
                                    "echo wrote-no" % (w, o))
        self.assertIn("wrote-ok", out, err)
        self.assertNotIn("wrote-no", out, err)
        self.assertNotEqual(rc, 0)
        self.assertTrue(os.path.exists(os.path.join(w, "ok")))
        self.assertFalse(os.path.exists(os.path.join(o, "no")))
        # what the command saw (and, as root, its summary: test_fs_denials.py)
        self.assertRegex(err, "Read-only file system|Permission denied")

    def test_hidden_path_cannot_be_read(self):
        d = self.owned_dir("h-" + self.id().rsplit(".", 1)[-1])
        secret = os.path.join(d, "secret")
        with open(secret, "w") as f:
            f.write("s3cret\n")
        os.chmod(secret, 0o644)
        rc, out, err = self.sandbox("--", "/bin/cat", secret)
        self.assertEqual((rc, out), (0, "s3cret\n"), err)  # visible without --hide
        rc, out, err = self.sandbox("--hide", secret, "--", "/bin/cat", secret)
        self.assertNotEqual(rc, 0)
        self.assertNotIn("s3cret", out + err)

    # ---- the network ----

    def connect_script(self, port):
        return ("import socket\n"
                "try:\n"
                "    socket.create_connection(('127.0.0.1', %d), timeout=10).close()\n"
                "    print('connected')\n"
                "except OSError as e:\n"
                "    print('refused', e)\n" % port)

    def test_net_off_blocks_a_connect(self):
        rc, out, err = self.sandbox("--net", "host", "--", PY, "-c", self.connect_script(self.port))
        self.assertIn("connected", out, err)  # the server is there
        rc, out, err = self.sandbox("--net", "off", "--json", "--", PY, "-c",
                                    self.connect_script(self.port))
        # its own lo, not the host's: nothing listens there (and nothing
        # was refused, so no denial; test_sandbox_net.py)
        self.assertIn("refused", out, err)
        self.assertNotIn("connected", out)
        self.assertEqual(self.json_summary(err)["denied"], [], err)

    def test_net_allow_list_goes_through_the_proxy(self):
        script = ("import urllib.request, os\n"
                  "assert os.environ['HTTP_PROXY']\n"
                  "print(urllib.request.urlopen('http://127.0.0.1:%d/', timeout=10).read()"
                  ".decode(), end='')\n"
                  "try:\n"
                  "    urllib.request.urlopen('http://127.0.0.1:%d/', timeout=10)\n"
                  "    print('other: reached')\n"
                  "except Exception as e:\n"
                  "    print('other: refused', e)\n" % (self.port, self.other_port))
        summary = os.path.join(self.owned_dir("j-" + self.id().rsplit(".", 1)[-1]), "s.json")
        rc, out, err = self.sandbox("--net", "127.0.0.1:%d" % self.port, "--json=" + summary,
                                    "--", PY, "-c", script)
        self.assertEqual(rc, 0, err)
        self.assertIn("hello from the host", out)
        self.assertIn("other: refused", out)
        self.assertIn("denied: network 127.0.0.1:%d" % self.other_port, err)
        with open(summary) as f:
            s = json.load(f)
        self.assertEqual(s["status"], 0)
        self.assertIn({"kind": "network", "host": "127.0.0.1", "port": self.other_port},
                      s["denied"])
        # a direct connect, around the proxy, has no network to go to
        rc, out, err = self.sandbox("--net", "127.0.0.1:%d" % self.port, "--", PY, "-c",
                                    self.connect_script(self.port))
        self.assertIn("refused", out, err)

    # ---- system calls, limits ----

    def test_denied_syscall_is_reported(self):
        script = "import ctypes, os; print(ctypes.CDLL(None).ptrace(0, 0, 0, 0))"
        rc, out, err = self.sandbox("--json", "--", PY, "-c", script)
        self.assertEqual((rc, out.strip()), (0, "-1"), err)
        self.assertIn("denied: system call ptrace", err)
        self.assertIn({"kind": "syscall", "name": "ptrace"}, self.json_summary(err)["denied"])
        rc, out, err = self.sandbox("--syscalls", "off", "--", PY, "-c", script)
        self.assertNotIn("denied", err)

    def test_timeout_kills(self):
        rc, out, err = self.sandbox("--timeout", "0.3", "--json", "--", "/bin/sleep", "60")
        self.assertEqual(rc, 124, err)
        self.assertIn("timed out", err)
        self.assertTrue(self.json_summary(err)["timed_out"])

    def test_memory_limit(self):
        script = "x = bytearray(160 << 20); print('allocated')"
        rc, out, err = self.sandbox("--", PY, "-c", script)
        self.assertEqual((rc, out), (0, "allocated\n"), err)  # fits without the limit
        rc, out, err = self.sandbox("--memory", "48M", "--", PY, "-c", script)
        self.assertNotEqual(rc, 0)
        self.assertNotIn("allocated", out)

    def test_the_command_gets_no_descriptor_but_0_1_2(self):
        # none of the engine's (run in toolexec's own process, or exec'd)
        # nor of its caller's: here a pipe's end the caller left inheritable
        script = ("import os\n"
                  "fds = []\n"
                  "for fd in range(3, 1024):\n"
                  "    try:\n"
                  "        os.fstat(fd)\n"
                  "        fds.append(fd)\n"
                  "    except OSError:\n"
                  "        pass\n"
                  "print(fds)\n")
        r, w = os.pipe()
        try:
            os.set_inheritable(w, True)
            rc, out, err = self.sandbox("--", PY, "-c", script, pass_fds=(w,))
        finally:
            os.close(r)
            os.close(w)
        self.assertEqual((rc, out), (0, "[]\n"), err)

    def test_bad_usage_is_125(self):
        self.assertEqual(self.sandbox("--net", "", "--", "/bin/true")[0], 125)
        self.assertEqual(self.sandbox("--no-such-option", "--", "/bin/true")[0], 125)
        rc, _, err = self.sandbox("--", "/no/such/command")
        self.assertEqual(rc, 127, err)


@unittest.skipUnless(TOOLEXEC, "TOOLEXEC not set")
class AsCaller(Base, unittest.TestCase):
    pass


@unittest.skipUnless(TOOLEXEC and os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class AsNobody(Base, unittest.TestCase):
    as_nobody = True


COMPLETION = os.path.join(harness.HERE, "..", "..", "contrib", "bash-completion", "toolexec")


@unittest.skipUnless(TOOLEXEC and harness.TOOLEXECD and shutil.which("readelf"),
                     "needs the build's toolexec, toolexecd and readelf")
class Engine(unittest.TestCase):
    """toolexec runs toolexecd-sandbox's engine, alone, in its own process
    (its module) or exec'd: none of the daemon's libraries it never uses
    are loaded at each run. Without it beside the daemon, the daemon's
    --sandbox-run does the same."""

    ENGINE = os.path.join(os.path.dirname(harness.TOOLEXECD or "."), "toolexecd-sandbox")

    @staticmethod
    def needed(path):
        p = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=True)
        return [l.split("[", 1)[1].rstrip("]") for l in p.stdout.decode().splitlines()
                if "(NEEDED)" in l]

    def test_the_engine_needs_none_of_the_daemons_unused_libraries(self):
        needed = self.needed(self.ENGINE)
        self.assertIn("libseccomp.so.2", needed)
        for lib in ("libgnutls", "libsystemd", "libmicrohttpd", "libgcrypt", "libp11-kit"):
            self.assertFalse([n for n in needed if n.startswith(lib)], (lib, needed))

    def test_the_engine_has_libtoolexecs_objects_in_it(self):
        # linked in, only those it reaches: no libtoolexec.so to map and
        # no symbol of it to look up at each run
        needed = self.needed(self.ENGINE)
        self.assertFalse([n for n in needed if n.startswith("libtoolexec")], needed)
        # and so no RUNPATH: the loader would try each of its directories
        # for every library before the system's
        p = subprocess.run(["readelf", "-d", self.ENGINE], stdout=subprocess.PIPE, check=True)
        self.assertNotIn(b"(RUNPATH)", p.stdout)
        self.assertNotIn(b"(RPATH)", p.stdout)

    def test_the_engine_opens_libbpf_only_for_a_watch(self):
        # as root with a --user it opens libbpf for the refusal watch
        # (test_fs_denials.py); a run that loads none never maps it, nor
        # libelf and zlib under it
        needed = self.needed(self.ENGINE)
        for lib in ("libbpf", "libelf", "libz"):
            self.assertFalse([n for n in needed if n.startswith(lib)], (lib, needed))

    def test_the_cli_has_libtoolexecs_objects_in_it(self):
        # toolexec is exec'd at each toolexec sandbox too: no libtoolexec.so
        # to find and map, no RUNPATH to search first for every library
        self.assertFalse([n for n in self.needed(TOOLEXEC) if n.startswith("libtoolexec")])
        p = subprocess.run(["readelf", "-d", TOOLEXEC], stdout=subprocess.PIPE, check=True)
        self.assertNotIn(b"(RUNPATH)", p.stdout)

    def test_the_cli_loads_the_http_fronts_libraries_only_to_serve(self):
        # toolexec mcp --listen loads them (toolexec-mcp-http.so, which
        # test_mcp_http runs); every other command, sandbox first, not
        needed = self.needed(TOOLEXEC)
        for lib in ("libgnutls", "libmicrohttpd", "libcjose", "libcrypto", "libhttp_parser"):
            self.assertFalse([n for n in needed if n.startswith(lib)], (lib, needed))

    def test_neither_cli_nor_engine_loads_libm(self):
        # libtoolexec's one libm call (nearbyint, in its JSON numbers) is
        # gone: a library less to load at each start of each
        if any(n.startswith(("libasan.", "libubsan.")) for n in self.needed(TOOLEXEC)):
            self.skipTest("a sanitized build: its instrumentation needs libm itself")
        for path in (TOOLEXEC, self.ENGINE, self.MODULE):
            self.assertFalse([n for n in self.needed(path) if n.startswith("libm.")], path)

    def test_http_parser_is_opened_only_for_an_egress_proxy(self):
        # linked by neither: a run without an allow-list (here --net off,
        # the default) never maps it; one with one parses its requests
        # (test_net_allow_list_goes_through_the_proxy)
        for path in (self.ENGINE, self.MODULE):
            self.assertFalse([n for n in self.needed(path) if n.startswith("libhttp_parser")],
                             path)
        exe, mapped, rc, out, err = self.running()
        self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)
        self.assertEqual([l for l in self.maps.splitlines() if "libhttp_parser" in l], [])

    def test_a_proxy_without_http_parser_is_said_and_nothing_runs(self):
        d = tempfile.mkdtemp(prefix="te-noparser.")
        self.addCleanup(shutil.rmtree, d)
        for soname in ("libhttp_parser.so.2.9", "libhttp_parser.so.2", "libhttp_parser.so"):
            with open(os.path.join(d, soname), "wb") as f:
                f.write(b"not an ELF object\n")
        p = subprocess.run([TOOLEXEC, "sandbox", "--net", "127.0.0.1:9", "--", "/bin/echo", "ran"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE,
                           env=harness.sandbox_env(LD_LIBRARY_PATH=d))
        err = p.stderr.decode()
        self.assertEqual((p.returncode, p.stdout), (125, b""), err)
        self.assertIn("egress proxy cannot parse requests", err)

    def run_sandbox(self, argv, **env):
        return subprocess.run([TOOLEXEC, "sandbox", "--"] + argv, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=harness.sandbox_env(**env))

    def test_a_host_without_the_namespaces_is_probed_after_all(self):
        """Nothing is probed ahead: the call's own clone finds a layer
        missing (here the outer sandbox's filter refuses every namespace),
        and the run is set up again as the daemon would, probed: the view
        it cannot have refused as ever, not a failed clone."""
        d = os.path.dirname(os.path.dirname(os.path.abspath(TOOLEXEC)))
        if any(d == p or d.startswith(p + "/") for p in harness.VIEW_LEFT_OUT):
            self.skipTest("the build is outside the default view")
        # a sanitized inner engine: LeakSanitizer stops its threads with
        # ptrace at exit, which the outer sandbox refuses
        nolsan = {"ASAN_OPTIONS": "detect_leaks=0"} if harness.SANITIZED else {}
        p = self.run_sandbox([TOOLEXEC, "sandbox", "--", "/bin/echo", "hi"], **nolsan)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 125, err)
        self.assertIn("no view of their own", err)
        self.assertNotIn("could not set it up", err)

    def test_the_probed_runs_marker_is_not_the_commands(self):
        p = self.run_sandbox(["/bin/sh", "-c", "echo ${TOOLEXECD_SANDBOX_PROBED-unset}"],
                             TOOLEXECD_SANDBOX_PROBED="1")
        self.assertEqual((p.returncode, p.stdout), (0, b"unset\n"), p.stderr)

    MODULE = os.path.join(os.path.dirname(harness.TOOLEXECD or "."), "toolexec-sandbox.so")

    def running(self, env=None):
        """toolexec sandbox's process while its command runs: its exe and
        whether the module is mapped in it; then its exit status and
        output."""
        p = subprocess.Popen([TOOLEXEC, "sandbox", "--", "/bin/sh", "-c",
                              "echo ready; read x; echo done; exit 3"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env or harness.sandbox_env())
        try:
            line = p.stdout.readline()
            self.assertEqual(line, b"ready\n", p.stderr.read() if not line else line)
            exe = os.readlink("/proc/%d/exe" % p.pid)
            with open("/proc/%d/maps" % p.pid) as f:
                self.maps = f.read()
            mapped = any(l.endswith("/toolexec-sandbox.so") for l in self.maps.splitlines())
            out, err = p.communicate(b"go\n", timeout=60 * harness.SCALE)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        return exe, mapped, p.returncode, line + out, err.decode()

    def linked_engine_dir(self, module):
        """A directory with the daemon and its engine linked in, and the
        module as given: "link" (the build's), bytes (a file of them), or
        None (none)."""
        d = tempfile.mkdtemp(prefix="te-engine.")
        self.addCleanup(shutil.rmtree, d)
        for name in ("toolexecd", "toolexecd-sandbox"):
            os.symlink(os.path.abspath(os.path.join(os.path.dirname(self.MODULE), name)),
                       os.path.join(d, name))
        if module == "link":
            os.symlink(os.path.abspath(self.MODULE), os.path.join(d, "toolexec-sandbox.so"))
        elif module is not None:
            with open(os.path.join(d, "toolexec-sandbox.so"), "wb") as f:
                f.write(module)
        return d

    def test_the_cli_runs_the_engine_in_its_own_process(self):
        # its module, toolexec-sandbox.so: no second exec, no second start
        # of the loader
        exe, mapped, rc, out, err = self.running()
        self.assertEqual(exe, os.path.realpath(TOOLEXEC))
        self.assertTrue(mapped)
        self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)

    @unittest.skipUnless(os.path.exists("/usr/lib/locale/C.utf8/LC_CTYPE"), "needs C.UTF-8")
    def test_the_cli_loads_no_locale_for_a_sandbox(self):
        # toolexec's other commands take the locale's character set for
        # their tables; sandbox shows no text of its own, and its engine
        # runs in the C locale: nothing of the locale's is loaded
        exe, mapped, rc, out, err = self.running(harness.sandbox_env(LANG="C.UTF-8"))
        self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)
        self.assertEqual([l for l in self.maps.splitlines() if "/usr/lib/locale/" in l], [])

    def test_the_modules_helpers_are_beside_the_engine_not_the_cli(self):
        # toolexecd-init is found beside the engine's program, through its
        # links (as /proc/self/exe's): here in none of the link's directory,
        # toolexec's or the installed one
        d = self.linked_engine_dir("link")
        exe, mapped, rc, out, err = self.running(
            harness.sandbox_env(TOOLEXECD=os.path.join(d, "toolexecd")))
        self.assertEqual((exe, mapped), (os.path.realpath(TOOLEXEC), True))
        self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)
        self.assertNotIn("toolexecd-init not found", err)

    def test_without_a_loadable_module_the_engine_is_execd(self):
        for module in (None, b"not an ELF object\n"):
            d = self.linked_engine_dir(module)
            exe, mapped, rc, out, err = self.running(
                harness.sandbox_env(TOOLEXECD=os.path.join(d, "toolexecd")))
            self.assertEqual(exe, os.path.realpath(os.path.join(d, "toolexecd-sandbox")), module)
            self.assertFalse(mapped, module)
            self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)

    def module_of_another_version(self, path):
        """A copy of the module whose toolexec_sandbox_version says 9.9.9:
        its bytes rewritten where its symbol's section puts it."""
        sym = subprocess.run(["readelf", "-sW", self.MODULE], stdout=subprocess.PIPE,
                             check=True).stdout.decode()
        value, size, ndx = next((int(f[1], 16), int(f[2]), f[6]) for f in
                                (l.split() for l in sym.splitlines())
                                if len(f) == 8 and f[7] == "toolexec_sandbox_version")
        secs = subprocess.run(["readelf", "-SW", self.MODULE], stdout=subprocess.PIPE,
                              check=True).stdout.decode()
        for l in secs.splitlines():
            f = l.replace("[ ", "[").split()
            if f and f[0] == "[%s]" % ndx:
                addr, off = int(f[3], 16), int(f[4], 16)
                break
        with open(self.MODULE, "rb") as f:
            data = bytearray(f.read())
        at = value - addr + off
        version = b"9.9.9".ljust(size, b"\0")[:size - 1] + b"\0"
        self.assertNotEqual(bytes(data[at:at + size]), version)
        data[at:at + size] = version
        with open(path, "wb") as f:
            f.write(data)

    def test_the_module_needs_none_of_the_clis_code(self):
        # toolexec (package toolexec) and the module (package toolexecd)
        # may be of different builds: every function of libtoolexec's and
        # the daemon's the module calls is its own, none left for the
        # executable to provide
        sym = subprocess.run(["readelf", "--dyn-syms", "-W", self.MODULE], stdout=subprocess.PIPE,
                             check=True).stdout.decode()
        undefined = [f[7] for f in (l.split() for l in sym.splitlines())
                     if len(f) >= 8 and f[6] == "UND"]
        self.assertTrue(undefined)  # the C library's, at least
        self.assertEqual([n for n in undefined if n.startswith(("te_", "td_"))], [])

    def test_a_module_of_another_version_is_not_run(self):
        # its one interface with toolexec, the argv of its main, is its own
        # version's: the engine is exec'd instead
        d = self.linked_engine_dir(None)
        self.module_of_another_version(os.path.join(d, "toolexec-sandbox.so"))
        exe, mapped, rc, out, err = self.running(
            harness.sandbox_env(TOOLEXECD=os.path.join(d, "toolexecd")))
        self.assertEqual(exe, os.path.realpath(os.path.join(d, "toolexecd-sandbox")))
        self.assertFalse(mapped)
        self.assertEqual((rc, out), (3, b"ready\ndone\n"), err)

    def test_without_it_the_daemon_runs_the_command(self):
        d = tempfile.mkdtemp(prefix="te-engine.")
        try:
            os.symlink(os.path.abspath(harness.TOOLEXECD), os.path.join(d, "toolexecd"))
            env = dict(os.environ, TOOLEXECD=os.path.join(d, "toolexecd"))
            p = subprocess.run([TOOLEXEC, "sandbox", "--", "/bin/sh", "-c", "echo hi; exit 3"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
            self.assertEqual((p.returncode, p.stdout), (3, b"hi\n"), p.stderr)
        finally:
            shutil.rmtree(d)


@unittest.skipUnless(shutil.which("bash"), "needs bash")
class Completion(unittest.TestCase):
    """contrib/bash-completion knows the command, its options and values."""

    def complete(self, *words):
        script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
                  '_toolexec; printf "%s\\n" "${COMPREPLY[@]}"')
        p = subprocess.run(["bash", "-c", script, "bash", COMPLETION] + list(words),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
        return p.stdout.decode().split()

    def test_sandbox(self):
        self.assertIn("sandbox", self.complete("toolexec", "sa"))
        self.assertEqual(self.complete("toolexec", "sandbox", "--ne"), ["--net"])
        self.assertEqual(self.complete("toolexec", "sandbox", "--net", ""), ["off", "host"])
        self.assertEqual(self.complete("toolexec", "sandbox", "--syscalls", "o"), ["off"])
        self.assertIn("sh", self.complete("toolexec", "sandbox", "--", "sh"))


if __name__ == "__main__":
    harness.main()
