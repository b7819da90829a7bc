#!/bin/sh
# tail.sh - follow every event of every batch on the daemon.
#   EVENTS=/run/toolexecd/events.sock contrib/socat/tail.sh
# With no events socket, send the tail op on the main socket instead:
#   (echo '{"op":"tail"}'; cat) | socat - UNIX-CONNECT:$SOCK
EVENTS=${EVENTS:-/run/toolexecd/events.sock}
exec socat -u "UNIX-CONNECT:$EVENTS" -
