#!/bin/sh
# uname - describe the machine the daemon runs on (a plain-protocol tool).
#
# Arguments: none (an empty object; anything else is ignored)
# Result:    {"ok": {"sysname": s, "release": s, "version": s, "machine": s}}
#
# Shows that any command-line program can be a tool: read (and here ignore)
# the one line of JSON arguments on stdin, print JSON on stdout, exit 0.
set -eu

# Drain stdin so the daemon's write of the arguments never meets a closed pipe.
cat >/dev/null

# uname output has no control characters; escaping \ and " makes any of it a
# valid JSON string.
json_string() {
    printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

printf '{"sysname":%s,"release":%s,"version":%s,"machine":%s}\n' \
    "$(json_string "$(uname -s)")" "$(json_string "$(uname -r)")" \
    "$(json_string "$(uname -v)")" "$(json_string "$(uname -m)")"
