#!/bin/sh
# bench/run.sh [CALLS] - for each containment mode, start a private toolexecd
# with one trivial framed tool (the C SDK echo example) and compare a call
# through the daemon with the same worker run by a plain fork+exec+pipe
# loop, measured in the same run. MODES="pgroup pidns cgroup" by default;
# cgroup makes a cgroup for the daemon's calls under the script's own (it
# needs a writable cgroup v2, else it is skipped, saying so).
# WORK_DIR: where per-call directories go (default: on tmpfs, /dev/shm, as
# the daemon's default runtime directory is on a systemd host; an ext4
# directory adds ~100 us per call of inode allocation: try WORK_DIR=/var/tmp).
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ninja -C "$BUILD_DIR" bench/bench daemon/toolexecd daemon/toolexecd-init contrib/tools/c/echo >/dev/null
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
worker="$(pwd)/$BUILD_DIR/contrib/tools/c/echo"
mkdir "$tmp/tools"
printf '{"name": "echo", "command": ["%s"]}\n' "$worker" > "$tmp/tools/echo.json"
echo "toolexecd $("$BUILD_DIR/daemon/toolexecd" --version | cut -d' ' -f2), $(nproc) CPUs, worker $worker"
work_root=${WORK_DIR:-/dev/shm}
[ -d "$work_root" ] || work_root=$tmp
work=$(mktemp -d "$work_root/toolexecd-bench.XXXXXX")
chmod 755 "$work"
cg=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp" "$work"; [ -z "$cg" ] || rmdir "$cg"' EXIT
echo "per-call directories under $work ($(stat -f -c %T "$work"))"
for mode in ${MODES:-pgroup pidns cgroup}; do
    rm -f "$tmp/s.sock"
    extra=
    if [ "$mode" = cgroup ]; then
        mnt=$(awk '$4 == "/" && $0 ~ / - cgroup2 / {print $5; exit}' /proc/self/mountinfo)
        own=$(sed -n 's/^0:://p' /proc/self/cgroup)
        cg="$mnt${own%/}/toolexecd-bench-$$"
        if [ -z "$mnt" ] || ! mkdir "$cg" 2>/dev/null; then
            echo; echo "containment: cgroup skipped (no writable cgroup v2 here)"; cg=; continue
        fi
        extra="--cgroup $cg"
    fi
    "$BUILD_DIR/daemon/toolexecd" --socket "$tmp/s.sock" --tools "$tmp/tools" \
        --work-dir "$work" --log-level warn --containment "$mode" \
        --max-batch-calls 1000000 $extra &
    pid=$!
    i=0
    while [ ! -S "$tmp/s.sock" ]; do
        i=$((i + 1)); [ $i -lt 500 ] || { echo "daemon did not start" >&2; exit 1; }
        sleep 0.01
    done
    echo
    echo "containment: $mode"
    "$BUILD_DIR/bench/bench" "$tmp/s.sock" "$worker" "${1:-2000}"
    kill "$pid"; wait "$pid" || true; pid=
done
