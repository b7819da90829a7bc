#!/bin/sh
# contrib/quickstart.sh - install what is missing (Debian), build, and run
# toolexecd in the foreground with the bundled example tools, a client
# socket and an events socket (for tailing). Stop it with ^C.
#
# Where it listens is decided first, before anything is built: root uses
# /run/toolexecd (toolexecd.sock, events.sock); anyone else $XDG_RUNTIME_DIR
# (toolexecd.sock, toolexecd-events.sock), or, where that is not set (su -,
# ssh without pam_systemd, containers), a directory of their own,
# ${TMPDIR:-/tmp}/toolexecd-UID (mode 0700).
#
#   BUILD_DIR=DIR           the build directory (default build)
#   QUICKSTART_NO_BUILD=1   use it as built (no package check, no ninja)
set -eu
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}

# The sockets: the daemon's defaults where there are some, so the README's
# commands work as written ($SOCK and $EVENTS there).
if [ "$(id -u)" -eq 0 ]; then
    sockdir=/run/toolexecd
    mkdir -p "$sockdir"
    sock=$sockdir/toolexecd.sock
    events=$sockdir/events.sock
    rundir=$sockdir/quickstart
elif [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -d "$XDG_RUNTIME_DIR" ] && [ -w "$XDG_RUNTIME_DIR" ]; then
    sock=$XDG_RUNTIME_DIR/toolexecd.sock
    events=$XDG_RUNTIME_DIR/toolexecd-events.sock
    rundir=$XDG_RUNTIME_DIR/toolexecd-quickstart
else
    rundir=${TMPDIR:-/tmp}/toolexecd-$(id -u)
    echo "XDG_RUNTIME_DIR is not set (or not writable): using $rundir" >&2
    sock=$rundir/toolexecd.sock
    events=$rundir/events.sock
fi
# The definitions' copy, and without XDG_RUNTIME_DIR the calls' work
# directory too (the daemon's default is under it): the daemon refuses a
# work directory others may write to or that is not its own.
if ! mkdir -p "$rundir" || [ ! -O "$rundir" ]; then
    echo "quickstart: $rundir is not a directory of our own; set TMPDIR to one" >&2
    exit 1
fi
chmod 0700 "$rundir"
set --
if [ "$(id -u)" -ne 0 ] && [ "$sock" = "$rundir/toolexecd.sock" ]; then
    mkdir -p "$rundir/work"
    chmod 0700 "$rundir/work"
    set -- --work-dir "$rundir/work"
fi

if [ "${QUICKSTART_NO_BUILD:-0}" != 1 ]; then
    . ./contrib/deps.sh
    te_install_deps
    [ -f "$build/build.ninja" ] || meson setup "$build"
    ninja -C "$build"
fi
# absolute: the commands printed below work from any directory
build=$(cd "$build" && pwd)

# The daemon refuses definitions others may change (a umask of 002 makes
# them group-writable), and env values may be secrets: a private copy.
tools=$rundir/tools.d
rm -rf "$tools"
mkdir -m 0700 "$tools"
cp "$build"/contrib/tools.d/*.json "$tools/"
chmod 0600 "$tools"/*.json

cat <<MSG

toolexecd is starting on $sock. In another terminal, try:

  SOCK=$sock EVENTS=$events

  echo '{"op":"run","calls":[{"id":"c0","name":"echo","arguments":{"x":1}},{"id":"c1","name":"calc","arguments":{"expression":"6*7"}}]}' | socat -t 30 - UNIX-CONNECT:\$SOCK
  $build/daemon/cli/toolexec --socket \$SOCK call calc '{"expression": "6*7"}'

and watch every call as it happens:

  socat -u UNIX-CONNECT:\$EVENTS -

MSG
exec "$build"/daemon/toolexecd --tools "$tools" --socket "$sock" --events-socket "$events" "$@"
