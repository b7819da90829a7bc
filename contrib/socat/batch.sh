#!/bin/sh
# batch.sh - run a batch of two calls and print the events as they come.
#   SOCK=/run/toolexecd/toolexecd.sock contrib/socat/batch.sh
# -t 30: after sending, socat waits up to 30 s for the rest of the reply
# (its default 0.5 s would cut a slow batch short).
SOCK=${SOCK:-${XDG_RUNTIME_DIR:-/run/toolexecd}/toolexecd.sock}
echo '{"op":"run","batch":"demo","calls":[{"id":"c0","name":"echo","arguments":{"x":1}},{"id":"c1","name":"wordcount","arguments":{"text":"one two three"}}]}' |
    socat -t 30 - "UNIX-CONNECT:$SOCK"
