"""Shared harness for the toolexecd integration tests (standard library only).

A Daemon makes a temporary directory, writes tool definitions into
TMP/tools, starts the real daemon

    $TOOLEXECD --socket TMP/s.sock --tools TMP/tools --work-dir TMP/work

waits until the socket accepts connections (deadline-bounded retry), hands
out Clients that speak JSON lines, and stops the daemon with SIGTERM,
asserting exit status 0 and a stderr free of sanitizer reports.

Its parts, each imported through this module by the tests:
  harness_paths.py   where the trees are, the views that show them, and a
                     way through a directory closed to other users above
                     them (a clone in a `mktemp -d`), opened at import
  harness_procs.py   deadline-bounded waits, a call's processes by a token
  harness_events.py  BatchResult: a batch's events checked against the spec

Environment (set by tests/integration/meson.build):
  TOOLEXECD       the daemon executable
  TE_TESTWORKER   tests/workers/testworker
  TE_WORKERS_SRC  the tests/workers source directory (shell scripts)
  TE_PROTO_DIR    the proto/ source directory
  TE_TIMEOUT_SCALE  optional factor for every wait (slow machines)

Run one file: meson test -C build test_errors --print-errorlogs, or export the
variables above and run python3 tests/integration/test_errors.py [-k NAME].
"""

import atexit
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import weakref

# harness_*: the harness's other parts; what the tests import from them
# they import from here
from harness_events import (PER_CALL_LAST, RESERVED_HALTS, TERMINAL, BatchResult,  # noqa: F401
                            GrammarError, call_id_of)
from harness_paths import (HERE, TESTWORKER, TOOLEXECD, VIEW_LEFT_OUT, leads_to_tree,  # noqa: F401
                           reach_trees, sandbox_env, tree_closed, tree_reads, with_tree)
from harness_procs import (SCALE, WAIT, assert_token_gone, deadline_wait, kill_token,  # noqa: F401
                           new_token, pids_with_token, spare_dirs, spare_pids,
                           wait_token_present)

# A tree under a directory closed to other users: opened for the tools
# that run as one, in a mount namespace of this process's (harness_paths).
# Now, while the process has a single thread.
REACHED = reach_trees()
WORKERS_SRC = os.environ.get("TE_WORKERS_SRC", os.path.join(HERE, "..", "workers"))
PROTO_DIR = os.environ.get("TE_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error", "ThreadSanitizer")


def _sanitized(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return b"__asan_init" in data or b"__lsan" in data
    except OSError:
        return False


# Built with the sanitizers (the CI's second pass): the daemon's RSS is
# ASan's shadow and quarantine as much as its own, and a testworker's
# LeakSanitizer calls ptrace() at exit to stop its threads, which the
# default filter refuses and reports in the call's "denied". That entry is
# the test build's, not the tool's: the client below leaves it out of the
# events it returns unless a test sets KEEP_LSAN_PTRACE (test_confine_sys,
# which asks for ptrace itself).
SANITIZED = _sanitized(TOOLEXECD) if TOOLEXECD else False
LSAN_WORKER = _sanitized(TESTWORKER) if TESTWORKER else False
KEEP_LSAN_PTRACE = False
_LSAN_PTRACE = {"kind": "syscall", "name": "ptrace"}


def _drop_lsan_ptrace(ev):
    denied = ev.get("denied")
    if LSAN_WORKER and not KEEP_LSAN_PTRACE and isinstance(denied, list) and \
            _LSAN_PTRACE in denied:
        denied = [d for d in denied if d != _LSAN_PTRACE]
        if denied:
            ev["denied"] = denied
        else:
            del ev["denied"]
    return ev


def require_env(testcase=None):
    missing = [n for n, v in (("TOOLEXECD", TOOLEXECD), ("TE_TESTWORKER", TESTWORKER)) if not v]
    if missing:
        raise unittest.SkipTest("environment lacks " + ", ".join(missing) +
                                " (run through meson test)")
    global _closed_said
    closed = tree_closed()
    if closed and not _closed_said:
        # said, not failed: the tests whose tools run as root still pass
        _closed_said = True
        print("NOTE: %s (mode %04o) keeps every other user out of the trees and the harness "
              "could not open a way through it (above): a tool run as another user (nobody, "
              "toolexec) cannot be executed from them, and the tests that run one fail"
              % (closed, os.stat(closed).st_mode & 0o7777), file=sys.stderr)


_closed_said = False


def worker_tool(name, mode=None, *argv, **fields):
    """A tool definition running the testworker with argv [mode, *argv]."""
    cmd = [TESTWORKER] + ([mode] if mode else []) + list(argv)
    d = {"name": name, "description": "testworker %s" % (mode or "(mode from arguments)"),
         "schema": {"type": "object"}, "command": cmd}
    d.update(fields)
    return d


def script_tool(name, script, **fields):
    """A plain-protocol tool running tests/workers/SCRIPT with /bin/sh."""
    d = {"name": name, "description": "script " + script, "schema": {"type": "object"},
         "command": ["/bin/sh", os.path.join(WORKERS_SRC, script)], "protocol": "plain"}
    d.update(fields)
    return d


def give_work_dir(d):
    """Before start: let the daemon d make its socket in d.tmp and give it
    d.work_dir, which must be its own (a daemon refuses a work directory of
    another user or one others may write to). setpriv's --reuid/--regid in
    d.command() say whom it will run as."""
    import pwd
    os.chmod(d.tmp, 0o777)
    uid = gid = -1
    for a in d.command():
        if a.startswith("--reuid="):
            v = a.split("=", 1)[1]
            uid = int(v) if v.isdigit() else pwd.getpwnam(v).pw_uid
        elif a.startswith("--regid="):
            v = a.split("=", 1)[1]
            gid = int(v) if v.isdigit() else __import__("grp").getgrnam(v).gr_gid
    os.chown(d.work_dir, uid, gid)


def started(d):
    """d (made with start=False) started, or stopped and the error raised."""
    try:
        d.start()
    except BaseException:
        d.stop(check=False)
        raise
    return d


def wait_template(d, name, other_than=None):
    """The warm template of tool name says ready in d's stats (and is not
    the one of pid other_than): its stats entry."""
    def ready():
        t = (d.stats().get("templates") or {}).get(name)
        return t if t and t["state"] == "ready" and t["pid"] != other_than else None
    return deadline_wait(ready, what="the warm template of %s to be ready" % name)


def syscall_names(done):
    """The system calls a tool_execution_completed says were denied, sorted."""
    return sorted(e["name"] for e in done.get("denied", []) if e["kind"] == "syscall")


def nobody_daemon(tools=(), args=(), env=None, start=True):
    """A NobodyDaemon, started unless start is false: the unprivileged
    daemon of the tests that run against both, its socket directory and
    work directory given to it."""
    d = NobodyDaemon(tools=tools, args=args, env=env, start=False)
    give_work_dir(d)
    return started(d) if start else d


def root_and_unprivileged(cases, root=None, unprivileged=None, needs_root=False):
    """The test methods of the class cases run against a root daemon and an
    unprivileged one: the classes RootDaemon and UnprivilegedDaemon, which
    the test module binds under those names

        RootDaemon, UnprivilegedDaemon = harness.root_and_unprivileged(Cases)

    so that unittest finds them and names their tests as it did the pair
    written by hand (RootDaemon.test_x, UnprivilegedDaemon.test_x). cases
    makes its daemons with cls.daemon(tools=(), args=(), env=None,
    start=True) (Daemon, nobody_daemon) or from cls.DAEMON (Daemon,
    NobodyDaemon); root and unprivileged: more attributes of either class.
    The unprivileged one is skipped unless the tests run as root with
    setpriv (to drop the daemon to nobody), the root one too with
    needs_root (it asks for a daemon run as root)."""
    module = sys._getframe(1).f_globals["__name__"]
    made = []
    for name, daemon, cls, more in (("RootDaemon", Daemon, Daemon, root),
                                    ("UnprivilegedDaemon", nobody_daemon, NobodyDaemon,
                                     unprivileged)):
        attrs = {"__module__": module, "__qualname__": name, "DAEMON": cls,
                 "daemon": staticmethod(daemon)}
        attrs.update(more or {})
        made.append(type(name, (cases, unittest.TestCase), attrs))
    made[1] = unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                                  "needs root (to drop to nobody) and setpriv")(made[1])
    if needs_root:
        made[0] = unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")(made[0])
    return tuple(made)


def daemon_own_lines(text):
    """The daemon's stderr without the worker stderr lines it relays
    ("... call ID tool NAME: stderr: TEXT"), which may legitimately mention
    anything."""
    return "\n".join(l for l in text.split("\n") if ": stderr: " not in l)


# Daemons started and not yet stopped or killed. A daemon leads a session of
# its own (so a test can signal it alone), so nothing takes it down with a
# test that dies: meson's timeout (SIGTERM) or a failed set-up left daemons
# and their templates running for the rest of the machine's day. They are
# killed at exit, and SIGTERM now exits through that.
_live_daemons = weakref.WeakSet()


def _kill_live_daemons():
    for d in list(_live_daemons):
        d.kill()


def _on_sigterm(signum, frame):
    _kill_live_daemons()
    os._exit(128 + signum)


atexit.register(_kill_live_daemons)
if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _on_sigterm)


class DaemonFailed(AssertionError):
    pass


class Daemon:
    """One toolexecd instance in its own temporary directory."""

    def __init__(self, tools=(), args=(), start=True, env=None):
        require_env()
        base = None
        # Unix socket paths are limited to 107 bytes.
        if len(tempfile.gettempdir()) > 60:
            base = "/tmp"
        self.tmp = tempfile.mkdtemp(prefix="te-it-", dir=base)
        # Workers may run as an unprivileged user: let them reach tool files.
        os.chmod(self.tmp, 0o755)
        self.sock = os.path.join(self.tmp, "s.sock")
        self.tools_dir = os.path.join(self.tmp, "tools")
        self.work_dir = os.path.join(self.tmp, "work")
        self.stderr_path = os.path.join(self.tmp, "daemon.stderr")
        # the daemon refuses definitions others may change, whatever the umask
        os.mkdir(self.tools_dir, 0o755)
        os.chmod(self.tools_dir, 0o755)
        os.mkdir(self.work_dir)
        self.args = list(args)
        self.env = env
        self._harness_views = {}  # tool files given the harness's view
        self.proc = None
        self.clients = []
        for t in tools:
            self.add_tool(t)
        if start:
            try:
                self.start()
            except BaseException:
                self.kill()
                self.stop(check=False)
                raise

    # -- set-up -----------------------------------------------------------
    # Workers see the host read-only with a /tmp of their own, so
    # the tests' own directory (self.tmp: shared_dir, tmpfile, the files
    # workers leave for the test) is listed under "write" in each definition
    # that does not say what it sees; its tools, work directory and sockets
    # stay hidden below it. test_confine_fs turns this off.
    WRITE_TMP = True

    def add_tool(self, definition, filename=None):
        if filename is None:
            filename = definition["name"] + ".json"
        self._harness_views.pop(filename, None)
        if self.WRITE_TMP and isinstance(definition, dict) and "filesystem" not in definition:
            definition = dict(definition, filesystem=with_tree(
                {"write": [os.path.realpath(self.tmp)]}))
            self._harness_views[filename] = definition
        path = os.path.join(self.tools_dir, filename)
        with open(path, "w") as f:
            if isinstance(definition, str):
                f.write(definition)
            else:
                json.dump(definition, f, indent=1)
        os.chmod(path, 0o644)
        return path

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def shared_dir(self, name):
        """A directory that workers (perhaps another user) can write to."""
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o1777)
        return d

    def command(self):
        return [TOOLEXECD, "--socket", self.sock, "--tools", self.tools_dir,
                "--work-dir", self.work_dir] + self.args

    def spawn(self):
        if self.proc is not None and self.proc.poll() is None:
            # Daemon(...) starts it unless start=False: a second one would
            # be left running, its socket taken over
            raise RuntimeError("this daemon is running already (pid %d)" % self.proc.pid)
        # The view add_tool gave is the harness's, not the test's: under
        # --containment pgroup (no mount namespace) such a tool runs without
        # it, as a definition may say (else refused at load).
        if "pgroup" in self.args:
            for filename, definition in list(self._harness_views.items()):
                if "best_effort" not in definition:
                    self.add_tool(dict(definition, best_effort=["view"]), filename)
        env = dict(os.environ)
        # A marker that must never reach a worker's environment.
        env["TE_DAEMON_ONLY_MARKER"] = "leak"
        if self.env:
            env.update(self.env)
        self._stderr_f = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._stderr_f, stderr=self._stderr_f, env=env,
                                     start_new_session=True)
        _live_daemons.add(self)
        return self.proc

    def start(self):
        self.spawn()
        self.wait_ready()

    def wait_ready(self, timeout=WAIT):
        end = time.monotonic() + timeout
        delay = 0.002
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise DaemonFailed("toolexecd exited with %s during start-up; stderr:\n%s"
                                   % (rc, self.stderr()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.sock)
                return
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            finally:
                s.close()
            if time.monotonic() >= end:
                self.kill()
                raise DaemonFailed("toolexecd did not accept connections within %.1fs; "
                                   "stderr:\n%s" % (timeout, self.stderr()))
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def client(self):
        c = Client(self.sock)
        self.clients.append(c)
        return c

    def stats(self):
        """The reply to {"op": "stats"}, on a client of its own."""
        c = self.client()
        try:
            c.send({"op": "stats"})
            return c.recv()
        finally:
            c.close()
            self.clients.remove(c)

    # -- tear-down --------------------------------------------------------
    def kill(self):
        _live_daemons.discard(self)
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def stop(self, check=True):
        """SIGTERM; the daemon must exit 0 with a clean stderr."""
        for c in self.clients:
            c.close()
        self.clients = []
        problems = []
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=WAIT)
                except subprocess.TimeoutExpired:
                    problems.append("toolexecd did not exit within %.1fs of SIGTERM" % WAIT)
                    self.kill()
            rc = self.proc.returncode
            _live_daemons.discard(self)
            self._stderr_f.close()
            if rc != 0:
                problems.append("toolexecd exit status %s (expected 0)" % rc)
            err = daemon_own_lines(self.stderr())
            for m in SANITIZER_MARKERS:
                if m in err:
                    problems.append("toolexecd stderr contains %r" % m)
        if check and problems:
            raise DaemonFailed("; ".join(problems) + "\n--- toolexecd stderr ---\n" +
                               self.stderr()[-20000:])
        shutil.rmtree(self.tmp, ignore_errors=True)
        return problems

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.stop()
        else:
            self.kill()
            self.stop(check=False)
        return False


class Client:
    """A JSON-lines client with timeouts and per-batch event demultiplexing."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        self.sock.connect(path)
        self.buf = b""
        self.eof = False
        self.log = []        # every event, in arrival order
        self.pending = []    # received but not yet consumed
        self._auto = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj, separators=(",", ":")) + "\n")

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def _read_line(self, timeout):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                return None
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no event from toolexecd within %.1fs (received so far: %s)"
                                     % (timeout, self.log[-10:]))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                self.eof = True
                if self.buf:
                    raise AssertionError("connection closed after a partial line: %r"
                                         % self.buf[:200])
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def _next_raw(self, timeout):
        line = self._read_line(timeout)
        if line is None:
            return None
        try:
            ev = json.loads(line.decode("utf-8"))
        except ValueError as e:
            raise AssertionError("toolexecd sent a line that is not JSON (%s): %r" % (e, line))
        if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
            raise AssertionError("toolexecd sent a reply without an \"event\" key: %r" % line)
        if ev["event"] == "tool_execution_completed":
            _drop_lsan_ptrace(ev)
        self.log.append(ev)
        return ev

    def recv(self, timeout=WAIT):
        """The next event (first those set aside by recv_batch)."""
        if self.pending:
            return self.pending.pop(0)
        ev = self._next_raw(timeout)
        if ev is None:
            raise AssertionError("toolexecd closed the connection; events so far: %s"
                                 % self.log[-10:])
        return ev

    def recv_or_eof(self, timeout=WAIT):
        if self.pending:
            return self.pending.pop(0)
        return self._next_raw(timeout)

    def recv_for(self, pred, timeout=WAIT):
        """The first event (pending or new) satisfying pred; others are kept."""
        for i, ev in enumerate(self.pending):
            if pred(ev):
                return self.pending.pop(i)
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no matching event within %.1fs; recent: %s"
                                     % (timeout, self.log[-10:]))
            ev = self._next_raw(left)
            if ev is None:
                raise AssertionError("toolexecd closed the connection; events so far: %s"
                                     % self.log[-10:])
            if pred(ev):
                return ev
            self.pending.append(ev)

    def recv_batch(self, batch, timeout=WAIT):
        """All events of batch up to and including its terminal event."""
        evs = []
        end = time.monotonic() + timeout
        while True:
            ev = self.recv_for(lambda e: e.get("batch") == batch,
                               timeout=max(0.0, end - time.monotonic()))
            evs.append(ev)
            if ev["event"] in TERMINAL:
                return evs

    def finish_batch(self, batch, timeout=WAIT):
        """Wait for batch's terminal event; return every event of that batch
        this client has received (including ones consumed earlier)."""
        if not any(e.get("batch") == batch and e["event"] in TERMINAL for e in self.log):
            self.recv_batch(batch, timeout=timeout)
        self.pending = [e for e in self.pending if e.get("batch") != batch]
        return [e for e in self.log if e.get("batch") == batch]

    def start_batch(self, calls, batch=None, **opts):
        if batch is None:
            self._auto += 1
            batch = "b%d" % self._auto
        req = {"op": "run", "batch": batch, "calls": calls}
        req.update(opts)
        self.send(req)
        return batch

    def run(self, calls, batch=None, timeout=WAIT, **opts):
        """Run a batch; returns a BatchResult after checking the event grammar."""
        batch = self.start_batch(calls, batch, **opts)
        return BatchResult(calls, self.recv_batch(batch, timeout=timeout))

    def tools(self):
        self.send({"op": "tools"})
        return self.recv_for(lambda e: e.get("event") == "tools")

    def assert_quiet(self):
        """Nothing unsolicited is queued: a tools probe answers next."""
        self.send({"op": "tools"})
        ev = self.recv()
        if ev.get("event") != "tools":
            raise AssertionError("unexpected event before the tools probe's reply: %r" % ev)


class DaemonTestCase(unittest.TestCase):
    """One daemon per test class: TOOLS (a list of definitions) and ARGS."""

    TOOLS = []
    ARGS = []

    @classmethod
    def tools(cls):
        return cls.TOOLS

    @classmethod
    def setUpClass(cls):
        require_env()
        cls.daemon = Daemon(cls.tools(), cls.ARGS)

    @classmethod
    def tearDownClass(cls):
        d = cls.__dict__.get("daemon")
        if d is not None:
            d.stop()

    def setUp(self):
        self.c = self.daemon.client()

    def tearDown(self):
        # Nothing stray (a second terminal event, a late call event) may
        # follow what the test consumed: the next event answers a probe.
        if self._outcome_ok() and not self.c.eof:
            if self.c.pending:
                self.fail("unconsumed events: %s" % self.c.pending)
            self.c.assert_quiet()
        self.c.close()
        if self.c in self.daemon.clients:
            self.daemon.clients.remove(self.c)
        if self.daemon.proc.poll() is not None:
            self.fail("toolexecd died during the test; stderr:\n" + self.daemon.stderr()[-5000:])

    def _outcome_ok(self):
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        if result is None:
            return True
        return not (result.failures or result.errors) or all(
            t is not self for t, _ in list(result.failures) + list(result.errors))

    # -- helpers -------------------------------------------------------------
    def tmpfile(self, name):
        """A path in a per-test directory that workers can write to."""
        d = self.daemon.shared_dir("t-" + self.id().rsplit(".", 1)[-1])
        return os.path.join(d, name)

    def shared_log(self, name):
        """A tmpfile that several calls append to: made here, writable by
        all, since each call may run as a uid of its own (and in a sticky
        directory only its owner may open it with O_CREAT)."""
        path = self.tmpfile(name)
        with open(path, "w"):
            os.chmod(path, 0o666)
        return path

    def assertToolError(self, res, cid, reason, tool=None):
        te = res.tool_error(cid)
        self.assertEqual(te.get("reason"), reason, te)
        self.assertEqual(set(te), {"reason", "message", "tool_name", "tool_call_id", "cause",
                                   "metadata"}, te)
        name = tool or next(c["name"] for c in res.calls if c["id"] == cid)
        self.assertEqual(te["tool_name"], name)
        self.assertEqual(te["tool_call_id"], cid)
        self.assertIsInstance(te["metadata"], dict)
        prefix = "tool error (%s): %s" % (name, reason)
        self.assertTrue(te["message"] == prefix or te["message"].startswith(prefix + ": "),
                        "message %r does not start with %r" % (te["message"], prefix))
        # Encoded content of a tool error: {"error": MESSAGE}.
        self.assertEqual(json.loads(res.content(cid)), {"error": te["message"]})
        self.assertEqual(json.dumps({"error": te["message"]}, separators=(",", ":"),
                                    ensure_ascii=False), res.content(cid))
        return te

    def assertOk(self, res, cid, value=None, content=None):
        r = res.result(cid)
        self.assertEqual(set(r) if isinstance(r, dict) else r, {"ok"}, r)
        if value is not None:
            self.assertEqual(r["ok"], value)
        self.assertEqual(res.last(cid)["event"], "tool_result_encoded")
        self.assertEqual(res.last(cid)["content"], res.content(cid))
        if content is not None:
            self.assertEqual(res.content(cid), content)
        return r["ok"]


def main():
    unittest.main(verbosity=2)


class NobodyDaemon(Daemon):
    """The daemon as the user nobody (setpriv: its uid and gid, no other
    groups): the unprivileged half of the tests that run against both a root
    daemon and an unprivileged one. Its directories must be nobody's to use
    (give_work_dir)."""

    def command(self):
        nobody = pwd.getpwnam("nobody")
        return ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                "--clear-groups"] + super().command()
