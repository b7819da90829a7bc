"""What a worker is granted, against workers that try for more.

allow_uids/allow_gids, "network": false, per-tool limits and
--default-limits/--default-network, and the workers' user (a uid of the
call's own, --default-user, an explicit user and group). The rest of the
isolation tests (containment, cancel, clients, --max-*, --check, a stderr
flood) are test_isolation.py's.
"""

import grp
import os
import pwd
import socket
import time
import unittest

import harness
from harness import DaemonTestCase, WAIT, deadline_wait, worker_tool

MIB = 1 << 20


# -- 1. allow lists -------------------------------------------------------------------

class AllowLists(DaemonTestCase):
    @classmethod
    def tools(cls):
        uid, gid = os.getuid(), os.getgid()
        return [worker_tool("touch", "touch"),
                worker_tool("t_other_uid", "touch", allow_uids=[uid + 4242, uid + 4243]),
                worker_tool("t_own_uid", "touch", allow_uids=[uid + 4242, uid]),
                worker_tool("t_other_gid", "touch", allow_gids=[gid + 4242]),
                worker_tool("t_own_gid", "touch", allow_gids=[gid])]

    def _forbidden(self, name):
        a, b = self.tmpfile("allowed-side"), self.tmpfile("forbidden-side")
        calls = [{"id": "c0", "name": "touch", "arguments": {"path": a}},
                 {"id": "c1", "name": name, "arguments": {"path": b}}]
        res = self.c.run(calls, batch="fb")
        self.assertEqual(len(res.events), 1, res.events)
        ev = res.terminal
        self.assertEqual((ev["event"], ev["batch"], ev["type"], ev["reason"]),
                         ("error", "fb", "engine_error", "forbidden_tool"), ev)
        self.assertEqual(ev.get("metadata"), {"tool_name": name}, ev)
        # a later batch on the same connection runs; by its end anything the
        # rejected batch had started would have run too
        sentinel = self.tmpfile("sentinel")
        self.assertTrue(self.c.run([{"id": "s", "name": "touch",
                                     "arguments": {"path": sentinel}}]).ok)
        self.assertTrue(os.path.exists(sentinel))
        self.assertFalse(os.path.exists(a), "a call of a forbidden batch ran")
        self.assertFalse(os.path.exists(b), "the forbidden tool ran")
        deadline_wait(lambda: "forbidden tool %s" % name in self.daemon.stderr(),
                      what="the refusal in the daemon log")

    def _allowed(self, name):
        p = self.tmpfile("side")
        res = self.c.run([{"id": "c0", "name": name, "arguments": {"path": p}}])
        self.assertOk(res, "c0", "touched")
        self.assertTrue(os.path.exists(p))

    def test_allow_uids_without_our_uid_is_forbidden_tool(self):
        self._forbidden("t_other_uid")

    def test_allow_uids_with_our_uid_runs(self):
        self._allowed("t_own_uid")

    def test_allow_gids_without_our_gid_is_forbidden_tool(self):
        self._forbidden("t_other_gid")

    def test_allow_gids_with_our_gid_runs(self):
        self._allowed("t_own_gid")


# -- 2. network ---------------------------------------------------------------------

class NetworkMixin:
    def listener(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(s.close)
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        return s, s.getsockname()[1]

    def assertNoNetwork(self, tool):
        s, port = self.listener()
        res = self.c.run([{"id": "n", "name": tool, "arguments": {"port": port}}])
        v = self.assertOk(res, "n")
        self.assertIs(v["connected"], False, v)
        # the call's own loopback, not the host's: nothing listens there
        # (and nothing was refused: no denial)
        self.assertEqual(v["errno"], "ECONNREFUSED", v)
        self.assertNotIn("denied", res.completed("n"))
        s.setblocking(False)
        with self.assertRaises(BlockingIOError, msg="the listener saw a connection"):
            s.accept()[0].close()

    def assertNetwork(self, tool):
        s, port = self.listener()
        res = self.c.run([{"id": "n", "name": tool, "arguments": {"port": port}}])
        self.assertOk(res, "n", {"connected": True, "errno": None})
        s.settimeout(WAIT)
        conn, _ = s.accept()
        conn.close()


class NetworkDefault(NetworkMixin, DaemonTestCase):
    TOOLS = [worker_tool("net_default", "connect")]

    def test_network_by_default(self):
        self.assertNetwork("net_default")


class Network(NetworkMixin, DaemonTestCase):
    TOOLS = [worker_tool("net_off", "connect", network=False),
             worker_tool("net_on", "connect", network=True),
             worker_tool("net_off_unfiltered", "connect", network=False, syscalls="off")]

    def test_network_false_cannot_reach_a_loopback_listener(self):
        self.assertNoNetwork("net_off")

    def test_network_false_namespace_without_the_filter(self):
        s, port = self.listener()
        res = self.c.run([{"id": "n", "name": "net_off_unfiltered", "arguments": {"port": port}}])
        v = self.assertOk(res, "n")
        # a fresh network namespace whose loopback is its own
        self.assertEqual((v["connected"], v["errno"]), (False, "ECONNREFUSED"), v)
        self.assertNotIn("denied", res.completed("n"))

    def test_network_true(self):
        self.assertNetwork("net_on")


# -- 3. limits ------------------------------------------------------------------------

class Limits(DaemonTestCase):
    @classmethod
    def tools(cls):
        return [
            worker_tool("nofile16", "open-files", limits={"open_files": 16}),
            worker_tool("fsize", "write-file", limits={"file_size_mb": 1}),
            worker_tool("cpu", "spin", limits={"cpu_ms": 1000}, timeout_ms=30000),
            worker_tool("bigout", "big-output", limits={"output_mb": 1}),
            {"name": "plainbig", "description": "2 MiB of plain stdout",
             "command": ["/bin/sh", "-c", "head -c 2097152 /dev/zero | tr '\\0' x"],
             "protocol": "plain", "limits": {"output_mb": 1}},
        ]

    def test_open_files(self):
        res = self.c.run([{"id": "f", "name": "nofile16"}])
        v = self.assertOk(res, "f")
        self.assertEqual(v["nofile"], 16, v)
        self.assertEqual(v["errno"], "EMFILE", v)
        self.assertLessEqual(v["opened"] + 3, 16, v)  # 0, 1, 2 are open
        self.assertGreaterEqual(v["opened"], 1, v)

    def test_file_size_sigxfsz(self):
        res = self.c.run([{"id": "w", "name": "fsize", "arguments": {"mb": 2}}])
        te = self.assertToolError(res, "w", "handler_exit")
        self.assertEqual(te["cause"].get("signal"), "SIGXFSZ", te)

    def test_file_size_efbig_when_sigxfsz_ignored(self):
        res = self.c.run([{"id": "w", "name": "fsize",
                           "arguments": {"mb": 2, "ignore_sigxfsz": True}}])
        self.assertEqual(res.result("w"), {"error": {"errno": "EFBIG", "written": MIB}})

    def test_file_size_within_limit(self):
        res = self.c.run([{"id": "w", "name": "fsize", "arguments": {"mb": 1}}])
        self.assertOk(res, "w", {"written": MIB})

    def test_cpu_limit(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "s", "name": "cpu"}], timeout=40)
        elapsed = time.monotonic() - t0
        te = self.assertToolError(res, "s", "handler_exit")
        self.assertIn("cpu_limit", te["cause"], te)
        self.assertIn(te["cause"].get("signal"), ("SIGXCPU", "SIGKILL"), te)
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 25, "not stopped by its CPU limit")

    def test_output_limit_framed(self):
        t0 = time.monotonic()
        res = self.c.run([{"id": "o", "name": "bigout", "arguments": {"n": 2 * MIB}}])
        te = self.assertToolError(res, "o", "invalid_return")
        self.assertEqual(te["cause"].get("output_limit"), {"limit": MIB}, te["cause"])
        self.assertLess(time.monotonic() - t0, 10)

    def test_output_within_limit(self):
        res = self.c.run([{"id": "o", "name": "bigout", "arguments": {"n": 512 * 1024}}])
        self.assertEqual(len(self.assertOk(res, "o")), 512 * 1024)

    def test_output_limit_plain(self):
        res = self.c.run([{"id": "o", "name": "plainbig"}])
        te = self.assertToolError(res, "o", "invalid_return")
        self.assertEqual(te["cause"].get("output_limit"), {"limit": MIB}, te["cause"])


class NoLimitsByDefault(DaemonTestCase):
    TOOLS = [worker_tool("nofile_free", "open-files")]

    def test_open_files_is_per_tool(self):
        # the 16 of the limited tools is theirs, not the daemon's
        v = self.assertOk(self.c.run([{"id": "f", "name": "nofile_free"}]), "f")
        self.assertGreater(v["opened"] + 3, 64, v)


class DefaultLimits(NetworkMixin, DaemonTestCase):
    """--default-limits and --default-network for tools that set nothing."""
    ARGS = ["--default-limits", "open_files=16,output_mb=1", "--default-network", "no"]
    TOOLS = [worker_tool("nofile", "open-files"),
             worker_tool("bigout", "big-output"),
             worker_tool("net_unset", "connect")]

    def test_default_open_files(self):
        v = self.assertOk(self.c.run([{"id": "f", "name": "nofile"}]), "f")
        self.assertEqual((v["nofile"], v["errno"]), (16, "EMFILE"), v)
        self.assertLessEqual(v["opened"] + 3, 16, v)

    def test_default_output_limit(self):
        res = self.c.run([{"id": "o", "name": "bigout", "arguments": {"n": 2 * MIB}}])
        te = self.assertToolError(res, "o", "invalid_return")
        self.assertEqual(te["cause"].get("output_limit"), {"limit": MIB}, te["cause"])

    def test_default_output_limit_lets_smaller_through(self):
        res = self.c.run([{"id": "o", "name": "bigout", "arguments": {"n": 512 * 1024}}])
        self.assertEqual(len(self.assertOk(res, "o")), 512 * 1024)

    def test_default_network_no(self):
        self.assertNoNetwork("net_unset")


class DefaultLimitsOverridden(NetworkMixin, DaemonTestCase):
    """A tool's own keys win over the daemon-wide defaults."""
    ARGS = DefaultLimits.ARGS
    TOOLS = [worker_tool("nofile_own", "open-files", limits={"open_files": 64}),
             worker_tool("net_on", "connect", network=True)]

    def test_tool_limit_overrides_default(self):
        v = self.assertOk(self.c.run([{"id": "f", "name": "nofile_own"}]), "f")
        self.assertEqual((v["nofile"], v["errno"]), (64, "EMFILE"), v)
        self.assertGreater(v["opened"] + 3, 16, v)
        self.assertLessEqual(v["opened"] + 3, 64, v)

    def test_tool_network_true_overrides_default(self):
        self.assertNetwork("net_on")


# -- 4. the workers' user -----------------------------------------------------------

def default_worker_user():
    for name in ("toolexec", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    return None


class RootOnly:
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the daemon switches users only when run as root")
        super().setUpClass()


class DefaultUser(RootOnly, DaemonTestCase):
    TOOLS = [worker_tool("who", "identity")]

    def test_unprivileged_by_default(self):
        # a uid and gid of the call's own, from --call-uids' default range
        v = self.assertOk(self.c.run([{"id": "w", "name": "who"}]), "w")
        self.assertTrue(1879048192 <= v["uid"] <= 1879113727, v)
        self.assertEqual((v["euid"], v["gid"], v["egid"]), (v["uid"],) * 3, v)
        self.assertEqual(v["groups"], [], "supplementary groups were not dropped")


class DefaultUserWithoutCallUids(RootOnly, DaemonTestCase):
    ARGS = ["--call-uids", "no"]
    TOOLS = [worker_tool("who", "identity")]

    def test_default_worker_user(self):
        pw = default_worker_user()
        v = self.assertOk(self.c.run([{"id": "w", "name": "who"}]), "w")
        self.assertNotEqual(v["uid"], 0, v)
        self.assertNotEqual(v["euid"], 0, v)
        self.assertNotEqual(v["gid"], 0, v)
        self.assertNotEqual(v["egid"], 0, v)
        self.assertEqual((v["uid"], v["gid"]), (pw.pw_uid, pw.pw_gid), v)
        self.assertEqual(v["groups"], [], "supplementary groups were not dropped")


class ExplicitUser(RootOnly, DaemonTestCase):
    @classmethod
    def tools(cls):
        t = [worker_tool("who_root", "identity", user="root")]
        try:
            grp.getgrnam("nogroup")
            t.append(worker_tool("who_nogroup", "identity", user="nobody", group="nogroup"))
        except KeyError:
            pass
        return t

    def test_explicit_root(self):
        v = self.assertOk(self.c.run([{"id": "w", "name": "who_root"}]), "w")
        self.assertEqual((v["uid"], v["euid"], v["gid"], v["egid"]), (0, 0, 0, 0), v)
        self.assertEqual(v["groups"], [], "supplementary groups were not dropped")

    def test_explicit_group(self):
        try:
            gr = grp.getgrnam("nogroup")
        except KeyError:
            self.skipTest("no group nogroup")
        v = self.assertOk(self.c.run([{"id": "w", "name": "who_nogroup"}]), "w")
        self.assertEqual((v["uid"], v["gid"], v["egid"]),
                         (pwd.getpwnam("nobody").pw_uid, gr.gr_gid, gr.gr_gid), v)
        self.assertEqual(v["groups"], [])


if __name__ == "__main__":
    harness.main()
