"""Narrowing a tool by a run request's "policy" looks nothing up.

It runs on the loop, as the daemon, on paths any client chooses: a
realpath() or stat() there would stall the loop on a hung mount and tell
the client what exists where it may not look, and where a link points.
The narrowing files do string work only (fsview_narrow.c: lexical
normalisation, the tool's view as strings); the spawn opens the view's
paths without following links. This fails on any file-system call in them.

  narrow_no_lookup.py SOURCE_ROOT
"""
import os
import re
import sys

FILES = ["daemon/defs/narrow.c", "daemon/confine/fsview_narrow.c"]
LOOKUP = re.compile(r"\b(realpath|canonicalize_file_name|l?stat|fstatat|statx|open|openat2?|"
                    r"access|faccessat2?|readlink(at)?|opendir|scandir|glob|chdir)\s*\(")

bad = []
for rel in FILES:
    with open(os.path.join(sys.argv[1], rel)) as f:
        text = f.read()
    # comments may say what the code does not do
    code = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text,
                  flags=re.S)
    for n, line in enumerate(code.splitlines(), 1):
        m = LOOKUP.search(line)
        if m:
            bad.append("%s:%d: %s()" % (rel, n, m.group(1)))
if bad:
    print("narrowing looks paths up on the loop:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("no file-system look-up in %s" % ", ".join(FILES))
