#!/usr/bin/env python3
"""bench/fs_refusals.py - what reporting file-system refusals costs.

  sudo bench/fs_refusals.py --base BASEBUILD [--build DIR] [--calls N]
                            [--rounds R]

Two root daemons, one built without the watch (BASEBUILD: a build of the
commit before it) and this build's (daemon/confine/fswatch.c: a BPF program
at the end of every system call of the host, a map entry per call), run one
at a time in R interleaved rounds (drift hits both alike):

  serial   N calls of the C echo worker, one at a time: us per call
  c16      the same N at concurrency 16: us per call
  syscalls while each daemon is up, a loop of 1,000,000 getppid() (a
           system call that succeeds: the program's first test) and of
           200,000 failed opens of a name that is not there (ENOENT, a
           uid no call holds: the test, then the hash lookup): ns each

(A flood of 100,000 refusals in one call, and the daemon's memory through
it: tests/integration/test_fs_denials.py.)

It prints the median of the rounds for each. A benchmark to run by hand,
never a pass/fail test.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

LOOP_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec * 1e9 + t.tv_nsec; }
int main(void) {
    double t0 = now();
    for (int i = 0; i < 1000000; i++) getppid();
    double t1 = now();
    for (int i = 0; i < 200000; i++) open("/nonexistent-te-bench", O_RDONLY);
    double t2 = now();
    printf("%.1f %.1f\n", (t1 - t0) / 1e6, (t2 - t1) / 2e5);
    return 0;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="build dir without the watch")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: a root daemon's calls are the ones watched")
    tmp = tempfile.mkdtemp(prefix="te-fsbench-")
    loop = os.path.join(tmp, "loop")
    with open(loop + ".c", "w") as f:
        f.write(LOOP_C)
    subprocess.run(["cc", "-O2", "-o", loop, loop + ".c"], check=True)
    os.environ.setdefault("TE_TESTWORKER", os.path.join(a.build, "tests", "workers",
                                                        "testworker"))
    os.environ.setdefault("TOOLEXECD", os.path.join(a.build, "daemon", "toolexecd"))
    import harness
    builds = {"base": os.path.abspath(a.base), "new": os.path.abspath(a.build)}
    got = {k: {"serial": [], "c16": [], "getppid": [], "enoent": []} for k in builds}
    for r in range(a.rounds):
        for name, b in builds.items():
            harness.TOOLEXECD = os.path.join(b, "daemon", "toolexecd")
            d = harness.Daemon([harness.worker_tool("echo", "echo")])
            try:
                c = d.client()
                calls = [{"id": "e%d" % i, "name": "echo", "arguments": {}}
                         for i in range(a.calls)]
                c.run(calls[:16], max_concurrency=16)  # warm up
                for key, conc in (("serial", 1), ("c16", 16)):
                    t0 = time.monotonic()
                    c.run(calls, max_concurrency=conc, timeout=600)
                    got[name][key].append((time.monotonic() - t0) / a.calls * 1e6)
                out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                                      "--clear-groups", loop], check=True,
                                     stdout=subprocess.PIPE, text=True).stdout.split()
                got[name]["getppid"].append(float(out[0]))
                got[name]["enoent"].append(float(out[1]))
            finally:
                d.stop()
        print("round %d done" % (r + 1), file=sys.stderr)
    print("%-10s %12s %12s %8s" % ("", "base", "this", "delta"))
    for key, unit in (("serial", "us/call"), ("c16", "us/call"), ("getppid", "ns"),
                      ("enoent", "ns")):
        mb = statistics.median(got["base"][key])
        mn = statistics.median(got["new"][key])
        print("%-10s %9.1f %-2s %9.1f %-2s %+7.1f%%" % (key, mb, unit[:2], mn, unit[:2],
                                                       (mn - mb) / mb * 100))


if __name__ == "__main__":
    main()
