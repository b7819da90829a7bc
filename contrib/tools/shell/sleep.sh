#!/bin/sh
# sleep - wait a number of seconds, then report it (a plain-protocol tool).
#
# Arguments: {"seconds": N}   N a decimal number, 0 <= N <= 3600
# Result:    {"ok": {"slept": N}}
#
# The plain protocol: the arguments arrive on stdin as one line of compact
# JSON; exit 0 makes stdout the result (parsed as JSON when it parses). Any
# other exit status becomes a handler_exit tool error with the exit status and
# our stderr in its cause, which is how this tool reports bad arguments.
#
# Handy for demonstrating timeouts: call it with more seconds than the batch's
# tool_timeout allows and the daemon kills it and reports "timeout".
set -eu

fail() {
    echo "sleep: $*" >&2
    exit 2
}

IFS= read -r args || [ -n "${args:-}" ] || fail "no arguments on stdin"

# The daemon sends compact JSON, so one anchored pattern parses it exactly;
# whitespace is allowed so the tool can also be tried by hand.
num='[0-9]\{1,\}\(\.[0-9]\{1,\}\)\{0,1\}'
ws='[[:space:]]*'
seconds=$(printf '%s\n' "$args" |
    sed -n "s/^$ws{$ws\"seconds\"$ws:$ws\($num\)$ws}$ws\$/\1/p")
[ -n "$seconds" ] ||
    fail "expected arguments {\"seconds\": N} with N a decimal number, got: $args"

# test(1) only compares integers; awk compares decimals.
awk -v s="$seconds" 'BEGIN { exit !(s + 0 <= 3600) }' ||
    fail "seconds must be at most 3600, got $seconds"

sleep "$seconds"
printf '{"slept":%s}\n' "$seconds"
