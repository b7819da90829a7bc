#!/bin/sh
# tools.sh - list the tools toolexecd serves.
#   SOCK=/run/toolexecd/toolexecd.sock contrib/socat/tools.sh
SOCK=${SOCK:-${XDG_RUNTIME_DIR:-/run/toolexecd}/toolexecd.sock}
echo '{"op":"tools"}' | socat -t 5 - "UNIX-CONNECT:$SOCK"
