#!/usr/bin/env bash
# tests/package/run.sh - the Debian packages, as an operator meets them.
#
# Builds toolexecd, toolexec, libtoolexec0, libtoolexec-dev and
# python3-toolexec from a copy of the tree with the README's command
# (dpkg-buildpackage -us -uc -b, its tests included: the suite then runs
# under debhelper, which ignores signals 32 and 33 and once made every
# worker inherit that), runs lintian (no errors allowed),
# installs them on this machine with apt-get install ./*.deb, checks what
# the install set up (the toolexec user, /etc/toolexecd/tools.d, the
# sockets enabled), starts the INSTALLED daemon by hand (systemd is not
# PID 1 here), runs a batch through the INSTALLED toolexec with a Python
# tool that imports the installed SDK (and one run with Debian's python3
# and no PYTHONPATH, as the README's package path has it), then apt-get
# purge and checks that
# no file is left behind (a listing before and after).
# Needs root (or sudo). Exit 0 when everything holds; the last line is a
# summary.
#
#   KEEP=1          keep the temporary directory
#   DEBS_OUT=DIR    also copy the packages there (tests/container/run.sh)
#   PACKAGE_NOCHECK=1  build with DEB_BUILD_OPTIONS=nocheck (no suite)
#   TE_PACKAGE_TESTS="..."  the tests run under debhelper (default: those
#                   its environment and hardening flags could change, below;
#                   "" runs the whole suite)
#   PACKAGE_BUILD_TIMEOUT=S  bound on the build and its suite (default 2400)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# wait for another apt/dpkg rather than fail on its lock
apt="$sudo apt-get -o DPkg::Lock::Timeout=600"

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok      $*"; }
bad() { fail=$((fail + 1)); echo "FAIL    $*"; }
summary() {
    echo "package test: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}

PKGS="toolexecd toolexec libtoolexec0 libtoolexec-dev python3-toolexec"
for p in $PKGS; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        echo "FAIL    $p is installed already: this test installs and purges it"
        exit 1
    fi
done

user_before=no
getent passwd toolexec >/dev/null && user_before=yes
tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolexecd-package.XXXXXX")
chmod 755 "$tmp"
daemon_pid=
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -KILL "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    # never leave the packages installed, whatever failed
    installed=""
    for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed" && installed="$installed $p"
    done
    # shellcheck disable=SC2086
    [ -n "$installed" ] && $apt purge -y -q $installed >/dev/null 2>&1
    # Debian keeps system users on purge; this machine goes on running the
    # suite, whose root daemons would pick the toolexec user up: remove it
    # when this test made it.
    if [ "$user_before" = no ] && getent passwd toolexec >/dev/null; then
        $sudo userdel toolexec 2>/dev/null
        getent group toolexec >/dev/null && $sudo groupdel toolexec 2>/dev/null
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ---- build -----------------------------------------------------------------
# A copy of the tracked and new files (not build directories): the .debs
# land beside it, not beside the checkout.
mkdir "$tmp/src"
(cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tmp/src" 2>/dev/null) ||
    (cd "$src" && tar --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tmp/src" -xf -)
opts="noautodbgsym parallel=2"
# Under debhelper: what its environment (signals 32 and 33 ignored once
# reached every worker) and Debian's hardening flags (fortify, -O2) could
# change: the unit tests of the parsers, the daemon's core, confinement,
# warm calls, the SDK, and a soak. The whole suite runs outside (.ci/run);
# running it twice cost about 5 of CI's minutes.
export TE_PACKAGE_TESTS="${TE_PACKAGE_TESTS-test_frame test_message test_schema test_errors
    test_batches test_daemon test_unprivileged test_isolation test_hard_limits test_confine_sys
    test_warm_isolation test_ignored_signals python-sdk-worker test_soak}"
TE_PACKAGE_TESTS=$(echo $TE_PACKAGE_TESTS)
what="dpkg-buildpackage -us -uc -b (with its test suite, under debhelper)"
if [ "${PACKAGE_NOCHECK:-0}" = 1 ]; then
    opts="nocheck $opts"
    what="dpkg-buildpackage -us -uc -b (nocheck)"
fi
# bounded: a hung test must not hold CI (meson's own per-test timeouts
# apply inside; this is the whole build's)
if (cd "$tmp/src" && DEB_BUILD_OPTIONS="$opts" timeout -k 10 "${PACKAGE_BUILD_TIMEOUT:-2400}" \
    dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
    ok "$what"
    if [ "${PACKAGE_NOCHECK:-0}" != 1 ]; then
        # the suite did run, and ran everything it was given
        grep -E '^(Ok|Fail|Timeout):' "$tmp/build.log" | tr -s ' ' | paste -sd' ' -
        grep -qE '^Ok: +[1-9]' "$tmp/build.log" && grep -qE '^Fail: +0' "$tmp/build.log" &&
            ok "the suite ran under dh_auto_test, no failures" || bad "dh_auto_test ran no suite"
    fi
else
    bad "dpkg-buildpackage (last lines of the log follow)"
    tail -40 "$tmp/build.log"
    summary
fi
debs=$(cd "$tmp" && ls ./*.deb)
if [ -n "${DEBS_OUT:-}" ]; then
    rm -rf "$DEBS_OUT" && mkdir -p "$DEBS_OUT" && cp "$tmp"/*.deb "$DEBS_OUT"/
fi
for p in $PKGS; do
    if ls "$tmp/${p}_"*.deb >/dev/null 2>&1; then ok "built $p"; else bad "no package $p"; fi
done
# fswatch.c dlopens libbpf (dpkg-shlibdeps cannot see it): without it a
# root daemon's calls' file-system refusals would go unreported
if dpkg-deb -f "$tmp"/toolexecd_*.deb Depends | grep -qw libbpf1; then
    ok "toolexecd depends on libbpf1 (opened, not linked)"
else
    bad "toolexecd does not depend on libbpf1: $(dpkg-deb -f "$tmp"/toolexecd_*.deb Depends)"
fi

# ---- lintian -------------------------------------------------------------------
if command -v lintian >/dev/null; then
    if lintian --fail-on error --suppress-tags-from-file /dev/null "$tmp"/*.changes >"$tmp/lintian.log" 2>&1; then
        ok "lintian: no errors ($(grep -c '^W:' "$tmp/lintian.log") warnings)"
    else
        bad "lintian reports errors:"
        grep '^E:' "$tmp/lintian.log"
    fi
else
    bad "lintian is not installed"
fi

# ---- a listing of the system before ---------------------------------------------
listing() {
    find /etc /usr /opt /srv /var /lib /bin /sbin -xdev \
        \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache -o -path /var/log \
        -o -path /var/tmp -o -path /var/lib/systemd/catalog \) -prune -o -print 2>/dev/null | sort
}
listing >"$tmp/before"

# ---- install -----------------------------------------------------------------
# shellcheck disable=SC2086
if (cd "$tmp" && $apt install -y -q --no-install-recommends $debs) >"$tmp/install.log" 2>&1; then
    ok "apt-get install ./*.deb"
else
    bad "apt-get install (log follows)"
    cat "$tmp/install.log"
    summary
fi
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" | grep -q "ok installed" && ok "$p installed" || bad "$p not installed"
done
getent passwd toolexec >/dev/null && ok "the toolexec system user exists (sysusers.d)" ||
    bad "no toolexec user"
[ -d /etc/toolexecd/tools.d ] && ok "/etc/toolexecd/tools.d exists" || bad "no /etc/toolexecd/tools.d"
for u in toolexecd.socket toolexecd-events.socket; do
    [ -L "/etc/systemd/system/sockets.target.wants/$u" ] && ok "$u enabled" || bad "$u not enabled"
done
[ ! -e /etc/systemd/system/multi-user.target.wants/toolexecd.service ] &&
    ok "toolexecd.service not enabled (its sockets start it)" || bad "toolexecd.service enabled"
# the MCP HTTP front: its user (the daemon's drop-in names it at start), its
# unit shipped but not enabled
getent passwd toolexec-mcp >/dev/null && ok "the toolexec-mcp system user exists (sysusers.d)" ||
    bad "no toolexec-mcp user"
[ -f /lib/systemd/system/toolexecd.service.d/toolexec-mcp.conf ] &&
    ok "toolexecd.service's drop-in trusts toolexec-mcp" || bad "no toolexecd.service.d/toolexec-mcp.conf"
[ ! -e /etc/systemd/system/multi-user.target.wants/toolexec-mcp.service ] &&
    ok "toolexec-mcp.service not enabled" || bad "toolexec-mcp.service enabled"
# the installed binaries start as a user would run them: no LD_LIBRARY_PATH
env -u LD_LIBRARY_PATH /usr/sbin/toolexecd --version >/dev/null && ok "toolexecd --version" ||
    bad "installed toolexecd does not start"
env -u LD_LIBRARY_PATH toolexec --version >/dev/null && ok "toolexec --version" ||
    bad "installed toolexec does not start"
printf '#include <toolexec.h>\nint main(void){return te_reason_parse("timeout") < 0;}\n' >"$tmp/t.c"
# shellcheck disable=SC2046
if cc -o "$tmp/t" "$tmp/t.c" $(pkg-config --cflags --libs libtoolexec) && "$tmp/t"; then
    ok "a program builds against libtoolexec-dev and runs"
else
    bad "libtoolexec-dev: build against the installed header and .pc"
fi
/usr/bin/python3 -c 'import toolexec.client, toolexec.worker' && ok "Debian's python3 imports toolexec (no PYTHONPATH)" ||
    bad "python3-toolexec does not import"
# toolexec (its package) runs toolexecd's engine module in its own process:
# the loader says what it loads and starts (toolexecd-sandbox only if exec'd)
out=$(cd / && env -u LD_LIBRARY_PATH LD_DEBUG=files toolexec sandbox -- /bin/sh -c 'echo ran' 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -qx 'ran' <<<"$out" &&
    grep -q 'calling init: /usr/libexec/toolexecd/toolexec-sandbox.so' <<<"$out" &&
    ! grep -q 'initialize program: /usr/libexec/toolexecd/toolexecd-sandbox' <<<"$out"; then
    ok "toolexec sandbox runs toolexecd's engine in its own process (toolexec-sandbox.so)"
else
    bad "toolexec sandbox (exit $rc): $(grep -E 'ran|toolexec|error' <<<"$out" | head -n 20)"
fi

# ---- the installed daemon, started by hand ----------------------------------------
mkdir -m 755 "$tmp/tools" "$tmp/work"
calc=$(ls /usr/share/doc/toolexecd/examples/tools/python/calc.py)
cat >"$tmp/tools/calc.json" <<JSON
{"name": "calc", "description": "arithmetic", "schema": {"type": "object"},
 "command": ["python3", "$calc"], "protocol": "framed", "timeout_ms": 10000,
 "env": {"PYTHONDONTWRITEBYTECODE": "1"}}
JSON
cat >"$tmp/tools/cat.json" <<'JSON'
{"name": "cat", "description": "its input", "schema": {"type": "object"},
 "command": ["/bin/cat"], "protocol": "plain"}
JSON
chmod 644 "$tmp"/tools/*.json
sock=$tmp/s.sock
env -u LD_LIBRARY_PATH /usr/sbin/toolexecd --socket "$sock" --tools "$tmp/tools" \
    --work-dir "$tmp/work" 2>"$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 200); do
    [ -S "$sock" ] && toolexec -s "$sock" tools >/dev/null 2>&1 && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.05
done
out=$(printf '%s' '[{"id":"c1","name":"calc","arguments":{"expression":"6*7"}},{"id":"c2","name":"cat","arguments":{"k":"v"}}]' |
    env -u LD_LIBRARY_PATH toolexec -s "$sock" run -j -)
rc=$?
if [ $rc -eq 0 ] && grep -q '"content":"42"' <<<"$out" && grep -q 'batch_completed' <<<"$out"; then
    ok "a batch through the installed toolexec and toolexecd (calc 6*7 = 42: calc.py imports toolexec.worker from python3-toolexec, Debian's python3, no PYTHONPATH; cat)"
else
    bad "the batch (exit $rc):"
    echo "$out"
    cat "$tmp/daemon.log"
fi

kill -TERM "$daemon_pid"
wait "$daemon_pid"
rc=$?
daemon_pid=
[ $rc -eq 0 ] && ok "the daemon exits 0 on SIGTERM" || bad "daemon exit status $rc"

# ---- purge --------------------------------------------------------------------
# shellcheck disable=SC2086
if $apt purge -y -q $PKGS >"$tmp/purge.log" 2>&1; then
    ok "apt-get purge"
else
    bad "apt-get purge (log follows)"
    cat "$tmp/purge.log"
fi
listing >"$tmp/after"
# New paths that no installed package owns were left by ours (a path that
# another package installed meanwhile is owned by it); paths gone that were
# there before were removed by ours.
comm -13 "$tmp/before" "$tmp/after" | while read -r f; do
    dpkg -S "$f" >/dev/null 2>&1 || echo "left: $f"
done >"$tmp/left"
comm -23 "$tmp/before" "$tmp/after" | while read -r f; do
    [ -e "$f" ] || [ -L "$f" ] || echo "removed: $f"
done >>"$tmp/left"
if [ ! -s "$tmp/left" ]; then
    ok "purge leaves no files (listing of /etc /usr /var /lib /bin /sbin /opt /srv before and after)"
else
    bad "install + purge changed the file system:"
    cat "$tmp/left"
fi
summary
