#!/usr/bin/env python3
"""fs_denials.py - a hostile Python SDK tool for test_fs_denials.py: its
handler tries each of arguments["try"], a list of [what, path] with what
one of "read", "write" (append to an existing file), "create", "remove",
"mkdir" or "exec", and returns each one's outcome, "ok" or the errno's
name ("exec" copies /bin/true there first when nothing is), and its
directory. arguments["flood"] = {"path": P, "n": N} tries to open P for
writing N times first (a flood of refusals); arguments["refuse_until"] = [P, F, S]
makes the file S, then tries to create P until the file F exists."""
import errno
import os
import shutil
import subprocess

from toolexec.worker import serve


def attempt(what, path):
    try:
        if what == "read":
            with open(path, "rb") as f:
                f.read(1)
        elif what == "write":
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        elif what == "create":
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        elif what == "remove":
            os.unlink(path)
        elif what == "mkdir":
            os.mkdir(path)
        elif what == "exec":
            if not os.path.exists(path):  # a program of its own, where it may write
                shutil.copy("/bin/true", path)
                os.chmod(path, 0o755)
            subprocess.run([path], check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        else:
            return "unknown"
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def handler(arguments):
    flood = arguments.get("flood")
    refused = 0
    if flood:
        for _ in range(int(flood["n"])):
            try:
                os.close(os.open(flood["path"], os.O_WRONLY | os.O_CREAT, 0o644))
            except OSError:
                refused += 1
    until = arguments.get("refuse_until")
    if until:  # [path, flag, started]: refused over and over until flag exists
        with open(until[2], "w"):
            pass
        while not os.path.exists(until[1]):
            attempt("create", until[0])
    out = [attempt(what, path) for what, path in arguments.get("try", [])]
    return {"tried": out, "flood_refused": refused, "cwd": os.getcwd()}


if __name__ == "__main__":
    serve(handler)
