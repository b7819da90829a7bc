#!/usr/bin/env python3
"""bench/sandbox_cmd.py [BUILD] [RUNS] - the per-run cost of `toolexec sandbox`
beside bubblewrap doing comparable confinement and a bare run, for /bin/true
a tiny C program that prints a line, and a Python script (python3, one
import, a line printed).

Each round runs every variant once, in turn (bare, bwrap, toolexec sandbox),
so that a machine's drift hits them alike; each run is timed from outside,
fork to reap (time.perf_counter around subprocess.run), and its CPU taken
from getrusage(RUSAGE_CHILDREN) around it (user + system of the run's
processes, those that outlive it included: the bench is their subreaper).
Printed: the median and the quartiles of the
wall time in ms per variant, the median CPU, and the ratios of the medians.
bench/goals imports measure() and variants().

bwrap's comparable confinement: the host read-only (--ro-bind / /), a /tmp,
/dev and /proc of its own, /home and /root covered, every namespace
(--unshare-all: user, ipc, pid, net, uts, cgroup), a session of its own,
no capabilities, killed with its parent. Not included (toolexec sandbox
has them): a seccomp filter (bwrap takes one only as compiled BPF on a
descriptor), Landlock, a private current directory made and removed per
run, the PID 1 that reports the command's resource use. bwrap is installed
from Debian (bubblewrap) when missing and apt-get is there.

A figure to read, never a pass/fail test.
"""
import ctypes
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def need_bwrap():
    if shutil.which("bwrap"):
        return shutil.which("bwrap")
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"],
                       stdout=subprocess.DEVNULL, check=False)
    return shutil.which("bwrap")


def tiny_c(d):
    src = os.path.join(d, "hello.c")
    exe = os.path.join(d, "hello")
    with open(src, "w") as f:
        f.write('#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n')
    subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    os.chmod(d, 0o755)
    return exe


def py_script(d):
    """A Python script that prints a line, as python3 runs it: the
    interpreter's start-up (site, encodings) and the script's import of json."""
    path = os.path.join(d, "hello.py")
    with open(path, "w") as f:
        f.write('import json\nprint(json.dumps({"hello": 1}))\n')
    os.chmod(d, 0o755)
    # the system's interpreter: one under /root or /home (pyenv) is hidden by bwrap's
    # --tmpfs there, as it is by toolexec sandbox's view
    system = [p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)]
    return [(system + [sys.executable])[0], path]


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def own_children():
    pids = set()
    for t in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/children" % t) as f:
                pids.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return pids


def reap_orphans(before):
    """Reap the children we gained as subreaper (not those of before) until
    none is left: a run's descendants that outlived it."""
    while True:
        new = own_children() - before
        if not new:
            return
        for pid in new:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def timed(argv):
    """One run: wall ms (fork to reap) and the CPU ms of the run's
    processes, its own and every descendant (the kernel's deferred work,
    such as a namespace's teardown in a kworker, is not counted). bwrap
    exits as soon as its PID 1 reports the command's status, before that
    PID 1 is reaped: as subreaper (measure()) we inherit and reap it after
    the wall time is taken, so its CPU and the command's are counted."""
    before = own_children()
    c0 = cpu_children()
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t = time.perf_counter() - t0
    reap_orphans(before)
    c = cpu_children() - c0
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.decode()[-500:]))
    return t * 1000, c * 1000


def variants(toolexec, bwrap, d, cmd):
    """(name, argv) of cmd bare, under bwrap (when bwrap) and under
    toolexec sandbox, d readable to it."""
    v = [("bare", cmd)]
    if bwrap:
        v.append(("bwrap", [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                            "--tmpfs", "/tmp", "--tmpfs", "/home", "--tmpfs", "/root",
                            "--ro-bind", d, d, "--unshare-all", "--new-session",
                            "--die-with-parent", "--cap-drop", "ALL", "--"] + cmd))
    v.append(("toolexec sandbox", [toolexec, "sandbox", "--read", d, "--"] + cmd))
    return v


def measure(variants, runs):
    """3 warm-up rounds, then runs rounds, each variant once in turn: wall
    and CPU ms of each run, by name."""
    wall = {v: [] for v, _ in variants}
    cpu = {v: [] for v, _ in variants}
    libc = ctypes.CDLL(None, use_errno=True)
    was = ctypes.c_int(0)
    libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER): %s" % os.strerror(ctypes.get_errno()))
    try:
        for _ in range(3):  # warm-up: page cache, first exec of each
            for v, argv in variants:
                timed(argv)
        for _ in range(runs):
            for v, argv in variants:
                w, c = timed(argv)
                wall[v].append(w)
                cpu[v].append(c)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, was.value, 0, 0, 0)
    return wall, cpu


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    toolexec = os.path.join(build, "daemon", "cli", "toolexec")
    bwrap = need_bwrap()
    d = tempfile.mkdtemp(prefix="te-sbx-bench.")
    try:
        hello = tiny_c(d)
        for name, cmd in (("/bin/true", ["/bin/true"]), ("tiny C (puts)", [hello]),
                          ("python3 script", py_script(d))):
            times, cpu = measure(variants(toolexec, bwrap, d, cmd), runs)
            med = {v: statistics.median(t) for v, t in times.items()}
            cmed = {v: statistics.median(t) for v, t in cpu.items()}
            print("%s, %d runs each, uid %d:" % (name, runs, os.geteuid()))
            for v, t in times.items():
                q = statistics.quantiles(t, n=4)
                print("  %-17s median %7.2f ms  (q1 %.2f, q3 %.2f)  CPU median %.2f ms" % (
                    v, med[v], q[0], q[2], cmed[v]))
            s = med["toolexec sandbox"]
            print("  toolexec sandbox / bare:  %.1fx" % (s / med["bare"]))
            if bwrap:
                print("  toolexec sandbox / bwrap: %.2fx   (bwrap / bare: %.1fx); CPU %.2fx"
                      % (s / med["bwrap"], med["bwrap"] / med["bare"],
                         cmed["toolexec sandbox"] / max(cmed["bwrap"], 1e-9)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
