#!/usr/bin/env python3
"""Docs that once fell behind the code: the README's layout table
names every man page in man/; the README's run request names every key the
protocol's run table has (unknown_tool was missing); toolexecd.tools(5)
explains every placeholder the installed example definitions use.

    doc_claims.py SRC_DIR
"""

import glob
import os
import re
import sys

src = sys.argv[1]
fails = []


def read(*p):
    with open(os.path.join(src, *p)) as f:
        return f.read()


readme = read("README.md")
layout = next((l for l in readme.splitlines() if l.startswith("| `man/`")), "")
for page in sorted(glob.glob(os.path.join(src, "man", "*.[1-8]"))):
    name, sect = os.path.basename(page).rsplit(".", 1)
    if "`%s(%s)`" % (name, sect) not in layout:
        fails.append("README's layout table does not name %s(%s)" % (name, sect))

proto = read("proto", "PROTOCOL.md")
m = re.search(r'- `\{"op": "run",(.*?)\}` runs a batch', readme, re.S)
run_line = m.group(1) if m else ""
sect = proto[proto.index("| `tool_timeout`") - 3000:proto.index("| `tool_timeout`") + 3000]
for key in ("unknown_tool", "tool_timeout", "max_concurrency", "result_format", "context"):
    if "| `%s` |" % key in sect and '"%s"' % key not in run_line:
        fails.append("README's run request does not name %r" % key)

man5 = read("man", "toolexecd.tools.5")
holders = set()
for f in glob.glob(os.path.join(src, "contrib", "tools.d", "*.json.in")):
    with open(f) as fh:
        holders |= set(re.findall(r"@[A-Z_]+@", fh.read()))
for h in sorted(holders):
    if h not in man5:
        fails.append("toolexecd.tools(5) does not explain %s" % h)

for f in fails:
    print("FAIL", f)
print("%d problems" % len(fails))
sys.exit(1 if fails else 0)
