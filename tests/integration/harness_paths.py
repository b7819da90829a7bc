"""Where the source and build trees are, as the tools the tests run see them.

The tests' tools run from the trees (the testworker, tests/workers' scripts,
contrib/python's SDK, tests/mcp_servers' servers) and many run as another
user (nobody, the toolexec user, a uid per call), as may the daemon itself.
A tree under a directory other users may not pass through (a clone in a
`mktemp -d` or a home directory, mode 0700) keeps them out: "could not
execute .../testworker: Permission denied". reach_trees() lets them in
without touching the disk: in a mount namespace of the test's own, each
such directory is covered by a tmpfs of mode 0755 holding bind mounts of its
real entries, each keeping its own mode. The paths stay the same, so
definitions and the tests about them keep the build tree's; the daemon and
everything the test starts inherit the namespace, which goes with the last
of them (nothing to clean up, nothing left on disk).
"""

import ctypes
import os
import stat
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLEXECD = os.environ.get("TOOLEXECD", "")
TESTWORKER = os.environ.get("TE_TESTWORKER", "")

# Where the default file-system view leaves nothing of the host:
# hidden, or a fresh /tmp of the call's own.
VIEW_LEFT_OUT = ("/tmp", "/home", "/root", "/run", "/var/tmp", "/var/lib", "/dev/shm")


def trees():
    """The source tree and the build tree (they may be apart)."""
    out = {os.path.realpath(os.path.join(HERE, "..", ".."))}
    if TOOLEXECD:
        out.add(os.path.realpath(os.path.join(os.path.dirname(TOOLEXECD), "..")))
    return sorted(out)


def tree_reads():
    """The source and build trees, where the view would leave them out (a
    checkout in a home directory or under /tmp): the test tools run from
    them and load the build's libtoolexec, so definitions show them
    read-only."""
    return [t for t in trees() if any(t == p or t.startswith(p + "/") for p in VIEW_LEFT_OUT)]


def leads_to_tree(path):
    """Is path a directory above a tree of tree_reads() (/home for a clone in
    a home directory)? A view that shows the tree shows the way down to it."""
    return any(t.startswith(path.rstrip("/") + "/") for t in tree_reads())


def sandbox_env(**extra):
    """The environment for a `toolexec sandbox` run: ours without meson's
    LD_LIBRARY_PATH (the build's binaries find their libraries by their
    RUNPATH). The sandboxed command inherits the caller's environment, and
    where the tree is under a hidden directory (a clone under /var/tmp) its
    loader would probe each of those directories for libc, every probe a
    file-system refusal on the run's list."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


def with_tree(fs):
    """A "filesystem" object with the trees of tree_reads() added to "read"."""
    fs = dict(fs)
    fs["read"] = list(fs.get("read", [])) + [t for t in tree_reads() if t not in fs.get("read", [])]
    return fs


def _closed_above(tree):
    """The directories above tree that other users may not pass through, top
    first, each with the entry below it on the way to tree."""
    out = []
    parts = tree.strip("/").split("/")
    for i in range(len(parts)):
        d = "/" + "/".join(parts[:i])
        if not os.stat(d).st_mode & 0o001:
            out.append((d, parts[i]))
    return out


def tree_closed():
    """The first directory on the way to the test programs, or in the trees,
    that other users may not pass through, or None."""
    if os.geteuid() != 0 or not TESTWORKER:
        return None  # the daemon and its tools run as the tests' own user
    for path in [os.path.dirname(os.path.realpath(TESTWORKER))] + trees():
        parts = path.strip("/").split("/")
        for i in range(len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if not os.stat(d).st_mode & 0o001:
                return d
    return None


CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MS_BIND, MS_REC, MS_SLAVE = 4096, 16384, 1 << 19


def _mount(libc, src, target, fstype, flags, data):
    enc = (lambda s: s.encode() if s is not None else None)
    if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "mount %s on %s: %s" % (src or fstype, target, os.strerror(e)))


def _cover(libc, d, way):
    """d, in this mount namespace: a read-only tmpfs of mode 0755 holding
    the same entries, each the real one bind-mounted (a symbolic link
    copied), so that the test sees what it saw (a clone in /root: the
    Python of /root/.pyenv) and other users get through to the entries on
    the way to the trees; each entry keeps its own mode."""
    st = os.stat(d)
    fds, links = {}, {}
    for e in sorted(set(os.listdir(d)) | set(way)):
        p = os.path.join(d, e)
        try:
            if os.path.islink(p):
                links[e] = os.readlink(p)
            else:
                fds[e] = os.open(p, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            if e in way:
                raise  # else gone meanwhile
    try:
        _mount(libc, "te-reach", d, "tmpfs", MS_NOSUID | MS_NODEV,
               "mode=0755,uid=%d,gid=%d,size=1m" % (st.st_uid, st.st_gid))
        for e, fd in fds.items():
            p = os.path.join(d, e)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(p, 0o755)
            else:
                os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            _mount(libc, "/proc/self/fd/%d" % fd, p, None, MS_BIND | MS_REC, None)
        for e, target in links.items():
            os.symlink(target, os.path.join(d, e))
        _mount(libc, None, d, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    finally:
        for fd in fds.values():
            os.close(fd)


def reach_trees(roots=None):
    """Let other users through the directories above the trees (or roots)
    that keep them out (see the module's doc). Needs root and a single
    thread (unshare of a mount namespace), so the harness calls it when
    imported. Returns the directories covered; [] where there were none or
    it cannot (then tree_closed() says what still keeps them out)."""
    if os.geteuid() != 0 or not (roots or TESTWORKER):
        return []
    closed = {}
    for t in roots or trees():
        for d, e in _closed_above(t):
            closed.setdefault(d, set()).add(e)
    if not closed:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        print("NOTE: unshare(CLONE_NEWNS): %s" % os.strerror(ctypes.get_errno()), file=sys.stderr)
        return []
    try:
        # ours stay ours; the host's still reach us
        _mount(libc, None, "/", None, MS_REC | MS_SLAVE, None)
        for d in sorted(closed, key=len):  # the outer first: the inner lie below it
            _cover(libc, d, sorted(closed[d]))
    except OSError as e:
        print("NOTE: %s" % e, file=sys.stderr)
        return []
    return sorted(closed, key=len)
