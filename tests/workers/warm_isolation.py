#!/usr/bin/env python3
"""warm_isolation.py - a Python SDK tool for test_warm_isolation.py: what one warm call could reach of another, of
its own PID 1 or of the host. Its handler does {"op": ...}:
  ids        its uid, gid and capability bounding set (CapBnd)
  shm_make   SysV shared memory segments by "keys" (mode "mode"), left behind
  shm_see    whether segments of those keys are there (shmget without IPC_CREAT)
  write      "text" into "path", mode 0600
  read       "path" read back, or the errno that refused it
  bomb       forks until the kernel refuses (children held), writes how many
             to the FIFO "ready", then waits for the FIFO "gate" to open
  hostile    tries its PID 1's report pipe (fd 3): pidfd_getfd, /proc/1/fd/3
             and /proc/1/mem; writes a forged CPU/RSS/status record to
             whatever it got; reads /proc/1/fd/3's link and /proc/1/maps;
             then burns "cpu_ms" of CPU
"""
import ctypes
import errno
import os
import struct
import time

from toolexec.worker import serve

libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438


def err(e):
    return errno.errorcode.get(e, str(e))


def shmget(key, size, flags):
    r = libc.shmget(ctypes.c_int(key), ctypes.c_size_t(size), ctypes.c_int(flags))
    return r if r >= 0 else -ctypes.get_errno()


def status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split()[1]
    return None


def forge(fd):
    """The records toolexecd-init (lib/initwait.h) writes: CPU 1 ms, RSS
    7 kB, status 0."""
    os.write(fd, struct.pack("3i", 3, 1, 0) + struct.pack("3i", 4, 7, 0) +
             struct.pack("3i", 2, 0, 0))


def hostile(arguments):
    out = {}
    pidfd = libc.syscall(SYS_pidfd_open, 1, 0)
    if pidfd < 0:
        out["pidfd_open"] = err(ctypes.get_errno())
    else:
        fd = libc.syscall(SYS_pidfd_getfd, pidfd, 3, 0)
        out["pidfd_getfd"] = err(ctypes.get_errno()) if fd < 0 else "got it"
        if fd >= 0:
            forge(fd)
    for path, flags in (("/proc/1/fd/3", os.O_WRONLY), ("/proc/1/mem", os.O_RDWR)):
        try:
            fd = os.open(path, flags)
        except OSError as e:
            out[path] = err(e.errno)
            continue
        out[path] = "got it"
        if path.endswith("/3"):
            forge(fd)
        os.close(fd)
    # what needs only read access to it (Yama's ptrace_scope 1 leaves
    # that to the same uid): its descriptors' names, its memory map
    try:
        out["readlink /proc/1/fd/3"] = os.readlink("/proc/1/fd/3") and "got it"
    except OSError as e:
        out["readlink /proc/1/fd/3"] = err(e.errno)
    try:
        with open("/proc/1/maps") as f:
            out["/proc/1/maps"] = f.read(1) and "got it"
    except OSError as e:
        out["/proc/1/maps"] = err(e.errno)
    t0 = time.process_time()
    while time.process_time() - t0 < arguments.get("cpu_ms", 300) / 1000.0:
        pass
    out["burnt_ms"] = int((time.process_time() - t0) * 1000)
    return out


def bomb(arguments):
    r, w = os.pipe()
    n, why = 0, None
    while n < arguments.get("max", 10000):
        try:
            pid = os.fork()
        except OSError as e:
            why = err(e.errno)
            break
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        n += 1
    with open(arguments["ready"], "w") as f:
        f.write(str(n))
    with open(arguments["gate"]) as f:
        f.read()
    os.close(w)
    return {"forked": n, "errno": why}


def handler(arguments):
    op = arguments.get("op")
    if op == "ids":
        return {"uid": os.getuid(), "gid": os.getgid(), "capbnd": status_field("CapBnd")}
    if op == "shm_make":
        return [shmget(k, 1 << 20, IPC_CREAT | int(arguments["mode"], 8))
                for k in arguments["keys"]]
    if op == "shm_see":
        return [shmget(k, 0, 0) for k in arguments["keys"]]
    if op == "write":
        fd = os.open(arguments["path"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, arguments["text"].encode())
        os.close(fd)
        return {"uid": os.getuid()}
    if op == "read":
        try:
            with open(arguments["path"]) as f:
                return {"text": f.read()}
        except OSError as e:
            return {"errno": err(e.errno)}
    if op == "bomb":
        return bomb(arguments)
    if op == "hostile":
        return hostile(arguments)
    return {"unknown": op}


if __name__ == "__main__":
    serve(handler)
