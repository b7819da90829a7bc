#!/bin/sh
# plain protocol: death by a signal -> handler_exit with the signal's name.
cat >/dev/null
echo "plain-signal: terminating myself" >&2
kill -TERM $$
sleep 5
