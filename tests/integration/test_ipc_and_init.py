"""What a hostile cold call could still reach of the host and of its own
init. Hostile Python tools really try, against a root daemon and an
unprivileged one (the warm calls' part is test_warm_isolation.py).

1. IPC: a call makes System V shared-memory segments (0666 and 0600), a
   semaphore set and a message queue, and a POSIX message queue (with
   "filesystem": "host": a view's Landlock refuses that already), and ends.
   Nothing of it may be left on the host (/proc/sysvipc, read by this test in
   the host's IPC namespace), and a later call of another client must not
   find it by its key.
2. The call's own toolexecd-init: its report pipe (fd 3) says how the call
   ended and what it used. A call must not take it (pidfd_getfd), open the
   init's /proc/1/mem or /proc/1/fd/3 (with "filesystem": "host", whose /proc
   is still the call's own), nor compare or advise its memory (kcmp,
   process_madvise); with "syscalls": "off" too, where only the init's being
   not dumpable stands in the way. A call that burns CPU is charged for it.
3. The capability bounding set is empty in a call.
"""

import errno
import os
import shutil
import sys
import unittest

import harness
from harness import DaemonTestCase

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
KEY = 0x7E20_0001  # the segments' key; the test process looks for it on the host

PY_IPC = r"""
import ctypes, ctypes.util, json, os, sys
args = json.loads(sys.stdin.readline() or "{}")
libc = ctypes.CDLL(None, use_errno=True)
key = args["key"]
def err(rc):
    return "ok" if rc >= 0 else __import__("errno").errorcode[ctypes.get_errno()]
out = {}
if args["make"]:
    # two 16 MiB segments, 0666 and 0600 (keys key and key+1), a semaphore
    # set and a message queue; and a POSIX message queue
    out["shm666"] = err(libc.shmget(key, 16 << 20, 0o1000 | 0o666))
    out["shm600"] = err(libc.shmget(key + 1, 16 << 20, 0o1000 | 0o600))
    out["sem"] = err(libc.semget(key + 2, 1, 0o1000 | 0o666))
    out["msg"] = err(libc.msgget(key + 3, 0o1000 | 0o666))
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    rt.mq_open.restype = ctypes.c_int
    out["mq"] = err(rt.mq_open(b"/te-ipc-and-init", os.O_CREAT | os.O_RDWR, 0o666, None))
else:
    out["shm666"] = err(libc.shmget(key, 0, 0))
    out["shm600"] = err(libc.shmget(key + 1, 0, 0))
    out["sem"] = err(libc.semget(key + 2, 0, 0))
    out["msg"] = err(libc.msgget(key + 3, 0))
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    rt.mq_open.restype = ctypes.c_int
    out["mq"] = err(rt.mq_open(b"/te-ipc-and-init", os.O_RDWR, 0, None))
print(json.dumps(out))
"""

PY_INIT = r"""
import ctypes, json, os, sys, time
sys.stdin.readline()
libc = ctypes.CDLL(None, use_errno=True)
def sys_(nr, *a):
    rc = libc.syscall(nr, *[ctypes.c_long(x) for x in a])
    return "ok" if rc >= 0 else __import__("errno").errorcode[ctypes.get_errno()]
out = {"init_pid": os.getppid()}
try:
    pfd = os.pidfd_open(1)
    fd = libc.syscall(438, pfd, 3, 0)                          # the init's report pipe
    out["pidfd_getfd"] = "ok" if fd >= 0 else __import__("errno").errorcode[ctypes.get_errno()]
    if fd >= 0:  # the attack: 1 ms of CPU, 7 kB, exited 0, while it runs on
        import struct
        os.write(fd, struct.pack("3i", 3, 1, 0) + struct.pack("3i", 4, 7, 0) +
                 struct.pack("3i", 2, 0, 0))
    out["process_madvise"] = sys_(440, pfd, 0, 0, 0)
except OSError as e:
    out["pidfd_open"] = e.strerror
out["kcmp"] = sys_(312, os.getpid(), 1, 0, 0, 0)               # KCMP_FILE
for what, path, flags in (("mem", "/proc/1/mem", os.O_RDWR),
                          ("report_pipe", "/proc/1/fd/3", os.O_WRONLY)):
    try:
        os.close(os.open(path, flags))
        out[what] = "ok"
    except OSError as e:
        out[what] = __import__("errno").errorcode[e.errno]
with open("/proc/self/status") as f:
    out["capbnd"] = [l.split()[1] for l in f if l.startswith("CapBnd:")][0]
t = time.process_time() + 0.3                                  # 300 ms of CPU
while time.process_time() < t:
    pass
print(json.dumps(out))
"""


def py_tool(name, script, **fields):
    d = {"name": name, "description": "python " + name, "schema": {"type": "object"},
         "command": [PYTHON, "-c", script], "protocol": "plain", "timeout_ms": 60000}
    d.update(fields)
    return d


TOOLS = [py_tool("ipc", PY_IPC),
         py_tool("ipc_host", PY_IPC, filesystem="host"),
         py_tool("init", PY_INIT),
         py_tool("init_host", PY_INIT, filesystem="host"),
         py_tool("init_off", PY_INIT, filesystem="host", syscalls="off")]


def _libc():
    import ctypes
    return ctypes, ctypes.CDLL(None, use_errno=True)


def host_mq_open():
    ctypes, libc = _libc()
    libc.mq_open.restype = ctypes.c_int
    fd = libc.mq_open(b"/te-ipc-and-init", os.O_RDWR, 0, None)
    if fd >= 0:
        os.close(fd)
        return "ok"
    return errno.errorcode[ctypes.get_errno()]


def remove_leftovers():
    """What a daemon without IPC namespaces left on the host (so that one
    failed run does not fail the next)."""
    ctypes, libc = _libc()
    for i, get, ctl in ((0, libc.shmget, libc.shmctl), (1, libc.shmget, libc.shmctl),
                        (2, None, libc.semctl), (3, None, libc.msgctl)):
        ident = (libc.semget(KEY + 2, 0, 0) if i == 2 else libc.msgget(KEY + 3, 0) if i == 3
                 else get(KEY + i, 0, 0))
        if ident >= 0:
            ctl(ident, 0, 0) if i == 2 else ctl(ident, 0, None)  # IPC_RMID
    libc.mq_unlink(b"/te-ipc-and-init")


def host_ipc_keys():
    keys = set()
    for kind in ("shm", "sem", "msg"):
        with open("/proc/sysvipc/" + kind) as f:
            next(f)
            keys.update(int(line.split()[0]) & 0xFFFFFFFF for line in f)
    return keys


class Checks:
    def setUp(self):
        super().setUp()
        remove_leftovers()
        self.addCleanup(remove_leftovers)

    def run_one(self, tool, **args):
        c = self.daemon.client()
        try:
            res = c.run([{"id": "c", "name": tool, "arguments": args}], timeout=120)
        finally:
            c.close()
            self.daemon.clients.remove(c)
        done = res.completed("c")
        self.assertEqual(set(done["result"]), {"ok"}, done)
        return done["result"]["ok"], done

    def test_ipc_ends_with_the_call(self):
        # Under a view, Landlock refuses a POSIX queue already (EACCES):
        # "filesystem": "host" is where one can be made.
        for tool, mq in (("ipc", ("ok", "EACCES")), ("ipc_host", ("ok",))):
            with self.subTest(tool=tool):
                got, _ = self.run_one(tool, key=KEY, make=True)
                self.assertIn(got.pop("mq"), mq)
                self.assertEqual(got, {"shm666": "ok", "shm600": "ok", "sem": "ok", "msg": "ok"})
                left = host_ipc_keys() & {KEY, KEY + 1, KEY + 2, KEY + 3}
                self.assertEqual(left, set(), "the call's IPC objects are still on the host")
                self.assertEqual(host_mq_open(), "ENOENT", "the call's POSIX queue is on the host")
                # another client's later call finds none of them by key or name
                got, _ = self.run_one(tool, key=KEY, make=False)
                self.assertEqual(got, {"shm666": "ENOENT", "shm600": "ENOENT", "sem": "ENOENT",
                                       "msg": "ENOENT", "mq": "ENOENT"})

    def check_init_unreachable(self, tool):
        got, done = self.run_one(tool)
        self.assertIsInstance(got, dict, done)  # not ended early by a forged report
        for what in ("pidfd_getfd", "process_madvise", "kcmp", "mem", "report_pipe"):
            self.assertNotEqual(got.get(what), "ok", (what, got))
        self.assertNotIn("pidfd_open", got)
        self.assertEqual(got["init_pid"], 1, got)  # really under its init
        self.assertEqual(got["capbnd"], "0000000000000000", got)
        # charged for its CPU: nothing of the call wrote the report
        self.assertGreaterEqual(done["cpu_user_ms"] + done["cpu_sys_ms"], 270, done)
        return got

    def test_init_unreachable_default_view(self):
        got = self.check_init_unreachable("init")
        for what in ("pidfd_getfd", "kcmp", "process_madvise"):  # the filter's
            self.assertEqual(got[what], "EPERM", (what, got))

    def test_init_unreachable_host_view(self):
        got = self.check_init_unreachable("init_host")
        for what in ("pidfd_getfd", "kcmp", "process_madvise"):
            self.assertEqual(got[what], "EPERM", (what, got))

    def test_init_unreachable_without_a_filter(self):
        # "syscalls": "off": the init's not being dumpable alone refuses it
        got = self.check_init_unreachable("init_off")
        self.assertIn(got["pidfd_getfd"], ("EPERM", "EACCES"), got)


class RootDaemon(Checks, DaemonTestCase):
    TOOLS = TOOLS


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_env()
        cls.daemon = harness.nobody_daemon(TOOLS)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()


if __name__ == "__main__":
    harness.main()
