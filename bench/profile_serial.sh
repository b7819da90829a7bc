#!/bin/sh
# bench/profile_serial.sh [BUILD] [DAEMON ARGS...] - where the CPU of serial
# confined calls goes: 600 calls of the C echo tool (default confinement)
# one after another through a private toolexecd, sampled system-wide
# (perf record -a -e cpu-clock: works without hardware counters), reported
# by process name. toolexecd-spawn includes each call's set-up before its
# exec (the child runs under the spawner's name until then): namespaces,
# view mounts, filter; toolexecd-init its start and the namespace teardown
# at its exit; echo the tool's own exec and run. Needs perf (linux-perf).
# A profile to read by hand, never a pass/fail test.
set -eu
B=$(cd "${1:-build}" && pwd)
[ $# -gt 0 ] && shift
T=$(mktemp -d /tmp/te-prof.XXXXXX)
chmod 755 "$T"
mkdir "$T/tools"
W=$(mktemp -d "${WORK_DIR:-/dev/shm}/te-prof.XXXXXX")
chmod 755 "$W"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T" "$W"' EXIT
printf '{"name": "echo", "command": ["%s"]}\n' "$B/contrib/tools/c/echo" > "$T/tools/echo.json"
"$B/daemon/toolexecd" --socket "$T/s.sock" --tools "$T/tools" --work-dir "$W" \
    --log-level warn --max-batch-calls 100000 "$@" &
pid=$!
while [ ! -S "$T/s.sock" ]; do sleep 0.05; done
python3 -c 'import json; print(json.dumps({"op": "run", "max_concurrency": 1, "calls": [
    {"id": "c%d" % i, "name": "echo", "arguments": {}} for i in range(600)]}))' > "$T/batch.json"
"$B/daemon/cli/toolexec" -s "$T/s.sock" run -j "$T/batch.json" >/dev/null  # warm-up
perf record -q -a -e cpu-clock -F 4999 -o "$T/perf.data" -- \
    "$B/daemon/cli/toolexec" -s "$T/s.sock" run -j "$T/batch.json" >/dev/null 2>&1
perf report -q -i "$T/perf.data" --sort comm --stdio 2>/dev/null | grep -v '^$' | head -12
