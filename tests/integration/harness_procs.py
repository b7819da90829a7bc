"""Waiting and processes for the integration tests: deadline-bounded polls,
the processes of a call found by a marker in their command line, and the
spare sandboxes a daemon's spawner holds ready."""

import os
import signal
import time
import uuid

SCALE = float(os.environ.get("TE_TIMEOUT_SCALE", "1"))
# Longest wait for any single event / condition. Generous: under ASan on a
# loaded machine a fork+exec can take a while; a correct daemon never makes
# a test wait this long.
WAIT = 15.0 * SCALE


def deadline_wait(cond, timeout=WAIT, interval=0.005, what="condition"):
    """Poll cond() until it returns a true value or the deadline passes."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)
        interval = min(interval * 2, 0.05)


def new_token(what="tok"):
    """A unique marker to put in a worker's command line."""
    return "te-%s-%s" % (what, uuid.uuid4().hex)


def pids_with_token(token):
    """Live (non-zombie) processes whose command line contains token. Found
    from outside through /proc, so PID namespaces do not matter."""
    needle = token.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
            if needle not in cmd:
                continue
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rindex(")") + 2:].split()[0]
        if state not in ("Z", "X", "x"):
            found.append(int(name))
    return found


def wait_token_present(token, timeout=WAIT):
    return deadline_wait(lambda: pids_with_token(token), timeout=timeout,
                         what="a process with %s in its command line" % token)


def assert_token_gone(token, timeout=3.0 * SCALE, what="process"):
    """No process of the call is left: the spec kills leftovers within 1 s."""
    try:
        deadline_wait(lambda: not pids_with_token(token), timeout=timeout,
                      what="%s (%s) to be gone" % (what, token))
    finally:
        kill_token(token)  # clean up after a failure


def kill_token(token):
    """SIGKILL to every process with token in its command line."""
    for pid in pids_with_token(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    return s[s.index("(") + 1:s.rindex(")")], int(s[s.rindex(")") + 2:].split()[1])


def _children(pid, comm):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                c, ppid = _stat(int(name))
            except (OSError, ValueError):
                continue
            if ppid == pid and c == comm:
                out.append(int(name))
    return out


def spare_pids(daemon_pid):
    """The sandboxes the daemon's spawner holds ready (daemon/run/spares.c):
    processes named toolexecd-spare, each with a directory (its cwd) and,
    where calls get one, a cgroup made for the call that will take it."""
    return [p for sp in _children(daemon_pid, "toolexecd-spawn")
            for p in _children(sp, "toolexecd-spare")]


def spare_dirs(daemon_pid):
    out = set()
    for p in spare_pids(daemon_pid):
        try:
            out.add(os.path.basename(os.readlink("/proc/%d/cwd" % p)))
        except OSError:
            pass
    return out
