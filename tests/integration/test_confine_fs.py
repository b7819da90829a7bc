"""Every call gets its own view of the file system, and the operator sees
which confinement layers are active.

Hostile tools (testworker fs-probe) try to read secrets, other calls'
directories and the tool definitions, to leave files in /tmp for a later
call of another client, and to write outside their "write" paths, against
a root daemon and an unprivileged one (setpriv --reuid=nobody). Definitions
with bad paths are refused at load naming file and key; "filesystem":
"host" is the explicit opt-out; --check and the start-up log name the
layers; --require-confinement refuses to start without one."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

import harness
from harness import Daemon, DaemonFailed, new_token, worker_tool


NobodyDaemon = harness.NobodyDaemon


def require_view():
    """The view needs a mount namespace per call (toolexecd --check)."""
    harness.require_env()
    out = subprocess.run([harness.TOOLEXECD, "--check"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, timeout=harness.WAIT).stdout.decode()
    if "mount namespace:   yes" not in out:
        raise unittest.SkipTest("no mount namespace per call here (toolexecd --check)")


class Shared:
    """A host directory outside every default-hidden one, that the tests and
    the tools both reach: what a definition lists under "write"/"read"."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="te-fs-", dir="/var/cache" if os.geteuid() == 0
                                    else None)
        os.chmod(self.dir, 0o777)
        # a hidden place a definition may expose with "read"
        self.secret_dir = "/var/lib/te-fs-%s" % uuid.uuid4().hex[:12]
        os.mkdir(self.secret_dir, 0o755)
        with open(os.path.join(self.secret_dir, "data.txt"), "w") as f:
            f.write("exposed-data")
        os.chmod(os.path.join(self.secret_dir, "data.txt"), 0o644)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.secret_dir, ignore_errors=True)


SECRET = "te-fs-victim-secret-7c1e"


# the minimal root's tool: its program is shown; the library beside it in
# the build tree is the operator's to name
MINIMAL_READ = [os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(harness.TESTWORKER))))] if harness.TESTWORKER else []


def probe_tool(name, **fields):
    # a checkout left out by the view (a home directory, /tmp): the testworker
    # and its libtoolexec are shown, as everywhere in the suite
    if isinstance(fields.get("filesystem"), dict):
        fields["filesystem"] = harness.with_tree(fields["filesystem"])
    return worker_tool(name, "fs-probe", **fields)


DEVS = r"""
import json, os, stat, sys
sys.stdin.readline()
mounts = set(l.split()[4] for l in open("/proc/self/mountinfo"))
out = {}
for n in ("null", "zero", "full", "random", "urandom"):
    st = os.stat("/dev/" + n)
    out[n] = [stat.S_ISCHR(st.st_mode), st.st_rdev, st.st_mode & 0o777, "/dev/" + n in mounts]
fd = os.open("/dev/null", os.O_WRONLY)
out["null_write"] = os.write(fd, b"x")
os.close(fd)
out["urandom_read"] = len(open("/dev/urandom", "rb").read(8))
out["zero_read"] = open("/dev/zero", "rb").read(4).hex()
print(json.dumps(out))
"""
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def has_cap(n):
    with open("/proc/self/status") as f:
        eff = [int(l.split()[1], 16) for l in f if l.startswith("CapEff:")][0]
    return bool(eff >> n & 1)


DEVS_TOOL = {"name": "devs", "description": "the view's devices", "schema": {"type": "object"},
             "command": [PYTHON, "-c", DEVS], "protocol": "plain"}


class Checks:
    DAEMON = Daemon

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root (to make /var/lib paths and drop to nobody)")
        require_view()
        cls.shared = Shared()
        cls.outbox = os.path.join(cls.shared.dir, "outbox")
        os.mkdir(cls.outbox)
        os.chmod(cls.outbox, 0o777)
        tools = [
            probe_tool("probe"),
            probe_tool("writer", filesystem={"write": [cls.outbox]}),
            probe_tool("reader", filesystem={"read": [cls.shared.secret_dir]}),
            probe_tool("hider", filesystem={"hide": [cls.shared.dir]}),
            probe_tool("minimal", filesystem={"root": "minimal", "read": MINIMAL_READ}),
            probe_tool("host", filesystem="host"),
            DEVS_TOOL,
            worker_tool("victim", "victim", env={"VICTIM_SECRET": SECRET},
                        filesystem=harness.with_tree({"write": [cls.outbox]})),
        ]
        d = cls.DAEMON(tools, start=False)
        harness.give_work_dir(d)
        try:
            d.start()
        except BaseException:
            d.stop(check=False)
            cls.shared.close()
            raise
        cls.d = d

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.shared.close()

    def probe(self, tool="probe", client=None, **args):
        res = (client or self.d.client()).run([{"id": "c", "name": tool, "arguments": args}])
        r = res.result("c")
        self.assertEqual(set(r), {"ok"}, r)
        return r["ok"]

    # -- hidden by default -----------------------------------------------------

    def test_secrets_and_homes_are_hidden(self):
        dirs = ["/root", "/home", "/etc/ssh", "/var/lib", "/run"]
        dirs = [p for p in dirs if os.path.isdir(p) and not harness.leads_to_tree(p)]
        r = self.probe(list=dirs, read=["/etc/shadow", "/etc/gshadow"])
        for path, got in zip(dirs, r["list"]):
            self.assertEqual(got, "EACCES", path)
        self.assertEqual(r["read"], ["EACCES", "EACCES"])

    def test_the_host_root_is_readable(self):
        r = self.probe(read=["/etc/hostname"], list=["/usr"])
        with open("/etc/hostname") as f:
            self.assertEqual(r["read"][0].strip(), "ok:" + f.read()[:256].strip())
        self.assertTrue(r["list"][0].startswith("ok:"), r)

    def test_tools_and_work_directories_are_hidden(self):
        r = self.probe(list=[self.d.tools_dir, self.d.work_dir],
                       read=[os.path.join(self.d.tools_dir, "probe.json")])
        self.assertIn(r["list"][0], ("ENOENT", "EACCES"))
        self.assertIn(r["read"][0], ("ENOENT", "EACCES"))
        # the work directory holds only the way down to the call's own
        if r["list"][1].startswith("ok:"):
            self.assertEqual(r["list"][1].split(), ["ok:" + os.path.basename(r["cwd"])])
        else:
            self.assertEqual(r["list"][1], "EACCES")

    def test_another_running_call_directory_is_not_there(self):
        # a live victim writes a secret into its directory, tells the test
        # where that is (through a "write" path of its definition) and waits
        token = new_token("victim")
        ready = os.path.join(self.outbox, "ready-" + token)
        release = os.path.join(self.outbox, "release-" + token)
        c = self.d.client()
        c.start_batch([{"id": "v", "name": "victim",
                        "arguments": {"ready": ready, "release": release, "answer": "genuine"}}],
                      batch="vict")
        try:
            harness.deadline_wait(lambda: os.path.exists(ready), what="the victim to be ready")
            with open(ready) as f:
                calldir = f.read()
            self.assertTrue(os.path.exists(os.path.join(calldir, "secret.txt")), calldir)
            r = self.probe(list=[calldir, os.path.dirname(calldir)],
                           read=[os.path.join(calldir, "secret.txt")])
            self.assertIn(r["list"][0], ("ENOENT", "EACCES"))
            self.assertEqual(r["read"], ["ENOENT"])
        finally:
            open(release, "w").close()
        evs = c.finish_batch("vict")
        done = [e for e in evs if e.get("event") == "tool_execution_completed"]
        self.assertTrue(done[0]["result"]["ok"]["secret_file"].startswith(SECRET), done)

    # -- nothing written outlives the call -------------------------------------

    def test_tmp_is_private_to_the_call(self):
        name = "/tmp/" + new_token("tmp")
        r = self.probe(write=[name, "/dev/shm/" + os.path.basename(name)], stat=[name])
        self.assertEqual(r["write"], ["ok:written", "ok:written"])
        self.assertEqual(r["stat"], ["ok:644 8"])
        # not on the host, and not for a later call of another client
        self.assertFalse(os.path.exists(name))
        self.assertFalse(os.path.exists("/dev/shm/" + os.path.basename(name)))
        other = self.d.client()
        r2 = self.probe(client=other, read=[name, "/dev/shm/" + os.path.basename(name)])
        self.assertEqual(r2["read"], ["ENOENT", "ENOENT"])

    def test_writes_outside_the_view_fail(self):
        token = new_token("w")
        targets = ["/etc/" + token, "/var/tmp/" + token, "/usr/" + token,
                   os.path.join(self.shared.dir, token), os.path.join(self.outbox, token)]
        r = self.probe(write=targets + ["./mine"])
        for path, got in zip(targets, r["write"]):
            self.assertIn(got, ("EROFS", "EACCES", "ENOENT"), path)
            self.assertFalse(os.path.exists(path), path)
        self.assertEqual(r["write"][-1], "ok:written")  # its own directory

    def test_write_paths_persist(self):
        path = os.path.join(self.outbox, new_token("kept"))
        r = self.probe("writer", write=[path, os.path.join(self.shared.dir, "beside")])
        self.assertEqual(r["write"][0], "ok:written")
        self.assertIn(r["write"][1], ("EROFS", "EACCES"))
        with open(path) as f:
            self.assertEqual(f.read(), "written\n")
        self.assertFalse(os.path.exists(os.path.join(self.shared.dir, "beside")))

    def test_read_exposes_a_hidden_path_read_only(self):
        data = os.path.join(self.shared.secret_dir, "data.txt")
        hidden = self.probe(read=[data])
        self.assertIn(hidden["read"][0], ("EACCES", "ENOENT"))
        r = self.probe("reader", read=[data], write=[os.path.join(self.shared.secret_dir, "new")],
                       list=["/var/lib"])
        self.assertEqual(r["read"], ["ok:exposed-data"])
        self.assertIn(r["write"][0], ("EROFS", "EACCES"))
        # the way down to it, nothing else of /var/lib (which only the
        # daemon's user may list)
        if r["list"][0] != "EACCES":
            self.assertEqual(r["list"][0].split(),
                             ["ok:" + os.path.basename(self.shared.secret_dir)])

    def test_hide_adds_to_the_hidden_set(self):
        seen = self.probe(list=[self.shared.dir])
        self.assertTrue(seen["list"][0].startswith("ok:"), seen)
        r = self.probe("hider", list=[self.shared.dir])
        self.assertEqual(r["list"], ["EACCES"])

    def test_minimal_root(self):
        # the build tree is shown (its "read"), and with it the top
        # directory it lives under (/var in a clone under /var/tmp, /srv,
        # /home...): every other one is absent
        shown = {p.split("/")[1] for p in MINIMAL_READ + harness.tree_reads()}
        gone = sorted({"opt", "var", "home", "root", "srv", "mnt", "media"} - shown)
        r = self.probe("minimal", list=["/"], read=["/etc/hostname", "/etc/shadow"],
                       stat=["/" + g for g in gone] + ["/usr/bin/env"])
        names = set(r["list"][0][3:].split())
        self.assertTrue({"usr", "etc", "dev", "proc", "tmp"} | shown <= names, names)
        self.assertFalse(set(gone) & names, names)
        self.assertTrue(r["read"][0].startswith("ok:"), r)
        self.assertEqual(r["read"][1], "EACCES")
        self.assertEqual(r["stat"][:-1], ["ENOENT"] * len(gone))
        self.assertTrue(r["stat"][-1].startswith("ok:"), r)

    def test_minimal_dev(self):
        r = self.probe(list=["/dev"], write=["/dev/null"], read=["/dev/zero"])
        self.assertEqual(set(r["list"][0][3:].split()),
                         {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout",
                          "stderr", "shm"})
        self.assertEqual(r["write"], ["ok:written"])
        self.assertTrue(r["read"][0].startswith("ok:"), r)

    def test_the_devices_are_the_hosts(self):
        # made again (mknod) where the daemon may, bound where it may not
        # (a user namespace): either way the host's devices, usable
        r = self.probe("devs")
        for n in ("null", "zero", "full", "random", "urandom"):
            st = os.stat("/dev/" + n)
            self.assertEqual(r[n][:3], [True, st.st_rdev, st.st_mode & 0o777], (n, r))
            # no mount of its own to copy and tear down, where root may mknod
            if self.DAEMON is Daemon and has_cap(27):  # CAP_MKNOD
                self.assertFalse(r[n][3], (n, r))
        self.assertEqual((r["null_write"], r["urandom_read"], r["zero_read"]), (1, 8, "00000000"))

    def test_filesystem_host_is_the_explicit_opt_out(self):
        r = self.probe("host", list=["/home"] if os.path.isdir("/home") else ["/"])
        self.assertTrue(r["list"][0].startswith("ok:"), r)
        self.assertIn('"filesystem": "host"', harness.daemon_own_lines(self.d.stderr()))


@unittest.skipUnless(os.geteuid() == 0, "needs root (a root daemon)")
class RootDaemon(Checks, unittest.TestCase):

    def test_a_root_tool_reads_an_empty_shadow(self):
        # root passes any mode: what is hidden is empty, not only unreadable
        d = Daemon([probe_tool("asroot", user="root")])
        try:
            res = d.client().run([{"id": "c", "name": "asroot",
                                   "arguments": {"read": ["/etc/shadow"], "list": ["/root"]}}])
            r = res.result("c")["ok"]
            self.assertEqual(r["read"], ["ok:"])
            self.assertEqual(r["list"], ["ok:"])
        finally:
            d.stop()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    DAEMON = NobodyDaemon


class NoMknodDaemon(Daemon):
    """A root daemon without CAP_MKNOD (as the systemd unit's)."""

    def command(self):
        return ["setpriv", "--bounding-set=-mknod"] + super().command()


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv") and has_cap(27),
                     "needs root with CAP_MKNOD (to run a daemon without it) and setpriv")
class RootDaemonWithoutMknod(unittest.TestCase):
    def test_the_devices_are_the_hosts_bound(self):
        require_view()
        d = NoMknodDaemon([DEVS_TOOL])
        try:
            r = d.client().run([{"id": "c", "name": "devs"}]).result("c")["ok"]
        finally:
            d.stop()
        for n in ("null", "zero", "full", "random", "urandom"):
            st = os.stat("/dev/" + n)
            self.assertEqual(r[n], [True, st.st_rdev, st.st_mode & 0o777, True], (n, r))
        self.assertEqual((r["null_write"], r["urandom_read"], r["zero_read"]), (1, 8, "00000000"))


class Refusals(unittest.TestCase):
    """A bad "filesystem" is refused at load, naming the file and the key."""

    def refused(self, fs, want):
        d = Daemon([probe_tool("bad", filesystem=fs)], start=False)
        try:
            with self.assertRaises(DaemonFailed) as cm:
                d.start()
            self.assertIn("bad.json: filesystem", str(cm.exception))
            self.assertIn(want, str(cm.exception))
        finally:
            d.stop(check=False)

    def test_relative(self):
        self.refused({"read": ["etc"]}, "filesystem.read[0]: \"etc\": not an absolute path")

    def test_missing(self):
        self.refused({"write": ["/nonexistent-" + uuid.uuid4().hex]},
                     "filesystem.write[0]")

    def test_not_normalised(self):
        self.refused({"hide": ["/usr/../etc"]}, "not normalised")
        self.refused({"read": ["/usr/"]}, "not normalised")

    def test_symlink_is_not_normalised(self):
        if not os.path.islink("/bin"):
            self.skipTest("/bin is not a symlink here")
        self.refused({"read": ["/bin"]}, "resolves to")

    def test_unknown_key_and_root(self):
        self.refused({"mount": []}, "filesystem.mount: unknown key")
        self.refused({"root": "none"}, "filesystem.root")
        self.refused("none", "expected \"host\"")


class Layers(unittest.TestCase):
    """toolexecd --check and the start-up log list each layer."""

    def test_check_lists_every_layer(self):
        harness.require_env()
        out = subprocess.run([harness.TOOLEXECD, "--check"], stdout=subprocess.PIPE,
                             timeout=harness.WAIT).stdout.decode()
        for layer in ("mount namespace:", "landlock:", "seccomp:", "user namespace:",
                      "network namespace:"):
            self.assertIn("  " + layer, out)

    def test_start_up_log_and_require(self):
        require_view()
        d = Daemon([probe_tool("probe")], args=["--require-confinement"])
        try:
            log = d.stderr()
            self.assertIn("confinement: mount namespace yes", log)
        finally:
            d.stop()

    def test_require_refuses_without_a_mount_namespace(self):
        d = Daemon([probe_tool("probe")], args=["--require-confinement", "--containment",
                                                "pgroup"], start=False)
        try:
            with self.assertRaises(DaemonFailed) as cm:
                d.start()
            self.assertIn("mount namespace NO", str(cm.exception))
            self.assertIn("--require-confinement", str(cm.exception))
        finally:
            d.stop(check=False)


class NoMountNamespace(unittest.TestCase):
    """--containment pgroup: no mount namespace, so no view; Landlock (where
    the kernel has it) still keeps writes to the call's own directory."""

    def test_landlock_keeps_writes_in(self):
        harness.require_env()
        out = subprocess.run([harness.TOOLEXECD, "--check"], stdout=subprocess.PIPE,
                             timeout=harness.WAIT).stdout.decode()
        if "landlock:          yes" not in out:
            self.skipTest("no Landlock in this kernel")
        d = Daemon([probe_tool("probe")], args=["--containment", "pgroup"])
        try:
            name = "/tmp/" + new_token("ll")
            res = d.client().run([{"id": "c", "name": "probe",
                                   "arguments": {"write": [name, "./mine", "/dev/null"]}}])
            r = res.result("c")["ok"]
            self.assertEqual(r["write"], ["EACCES", "ok:written", "ok:written"])
            self.assertFalse(os.path.exists(name))
            self.assertIn("Landlock keeps their writes", d.stderr())
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
