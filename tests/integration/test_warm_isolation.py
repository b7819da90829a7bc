"""Warm calls ("start": "warm") kept apart from each other and from their
PID 1, against the real daemon:

  ipc     each warm call has an IPC namespace of its own: SysV shared memory
          one call makes is neither seen by the next call of the tool (from
          another client) nor left on the host after the call;
  init    a warm call's PID 1 (lib/warm.c's P1, which reports the call's
          status, CPU and memory on its report pipe) is out of the call's
          reach: pidfd_getfd of its fd 3, /proc/1/fd/3 and /proc/1/mem all
          fail, with the default filter and with "syscalls": "off", and a
          call that burns CPU is reported with that CPU; P1 is not dumpable
          where the daemon writes its id maps (root). (The reach tests pass
          on the code before too: P1 holds every capability of the call's
          user namespace, which the kernel's ptrace check denies to a
          process without them; they stay as guards. Under the unprivileged
          daemon P1 shares the template's memory and maps its own ids, so
          it stays dumpable; a Landlock domain keeps the call off it.)
  uid     (root daemon) each warm call runs as a uid of its own: two
          concurrent calls of one tool differ, a fork bomb bounded by the
          tool's process limit in one call leaves a concurrent call of the
          tool free to start, and a 0600 file one call leaves where the next
          can reach is not readable by it;
  caps    a warm call's capability bounding set is empty.

Root daemon, and the unprivileged one (nobody) for ipc and caps.
"""

import ctypes
import os
import unittest

import harness
from harness import Daemon, deadline_wait
from test_warm import completed, py_tool, python_loads_lib, template, wait_ready

# keys of this run's own, so that a failed run's segments cannot mislead the next
SHM_BASE = 0x7e000000 | (os.getpid() & 0xffff) << 8
SHM_KEYS = [SHM_BASE + 1, SHM_BASE + 2]


def tools():
    return [
        py_tool("h3", "warm_isolation.py", start="warm", timeout_ms=30000),
        # the host's file system: no view, so no Landlock domain of the view's
        py_tool("h3_host", "warm_isolation.py", start="warm", timeout_ms=30000, filesystem="host"),
        py_tool("h3_off", "warm_isolation.py", start="warm", timeout_ms=30000, syscalls="off",
                filesystem="host"),
        py_tool("h3_lim", "warm_isolation.py", start="warm", timeout_ms=30000,
                limits={"processes": 24}),
    ]


def host_shm_keys():
    """The keys of the SysV segments on the host (the test's IPC namespace)."""
    with open("/proc/sysvipc/shm") as f:
        next(f)
        return {int(line.split()[0]) & 0xffffffff for line in f if line.strip()}


def remove_host_shm(keys):
    """A failed run's segments (the host's) removed."""
    libc = ctypes.CDLL(None, use_errno=True)
    for k in keys:
        i = libc.shmget(ctypes.c_int(k - (1 << 32) if k >= 1 << 31 else k), ctypes.c_size_t(0), 0)
        if i >= 0:
            libc.shmctl(i, 0, None)  # IPC_RMID


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Hard3(unittest.TestCase):
    daemon_class = Daemon

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not python_loads_lib():
            raise unittest.SkipTest("python cannot load this build's libtoolexec (a sanitizer build)")
        cls.d = cls.make_daemon()

    @classmethod
    def make_daemon(cls):
        return Daemon(tools=tools())

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def call(self, name, args, client=None):
        """One warm call on a connection of its own (or client): its result."""
        wait_ready(self.d, name)
        c = client or self.d.client()
        res = c.run([{"id": "a", "name": name, "arguments": args}])
        self.assertEqual(completed(res).get("start"), "warm", completed(res))
        r = res.result("a")
        self.assertIn("ok", r, r)
        return r["ok"], completed(res)

    # -- ipc -------------------------------------------------------------------

    def test_sysv_shm_is_the_calls_own(self):
        before = host_shm_keys()
        self.assertFalse(before & set(SHM_KEYS), "segments of the test's keys already there")
        made, _ = self.call("h3", {"op": "shm_make", "keys": SHM_KEYS[:1], "mode": "600"})
        made += self.call("h3", {"op": "shm_make", "keys": SHM_KEYS[1:], "mode": "666"})[0]
        self.assertTrue(all(m >= 0 for m in made), made)
        self.addCleanup(remove_host_shm, SHM_KEYS)
        seen, _ = self.call("h3", {"op": "shm_see", "keys": SHM_KEYS})
        self.assertEqual(seen, [-2, -2], "the next warm call sees the segments (ENOENT wanted)")
        self.assertFalse(host_shm_keys() & set(SHM_KEYS), "segments left on the host")

    # -- caps ------------------------------------------------------------------

    def test_capability_bounding_set_is_empty(self):
        ids, _ = self.call("h3", {"op": "ids"})
        self.assertEqual(ids["capbnd"], "0000000000000000", ids)

    # -- init ------------------------------------------------------------------

    def hostile(self, name):
        out, ev = self.call(name, {"op": "hostile", "cpu_ms": 300})
        for k in ("pidfd_getfd", "/proc/1/fd/3", "/proc/1/mem", "readlink /proc/1/fd/3",
                  "/proc/1/maps"):
            self.assertNotEqual(out.get(k), "got it", (k, out))
        self.assertGreaterEqual(out["burnt_ms"], 300, out)
        # the kernel's count (ms, truncated), not what the call could forge
        self.assertGreaterEqual(ev["cpu_user_ms"] + ev["cpu_sys_ms"], 290, (out, ev))
        self.assertNotEqual(ev.get("max_rss_kb"), 7, ev)

    def test_pid_1_out_of_reach_default_filter(self):
        self.hostile("h3")
        self.hostile("h3_host")

    def test_pid_1_out_of_reach_without_filter(self):
        self.hostile("h3_off")

class Hard3Root(Hard3):
    """A uid per warm call (a root daemon's --call-uids); P1 not dumpable,
    where the daemon writes its id maps."""

    def test_pid_1_is_not_dumpable(self):
        """Its /proc files belong to root, as a non-dumpable process's do
        (the spare P1 the template keeps after a call is checked)."""
        self.call("h3", {"op": "ids"})
        tpid = template(self.d, "h3")["pid"]
        p1 = deadline_wait(lambda: children(tpid), what="the template's spare PID 1")
        for pid in p1:
            try:
                st = os.stat("/proc/%d/mem" % pid)
                with open("/proc/%d/status" % pid) as f:
                    uid = [l.split()[1] for l in f if l.startswith("Uid:")][0]
            except FileNotFoundError:
                continue
            self.assertNotEqual(int(uid), 0)
            self.assertEqual(st.st_uid, 0, "P1 %d (uid %s) is dumpable" % (pid, uid))


    def test_concurrent_calls_have_uids_of_their_own(self):
        """Call a forks until its tool's process limit (24) stops it and holds
        its processes; meanwhile call b of the same tool starts and runs, as
        another uid. Then a is let go."""
        fifos = self.d.shared_dir("bomb")
        ready, gate = os.path.join(fifos, "ready"), os.path.join(fifos, "gate")
        for p in (ready, gate):
            os.mkfifo(p)
            os.chmod(p, 0o666)
        wait_ready(self.d, "h3_lim")
        a = self.d.client()
        batch = a.start_batch([{"id": "a", "name": "h3_lim", "arguments": {
            "op": "bomb", "ready": ready, "gate": gate}}])
        with open(ready) as f:  # a has forked all it could
            forked = int(f.read())
        try:
            ids_b, _ = self.call("h3_lim", {"op": "ids"})
        finally:
            # a waits in its open of the gate: this open returns at once
            with open(gate, "w"):
                pass
        res = harness.BatchResult([{"id": "a", "name": "h3_lim"}], a.finish_batch(batch))
        self.assertEqual(completed(res).get("start"), "warm", completed(res))
        out_a = res.result("a")["ok"]
        self.assertEqual(out_a["errno"], "EAGAIN", out_a)
        self.assertLessEqual(forked, 24, "the bomb was not bounded by the process limit")
        ids_a, _ = self.call("h3_lim", {"op": "ids"})
        self.assertNotEqual(ids_a["uid"], ids_b["uid"])
        self.assertNotEqual(ids_a["gid"], ids_b["gid"])

    def test_files_of_one_call_are_not_the_next_ones(self):
        d = self.d.shared_dir("meet")
        secret = os.path.join(d, "secret")
        w, _ = self.call("h3", {"op": "write", "path": secret, "text": "s3cret"})
        self.assertEqual(os.stat(secret).st_mode & 0o777, 0o600)
        r, _ = self.call("h3", {"op": "read", "path": secret})
        self.assertEqual(r, {"errno": "EACCES"}, "the next warm call read a 0600 file of the last")
        self.assertNotEqual(os.stat(secret).st_uid, 0)


class Hard3Nobody(Hard3):
    """The unprivileged daemon: its calls share its uid, cold and warm."""

    @classmethod
    def make_daemon(cls):
        return harness.nobody_daemon(tools())


class Hard3C(unittest.TestCase):
    """A uid per warm call with the C SDK (which also runs under the sanitizers, where
    the Python SDK cannot load the build's library): each warm call its own
    uid and gid, none of them the template's."""

    def test_warm_calls_each_their_own_uid(self):
        harness.require_env()
        with Daemon(tools=[harness.worker_tool("h3_c", "identity", start="warm")]) as d:
            seen = []
            for _ in range(3):
                wait_ready(d, "h3_c")
                res = d.client().run([{"id": "a", "name": "h3_c", "arguments": {}}])
                self.assertEqual(completed(res).get("start"), "warm", completed(res))
                seen.append(res.result("a")["ok"])
            with open("/proc/%d/status" % template(d, "h3_c")["pid"]) as f:
                tuid = int([l.split()[1] for l in f if l.startswith("Uid:")][0])
            uids = [i["uid"] for i in seen]
            self.assertEqual(len(set(uids)), 3, seen)
            self.assertNotIn(tuid, uids)
            self.assertEqual([i["gid"] for i in seen], uids, seen)


del Hard3  # its tests run as Hard3Root's and Hard3Nobody's


if __name__ == "__main__":
    harness.main()
