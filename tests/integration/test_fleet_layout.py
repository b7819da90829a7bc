"""The shipped fleet manifests start the daemon.

contrib/kubernetes/toolexecd-daemonset.yaml and contrib/nomad/toolexecd.nomad.hcl
crash-looped: the kubelet's configMap volume is a 0777 directory (with the
..data symlink layout) and an emptyDir with medium Memory, like a Docker or
Nomad tmpfs mount, is 1777; the daemon refused both and exited 1.

Here each manifest's own daemon arguments, volumes and mounts are read
from the file (a change to the manifest changes the test), and what the
kubelet or Nomad would give the container is rebuilt: in a mount and
network namespace of its own (unshare) the daemon sees

  - the configMap volume: a 0777 directory holding ..<timestamp>/ (0755,
    the ConfigMap's data as files of the volume's defaultMode), ..data ->
    ..<timestamp>, and NAME -> ..data/NAME, bind-mounted read-only at the
    mountPath when the manifest says readOnly (the kubelet's AtomicWriter
    and emptyDir's setupDir: 0777);
  - the emptyDir with medium Memory: a tmpfs mounted without a mode (1777)
    of the manifest's sizeLimit; Nomad's tmpfs mount the same (Docker's
    default mode is 1777);
  - Nomad's template: the destination's directory 0755, the file 0644
    (consul-template's defaults);

every absolute path of the arguments is moved under the test's directory
(the container's root), every other argument is passed as written, the
metrics port included (the network namespace is the daemon's own). The
daemon must start, answer the readiness probe's command and run a batch
from the uid the manifest's tool allows (allow_uids: SO_PEERCRED), as
root (as the manifests run it) and as nobody. A truly unsafe directory
stays refused: the configMap's 0777 without the read-only mount, an
emptyDir on disk (0777, no sticky bit), and a link planted where the
daemon's own directory in the 1777 one would be.

Needs root (mounts, namespaces), unshare and setpriv, and python3-yaml
(listed for CI in .ci/run).
"""

import json
import os
import re
import shutil
import stat
import subprocess
import unittest

import harness
from harness import Daemon, DaemonFailed

try:
    import yaml
except ImportError:  # python3-yaml: in .ci/run's packages
    yaml = None

SRC = os.path.realpath(os.path.join(harness.HERE, "..", ".."))
DAEMONSET = os.path.join(SRC, "contrib", "kubernetes", "toolexecd-daemonset.yaml")
NOMAD = os.path.join(SRC, "contrib", "nomad", "toolexecd.nomad.hcl")
ROOT = os.geteuid() == 0
HAVE = all(shutil.which(t) for t in ("unshare", "setpriv", "mount"))
TS = "..2026_11_26_08_00_00.123456789"  # the kubelet's timestamped directory
# the client runs as the allowed uid: an interpreter under /root is not its to run
CLIENT_PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


def quantity(q):
    """A Kubernetes quantity ("1Gi", "512Mi", "1000") in bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(q))
    unit = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6,
            "G": 10**9, "T": 10**12, None: 1}[m.group(2)]
    return int(m.group(1)) * unit


def daemonset():
    """The DaemonSet's container, its volumes by name, and the ConfigMaps."""
    with open(DAEMONSET) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    return ds["containers"][0], {v["name"]: v for v in ds["volumes"]}, cms


def nomad():
    """The Nomad task's args, tmpfs mount targets, host volumes and templates."""
    with open(NOMAD) as f:
        hcl = f.read()
    args = json.loads(re.sub(r",\s*\]", "]", re.search(r"\bargs\s*=\s*(\[.*?\])", hcl, re.S).group(1)))
    tmpfs = [(m.group(1), int(m.group(2))) for m in re.finditer(
        r'mount\s*\{\s*type\s*=\s*"tmpfs"\s*target\s*=\s*"([^"]+)".*?size\s*=\s*(\d+)', hcl, re.S)]
    volumes = json.loads(re.sub(r",\s*\]", "]", re.search(r"\bvolumes\s*=\s*(\[.*?\])", hcl, re.S).group(1)))
    caps = json.loads(re.search(r"\bcap_add\s*=\s*(\[.*?\])", hcl, re.S).group(1))
    assert re.search(r'\bcap_drop\s*=\s*\["all"\]', hcl)
    nnp = "no-new-privileges" in re.search(r"\bsecurity_opt\s*=\s*(\[.*?\])", hcl, re.S).group(1)
    templates = [(m.group(1), m.group(2)) for m in re.finditer(
        r'template\s*\{\s*destination\s*=\s*"([^"]+)"\s*data\s*=\s*<<-JSON\n(.*?)\n\s*JSON\n', hcl, re.S)]
    return args, tmpfs, volumes, templates, caps, nnp


def arg(args, name):
    return next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))


class Pod(Daemon):
    """The daemon with a manifest's arguments, in namespaces of its own where
    setup (shell lines run as root before the daemon) has built what the
    runtime gives the container; absolute paths under self.root."""

    def __init__(self, args, setup, user=None, caps=(), no_new_privs=False):
        self.manifest_args = args
        self.setup = setup
        self.user = user
        self.caps = caps
        self.no_new_privs = no_new_privs
        super().__init__(start=False)
        self.root = self.path("root")
        os.mkdir(self.root, 0o755)
        self.sock = self.at(arg(args, "--socket"))

    def at(self, p):
        return self.root + p

    def command(self):
        args = [re.sub(r"^(--[a-z-]+)=(/.*)$", lambda m: m.group(1) + "=" + self.at(m.group(2)), a)
                for a in self.manifest_args]
        # the container's capabilities: the bounding set is what root keeps
        # at exec (CAP_FOWNER, for one, is not there)
        drop = ["setpriv", "--bounding-set=-all" + "".join(",+" + c.lower() for c in self.caps)]
        if self.no_new_privs:
            drop.append("--no-new-privs")
        if self.user:
            drop += ["--reuid=%d" % self.user.pw_uid, "--regid=%d" % self.user.pw_gid,
                     "--clear-groups"]
        script = "set -e\n" + "\n".join(self.setup) + '\nexec "$@"\n'
        return (["unshare", "--mount", "--propagation", "private", "--net", "sh", "-c", script,
                 "sh"] + drop + [harness.TOOLEXECD] + args)

    def in_ns(self, p):
        """p as the daemon sees it (its mount namespace)."""
        return "/proc/%d/root%s" % (self.proc.pid, self.at(p))

    def batch_as(self, uid, text):
        """A batch calling "cat" with text, from uid (allow_uids)."""
        code = ("import json, harness; c = harness.Client(%r); "
                "r = c.run([{'id': 'c1', 'name': 'cat', 'arguments': {'text': %r}}]); "
                "print(json.dumps(r.terminal))") % (self.sock, text)
        out = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                              CLIENT_PY, "-c", code], cwd=harness.HERE, capture_output=True,
                             text=True, timeout=harness.WAIT * 2,
                             env=dict(os.environ, PYTHONPATH=harness.HERE))
        if out.returncode != 0:
            raise AssertionError("client as uid %d: %s\n%s" % (uid, out.stderr, self.stderr()))
        return json.loads(out.stdout)


def configmap_volume(base, data, mode):
    """The kubelet's configMap volume directory, as its AtomicWriter leaves it."""
    os.makedirs(base)
    os.chmod(base, 0o777)  # emptyDir's setupDir, which the configMap wraps
    ts = os.path.join(base, TS)
    os.mkdir(ts)
    os.chmod(ts, 0o755)
    for name, text in data.items():
        with open(os.path.join(ts, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(ts, name), mode)
    os.symlink(TS, os.path.join(base, "..data"))
    for name in data:
        os.symlink(os.path.join("..data", name), os.path.join(base, name))
    return base


def mount_lines(pod, container, volumes, read_only=None, tmpfs_medium=True):
    """The DaemonSet's volumeMounts as shell lines (and the host side made)."""
    lines = []
    for m in container["volumeMounts"]:
        v = volumes[m["name"]]
        target = pod.at(m["mountPath"])
        os.makedirs(target, exist_ok=True)
        ro = m.get("readOnly", False) if read_only is None else read_only
        if "hostPath" in v:  # DirectoryOrCreate: 0755, root's
            os.chmod(target, 0o755)
            if pod.user:
                os.chown(target, pod.user.pw_uid, pod.user.pw_gid)
        elif "emptyDir" in v:
            if v["emptyDir"].get("medium") == "Memory" and tmpfs_medium:
                size = quantity(v["emptyDir"]["sizeLimit"])
                lines.append("mount -t tmpfs -o size=%d tmpfs %s" % (size, target))
            else:
                os.chmod(target, 0o777)  # setupDir on disk: 0777, no sticky bit
        elif "configMap" in v:
            _, _, cms = daemonset()
            cm = cms[v["configMap"]["name"]]
            src = configmap_volume(pod.path("kubelet", "volumes", "kubernetes.io~configmap", m["name"]),
                                   cm["data"], v["configMap"].get("defaultMode", 0o644))
            lines.append("mount --bind %s %s" % (src, target))
            if ro:
                lines.append("mount -o remount,bind,ro %s" % target)
        else:
            raise AssertionError("a volume kind the test does not rebuild: %r" % v)
    return lines


def k8s_pod(user=None, read_only=None, tmpfs_medium=True):
    container, volumes, _ = daemonset()
    sc = container["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and sc.get("runAsUser") == 0
    pod = Pod(container["args"], [], user, sc["capabilities"]["add"],
              sc.get("allowPrivilegeEscalation") is False)
    pod.setup = mount_lines(pod, container, volumes, read_only, tmpfs_medium)
    return pod, container


def allowed_uid():
    _, _, cms = daemonset()
    tools = [json.loads(t) for cm in cms.values() for t in cm["data"].values()]
    return tools[0]["allow_uids"][0], tools[0]["name"]


@unittest.skipUnless(ROOT and HAVE, "needs root (mounts, namespaces), unshare and setpriv")
@unittest.skipIf(yaml is None, "needs python3-yaml (.ci/run installs it)")
class TestDaemonSet(unittest.TestCase):
    def serve(self, pod, container):
        self.addCleanup(pod.stop)  # exit 0 at SIGTERM, a clean stderr
        pod.start()
        # the layout is the kubelet's: 0777 tools (read-only), 1777 work
        tools = pod.in_ns(arg(container["args"], "--tools"))
        work = pod.in_ns(arg(container["args"], "--work-dir"))
        self.assertEqual(stat.S_IMODE(os.stat(tools).st_mode), 0o777)
        self.assertTrue(os.statvfs(tools).f_flag & os.ST_RDONLY)
        self.assertTrue(os.path.islink(os.path.join(tools, "cat.json")))
        self.assertEqual(stat.S_IMODE(os.stat(work).st_mode), 0o1777)
        # the readiness probe's own command, its socket path moved
        probe = container["readinessProbe"]["exec"]["command"]
        self.assertEqual(probe[0], "toolexec")
        probe = [os.environ.get("TOOLEXEC", "toolexec")] + [
            pod.at(a) if a.startswith("/") else a for a in probe[1:]]
        r = subprocess.run(probe, capture_output=True, text=True, timeout=harness.WAIT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + pod.stderr())
        uid, name = allowed_uid()
        self.assertEqual(name, "cat")
        term = pod.batch_as(uid, "from the agent pod")
        self.assertEqual(term["event"], "batch_completed", term)
        self.assertIn("from the agent pod", term["messages"][0]["content"])
        # the daemon works in a directory of its own in the 1777 one
        uid_d = pod.user.pw_uid if pod.user else 0
        st = os.lstat(os.path.join(work, "toolexecd-%d" % uid_d))
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o711)
        self.assertEqual(st.st_uid, uid_d)
        return pod

    def test_root_daemon_starts_and_serves(self):
        pod, container = k8s_pod()
        self.serve(pod, container)

    def test_unprivileged_daemon_starts_and_serves(self):
        import pwd
        pod, container = k8s_pod(user=pwd.getpwnam("nobody"))
        # the unprivileged daemon makes its socket: the hostPath is its own
        self.serve(pod, container)

    def test_reload_after_the_kubelet_updates_the_configmap(self):
        pod, container = k8s_pod()
        self.serve(pod, container)
        # the kubelet's update: a new timestamped directory, ..data swapped
        base = pod.path("kubelet", "volumes", "kubernetes.io~configmap", "tools")
        new = "..2026_11_26_09_00_00.987654321"
        shutil.copytree(os.path.join(base, TS), os.path.join(base, new), symlinks=True)
        with open(os.path.join(base, new, "cat.json")) as f:
            tool = json.load(f)
        tool["description"] = "Returns its arguments, updated."
        with open(os.path.join(base, new, "cat.json"), "w") as f:
            json.dump(tool, f)
        os.symlink(new, os.path.join(base, "..data_tmp"))
        os.rename(os.path.join(base, "..data_tmp"), os.path.join(base, "..data"))
        c = pod.client()
        pod.proc.send_signal(1)  # the manifest's `kill -HUP 1`
        harness.deadline_wait(
            lambda: any(t["description"].endswith("updated.") for t in c.tools()["tools"]),
            what="the updated definition loaded")

    def refused(self, pod, why):
        self.addCleanup(pod.stop, False)
        with self.assertRaises(DaemonFailed) as cm:
            pod.start()
        self.assertEqual(pod.proc.returncode, 1)
        self.assertIn(why, str(cm.exception))

    def test_configmap_not_read_only_is_refused(self):
        pod, container = k8s_pod(read_only=False)
        self.refused(pod, "%s: writable by others (mode 0777); chmod go-w: refusing every "
                     "definition" % pod.at(arg(container["args"], "--tools")))

    def test_emptydir_on_disk_is_refused(self):
        # 0777 without the sticky bit: the daemon's directory in it could be
        # renamed away by anyone
        pod, container = k8s_pod(tmpfs_medium=False)
        self.refused(pod, "%s: writable by group or others (mode 0777)"
                     % pod.at(arg(container["args"], "--work-dir")))

    def test_link_planted_in_the_sticky_dir_is_refused(self):
        pod, container = k8s_pod()
        work = pod.at(arg(container["args"], "--work-dir"))
        # another user's link where the daemon's own directory would be,
        # made on the tmpfs before the daemon starts
        elsewhere = pod.path("elsewhere")
        os.mkdir(elsewhere, 0o711)
        pod.setup.append("ln -s %s %s/toolexecd-0" % (elsewhere, work))
        pod.setup.append("chown -h 10001:10001 %s/toolexecd-0" % work)
        self.refused(pod, "%s/toolexecd-0: a link or not a directory, not the daemon's own: "
                     "refused" % work)


@unittest.skipUnless(ROOT and HAVE, "needs root (mounts, namespaces), unshare and setpriv")
class TestNomadJob(unittest.TestCase):
    def test_root_daemon_starts_and_serves(self):
        args, tmpfs, volumes, templates, caps, nnp = nomad()
        pod = Pod(args, [], caps=caps, no_new_privs=nnp)
        self.addCleanup(pod.stop)
        for target, size in tmpfs:  # Docker's tmpfs: mode 1777 unless told
            os.makedirs(pod.at(target))
            pod.setup.append("mount -t tmpfs -o size=%d tmpfs %s" % (size, pod.at(target)))
        for v in volumes:  # the node's socket directory
            os.makedirs(pod.at(v.split(":")[1]), 0o755)
        self.assertTrue(templates)
        for dest, data in templates:  # consul-template: 0755 directories, 0644 files
            path = pod.at("/" + dest)
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            with open(path, "w") as f:
                f.write(data)
            os.chmod(path, 0o644)
        self.assertEqual(os.path.dirname(pod.at("/" + templates[0][0])),
                         pod.at(arg(args, "--tools")))
        pod.start()
        self.assertEqual(stat.S_IMODE(os.stat(pod.in_ns(arg(args, "--work-dir"))).st_mode),
                         0o1777)
        uid = json.loads(templates[0][1])["allow_uids"][0]
        term = pod.batch_as(uid, "from the agent job")
        self.assertEqual(term["event"], "batch_completed", term)
        self.assertIn("from the agent job", term["messages"][0]["content"])


if __name__ == "__main__":
    unittest.main()
