#!/usr/bin/env python3
"""tests/container/podman_daemonset.py IMAGE PODMAN... - the image run as the
DaemonSet runs it, under Debian's podman.

From contrib/kubernetes/toolexecd-daemonset.yaml (python3-yaml), nothing
written twice: the container's args and user, its capabilities, a
read-only root, no privilege escalation, AppArmor unconfined; its volumes
as the kubelet gives them: the hostPath socket directory (bind), the
emptyDir with medium Memory (a tmpfs of its sizeLimit, mode left to the
kernel: 1777), the configMap (a 0777 directory with ..<timestamp>/, ..data
and the links, the files of defaultMode) mounted read-only when readOnly.
The container must keep running, answer the readiness probe's own command
(podman exec), and run a batch sent through the socket from the uid the
ConfigMap's tool allows. Every podman command is bounded in time.

PODMAN is the podman command with its global options (storage, runtime).
Prints "ok ...", "FAIL ..." or "SKIP ..." lines; exit 0, 1, or 77 when
podman cannot run a container here at all (the reason printed).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import harness  # noqa: E402  (the integration tests' client)

BOUND = 120  # seconds: any one podman command
TS = "..2026_11_26_08_00_00.123456789"


def quantity(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    q = str(q)
    return int(q[:-2]) * units[q[-2:]] if q[-2:] in units else int(q)


def main():
    image, podman = sys.argv[1], sys.argv[2:]
    with open(os.path.join(SRC, "contrib", "kubernetes", "toolexecd-daemonset.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    spec = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    c = spec["containers"][0]
    volumes = {v["name"]: v for v in spec["volumes"]}
    sc = c["securityContext"]

    def pm(*args, timeout=BOUND):
        return subprocess.run(podman + list(args), capture_output=True, text=True, timeout=timeout)

    # podman at all: the image's shell, none of the DaemonSet's options
    r = pm("run", "--rm", "--network", "none", "--entrypoint", "/bin/true", image)
    if r.returncode != 0:
        print("SKIP    podman cannot run a container here: %s" % (r.stderr.strip() or r.stdout.strip()))
        return 77

    tmp = tempfile.mkdtemp(prefix="toolexecd-podman.")
    os.chmod(tmp, 0o755)
    name = "toolexecd-ds-%d" % os.getpid()
    run = ["run", "-d", "--name", name, "--network", "none",
           "--user", str(sc.get("runAsUser", 0)), "--cap-drop", "ALL"]
    for cap in sc["capabilities"]["add"]:
        run += ["--cap-add", cap]
    if sc.get("readOnlyRootFilesystem"):
        run.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        run += ["--security-opt", "no-new-privileges"]
    if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
        run += ["--security-opt", "apparmor=unconfined"]
    sock_host = None
    for m in c["volumeMounts"]:
        v = volumes[m["name"]]
        host = os.path.join(tmp, m["name"])
        ro = ":ro" if m.get("readOnly") else ""
        if "hostPath" in v:
            os.mkdir(host, 0o755)
            run += ["-v", "%s:%s%s" % (host, m["mountPath"], ro)]
            sock_host = (m["mountPath"], host)
        elif "emptyDir" in v and v["emptyDir"].get("medium") == "Memory":
            run += ["--mount", "type=tmpfs,destination=%s,tmpfs-size=%d" % (
                m["mountPath"], quantity(v["emptyDir"]["sizeLimit"]))]
        elif "configMap" in v:
            os.mkdir(host)
            os.chmod(host, 0o777)
            ts = os.path.join(host, TS)
            os.mkdir(ts, 0o755)
            for fn, text in cms[v["configMap"]["name"]]["data"].items():
                with open(os.path.join(ts, fn), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(ts, fn), v["configMap"].get("defaultMode", 0o644))
                os.symlink(os.path.join("..data", fn), os.path.join(host, fn))
            os.symlink(TS, os.path.join(host, "..data"))
            run += ["-v", "%s:%s%s" % (host, m["mountPath"], ro)]
        else:
            print("FAIL    a volume this test does not rebuild: %r" % v)
            return 1
    run += [image] + c["args"]
    failed = 0

    def bad(msg):
        nonlocal failed
        failed += 1
        print("FAIL    " + msg)

    try:
        r = pm(*run)
        if r.returncode != 0:
            bad("podman run: %s" % r.stderr.strip())
            return 1
        # ready: the probe's own command answers, and the container runs
        probe = c["readinessProbe"]["exec"]["command"]
        end = time.monotonic() + BOUND
        while True:
            st = pm("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name)
            if not st.stdout.startswith("true"):
                bad("the container exited (%s); its log:\n%s" % (
                    st.stdout.strip(), pm("logs", name).stderr[-4000:]))
                return 1
            r = pm("exec", name, *probe)
            if r.returncode == 0:
                print("ok      running with the DaemonSet's args, capabilities and volumes; "
                      "the readiness probe answers")
                break
            if time.monotonic() > end:
                bad("the readiness probe did not answer within %d s: %s" % (BOUND, r.stderr))
                return 1
            time.sleep(0.2)
        r = pm("exec", name, "stat", "-c", "%a", c["volumeMounts"][1]["mountPath"],
               next(m["mountPath"] for m in c["volumeMounts"] if "configMap" in volumes[m["name"]]))
        modes = r.stdout.split()
        if modes == ["1777", "777"]:
            print("ok      the work directory is 1777 and the configMap 0777 in the container")
        else:
            bad("modes in the container: %r (expected 1777 and 777): %s" % (modes, r.stderr))
        # a batch from the uid the tool allows, through the hostPath socket
        tool = json.loads(next(iter(next(iter(cms.values()))["data"].values())))
        sock = c["args"][0].split("=", 1)[1]
        sock = os.path.join(sock_host[1], os.path.relpath(sock, sock_host[0]))
        code = ("import json, harness; c = harness.Client(%r); "
                "r = c.run([{'id': 'c1', 'name': %r, 'arguments': {'in': 'the pod'}}]); "
                "print(json.dumps(r.terminal))") % (sock, tool["name"])
        uid = tool["allow_uids"][0]
        # Debian's python3: an interpreter under /root is not the client's to run
        r = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                            "/usr/bin/python3", "-c", code], capture_output=True, text=True, timeout=BOUND,
                           env=dict(os.environ, PYTHONPATH=os.path.join(SRC, "tests", "integration"),
                                    PYTHONDONTWRITEBYTECODE="1"))
        try:
            term = json.loads(r.stdout)
        except ValueError:
            term = {}
        if term.get("event") == "batch_completed" and "the pod" in term["messages"][0]["content"]:
            print("ok      a batch from uid %d through the socket: %s" % (
                uid, term["messages"][0]["content"].strip()))
        else:
            bad("the batch: %s %s\n%s" % (r.stdout, r.stderr, pm("logs", name).stderr[-4000:]))
        r = pm("stop", "-t", str(spec.get("terminationGracePeriodSeconds", 30)), name)
        st = pm("inspect", "--format", "{{.State.ExitCode}}", name)
        if r.returncode == 0 and st.stdout.strip() == "0":
            print("ok      stopped (SIGTERM): exit status 0")
        else:
            bad("stop: %s exit %s" % (r.stderr.strip(), st.stdout.strip()))
    finally:
        pm("rm", "-f", name)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
