"""The spawner holds no secret (daemon/run/spawner.c, spawnproc.c).

The daemon holds a tool's credential header values (read from
--credentials-dir at load) and, once a tool has them, its egress proxy's CA
key and leaf key (proxy_tls.c, made in memory only). The spawner is a
process of its own, every spare sandbox a copy of it and every cold call
started from it: none of them may carry a copy of those. Read as root
through /proc/PID/mem over every readable mapping: the credential value and
the keys' private scalars (asked of the daemon's own gnutls through gdb)
are in the daemon's memory, and in neither the spawner's nor a spare's, at
the first start and after the spawner was killed and started again. A warm
tool's template and what it keeps ready (its calls' PID 1) are checked the
same way. Root and unprivileged daemon. A spawner that cannot run once
exec'd is not started again in a loop.
"""

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

import harness
from harness import Daemon
from test_spawner import children, spawner_of

TOKEN = "s3cr3t-" + os.urandom(12).hex()
SECRET = "Bearer " + TOKEN
HOST = "127.0.0.1:9"  # never reached: the headers alone make the proxy's TLS end
CRED = {"allow": [HOST], "headers": {HOST: {"Authorization": {"credential": "api"}}}}
TOOLS = [harness.worker_tool("cred", "echo", network=CRED),
         harness.worker_tool("wcred", "echo", start="warm", network=CRED, timeout_ms=30000)]
# a bigger mapping is ASan's shadow (terabytes reserved), which holds no data
MAX_MAPPING = 1 << 30
CHUNK = 8 << 20


def scan(pid, needles):
    """Which of needles ({name: [forms]}) pid's memory holds, over every
    readable mapping, and how many bytes were read."""
    seen, total = set(), 0
    keep = max(len(f) for forms in needles.values() for f in forms) - 1
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if f[1][0] != "r" or hi - lo > MAX_MAPPING:
                continue
            tail = b""
            for at in range(lo, hi, CHUNK):
                try:
                    data = tail + os.pread(mem.fileno(), min(CHUNK, hi - at), at)
                except OSError:  # [vvar], a mapping gone meanwhile
                    break
                total += len(data) - len(tail)
                seen |= {n for n, forms in needles.items() if any(x in data for x in forms)}
                tail = data[-keep:]
    return seen, total


def private_scalar(pid, var):
    """The private scalar of the gnutls_x509_privkey_t variable var in the
    daemon pid, big-endian, as its gnutls exports it."""
    cmds = ["set $c = (void*)malloc(8)", "set $x = (void*)malloc(16)",
            "set $y = (void*)malloc(16)", "set $k = (void*)malloc(16)",
            "print (int)gnutls_x509_privkey_export_ecc_raw(*(void**)&%s, $c, $x, $y, $k)" % var,
            "print *(unsigned*)((char*)$k + 8)",
            'eval "x/%dxb *(void**)$k", *(unsigned*)((char*)$k + 8)']
    cmds += ["call (void)free(*(void**)%s)" % d for d in ("$x", "$y", "$k")]
    cmds += ["call (void)free(%s)" % d for d in ("$c", "$x", "$y", "$k")]
    args = ["gdb", "-nx", "-batch", "-p", str(pid)]
    for c in cmds:
        args += ["-ex", c]
    p = subprocess.run(args, capture_output=True, text=True, timeout=harness.WAIT * 4)
    vals = re.findall(r"^\$\d+ = (-?\d+)$", p.stdout, re.M)
    if len(vals) < 2 or vals[0] != "0":
        raise AssertionError("gdb could not export %s: %s %s" % (var, p.stdout, p.stderr))
    data = bytes(int(b, 16) for b in re.findall(r"\t0x([0-9a-f]{2})", p.stdout))
    if len(data) != int(vals[1]) or not 30 <= len(data.lstrip(b"\0")) <= 32:
        raise AssertionError("%s: no P-256 scalar in %r" % (var, p.stdout))
    return data.lstrip(b"\0")


class Checks:
    maxDiff = None  # every leak named

    @classmethod
    def setUpClass(cls):
        harness.require_env()
        if not shutil.which("gdb"):
            raise unittest.SkipTest("needs gdb (contrib/deps.sh) to ask the daemon for its keys")
        cls.dir = tempfile.mkdtemp(prefix="te-sec-")
        os.chmod(cls.dir, 0o755)
        creds = os.path.join(cls.dir, "creds")
        os.mkdir(creds, 0o700)
        with open(os.path.join(creds, "api"), "w") as f:
            f.write(SECRET + "\n")
        os.chmod(os.path.join(creds, "api"), 0o600)
        for p in (creds, os.path.join(creds, "api")):
            os.chown(p, cls.OWNER, -1)
        cls.d = None
        try:
            cls.d = cls.make_daemon(["--credentials-dir", creds, "--spares", "2"])
            # the forms a scalar takes in memory: big-endian (gnutls' export,
            # DER) and as GMP/nettle limbs on a little-endian machine
            cls.needles = {"the credential": [TOKEN.encode()]}
            for var in ("ca_key", "leaf_key"):
                k = private_scalar(cls.d.proc.pid, var)
                cls.needles["the proxy's " + var] = [k, k[::-1]]
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.d:
            cls.d.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def spawner(self, other_than=None):
        return harness.deadline_wait(
            lambda: (lambda p: p if p and p != other_than else None)(spawner_of(self.d.proc.pid)),
            what="the daemon's spawner")

    def leaks(self, pid, what, least=1 << 20):
        """What of the needles pid's memory holds, said in words (least:
        the bytes a scan that means something reads)."""
        try:
            seen, total = scan(pid, self.needles)
        except OSError as e:
            self.fail("cannot read the memory of %s %d: %s" % (what, pid, e))
        self.assertGreater(total, least, what)
        return ["%s in %s %d" % (name, what, pid) for name in sorted(seen)]

    def spawner_and_spares_leaks(self, sp, when):
        # a call of the tool: the spawner then makes spares for the next
        res = self.d.client().run([{"id": "c", "name": "cred", "arguments": {"n": 1}}],
                                  batch=harness.new_token("call"))
        self.assertEqual(res.result("c"), {"ok": {"n": 1}})
        spares = harness.deadline_wait(
            lambda: [p for p, comm in children(sp) if comm == "toolexecd-spare"],
            what="a spare of the spawner " + when)
        out = self.leaks(sp, "the spawner " + when)
        for p in spares:
            # a spare that waits in its init (exec'd ahead: sandbox.h) holds
            # none of the spawner's memory, only the init's few pages
            init = os.path.basename(os.readlink("/proc/%d/exe" % p)) == "toolexecd-init"
            out += self.leaks(p, "a spare " + when, 1 << 12 if init else 1 << 20)
        return out

    def test_the_daemon_holds_what_is_looked_for(self):
        # the scan finds each where it is: a clean spawner means something
        self.assertEqual(scan(self.d.proc.pid, self.needles)[0], set(self.needles))

    def test_neither_spawner_nor_spare_holds_a_secret_at_start_and_after_a_restart(self):
        sp = self.spawner()
        leaks = self.spawner_and_spares_leaks(sp, "at start")
        os.kill(sp, signal.SIGKILL)
        new = self.spawner(other_than=sp)
        leaks += self.spawner_and_spares_leaks(new, "after a restart")
        self.assertEqual(leaks, [])

    def test_a_warm_template_holds_no_secret(self):
        tpl = harness.deadline_wait(
            lambda: (lambda t: t if t and t["state"] == "ready" else None)(
                (self.d.stats().get("templates") or {}).get("wcred")),
            what="the warm template")
        res = self.d.client().run([{"id": "w", "name": "wcred", "arguments": {"n": 2}}],
                                  batch=harness.new_token("warm"))
        self.assertEqual(res.result("w"), {"ok": {"n": 2}})
        self.assertEqual(res.completed("w").get("start"), "warm", res.completed("w"))
        leaks = self.leaks(tpl["pid"], "the warm template")
        # what it keeps ready for the next call (its PID 1), forked from it
        for p, comm in children(tpl["pid"]):
            leaks += self.leaks(p, "the template's child " + comm)
        self.assertEqual(leaks, [])


class SpawnerThatCannotRun(unittest.TestCase):
    """Exec'd, the spawner loads its libraries afresh: one that cannot (here
    libtoolexec made a file that does not load, under a copy of the build's
    binaries, as an upgrade might change it under a running daemon) exits at
    once, and so would every other. It is not started again in a loop: the
    loop starts calls from then on, and they run."""

    def test_not_restarted_in_a_loop_and_calls_still_run(self):
        harness.require_env()
        tree = tempfile.mkdtemp(prefix="te-tree-")
        self.addCleanup(shutil.rmtree, tree, True)
        os.chmod(tree, 0o755)
        build = os.path.dirname(os.path.dirname(os.path.abspath(harness.TOOLEXECD)))
        for sub, names in (("daemon", ("toolexecd", "toolexecd-init")),
                           ("lib", ("libtoolexec.so.0",))):
            os.mkdir(os.path.join(tree, sub), 0o755)
            for n in names:  # the spawner finds the library by RUNPATH $ORIGIN/../lib
                shutil.copy(os.path.join(build, sub, n), os.path.join(tree, sub, n))
        exe = os.path.join(tree, "daemon", "toolexecd")

        class Copy(Daemon):
            def command(self):
                return [exe] + super().command()[1:]

        d = Copy([harness.worker_tool("echo", "echo")])
        self.addCleanup(d.stop)
        sp = harness.deadline_wait(lambda: spawner_of(d.proc.pid), what="the spawner")
        with open(os.path.join(tree, "lib", "libtoolexec.so.0"), "w"):
            pass  # truncated: the next exec cannot load it
        os.kill(sp, signal.SIGKILL)
        harness.deadline_wait(lambda: "the spawner could not run" in d.stderr(),
                              what="the daemon to give the spawner up")
        self.assertNotIn("spawner", d.stats())
        res = d.client().run([{"id": "e", "name": "echo", "arguments": {"n": 3}}])
        self.assertEqual(res.result("e"), {"ok": {"n": 3}})
        self.assertIsNone(spawner_of(d.proc.pid))
        err = d.stderr()
        self.assertEqual((err.count("the spawner exited"), err.count("could not run")), (1, 1), err)


class RootDaemon(Checks, unittest.TestCase):
    OWNER = 0

    @classmethod
    def make_daemon(cls, args):
        return Daemon(TOOLS, args=args)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root (to drop to nobody) and setpriv")
class UnprivilegedDaemon(Checks, unittest.TestCase):
    OWNER = pwd.getpwnam("nobody").pw_uid

    @classmethod
    def make_daemon(cls, args):
        return harness.nobody_daemon(TOOLS, args=args)


if __name__ == "__main__":
    harness.main()
