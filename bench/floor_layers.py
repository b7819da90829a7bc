#!/usr/bin/env python3
"""bench/floor_layers.py - the confinement floor, layer by layer.

  sudo bench/floor_layers.py [--build DIR] [--calls N] [--rounds R]
                             [--perf] [--top K] [--only NAME,...]
                             [--extra NAME=FLAG,...]

bench/sandboxfloor (a default-confined call's sandbox built by the daemon's
own code, started in a plain loop, no daemon) is run with the default
confinement and with one layer changed at a time, R rounds interleaved so
drift on the host hits all alike, N calls each, at concurrency 1 and 16:

  default       as a root daemon's call: uid of its own, view, Landlock,
                seccomp with its listener, init as PID 1, no network namespace
  no-landlock   without the Landlock ruleset
  no-seccomp    without the system-call filter
  host-view     "filesystem": "host" (work dir covered), not the default view
  uid-tool      every call as the tool's user (--call-uids no)
  uid-daemon    no user switch at all (root; the bounding set kept too)
  no-init       the tool is PID 1 itself
  +netns        a network namespace per call ("network": false, its lo
                brought up), which the default has not: a layer added, its
                delta is negative (lo alone: bench/loopback_up)
  +bset-call    the bounding set emptied in each call's child (41
                PR_CAPBSET_DROP) rather than once in the spawning thread as
                the spawner does: a layer added back, its delta negative

and bench --plain (the bare fork+exec+pipe loop) beside them (--only: the
default and the variants named, no others; --extra: a variant of one's own,
sandboxfloor's flags comma-separated, e.g. another filter to compare with
--filter FILE). It prints us
per call (median, min-max) and each variant's delta against the default:
what that layer costs (for +netns, minus what it would add); then, of it,
the time from clone() to the child's exec (the spawner's own time for a
call, suspended in CLONE_VFORK: the serial part), median and delta.

--perf also records each variant once (perf record -a -g -e cpu-clock,
a sample every 50 us of CPU) and names, for the default and for each layer,
the system calls and the kernel functions whose time per call changes most
without it (the floor's own processes: sandboxfloor, toolexecd-init, echo;
the kernel's deferred teardown in kworkers is counted apart, shared with
whatever else runs on the host). A benchmark to run by hand, never a pass/fail test.
"""

import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = [
    ("default", []),
    ("no-landlock", ["--no-landlock"]),
    ("no-seccomp", ["--no-seccomp"]),
    ("host-view", ["--host-view"]),
    ("uid-tool", ["--uid", "tool"]),
    ("uid-daemon", ["--uid", "daemon"]),
    ("no-init", ["--no-init"]),
    ("+netns", ["--net-none"]),
    ("+bset-call", ["--bset-per-call"]),
]
PERIOD_NS = 50000
OWN = "sandboxfloor,toolexecd-init,echo"


def floor(sfloor, flags, worker, calls, conc, prefix=()):
    out = subprocess.run(list(prefix) + [sfloor] + flags + [worker, str(calls), str(conc)],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    start = re.search(r"us_start_per_call ([0-9.]+)", out)
    return float(re.search(r"us_per_call ([0-9.]+)", out).group(1)), float(start.group(1))


def plain(bench, worker, calls, conc):
    t0 = time.monotonic()
    subprocess.run([bench, "--plain", worker, str(calls), str(conc)], check=True)
    return (time.monotonic() - t0) / calls * 1e6


def paths(build):
    """The floor, the plain loop and the worker of a build directory."""
    build = os.path.abspath(build)
    return (os.path.join(build, "bench", "sandboxfloor"), os.path.join(build, "bench", "bench"),
            os.path.join(build, "contrib", "tools", "c", "echo"))


def measure(sfloor, bench, worker, calls, rounds, conc):
    """rounds rounds, interleaved, of calls calls at concurrency conc of the
    plain loop and of each variant: us per call of each round, by name
    ("plain" and VARIANTS), and of it the clone-to-exec time."""
    times = {name: [] for name, _ in VARIANTS}
    starts = {name: [] for name, _ in VARIANTS}
    times["plain"] = []
    for _ in range(rounds):
        times["plain"].append(plain(bench, worker, calls, conc))
        for name, flags in VARIANTS:
            per, start = floor(sfloor, flags, worker, calls, conc)
            times[name].append(per)
            starts[name].append(start)
    return times, starts


def report(conc, times, starts):
    """The layer table of one concurrency, as measure() returned it."""
    med = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    print("\nconcurrency %d: us per call, median and min (max); delta: default - variant, "
          "of the medians and of the mins (the least disturbed run)" % conc)
    for k, v in times.items():
        delta = "" if k in ("default", "plain") else "%+9.1f %+9.1f" % (
            med["default"] - med[k], low["default"] - low[k])
        print("  %-12s %8.1f %8.1f  (%.1f) %s" % (k, med[k], low[k], max(v), delta))
    print("  default / plain  %.2f (median)  %.2f (min)" % (med["default"] / med["plain"],
                                                          low["default"] / low["plain"]))
    smed = {k: statistics.median(v) for k, v in starts.items()}
    print("  of it, clone to exec (us per call, median; delta: default - variant):")
    print("   " + "  ".join("%s %.0f%s" % (k, smed[k], "" if k == "default" else " (%+.0f)" % (
        smed["default"] - smed[k])) for k in smed))


SKIP = re.compile(r"^(_raw_|__raw_callee_save|queued_|native_|__rcu_read|asm_|sysvec_|"
                  r"handle_softirqs|__irq_exit|irq_exit|__sysvec)")


def samples(data, comms):
    """Each sample of the processes comms: its kernel frames, innermost
    first ([] for a sample in user space)."""
    out = subprocess.run(["perf", "script", "-i", data, "--comms", comms, "-F", "comm,ip,sym,dso"],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    for block in out.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        frames = []
        for l in lines[1:]:
            m = re.match(r"\s*[0-9a-f]+ (\S+) \((.*)\)", l)
            if not m or "kernel" not in m.group(2):
                break
            frames.append(m.group(1).split("+")[0])
        yield frames


def kernel_us(data, comms, calls):
    """Kernel time per call (us) of the processes comms, by system call (or
    page fault, interrupt) and by function (the innermost frame that is not
    a lock or interrupt primitive: a cpu-clock sample taken in a section
    with interrupts off lands on the unlock that ends it)."""
    by_call, by_fn = collections.Counter(), collections.Counter()
    us = PERIOD_NS / 1000 / calls
    for frames in samples(data, comms):
        if not frames:
            by_call["(user)"] += us
            continue
        # the system call: the frame do_syscall_64 called (a wrapper such
        # as ksys_mmap_pgoff where the kernel inlined __x64_sys_*)
        sc = None
        if "__secure_computing" in frames:
            sc = "(seccomp filter)"
        elif any(re.match(r"__(x64|do|se)_sys_", f) for f in frames):
            sc = next(f for f in reversed(frames) if re.match(r"__(x64|do|se)_sys_", f))
        elif "do_syscall_64" in frames:
            i = frames.index("do_syscall_64")
            if i > 0 and frames[i - 1] == "x64_sys_call":  # the dispatcher
                i -= 1
            sc = frames[i - 1] if i > 0 else "(syscall entry)"
        else:
            sc = ("(page fault)" if "exc_page_fault" in frames else
                  "(interrupt)" if any(f.startswith(("sysvec_", "asm_sysvec")) for f in frames)
                  else "(fork child)" if "ret_from_fork" in frames else "(other)")
        by_call[re.sub(r"^(__(x64|do|se)_sys_|ksys_|__sys_|kernel_)", "", sc)] += us
        by_fn[next((f for f in frames if not SKIP.match(f)), frames[0])] += us
    return by_call, by_fn


def kworkers(data):
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                          "--sort", "comm", "-F", "sample,comm", "-q"], check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    n = 0
    for l in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)", l)
        if m and m.group(2).startswith("kworker"):
            n += int(m.group(1))
    return n


def fmt(c, top):
    return ", ".join("%s %+.0f" % (f, u) for f, u in sorted(c.items(), key=lambda x: -abs(x[1]))[:top])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--perf", action="store_true", help="name the kernel functions per layer")
    ap.add_argument("--perf-calls", type=int, default=1000)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--only", help="NAME[,NAME...]: these variants beside the default")
    ap.add_argument("--extra", action="append", default=[],
                    help="NAME=FLAG[,FLAG...]: a variant of one's own, e.g. "
                         "shape=--filter,/tmp/f.bpf")
    a = ap.parse_args()
    for e in a.extra:
        name, _, flags = e.partition("=")
        VARIANTS.append((name, flags.split(",") if flags else []))
    if a.only:
        keep = set(a.only.split(",")) | {"default"} | {e.partition("=")[0] for e in a.extra}
        unknown = keep - {name for name, _ in VARIANTS}
        if unknown:
            raise SystemExit("floor_layers.py: --only: no variant %s" % ", ".join(sorted(unknown)))
        VARIANTS[:] = [v for v in VARIANTS if v[0] in keep]
    if os.geteuid() != 0:
        raise SystemExit("floor_layers.py: root only (the floor is a root daemon's)")
    sfloor, bench, worker = paths(a.build)
    print("sandboxfloor, %d CPUs, %s, load %s; %d calls x %d rounds" % (
        os.cpu_count(), os.uname().release, " ".join("%.2f" % x for x in os.getloadavg()),
        a.calls, a.rounds))
    for conc in (1, 16):
        report(conc, *measure(sfloor, bench, worker, a.calls, a.rounds, conc))
    if not a.perf:
        return 0
    if not shutil.which("perf"):
        raise SystemExit("floor_layers.py: --perf: no perf")
    tmp = tempfile.mkdtemp(prefix="te-floorperf-")
    try:
        prof, kw = {}, {}
        for name, flags in VARIANTS:
            data = os.path.join(tmp, name + ".data")
            floor(sfloor, flags, worker, a.perf_calls, 1,
                  ["perf", "record", "-q", "-o", data, "-a", "-g", "-e", "cpu-clock", "-c",
                   str(PERIOD_NS), "--"])
            prof[name] = kernel_us(data, OWN, a.perf_calls)
            kw[name] = kworkers(data) * PERIOD_NS / 1000 / a.perf_calls
        print("\nperf, concurrency 1, %d calls each, a sample every %d us of CPU: us per call "
              "of %s (kworkers: the host's, apart)" % (a.perf_calls, PERIOD_NS // 1000, OWN))
        calls0, fns0 = prof["default"]
        kernel0 = sum(calls0.values()) - calls0["(user)"]
        print("  default: %.0f us in the kernel, %.0f in user space, kworkers %.0f" % (
            kernel0, calls0["(user)"], kw["default"]))
        print("    by system call: %s" % fmt(calls0, a.top))
        print("    by function:    %s" % fmt(fns0, a.top))
        for name, _ in VARIANTS[1:]:
            calls, fns = prof[name]
            dc, df = collections.Counter(calls0), collections.Counter(fns0)
            dc.subtract(calls)
            df.subtract(fns)
            print("  %s: default - variant: %+.0f us in the kernel, kworkers %+.0f" % (
                name, sum(dc.values()) - dc["(user)"], kw["default"] - kw[name]))
            print("    by system call: %s" % fmt(dc, a.top))
            print("    by function:    %s" % fmt(df, a.top))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
