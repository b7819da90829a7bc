#!/usr/bin/env bash
# tests/install/run.sh BUILD_DIR - check what "meson install" puts in place.
#
# As root: a real "meson install" (ldconfig and systemd-sysusers included)
# inside a private mount namespace, with a tmpfs over the prefix and
# throw-away overlays over /etc and whatever else it writes outside the
# prefix, and then runs the installed programs with no LD_LIBRARY_PATH, as
# a user would. Otherwise (or for prefix /usr):
# installs BUILD_DIR (already built) into a temporary DESTDIR, checks the
# file list (daemon, CLI, init, library, header, pkg-config file, man pages,
# systemd units, examples), builds tests/install/tiny_client.c and the
# example C tools against the INSTALLED header and pkg-config file, starts
# the INSTALLED daemon on a temporary socket with the INSTALLED example
# definitions, and runs the tiny client against it. Exit status 0 when
# everything holds, 1 otherwise; the last line is a summary.
#
#   KEEP=1   keep the temporary directory (its path is printed)
set -uo pipefail

build=${1:-}
if [ -z "$build" ] || [ ! -d "$build" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

pass=0
fail=0
warn=0
ok() { pass=$((pass + 1)); echo "ok      $*"; }
bad() { fail=$((fail + 1)); echo "FAIL    $*"; }
note() { warn=$((warn + 1)); echo "WARN    $*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/toolexecd-install.XXXXXX")
# workers of a root daemon run as an unprivileged user: they must reach
# the example tools under here
chmod 755 "$tmp"
dest=$tmp/dest
daemon_pid=
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -KILL "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    if [ "${real:-0}" = 1 ]; then
        for d in $outside; do umount "$d" 2>/dev/null; done
        umount /etc 2>/dev/null
        umount "$tmp/etc" 2>/dev/null
    fi
    if [ "${KEEP:-0}" = 1 ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT

summary() {
    echo "install test: $pass passed, $fail failed, $warn warnings"
    [ "$fail" -eq 0 ]
    exit $?
}

# ---- install ---------------------------------------------------------------
# As a user would: a real "meson install" to the configured prefix,
# whose programs must then start with no LD_LIBRARY_PATH. As root, that runs
# in a private mount namespace with an empty tmpfs over the prefix and /etc
# as a throw-away overlay (the install's ldconfig writes /etc/ld.so.cache),
# so this machine is left as it was. Otherwise (not root, or the prefix is
# /usr itself) a DESTDIR install, whose programs need LD_LIBRARY_PATH.
real=0
outside=
uppers=
if [ "${TE_INSTALL_NS:-}" = 1 ]; then
    real=1
elif [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    p=$(meson introspect "$build" --buildoptions |
        python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
    case "$p" in
    /usr | / | /usr/ | /etc*) ;;
    *)
        if [ -d "$p" ] && unshare -m --propagation private true 2>/dev/null; then
            rm -rf "$tmp"
            trap - EXIT
            TE_INSTALL_NS=1 exec unshare -m --propagation private "$0" "$@"
        fi
        ;;
    esac
fi
if [ "$real" = 1 ]; then
    p=$(meson introspect "$build" --buildoptions |
        python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
    mkdir -p "$tmp/etc/up" "$tmp/etc/work"
    if mount -t tmpfs -o mode=755 toolexecd-install "$p" &&
        mount -t tmpfs toolexecd-etc "$tmp/etc" && mkdir -p "$tmp/etc/up" "$tmp/etc/work" &&
        mount -t overlay overlay -o "lowerdir=/etc,upperdir=$tmp/etc/up,workdir=$tmp/etc/work" /etc; then
        :
    else
        bad "private mounts over $p and /etc"
        summary
    fi
    # what is installed outside the prefix (systemd's unit directory, which
    # its pkg-config file puts under /lib): a throw-away overlay each
    n=0
    while read -r d; do
        n=$((n + 1))
        mkdir -p "$tmp/etc/o$n/up" "$tmp/etc/o$n/work"
        if ! mount -t overlay overlay -o "lowerdir=$d,upperdir=$tmp/etc/o$n/up,workdir=$tmp/etc/o$n/work" "$d"; then
            bad "private overlay over $d"
            summary
        fi
        outside="$outside $d"
        uppers="$uppers $n:$d"
    done < <(meson introspect "$build" --installed | python3 -c '
import json, os, sys
prefix = sys.argv[1].rstrip("/") + "/"
dirs = set()
for path in json.load(sys.stdin).values():
    if not path.startswith(prefix):
        d = os.path.dirname(path)
        while not os.path.isdir(d):
            d = os.path.dirname(d)
        dirs.add(d)
for d in sorted(dirs):
    print(d)' "$p")
    dest=
    if meson install -C "$build" --no-rebuild >"$tmp/install.log" 2>&1; then
        ok "meson install into $p (private mount namespace, as root)"
    else
        bad "meson install (log follows)"
        cat "$tmp/install.log"
        summary
    fi
    # What a user's shell has: no LD_LIBRARY_PATH
    unset LD_LIBRARY_PATH
elif DESTDIR=$dest meson install -C "$build" --no-rebuild >"$tmp/install.log" 2>&1; then
    ok "meson install into DESTDIR"
else
    bad "meson install into DESTDIR (log follows)"
    cat "$tmp/install.log"
    summary
fi

# The prefix and install directories, as configured (absolute).
prefix='' bindir='' sbindir='' libdir='' libexecdir='' includedir='' mandir='' datadir=''
eval "$(meson introspect "$build" --buildoptions | python3 -c '
import json, os, shlex, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
prefix = opts["prefix"]
for name in ("bindir", "sbindir", "libdir", "libexecdir", "includedir", "mandir", "datadir"):
    path = opts[name]
    print("%s=%s" % (name, shlex.quote(path if os.path.isabs(path) else os.path.join(prefix, path))))
print("prefix=%s" % shlex.quote(prefix))
')"
root=$dest$prefix

# ---- the file list -----------------------------------------------------------
if [ "$real" = 1 ]; then
    (
        find "$prefix" \( -type f -o -type l \)
        # what went into the overlays outside the prefix
        for u in $uppers; do
            (cd "$tmp/etc/o${u%%:*}/up" && find . \( -type f -o -type l \) | sed "s|^\.|${u#*:}|")
        done
    ) | sort >"$tmp/files"
else
    (cd "$dest" && find . \( -type f -o -type l \) | sed 's|^\./|/|' | sort) >"$tmp/files"
fi
echo "installed $(wc -l <"$tmp/files") files under $prefix"

# need DESCRIPTION PATH: PATH (under DESTDIR) must exist
need() {
    if [ -e "$dest$2" ]; then ok "$1: $2"; else bad "$1: $2 missing"; fi
}
# need_match DESCRIPTION REGEX: some installed file matches
need_match() {
    local m
    m=$(grep -E "$2" "$tmp/files" | head -n 3 | tr '\n' ' ')
    if [ -n "$m" ]; then ok "$1: $m"; else bad "$1: nothing matches $2"; fi
}

need "daemon" "$sbindir/toolexecd"
[ -x "$dest$sbindir/toolexecd" ] || bad "daemon: $sbindir/toolexecd is not executable"
if [ -e "$dest$bindir/toolexec" ]; then
    ok "CLI: $bindir/toolexec"
else
    note "CLI: $bindir/toolexec is not installed (yet)"
fi
need "PID 1 of each call's namespace" "$libexecdir/toolexecd/toolexecd-init"
need "MCP servers' calls" "$libexecdir/toolexecd/toolexec-mcp-bridge"
need "toolexec sandbox's engine" "$libexecdir/toolexecd/toolexecd-sandbox"
need "toolexec sandbox's engine as a module" "$libexecdir/toolexecd/toolexec-sandbox.so"
need "toolexec mcp --listen's module" "$libexecdir/toolexecd/toolexec-mcp-http.so"
need_match "shared library" "^$libdir/libtoolexec\.so\.[0-9]"
need "shared library (link name)" "$libdir/libtoolexec.so"
need "public header" "$includedir/toolexec.h"
need "pkg-config file" "$libdir/pkgconfig/libtoolexec.pc"
for page in man8/toolexecd.8 man5/toolexecd.tools.5 man7/toolexecd-protocol.7; do
    need_match "man page" "^$mandir/$page(\.gz)?$"
done
if grep -qE "^$mandir/man1/toolexec\.1(\.gz)?$" "$tmp/files"; then
    ok "man page: $mandir/man1/toolexec.1"
else
    note "man page: toolexec(1) is not installed (yet)"
fi
for unit in toolexecd.service toolexecd.socket toolexecd-events.socket; do
    need_match "systemd unit" "/systemd/system/$unit$"
done
service=$(grep -E '/systemd/system/toolexecd\.service$' "$tmp/files" | head -n 1)
if [ -n "$service" ]; then
    if grep -q "^ExecStart=$sbindir/toolexecd " "$dest$service" && ! grep -q '@' "$dest$service"; then
        ok "toolexecd.service runs $sbindir/toolexecd"
    else
        bad "toolexecd.service: ExecStart does not name $sbindir/toolexecd"
    fi
fi
need "sysusers.d file" "$prefix/lib/sysusers.d/toolexecd.conf"
if grep -qx 'u toolexec - "toolexecd workers" /nonexistent' "$dest$prefix/lib/sysusers.d/toolexecd.conf" 2>/dev/null; then
    ok "sysusers.d: the toolexec user"
else
    bad "sysusers.d: no line for the toolexec user"
fi
if [ "$real" = 1 ]; then
    if getent passwd toolexec >/dev/null; then
        ok "the install created the toolexec user"
    elif command -v systemd-sysusers >/dev/null; then
        bad "the install did not create the toolexec user"
    else
        note "systemd-sysusers not found: no toolexec user"
    fi
fi
examples=$datadir/doc/toolexecd/examples
need "examples" "$examples/README.md"
need "example definitions" "$examples/tools.d/echo.json.in"
need "example C tool" "$examples/tools/c/echo.c"
need "example shell tool" "$examples/tools/shell/sleep.sh"
need "example Python tool" "$examples/tools/python/calc.py"
need "Python SDK" "$examples/python/toolexec/worker.py"
need "socat recipes" "$examples/socat/README.md"
if grep -qE '(meson\.build|__pycache__|\.pyc)$' "$tmp/files"; then
    bad "build files or byte code installed: $(grep -E '(meson\.build|__pycache__|\.pyc)$' "$tmp/files" | tr '\n' ' ')"
else
    ok "no meson.build or byte code among the installed files"
fi

# ---- man pages render without warnings ----------------------------------------
if command -v man >/dev/null; then
    for page in man8/toolexecd.8 man5/toolexecd.tools.5 man7/toolexecd-protocol.7; do
        f=
        for g in "$dest$mandir/$page" "$dest$mandir/$page.gz"; do
            [ -e "$g" ] && f=$g
        done
        [ -n "$f" ] || continue
        out=$(man --warnings -l "$f" 2>&1 >/dev/null)
        if [ -z "$out" ]; then ok "man --warnings: $page"; else bad "man --warnings: $page: $out"; fi
    done
else
    note "man not found: rendering not checked"
fi

# ---- build against the installed header and pkg-config file -------------------
lib=$dest$libdir
export PKG_CONFIG_PATH=$dest$libdir/pkgconfig
pc() { pkg-config --define-variable=prefix="$root" "$@" libtoolexec; }
if cflags=$(pc --cflags) && libs=$(pc --libs); then
    ok "pkg-config libtoolexec: $cflags $libs"
else
    bad "pkg-config libtoolexec"
    summary
fi
case " $cflags " in
*" -I$dest"*) ok "pkg-config points into the installed tree" ;;
*) bad "pkg-config --cflags does not point into $dest: $cflags" ;;
esac
cc=${CC:-cc}
# shellcheck disable=SC2086
if $cc -Wall -Wextra -Werror -o "$tmp/tiny_client" "$here/tiny_client.c" $cflags $libs 2>"$tmp/cc.log"; then
    ok "tiny_client built against the installed header"
else
    bad "tiny_client does not build against the installed header:"
    cat "$tmp/cc.log"
    summary
fi
mkdir -p "$tmp/bin"
for t in echo wordcount; do
    # workers get a clean environment (no LD_LIBRARY_PATH): an rpath instead
    # shellcheck disable=SC2086
    if $cc -Wall -Werror -o "$tmp/bin/$t" "$dest$examples/tools/c/$t.c" $cflags $libs \
        -Wl,-rpath,"$lib" 2>"$tmp/cc.log"; then
        ok "example tool $t built from the installed sources"
    else
        bad "example tool $t does not build:"
        cat "$tmp/cc.log"
    fi
done
if [ "$real" = 1 ]; then
    ok "installed programs run without LD_LIBRARY_PATH"
    for exe in "$sbindir/toolexecd" "$bindir/toolexec"; do
        if out=$("$exe" --version 2>&1); then ok "$exe --version: $out"; else bad "$exe does not start: $out"; fi
    done
    # toolexec sandbox runs the installed engine's module in its own
    # process: seen while its command waits on a line from us (started
    # in /, which its user may enter wherever this runs)
    mkfifo "$tmp/sbx.in" "$tmp/sbx.out"
    (cd / && exec "$bindir/toolexec" sandbox -- /bin/sh -c 'echo ready; read -r x; exit 3') \
        <"$tmp/sbx.in" >"$tmp/sbx.out" 2>"$tmp/sbx.err" &
    sbx=$!
    exec 8>"$tmp/sbx.in" 9<"$tmp/sbx.out"
    read -r line <&9
    exe=$(readlink "/proc/$sbx/exe")
    mapped=$(grep -c '/toolexec-sandbox\.so$' "/proc/$sbx/maps")
    echo go >&8
    exec 8>&- 9<&-
    wait "$sbx"
    rc=$?
    if [ "$line" = ready ] && [ "$rc" = 3 ] && [ "$exe" = "$bindir/toolexec" ] && [ "$mapped" != 0 ]; then
        ok "toolexec sandbox runs the installed engine in its own process"
    else
        bad "toolexec sandbox: '$line', status $rc, $exe, module mapped $mapped times: $(cat "$tmp/sbx.err")"
    fi
else
    note "installed programs run with LD_LIBRARY_PATH (a DESTDIR install: not root or prefix $prefix)"
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for exe in "$tmp/tiny_client" "$dest$sbindir/toolexecd"; do
    # not "ldd | grep -q": with pipefail, grep leaving early fails the pipe
    deps=$(ldd "$exe" 2>&1)
    case "$deps" in
    *"libtoolexec.so.0 => $lib/"*) ok "$(basename "$exe") loads the installed libtoolexec" ;;
    *) bad "$(basename "$exe") does not load libtoolexec from $lib: $(grep toolexec <<<"$deps")" ;;
    esac
done
# toolexec and toolexec sandbox's engine have libtoolexec's objects in them
# (exec'd at each toolexec sandbox: a library less to find and map)
for exe in "$dest$bindir/toolexec" "$dest$libexecdir/toolexecd/toolexecd-sandbox"; do
    deps=$(ldd "$exe" 2>&1)
    case "$deps" in
    *"not found"* | *libtoolexec.so*) bad "$(basename "$exe"): $(grep -E 'toolexec|not found' <<<"$deps")" ;;
    *) ok "$(basename "$exe") has libtoolexec in it, and finds its libraries" ;;
    esac
done
# the engine's module takes libtoolexec's symbols from toolexec, which runs it
deps=$(ldd "$dest$libexecdir/toolexecd/toolexec-sandbox.so" 2>&1)
case "$deps" in
*"not found"* | *libtoolexec.so*) bad "toolexec-sandbox.so: $(grep -E 'toolexec|not found' <<<"$deps")" ;;
*) ok "toolexec-sandbox.so loads no libtoolexec, and finds its libraries" ;;
esac

# ---- the installed daemon with the installed example definitions ----------------
daemon=$dest$sbindir/toolexecd
if version=$("$daemon" --version 2>&1); then
    ok "installed daemon runs: $version"
else
    bad "installed daemon does not run: $version"
    summary
fi
mkdir -p "$tmp/tools.d"
ndefs=0
for def in "$dest$examples"/tools.d/*.json.in; do
    name=$(basename "$def" .in)
    sed -e "s|@TOOLS_SRC@|$dest$examples/tools|g" -e "s|@TOOLS_BUILD@|$tmp/bin|g" \
        -e "s|@CONTRIB_SRC@|$dest$examples|g" -e "s|@BUILD_ROOT@|$tmp/bin|g" "$def" \
        >"$tmp/tools.d/$name"
    ndefs=$((ndefs + 1))
done
# who the workers run as without per-call uids: toolexec once it exists
extra=
if [ "$real" = 1 ] && getent passwd toolexec >/dev/null; then
    printf '{"name": "whoami", "description": "the worker user", "schema": {"type": "object"},\n "command": ["/usr/bin/id", "-un"], "protocol": "plain"}\n' >"$tmp/tools.d/whoami.json"
    ndefs=$((ndefs + 1))
    extra="--call-uids no"
fi
sock=$tmp/toolexecd.sock
# pgroup under DESTDIR: the installed daemon looks for toolexecd-init at its
# configured path, which is not under DESTDIR
containment=pgroup
[ "$real" = 1 ] && containment=auto
# which gives calls no mount namespace, so no view: the examples' views are
# best effort here (a definition asking for a layer the host cannot
# give is refused unless its "best_effort" names it)
if [ "$containment" = pgroup ]; then
    for f in "$tmp"/tools.d/*.json; do
        sed -i '1s/^{/{"best_effort": ["view"], /' "$f"
    done
fi
# shellcheck disable=SC2086  # $extra: none or two words
"$daemon" --tools "$tmp/tools.d" --socket "$sock" --work-dir "$tmp/work" \
    --containment $containment $extra 2>"$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do
    [ -S "$sock" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.05
done
if [ -S "$sock" ]; then
    ok "installed daemon listens with $ndefs installed example definitions"
else
    bad "installed daemon did not start (log follows)"
    cat "$tmp/daemon.log"
    summary
fi

out=$("$tmp/tiny_client" "$sock" 2>&1)
if [ "$out" = "tools: $ndefs" ]; then
    ok "tiny_client: $out"
else
    bad "tiny_client: expected \"tools: $ndefs\", got: $out"
fi
# one call of each kind of example tool: C, shell, Python (with the SDK)
check_call() { # TOOL ARGS EXPECTED-CONTENT
    local got
    got=$("$tmp/tiny_client" "$sock" "$1" "$2" 2>&1 | tail -n 1)
    if [ "$got" = "ok: $3" ]; then ok "call $1: $got"; else bad "call $1: expected \"ok: $3\", got: $got"; fi
}
check_call echo '{"x":1}' '{"x":1}'
check_call wordcount '{"text":"a b\n"}' '{"lines":1,"words":2,"chars":4,"bytes":4}'
check_call sleep '{"seconds":0}' '{"slept":0}'
check_call calc '{"expression":"6*7"}' '42'
[ -z "$extra" ] || check_call whoami '{}' 'toolexec'

kill -TERM "$daemon_pid"
wait "$daemon_pid"
status=$?
daemon_pid=
if [ "$status" -eq 0 ] && [ ! -e "$sock" ]; then
    ok "installed daemon stopped on SIGTERM (status 0, socket removed)"
else
    bad "installed daemon: status $status after SIGTERM$([ -e "$sock" ] && echo ', socket left behind')"
    cat "$tmp/daemon.log"
fi

summary
