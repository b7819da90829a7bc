"""Signals 32 and 33 ignored by whoever starts the daemon (debhelper does)
are back to their default in every worker.

glibc's sigaction() refuses 32 and 33, so the daemon must reset them with
the raw system call; an ignored disposition survives exec. The daemon is
started through a wrapper that ignores both with the raw rt_sigaction, then
execs it; the test checks that the daemon did inherit them (the set-up
worked) and that a worker's SigIgn is empty: cold and warm, root daemon and
unprivileged one.
"""

import os
import platform
import sys
import unittest

import harness
from harness import Daemon, NobodyDaemon, deadline_wait, give_work_dir, started, worker_tool

# SIG_IGN on 32 and 33 with the kernel's struct sigaction (handler, flags,
# restorer, mask), then exec the rest of argv.
WRAPPER = r"""
import ctypes, os, platform, sys
nr = {"x86_64": 13, "aarch64": 134}[platform.machine()]
class KSA(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]
libc = ctypes.CDLL(None, use_errno=True)
ign = KSA(1, 0, None, 0)
for sig in (32, 33):
    if libc.syscall(nr, sig, ctypes.byref(ign), None, 8) != 0:
        sys.exit("rt_sigaction(%d): errno %d" % (sig, ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
"""

RT_BITS = (1 << 31) | (1 << 32)  # SigIgn bit n-1 is signal n


def ignoring(cls):
    class Wrapped(cls):
        def command(self):
            return [sys.executable, "-c", WRAPPER] + super().command()
    return Wrapped


def sigign(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigIgn in /proc/%d/status" % pid)


TOOLS = [worker_tool("cold", "isolation"), worker_tool("warm", None, start="warm")]


@unittest.skipUnless(platform.machine() in ("x86_64", "aarch64"), "raw rt_sigaction numbers")
class IgnoredSignals(unittest.TestCase):

    def check(self, d):
        # the daemon did inherit them: else this test could not fail
        self.assertEqual(sigign(d.proc.pid) & RT_BITS, RT_BITS,
                         "the wrapper did not leave 32 and 33 ignored in the daemon")
        c = d.client()
        r = c.run([{"id": "a", "name": "cold"}]).result("a")["ok"]
        self.assertEqual(int(r["sigign"], 16), 0, "signals ignored in a cold worker")

        def ready():
            c2 = d.client()
            c2.send({"op": "stats"})
            t = (c2.recv().get("templates") or {}).get("warm")
            c2.close()
            return t and t["state"] == "ready"
        deadline_wait(ready, what="the warm template to be ready")
        res = c.run([{"id": "w", "name": "warm", "arguments": {"mode": "isolation"}}])
        self.assertEqual(res.completed("w").get("start"), "warm", res.completed("w"))
        self.assertEqual(int(res.result("w")["ok"]["sigign"], 16), 0,
                         "signals ignored in a warm worker")

    def test_root_daemon(self):
        harness.require_env(self)
        d = ignoring(Daemon)(TOOLS)
        try:
            self.check(d)
        finally:
            d.stop()

    def test_unprivileged_daemon(self):
        harness.require_env(self)
        d = ignoring(NobodyDaemon)(TOOLS, start=False)
        give_work_dir(d)
        started(d)
        try:
            self.check(d)
        finally:
            d.stop()


if __name__ == "__main__":
    harness.main()
