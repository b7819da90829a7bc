#!/bin/sh
# bench/confine.sh [CALLS] - issue 11: what the file-system view costs, in
# one run. For the same trivial framed worker (contrib/tools/c/echo) it
# prints per call, at concurrency 1 and 16, through bench/bench:
#   - a bare fork+exec+pipe loop against the daemon with the default
#     confinement (--filesystem default: the read-only host view);
#   - the same loop against the daemon with --filesystem host;
#   - bubblewrap (--ro-bind / / --tmpfs /tmp --dev /dev --proc /proc
#     --unshare-all --die-with-parent) running the worker, in the loop's
#     place, against the default daemon.
# Goals (issue 11): default <= 1.25 x the bare loop; >= 5 x cheaper than
# bubblewrap. Needs bwrap (Debian: bubblewrap) for the last part.
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
CALLS=${1:-1000}
ninja -C "$BUILD_DIR" bench/bench daemon/toolexecd daemon/toolexecd-init contrib/tools/c/echo >/dev/null
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid=
work=$(mktemp -d /dev/shm/toolexecd-bench.XXXXXX)
chmod 755 "$work"
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp" "$work"' EXIT
worker="$(pwd)/$BUILD_DIR/contrib/tools/c/echo"
mkdir "$tmp/tools"
printf '{"name": "echo", "command": ["%s"]}\n' "$worker" > "$tmp/tools/echo.json"
echo "toolexecd $("$BUILD_DIR/daemon/toolexecd" --version | cut -d' ' -f2), $(nproc) CPUs, $(uname -r)"
start() {
    rm -f "$tmp/s.sock"
    "$BUILD_DIR/daemon/toolexecd" --socket "$tmp/s.sock" --tools "$tmp/tools" \
        --work-dir "$work" --log-level warn --max-batch-calls 1000000 "$@" 2>"$tmp/log" &
    pid=$!
    i=0
    while [ ! -S "$tmp/s.sock" ]; do
        i=$((i + 1)); [ $i -lt 500 ] || { echo "daemon did not start" >&2; cat "$tmp/log"; exit 1; }
        sleep 0.01
    done
}
stop() { kill "$pid"; wait "$pid" || true; pid=; }
echo; echo "== --filesystem default (plain: bare fork+exec loop)"
start --filesystem default
"$BUILD_DIR/bench/bench" "$tmp/s.sock" "$worker" "$CALLS"
if command -v bwrap >/dev/null; then
    echo; echo "== --filesystem default (plain: bubblewrap running the worker)"
    BENCH_WRAP="$(command -v bwrap) --ro-bind / / --tmpfs /tmp --dev /dev --proc /proc --unshare-all --die-with-parent" \
        "$BUILD_DIR/bench/bench" "$tmp/s.sock" "$worker" "$CALLS"
else
    echo "bubblewrap: not installed (apt-get install bubblewrap), skipped"
fi
stop
echo; echo "== --filesystem host (plain: bare fork+exec loop)"
start --filesystem host
"$BUILD_DIR/bench/bench" "$tmp/s.sock" "$worker" "$CALLS"
stop
