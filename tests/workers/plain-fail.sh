#!/bin/sh
# plain protocol: a failing program -> handler_exit with exit_status 2.
cat >/dev/null
echo "plain-fail: something went wrong" >&2
exit 2
