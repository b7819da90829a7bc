"""Context forwarding, and the isolation of each worker process: clean
environment, private working directory, no leaked descriptors, own process
group, PDEATHSIG, no_new_privs, no core dumps, default signal state."""

import os
import subprocess
import unittest

import harness
from harness import DaemonTestCase, worker_tool, deadline_wait


def daemon_supports(option):
    if not harness.TOOLEXECD:
        return False
    p = subprocess.run([harness.TOOLEXECD, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    return option in p.stdout.decode()


class Context(DaemonTestCase):
    @classmethod
    def tools(cls):
        return [
            worker_tool("ctx", "request", context=True),
            worker_tool("ctx_sdk", "context", context=True),
            worker_tool("noctx", "request", context=False),
            worker_tool("noctx_default", "request"),
            worker_tool("noctx_sdk", "context"),
        ]

    def test_context_tool_receives_opts_exactly(self):
        ctx = {"user": "u1", "nested": {"list": [1, 2, {"k": None}]}}
        engine = {"name": "test-engine", "version": 3}
        res = self.c.run([{"id": "c0", "name": "ctx", "arguments": {"x": 1}}], batch="b-ctx",
                         context=ctx, session_id="s-1", request_id="r-7", engine=engine)
        self.assertOk(res, "c0", {
            "tool": "ctx", "arguments": {"x": 1},
            "opts": {"context": ctx, "session_id": "s-1", "request_id": "r-7",
                     "tool_call": {"id": "c0", "name": "ctx", "arguments": {"x": 1}},
                     "engine": engine}})

    def test_missing_context_values_are_null(self):
        res = self.c.run([{"id": "c0", "name": "ctx"}])
        self.assertOk(res, "c0", {
            "tool": "ctx", "arguments": {},
            "opts": {"context": None, "session_id": None, "request_id": None,
                     "tool_call": {"id": "c0", "name": "ctx", "arguments": {}},
                     "engine": None}})

    def test_explicit_null_context_values_are_null(self):
        res = self.c.run([{"id": "c0", "name": "ctx", "arguments": None}], context=None,
                         session_id=None, request_id=None, engine=None)
        opts = self.assertOk(res, "c0")["opts"]
        self.assertEqual(opts, {"context": None, "session_id": None, "request_id": None,
                                "tool_call": {"id": "c0", "name": "ctx", "arguments": {}},
                                "engine": None})

    def test_each_call_gets_its_own_tool_call(self):
        res = self.c.run([{"id": "a", "name": "ctx", "arguments": {"n": 1}},
                          {"id": "b", "name": "ctx", "arguments": {"n": 2}}],
                         request_id="r-9")
        for cid, n in (("a", 1), ("b", 2)):
            opts = self.assertOk(res, cid)["opts"]
            self.assertEqual(opts["tool_call"], {"id": cid, "name": "ctx", "arguments": {"n": n}})
            self.assertEqual(opts["request_id"], "r-9")

    def test_sdk_sees_opts(self):
        res = self.c.run([{"id": "c0", "name": "ctx_sdk"}, {"id": "c1", "name": "noctx_sdk"}],
                         session_id="sess")
        self.assertEqual(self.assertOk(res, "c0")["session_id"], "sess")
        self.assertIsNone(self.assertOk(res, "c1"))

    def test_non_context_tool_receives_no_opts(self):
        res = self.c.run([{"id": "a", "name": "noctx", "arguments": {"x": 1}},
                          {"id": "b", "name": "noctx_default", "arguments": {"x": 2}}],
                         context={"secret": 1}, session_id="s", request_id="r",
                         engine={"e": 1})
        self.assertOk(res, "a", {"tool": "noctx", "arguments": {"x": 1}})
        self.assertOk(res, "b", {"tool": "noctx_default", "arguments": {"x": 2}})


class Isolation(DaemonTestCase):
    @classmethod
    def tools(cls):
        return [
            worker_tool("env", "env", env={"LANG": "C.UTF-8", "FOO": "bar baz"}),
            worker_tool("env_plain", "env"),
            worker_tool("iso", "isolation"),
            worker_tool("fds", "fds"),
        ]

    def test_clean_environment(self):
        res = self.c.run([{"id": "c0", "name": "env"}], batch="envb")
        env = self.assertOk(res, "c0")["env"]
        self.assertEqual(env, {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                               "FOO": "bar baz", "TOOLEXEC_TOOL": "env",
                               "TOOLEXEC_CALL_ID": "c0", "TOOLEXEC_BATCH": "envb"})

    def test_clean_environment_without_tool_env(self):
        res = self.c.run([{"id": "x-1", "name": "env_plain"}], batch="B")
        env = self.assertOk(res, "x-1")["env"]
        self.assertEqual(env, {"PATH": "/usr/local/bin:/usr/bin:/bin",
                               "TOOLEXEC_TOOL": "env_plain", "TOOLEXEC_CALL_ID": "x-1",
                               "TOOLEXEC_BATCH": "B"})

    def test_assigned_batch_id_reaches_worker(self):
        self.c.send({"op": "run", "calls": [{"id": "c0", "name": "env_plain"}]})
        first = self.c.recv()
        batch = first.get("batch")
        self.assertIsInstance(batch, str)
        self.assertTrue(batch)
        res = harness.BatchResult([{"id": "c0", "name": "env_plain"}],
                                  [first] + self.c.recv_batch(batch))
        self.assertEqual(self.assertOk(res, "c0")["env"]["TOOLEXEC_BATCH"], batch)

    def test_private_working_directory_removed_after_call(self):
        res = self.c.run([{"id": "a", "name": "env_plain"}, {"id": "b", "name": "env_plain"}])
        a = self.assertOk(res, "a")
        b = self.assertOk(res, "b")
        work = os.path.realpath(self.daemon.work_dir)
        for r in (a, b):
            cwd = os.path.realpath(r["cwd"])
            self.assertTrue(cwd.startswith(work + os.sep), "%s not under %s" % (cwd, work))
            self.assertEqual(r["cwd_entries"], [], "working directory not fresh")
            self.assertTrue(r["cwd_writable"])
        self.assertNotEqual(a["cwd"], b["cwd"])
        for r in (a, b):
            deadline_wait(lambda: not os.path.exists(r["cwd"]), timeout=5,
                          what="working directory %s to be removed" % r["cwd"])

    def test_no_descriptor_leaks_into_worker(self):
        # several clients connected and a batch running concurrently, so the
        # daemon has plenty of descriptors that could leak
        others = [self.daemon.client() for _ in range(3)]
        res = self.c.run([{"id": "f%d" % i, "name": "fds"} for i in range(4)])
        for i in range(4):
            self.assertOk(res, "f%d" % i, [0, 1, 2])
        for o in others:
            o.close()

    def test_process_attributes(self):
        res = self.c.run([{"id": "c0", "name": "iso"}])
        r = self.assertOk(res, "c0")
        self.assertEqual(r["no_new_privs"], 1, "PR_SET_NO_NEW_PRIVS missing")
        self.assertEqual(r["core_limit"], 0, "RLIMIT_CORE not 0")
        self.assertEqual(int(r["sigblk"], 16), 0, "signals blocked in the worker")
        self.assertEqual(int(r["sigign"], 16), 0, "signals ignored in the worker")
        self.assertEqual(r["fds"], [0, 1, 2])
        if r["pidns"] == os.readlink("/proc/self/ns/pid"):
            # plain process-group containment: the core issue's set-up
            self.assertEqual(r["pgid"], r["pid"], "worker is not in its own process group")
            self.assertEqual(r["pdeathsig"], 9, "PR_SET_PDEATHSIG(SIGKILL) missing")
            assert_daemons_child(self, r["ppid"], self.daemon.proc.pid)
        else:
            # a PID namespace per call: the worker's tree dies with the
            # namespace's init, which is the daemon's child
            self.assertNotEqual(r["pid"], 1, "the worker must not be the namespace's init")


@unittest.skipUnless(daemon_supports("--containment"), "no --containment option")
def assert_daemons_child(test, ppid, daemon):
    """The worker's parent is the daemon's spawner (daemon/run/spawner.c), the
    daemon's own child, named toolexecd-spawn."""
    with open("/proc/%d/stat" % ppid) as f:
        stat = f.read()
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    parent = int(stat[stat.rindex(")") + 2:].split()[1])
    test.assertEqual((comm, parent), ("toolexecd-spawn", daemon),
                     "worker %d's parent %d is not the daemon's spawner" % (ppid, ppid))


class ProcessGroupContainment(DaemonTestCase):
    """The core issue's worker set-up, exactly: own process group, PDEATHSIG,
    forked by the daemon; a grandchild still dies with the call."""
    ARGS = ["--containment", "pgroup"]

    @classmethod
    def tools(cls):
        return [worker_tool("iso", "isolation"),
                worker_tool("gc", "grandchild", timeout_ms=500)]

    def test_process_attributes(self):
        r = self.assertOk(self.c.run([{"id": "c0", "name": "iso"}]), "c0")
        self.assertEqual(r["pidns"], os.readlink("/proc/self/ns/pid"))
        self.assertEqual(r["pgid"], r["pid"], "worker is not in its own process group")
        self.assertEqual(r["pdeathsig"], 9, "PR_SET_PDEATHSIG(SIGKILL) missing")
        assert_daemons_child(self, r["ppid"], self.daemon.proc.pid)
        self.assertEqual(r["no_new_privs"], 1)
        self.assertEqual(r["core_limit"], 0)
        self.assertEqual(int(r["sigblk"], 16), 0)
        self.assertEqual(int(r["sigign"], 16), 0)
        self.assertEqual(r["fds"], [0, 1, 2])

    def test_grandchild_gone(self):
        for then, reason in (("ok", None), ("exit", "handler_exit"), ("sleep", "timeout")):
            with self.subTest(then=then):
                tok = harness.new_token("gc")
                res = self.c.run([{"id": "g", "name": "gc",
                                   "arguments": {"token": tok, "then": then}}])
                if reason:
                    self.assertToolError(res, "g", reason)
                else:
                    self.assertEqual(self.assertOk(res, "g")["token"], tok)
                harness.assert_token_gone(tok, what="grandchild")


if __name__ == "__main__":
    harness.main()
