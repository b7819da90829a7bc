#!/usr/bin/env python3
"""warm_denials.py - a Python SDK tool for test_warm_denials.py: its handler
makes the system calls named in arguments["try"] through ctypes ("ptrace":
PTRACE_TRACEME, "keyctl": KEYCTL_GET_KEYRING_ID, "unshare": CLONE_NEWUSER)
and returns each one's result, "ok" or the errno's name."""
import ctypes
import errno
import platform

from toolexec.worker import serve

libc = ctypes.CDLL(None, use_errno=True)
# x86-64 and aarch64 numbers
NR = {"x86_64": {"ptrace": 101, "keyctl": 250, "unshare": 272},
      "aarch64": {"ptrace": 117, "keyctl": 219, "unshare": 97}}[platform.machine()]
ARGS = {"ptrace": (0, 0, 0, 0), "keyctl": (0, -3, 0), "unshare": (0x10000000,)}


def attempt(name):
    rc = libc.syscall(NR[name], *[ctypes.c_long(a) for a in ARGS[name]])
    return "ok" if rc >= 0 else errno.errorcode[ctypes.get_errno()]


def handler(arguments):
    return {name: attempt(name) for name in arguments.get("try", [])}


if __name__ == "__main__":
    serve(handler)
