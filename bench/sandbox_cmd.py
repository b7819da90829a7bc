#!/usr/bin/env python3
"""bench/sandbox_cmd.py [BUILD] [RUNS] - the per-run cost of `toolexec sandbox`
beside bubblewrap doing comparable confinement and a bare run, for /bin/true
and a tiny C program that prints a line.

Each round runs every variant once, in turn (bare, bwrap, toolexec sandbox),
so that a machine's drift hits them alike; each run is timed from outside,
fork to reap (time.perf_counter around subprocess.run). Printed: the median
and the quartiles in ms per variant, and the ratios of the medians.

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
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
TOOLEXEC = os.path.join(BUILD, "daemon", "cli", "toolexec")


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


def timed(argv):
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.decode()[-500:]))
    return t * 1000


def main():
    bwrap = need_bwrap()
    d = tempfile.mkdtemp(prefix="te-sbx-bench.")
    try:
        hello = tiny_c(d)
        for name, cmd in (("/bin/true", ["/bin/true"]), ("tiny C (puts)", [hello])):
            variants = [("bare", cmd)]
            if bwrap:
                variants.append(("bwrap", [bwrap, "--ro-bind", "/", "/", "--dev", "/dev",
                                           "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs",
                                           "/home", "--tmpfs", "/root", "--ro-bind", d, d,
                                           "--unshare-all", "--new-session", "--die-with-parent",
                                           "--cap-drop", "ALL", "--"] + cmd))
            variants.append(("toolexec sandbox", [TOOLEXEC, "sandbox", "--read", d, "--"] + cmd))
            times = {v: [] for v, _ in variants}
            for _ in range(3):  # warm-up: page cache, first exec of each
                for v, argv in variants:
                    timed(argv)
            for _ in range(RUNS):
                for v, argv in variants:
                    times[v].append(timed(argv))
            med = {v: statistics.median(t) for v, t in times.items()}
            print("%s, %d runs each, uid %d:" % (name, RUNS, os.geteuid()))
            for v, t in times.items():
                q = statistics.quantiles(t, n=4)
                print("  %-17s median %7.2f ms  (q1 %.2f, q3 %.2f)" % (v, med[v], q[0], q[2]))
            s = med["toolexec sandbox"]
            print("  toolexec sandbox / bare:  %.1fx" % (s / med["bare"]))
            if bwrap:
                print("  toolexec sandbox / bwrap: %.2fx   (bwrap / bare: %.1fx)"
                      % (s / med["bwrap"], med["bwrap"] / med["bare"]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
