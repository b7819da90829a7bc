#!/bin/sh
# plain protocol: runs past any timeout (its sleep child is in the group).
cat >/dev/null
echo "plain-sleep: sleeping" >&2
sleep 60
