"""The daemon calls none of glibc's credential setters.

glibc's setuid(), setgid(), setgroups() and their kin change the credentials
of every thread of the process: they take a lock and signal each thread
(SIGSETXID). The worker's set-up runs in a vfork child that shares the
daemon's memory (daemon/confine/sandbox.c), where "every thread" is the daemon's
(libuv's pool), not the child's; so the child makes the raw system calls,
as glibc's own posix_spawn does. Nothing else in the daemon changes its
credentials, so none of these may be imported at all.

  no_setxid.py TOOLEXECD
"""
import re
import subprocess
import sys

SETTERS = re.compile(r"^(set(e|re|res|fs)?[ug]id|setgroups|initgroups)(@|$)")

out = subprocess.run(["nm", "-D", "--undefined-only", sys.argv[1]], check=True,
                     capture_output=True, text=True).stdout
found = sorted({line.split()[-1] for line in out.splitlines() if line.split() and
                SETTERS.match(line.split()[-1])})
if found:
    print("the daemon imports glibc credential setters: %s" % ", ".join(found))
    sys.exit(1)
print("no glibc credential setter imported (%d undefined symbols checked)" % len(out.splitlines()))
