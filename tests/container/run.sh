#!/usr/bin/env bash
# tests/container/run.sh DEBS_DIR - build contrib/container/Containerfile
# from Debian packages alone, into an OCI archive, and run the image.
#
# No image registry is reachable here, so the base comes from Debian's
# archive instead: mmdebstrap makes a bookworm minbase root file system,
# buildah commits it as a local image, and the Containerfile itself is
# built on it (--build-arg BASE=...) with buildah (vfs storage, chroot
# isolation, under a temporary root: nothing is left on the machine). The
# result is pushed to an OCI archive, and checked by running the installed
# toolexecd and toolexec inside it: a batch runs through them.
# DEBS_DIR holds the .deb files (tests/package/run.sh with DEBS_OUT=DIR).
# Exit 0 when all holds; the last line is a summary.
set -uo pipefail
debs=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

pass=0
fail=0
skipped=0
ok() { pass=$((pass + 1)); echo "ok      $*"; }
bad() { fail=$((fail + 1)); echo "FAIL    $*"; }
summary() {
    echo "container test: $pass passed, $fail failed, $skipped skipped"
    [ "$fail" -eq 0 ]
    exit $?
}
if [ -z "$debs" ] || ! ls "$debs"/toolexecd_*.deb >/dev/null 2>&1; then
    bad "usage: $0 DEBS_DIR (a directory with the .deb packages)"
    summary
fi
for t in mmdebstrap buildah; do
    command -v "$t" >/dev/null || { bad "$t is not installed"; summary; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolexecd-container.XXXXXX")
b() { buildah --root "$tmp/storage" --runroot "$tmp/runroot" --storage-driver vfs "$@"; }
ctrs=()
cleanup() {
    for c in "${ctrs[@]}"; do b rm "$c" >/dev/null 2>&1; done
    # vfs layers may hold read-only directories
    chmod -R u+w "$tmp" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the base: Debian bookworm from the archive ------------------------------------
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
    grep -v security | head -1)
if mmdebstrap --variant=minbase --format=tar --quiet bookworm "$tmp/base.tar" \
    ${mirror:+"$mirror"} >"$tmp/mmdebstrap.log" 2>&1; then
    ok "mmdebstrap: a bookworm minbase root file system ($(du -h "$tmp/base.tar" | cut -f1))"
else
    bad "mmdebstrap (log follows)"
    tail -20 "$tmp/mmdebstrap.log"
    summary
fi
c=$(b from scratch) && ctrs+=("$c") &&
    b add "$c" "$tmp/base.tar" / >/dev/null &&
    b config --cmd /bin/bash "$c" &&
    b commit --quiet "$c" localhost/bookworm-base:test >/dev/null
if [ $? -eq 0 ]; then ok "the base committed as a local image"; else bad "buildah: the base image"; summary; fi

# ---- the Containerfile ---------------------------------------------------------------
mkdir "$tmp/context" "$tmp/context/debs"
cp "$debs"/toolexecd_*.deb "$debs"/toolexec_*.deb "$debs"/libtoolexec0_*.deb \
    "$debs"/python3-toolexec_*.deb "$tmp/context/debs/"
if b build --isolation chroot --quiet --build-arg BASE=localhost/bookworm-base:test \
    -f "$src/contrib/container/Containerfile" -t localhost/toolexecd:test "$tmp/context" \
    >"$tmp/build.log" 2>&1; then
    ok "buildah build -f contrib/container/Containerfile"
else
    bad "the Containerfile does not build (log follows)"
    tail -30 "$tmp/build.log"
    summary
fi
# not "tar -tf | grep -q": tar writes a line per entry, and with pipefail
# grep leaving at index.json kills it with SIGPIPE before its last entry
# (oci-layout), which failed this check at random (stop 21's CI)
if b push --quiet localhost/toolexecd:test "oci-archive:$tmp/toolexecd.oci.tar:toolexecd:test" &&
    tar -tf "$tmp/toolexecd.oci.tar" >"$tmp/oci.list" && grep -qx 'index.json' "$tmp/oci.list"; then
    ok "pushed to an OCI archive ($(du -h "$tmp/toolexecd.oci.tar" | cut -f1), index.json)"
else
    bad "no OCI archive"
fi

# ---- the image runs ------------------------------------------------------------------
c=$(b from localhost/toolexecd:test) && ctrs+=("$c")
cfg=$(b inspect --format '{{.OCIv1.Config.Entrypoint}}' "$c")
[ "$cfg" = "[/usr/sbin/toolexecd]" ] && ok "entrypoint $cfg" || bad "entrypoint: $cfg"
script='
set -e
getent passwd toolexec >/dev/null
python3 -c "import toolexec.client"
mkdir -p /tmp/t/tools /tmp/t/work
printf "%s" "{\"name\":\"cat\",\"description\":\"d\",\"schema\":{\"type\":\"object\"},\"command\":[\"/bin/cat\"],\"protocol\":\"plain\"}" >/tmp/t/tools/cat.json
toolexecd --socket /tmp/t/s.sock --tools /tmp/t/tools --work-dir /tmp/t/work --containment pgroup 2>/tmp/t/log &
pid=$!
for i in $(seq 100); do toolexec -s /tmp/t/s.sock tools >/dev/null 2>&1 && break; sleep 0.1; done
echo "[{\"id\":\"c1\",\"name\":\"cat\",\"arguments\":{\"in\":\"image\"}}]" | toolexec -s /tmp/t/s.sock run -j - | grep -q "in.*image"
kill -TERM $pid
wait $pid
'
if out=$(b run --isolation chroot "$c" -- /bin/sh -c "$script" 2>&1); then
    ok "in the image: the toolexec user, the Python SDK, a batch through toolexecd and toolexec"
else
    bad "the image does not run a batch: $out"
fi

# ---- the DaemonSet's container under podman ------------------------------
# The image run with the DaemonSet's args, securityContext and volumes as the
# kubelet lays them out (configMap 0777 with ..data, read-only; emptyDir
# Memory 1777): it must start, answer its readiness probe and serve a batch
# (podman_daemonset.py, bounded). podman uses buildah's storage. Without
# systemd as PID 1: cgroupfs, events to a file. As root podman raises nofile
# and nproc to 1048576 and 4194304, which needs CAP_SYS_RESOURCE (not in
# every VM's bounding set): 4096 each. runc when installed: crun 1.8 refuses
# a hybrid cgroup layout (v1 controllers and a v2 hierarchy).
if ! command -v podman >/dev/null; then
    skipped=$((skipped + 1))
    echo "SKIP    podman is not installed: the DaemonSet's container is not run"
else
    {
        echo '[containers]'
        echo 'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]'
        echo '[engine]'
        echo 'cgroup_manager = "cgroupfs"'
        echo 'events_logger = "file"'
        if command -v runc >/dev/null; then echo 'runtime = "runc"'; fi
    } >"$tmp/containers.conf"
    CONTAINERS_CONF="$tmp/containers.conf" timeout 600 /usr/bin/python3 \
        "$here/podman_daemonset.py" localhost/toolexecd:test \
        podman --root "$tmp/storage" --runroot "$tmp/runroot" --storage-driver vfs \
        >"$tmp/podman.out" 2>&1
    prc=$?
    cat "$tmp/podman.out"
    pass=$((pass + $(grep -c '^ok ' "$tmp/podman.out")))
    fail=$((fail + $(grep -c '^FAIL ' "$tmp/podman.out")))
    skipped=$((skipped + $(grep -c '^SKIP ' "$tmp/podman.out")))
    if [ "$prc" -ne 0 ] && [ "$prc" -ne 77 ] && ! grep -q '^FAIL ' "$tmp/podman.out"; then
        bad "podman_daemonset.py exited $prc"
    fi
fi
summary
